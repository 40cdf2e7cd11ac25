from __future__ import annotations

import pytest

from resolver import InvalidVariable, MissingVariable, environ


@pytest.mark.parametrize("raw", ["", " 1", "1 ", "+1", "-1", "1.0", "0x10", "1_000", "٣", "¹", "1e3", "9" * 19, "abc"])
def test_integer_refuses_what_int_would_accept_or_garbage(raw: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        environ.integer({"RANK": raw}, "RANK")
    assert info.value.variable == "RANK"
    assert str(info.value).startswith(f"RANK={raw!r} is invalid: expected a decimal integer")


def test_integer_minimum_and_missing() -> None:
    assert environ.integer({"N": "007"}, "N") == 7
    with pytest.raises(InvalidVariable, match=">= 1"):
        environ.integer({"N": "0"}, "N", minimum=1)
    with pytest.raises(MissingVariable) as info:
        environ.integer({}, "WORLD_SIZE", source="torchelastic")
    assert isinstance(info.value, KeyError)
    assert str(info.value) == (
        "WORLD_SIZE is not set (needed by source 'torchelastic'): expected a decimal integer >= 0"
    )


def test_optional_integer() -> None:
    assert environ.optional_integer({}, "X") is None
    with pytest.raises(InvalidVariable):
        environ.optional_integer({"X": ""}, "X")


@pytest.mark.parametrize("raw", ["0", "65536", "80abc", "", "-1", "99999999"])
def test_port_refuses(raw: str) -> None:
    with pytest.raises(InvalidVariable, match="TCP port"):
        environ.port({"MASTER_PORT": raw}, "MASTER_PORT")


@pytest.mark.parametrize("raw", ["10.0.0.1", "node-01.cluster", "fe80::1%eth0", "[::1]", "localhost", "a_b"])
def test_address_accepts(raw: str) -> None:
    assert environ.address({"MASTER_ADDR": raw}, "MASTER_ADDR") == raw


@pytest.mark.parametrize("raw", ["", " ", "a b", "host\n", "a;rm -rf /", "$(x)", "`x`", "h'o", "x" * 256, "é"])
def test_address_refuses(raw: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        environ.address({"MASTER_ADDR": raw}, "MASTER_ADDR")
    assert "MASTER_ADDR=" in str(info.value)


def test_huge_values_are_shortened_in_messages() -> None:
    with pytest.raises(InvalidVariable) as info:
        environ.integer({"RANK": "1" * 100_000}, "RANK")
    assert len(str(info.value)) < 400
