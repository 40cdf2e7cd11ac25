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


@pytest.mark.parametrize(
    ("raw", "stored"),
    [
        ("10.0.0.1", "10.0.0.1"),
        ("node-01.cluster", "node-01.cluster"),
        ("n001", "n001"),
        ("1node", "1node"),  # RFC 1123 lets a label start with a digit
        ("a" * 63 + ".b", "a" * 63 + ".b"),
        ("fe80::1%eth0", "fe80::1%eth0"),
        ("[fe80::1]", "fe80::1"),  # brackets are URL syntax, not part of the address
        ("[fe80::1%eth0]", "fe80::1%eth0"),
        ("[::1]", "::1"),
        ("2001:db8::7", "2001:db8::7"),
        ("::ffff:10.0.0.1", "::ffff:10.0.0.1"),
        ("localhost", "localhost"),
    ],
)
def test_address_accepts(raw: str, stored: str) -> None:
    assert environ.address({"MASTER_ADDR": raw}, "MASTER_ADDR") == stored
    assert environ.is_address(stored)


@pytest.mark.parametrize(
    "raw",
    [
        *("", " ", "a b", "host\n", "a;rm -rf /", "$(x)", "`x`", "h'o", "x" * 256, "é"),
        # accepted before issue 15, and written to the environment
        *(":::::", "%", ".", "-badhost", "a..b", "[[x]]"),
        *("badhost-", "a_b", "host.", "a" * 64, ".".join(["a" * 63] * 4) + "x"),  # labels and length
        *("1.2.3", "999.1.1.1", "010.0.0.1", "1.2.3.4.5"),  # digits only: an IPv4 address or nothing
        *("[10.0.0.1]", "[node1]", "[::1", "::1]", "[[::1]]"),  # brackets only around IPv6
        *("2001:db8::7%eth0", "::1%lo", "fe80::1%", "fe80::1%a b", "fe80::1%eth0%x"),  # zones: link-local only
        *("1:2:3:4:5:6:7:8:9", "fe80::g", "١٢٣.1.1.1"),
    ],
)
def test_address_refuses(raw: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        environ.address({"MASTER_ADDR": raw}, "MASTER_ADDR")
    assert info.value.variable == "MASTER_ADDR"
    assert "MASTER_ADDR=" in str(info.value)
    assert "RFC 1123" in str(info.value)


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        *(("127.0.0.1", True), ("127.1.2.3", True), ("::1", True), ("localhost", True), ("LOCALHOST", True)),
        *(("a.localhost", True), ("::ffff:127.0.0.1", True), ("0.0.0.0", True), ("::", True)),  # noqa: S104
        *(("10.0.0.1", False), ("128.0.0.1", False), ("fe80::1%lo", False), ("node1", False)),
        *(("localhost1", False), ("notlocalhost", False), ("126.255.255.255", False)),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert environ.is_loopback(address) is loopback


def test_more_than_18_digits_says_the_limit() -> None:
    with pytest.raises(InvalidVariable) as info:
        environ.integer({"RANK": "1" * 19}, "RANK")
    assert "at most 18 digits" in str(info.value)


def test_huge_values_are_shortened_in_messages() -> None:
    with pytest.raises(InvalidVariable) as info:
        environ.integer({"RANK": "1" * 100_000}, "RANK")
    assert len(str(info.value)) < 400


@pytest.mark.parametrize("value", [8, 8.0, None, b"8", True, ["8"]])
def test_a_value_that_is_not_a_str_is_named_with_its_type(value: object) -> None:
    """A dict fixture's `{"WORLD_SIZE": 8}` (issue 27): a TopologyError naming the variable and the type."""
    import resolver

    for call in (resolver.resolve, resolver.explain):
        with pytest.raises(resolver.InvalidVariable) as info:
            call({"RANK": "0", "WORLD_SIZE": value})  # type: ignore[dict-item]
        assert info.value.variable == "WORLD_SIZE"
        assert type(value).__name__ in str(info.value)
        assert "environment values are strings, as in os.environ" in str(info.value)
    if isinstance(value, int) and not isinstance(value, bool):
        assert "write WORLD_SIZE='8'" in str(info.value)


def test_a_name_that_is_not_a_str_is_named() -> None:
    import resolver

    with pytest.raises(resolver.InvalidVariable, match="environment names are strings, not int"):
        resolver.resolve({1: "x"})  # type: ignore[dict-item]
