"""The kit's host helpers, shared by LSF, PBS and Grid Engine: which host is this one."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import probes
from resolver import ProbeFailed
from resolver.sources import read_if_here, same_host, short_host, this_host


@pytest.mark.parametrize(
    ("name", "short"),
    [
        ("node1", "node1"),
        ("NODE1.cluster.local", "node1"),
        ("10.0.0.1", None),  # an IPv4 address has no short form: its first label names no host
        ("fe80::1", None),
        ("n01-ib.example", "n01-ib"),
    ],
)
def test_short_host(name: str, short: str | None) -> None:
    assert short_host(name) == short


@pytest.mark.parametrize(
    ("name", "other", "same"),
    [
        ("node1", "node1", True),
        ("node1", "NODE1.cluster", True),
        ("node1.a", "node1.b", True),  # one short name: the resolver cannot tell domains apart
        ("node1", "node10", False),
        ("10.0.0.1", "10.0.0.1", True),
        ("10.0.0.1", "10.0.0.2", False),  # not "10" == "10"
    ],
)
def test_same_host(name: str, other: str, same: bool) -> None:
    assert same_host(name, other) is same and same_host(other, name) is same


def test_this_host_refuses_an_answer_that_names_no_host() -> None:
    assert this_host(probes.fake(hostname="node1")) == "node1"
    with pytest.raises(ProbeFailed, match=r"hostname.*expected a non-empty str"):
        this_host(probes.fake(hostname=""))


def test_read_if_here_is_none_where_this_host_has_no_such_file() -> None:
    here = probes.fake(files={"/spool/hosts": "node1\n"})
    assert read_if_here(here, "PBS_NODEFILE", "/spool/hosts") == "node1\n"
    assert read_if_here(probes.fake(), "PBS_NODEFILE", "/spool/hosts") is None  # another host's file

    def forty_two(path: str) -> Any:
        return 42

    garbage = attrs.evolve(probes.fake(), read_text=forty_two)
    with pytest.raises(ProbeFailed, match=r"answered 42 for PBS_NODEFILE='/spool/hosts'"):
        read_if_here(garbage, "PBS_NODEFILE", "/spool/hosts")


@pytest.mark.parametrize(
    ("read", "variable"),
    [
        (lambda b: b.integer("global_rank", "X_RANK", expected="the task's rank, set by X"), "X_RANK"),
        (lambda b: b.address("X_ADDR", expected="the task's rank, set by X"), "X_ADDR"),
        (lambda b: b.port("X_PORT", expected="the task's rank, set by X"), "X_PORT"),
    ],
)
def test_a_missing_variable_is_named_with_what_the_source_says_it_holds(read: Any, variable: str) -> None:
    from resolver.errors import MissingVariable
    from resolver.sources import Builder

    with pytest.raises(MissingVariable) as caught:
        read(Builder("x", {}))
    assert caught.value.variable == variable
    assert "the task's rank, set by X" in str(caught.value) and "source 'x'" in str(caught.value).replace('"', "'")


def test_without_expected_a_missing_integer_says_which_integer() -> None:
    from resolver.errors import MissingVariable
    from resolver.sources import Builder

    with pytest.raises(MissingVariable, match=r"X_SIZE.*a decimal integer >= 1"):
        Builder("x", {}).integer("world_size", "X_SIZE", minimum=1)
