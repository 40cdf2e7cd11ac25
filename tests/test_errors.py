from __future__ import annotations

import pytest

from resolver import (
    HostlistSyntaxError,
    InvalidSettings,
    InvalidTopology,
    InvalidVariable,
    MissingVariable,
    ProbeFailed,
    TopologyError,
)


def test_one_tree() -> None:
    assert issubclass(MissingVariable, KeyError)
    for value_error in (InvalidVariable, InvalidTopology, InvalidSettings):
        assert issubclass(value_error, ValueError)
    for error in (MissingVariable, InvalidVariable, HostlistSyntaxError, InvalidTopology, InvalidSettings, ProbeFailed):
        assert issubclass(error, TopologyError)
    assert issubclass(HostlistSyntaxError, InvalidVariable)


def test_missing_variable_reads_as_a_sentence_not_a_key_repr() -> None:
    assert str(MissingVariable("RANK", "an integer")) == "RANK is not set: expected an integer"


@pytest.mark.parametrize(
    ("text", "position", "shown"),
    [
        ("ci[2-1]", 5, "ci[2-1]"),
        ("a\tb,n[\n1-2]", 5, "a\\tb,n[\\n1-2]"),
        ("x" * 200 + "[", 200, "..." + "x" * 60 + "["),
    ],
)
def test_caret_sits_under_the_fault_even_after_control_characters(text: str, position: int, shown: str) -> None:
    error = HostlistSyntaxError(text, position, "bad", variable="SLURM_NODELIST").for_variable("SLURM_STEP_NODELIST")
    head, line, caret = str(error).split("\n")
    assert head == f"SLURM_STEP_NODELIST: bad at column {position + 1}"
    assert line == f"    {shown}"
    faulty = text[position]
    assert line[caret.index("^")] == faulty
    assert error.variable == "SLURM_STEP_NODELIST"
