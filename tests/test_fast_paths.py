"""The hot path's shortcuts agree with the complete checks they stand in front of.

`resolve` runs on every rank, so the record's validators, the integer reader and the sources'
`detect` take a fast path for the common valid value (an exact-type check, a set lookup, a
preallocated Detection). Each test here compares one shortcut with the plain rule it shortcuts:
same acceptance, same error (field, value, expected) and the same Detection.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import Detection, InvalidTopology, InvalidVariable, Topology, detect, environ
from resolver.environ import ADDRESS_RE
from resolver.sources import mpi
from resolver.sources.lsf import Lsf
from resolver.sources.slurm import Slurm
from resolver.sources.torchelastic import TorchElastic
from resolver.topology import _BUILTIN_SOURCES, _SOURCE_RE


class Small(enum.IntEnum):
    ZERO = 0
    TWO = 2


class Text(str):
    __slots__ = ()


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# each field's complete rule, as the validators state it without their fast paths
RULES: dict[str, tuple[Any, str]] = {
    "source": (lambda v: isinstance(v, str) and bool(_SOURCE_RE.fullmatch(v)), "a lower-case source name"),
    "world_size": (lambda v: _int(v) and v >= 1, "an int >= 1"),
    "global_rank": (lambda v: _int(v) and v >= 0, "an int >= 0"),
    "num_nodes": (lambda v: v is None or (_int(v) and v >= 1), "an int >= 1"),
    "restart_count": (lambda v: v is None or (_int(v) and v >= 0), "an int >= 0"),
    "main_address": (
        lambda v: v is None or (isinstance(v, str) and bool(ADDRESS_RE.fullmatch(v))),
        "a non-empty host name",
    ),
    "main_port": (lambda v: v is None or (_int(v) and 1 <= v <= 65535), "an int port in 1..65535"),
    "creates_processes_externally": (lambda v: isinstance(v, bool), "a bool"),
    "job_id": (lambda v: v is None or isinstance(v, str), "a str or None"),
}
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 70000),
    st.sampled_from([Small.ZERO, Small.TWO, 2**70, 1.0, b"x", Text("mpi"), Text("10.0.0.1"), [], ("mpi",)]),
    st.sampled_from(sorted(_BUILTIN_SOURCES)),
    st.text(max_size=6),
    st.from_regex(ADDRESS_RE, fullmatch=True),
)


@given(st.sampled_from(sorted(RULES)), VALUES)
def test_field_validators_accept_exactly_what_their_rule_accepts(field: str, value: object) -> None:
    attribute = attrs.fields_dict(Topology)[field]
    rule, expected = RULES[field]
    assert attribute.validator is not None
    if rule(value):
        attribute.validator(None, attribute, value)
        return
    with pytest.raises(InvalidTopology) as info:
        attribute.validator(None, attribute, value)
    assert info.value.field == field
    assert info.value.value is value
    assert info.value.expected.startswith(expected)


def test_builtin_source_names_are_the_sources_and_fit_the_grammar() -> None:
    builtin = {s.name for s in (*detect.DETECTION_ORDER, detect.DEFAULT, *detect.ON_REQUEST)}
    assert builtin == _BUILTIN_SOURCES
    assert all(_SOURCE_RE.fullmatch(name) for name in _BUILTIN_SOURCES)


BASE: dict[str, Any] = {"source": "mpi", "world_size": 4, "global_rank": 1, "local_rank": 1, "node_rank": 0}


class Origins(Mapping[str, str]):
    """A Mapping that is not a dict."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def __getitem__(self, key: str) -> str:
        return self.data[key]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


@pytest.mark.parametrize(
    "provenance",
    [
        {},
        {"world_size": "env:W", "main_port": "probe:free_port"},
        {"world_size": Text("env:W")},
        MappingProxyType({"world_size": "env:W"}),
        Origins({"world_size": "env:W"}),
    ],
)
def test_provenance_accepted_in_any_mapping_and_kept_read_only(provenance: Mapping[str, str]) -> None:
    t = Topology(**BASE, provenance=provenance)
    assert dict(t.provenance) == dict(provenance)
    assert isinstance(t.provenance, MappingProxyType)
    if isinstance(provenance, dict):
        provenance["global_rank"] = "changed later"
        assert "global_rank" not in t.provenance  # the record holds its own copy


@pytest.mark.parametrize(
    ("provenance", "shown"),
    [
        ({"world_size": "env:W", "nope": "env:X"}, {"nope": "env:X"}),
        ({"world_size": 1}, {"world_size": 1}),
        ({"world_size": "env:W", "global_rank": None, "nope": "x"}, {"global_rank": None}),  # the first in order
        (Origins({"world_size": b"env:W"}), {"world_size": b"env:W"}),
    ],
)
def test_provenance_refusal_names_the_first_bad_entry(provenance: Mapping[str, Any], shown: dict[str, Any]) -> None:
    with pytest.raises(InvalidTopology) as info:
        Topology(**BASE, provenance=provenance)
    assert (info.value.field, info.value.value, info.value.expected) == (
        "provenance",
        shown,
        "field name -> origin string",
    )


@pytest.mark.parametrize(
    ("warnings", "kept"),
    [([], ()), ((), ()), (["a", "b"], ("a", "b")), (("a",), ("a",)), ([Text("a")], ("a",)), (iter(["a"]), ())],
)
def test_warnings_become_a_tuple(warnings: Any, kept: tuple[str, ...]) -> None:
    # an iterator is read by the check and then found empty: as before the fast paths
    assert Topology(**BASE, warnings=warnings).warnings == kept


@pytest.mark.parametrize("warnings", ["one string", [1], ["a", None], (b"x",)])
def test_warnings_refused(warnings: Any) -> None:
    with pytest.raises(InvalidTopology) as info:
        Topology(**BASE, warnings=warnings)
    assert (info.value.field, info.value.value) == ("warnings", warnings)


def test_evolve_still_runs_every_validator() -> None:
    t = Topology(**BASE)
    changes: list[tuple[str, Any]] = [("world_size", True), ("main_port", 0), ("source", "Bad"), ("job_id", 5)]
    for field, value in changes:
        with pytest.raises(InvalidTopology) as info:
            attrs.evolve(t, **{field: value})
        assert info.value.field == field


@given(st.text(max_size=22) | st.from_regex(r"[0-9]{1,20}", fullmatch=True), st.integers(0, 2), st.none() | st.just(9))
def test_check_integer_follows_the_digit_grammar(raw: str, minimum: int, maximum: int | None) -> None:
    fits = bool(re.fullmatch(r"[0-9]{1,18}", raw)) and minimum <= int(raw) <= (
        maximum if maximum is not None else int(raw)
    )
    if fits:
        assert environ.check_integer("N", raw, minimum, maximum) == int(raw)
        return
    with pytest.raises(InvalidVariable) as info:
        environ.check_integer("N", raw, minimum, maximum)
    bound = f" and <= {maximum}" if maximum is not None else ""
    assert info.value.expected == f"a decimal integer >= {minimum}{bound}"


def test_check_integer_refuses_a_value_that_is_not_a_str() -> None:
    with pytest.raises(TypeError):
        environ.check_integer("N", 5)  # type: ignore[arg-type]


NAMES = ("RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


@given(st.dictionaries(st.sampled_from([*NAMES, "OTHER"]), st.text(max_size=2)))
def test_present_is_the_same_for_a_dict_and_any_mapping(env: dict[str, str]) -> None:
    expected = tuple(name for name in NAMES if name in env)
    assert environ.present(env, *NAMES) == expected
    assert environ.present_among(env, NAMES) == expected
    assert environ.present_among(MappingProxyType(env), NAMES) == expected
    assert environ.present_among(Origins(env), NAMES) == expected


@pytest.mark.parametrize(
    ("source", "env", "expected"),
    [
        (
            TorchElastic(),
            {},
            Detection(
                False, "neither TORCHELASTIC_RUN_ID nor all of RANK, GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE", ()
            ),
        ),
        (
            TorchElastic(),
            {"LOCAL_RANK": "0"},
            Detection(
                False,
                "neither TORCHELASTIC_RUN_ID nor all of RANK, GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE",
                ("LOCAL_RANK",),
            ),
        ),
        (
            TorchElastic(),
            {"TORCHELASTIC_RUN_ID": "none"},
            Detection(True, "TORCHELASTIC_RUN_ID is set (torchrun worker)", ("TORCHELASTIC_RUN_ID",)),
        ),
        (Slurm(), {}, Detection(False, "SLURM_NTASKS is not set: not inside a SLURM job")),
        (
            Lsf(),
            {},
            Detection(
                False,
                "not a jsrun task: LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_LOCAL_RANK, JSM_NAMESPACE_SIZE not set",
                (),
            ),
        ),
        (
            Lsf(),
            {"LSB_JOBID": "1", "JSM_NAMESPACE_SIZE": "2"},
            Detection(
                False,
                "not a jsrun task: LSB_DJOB_RANKFILE, JSM_NAMESPACE_LOCAL_RANK not set",
                ("LSB_JOBID", "JSM_NAMESPACE_SIZE"),
            ),
        ),
        (mpi.Mpi(), {}, Detection(False, mpi.NOT_FOUND, ())),
    ],
)
def test_preallocated_detections_are_what_detect_always_answered(
    source: Any, env: dict[str, str], expected: Detection
) -> None:
    assert source.detect(env) == expected
    assert source.detect(MappingProxyType(env)) == expected


def test_a_launcher_outside_the_table_gets_its_own_plan() -> None:
    for launcher in mpi.LAUNCHERS:
        assert mpi._plan(launcher) == mpi._make_plan(launcher)
        assert mpi._plan(launcher).names == launcher.names
    other = mpi.Launcher("custom", marker="OMPI_COMM_WORLD_SIZE", rank="MY_RANK", size="MY_SIZE", local_size="MY_LS")
    plan = mpi._plan(other)
    assert plan.launcher is other
    assert plan.names == ("MY_RANK", "MY_SIZE", "MY_LS")
    assert plan.one_node[0] == "formula:0 (MY_LS == MY_SIZE: one node)"


class BoolSource:
    name = "boolish"
    auto = True

    def __init__(self, answer: bool) -> None:
        self.answer = answer

    def detect(self, environ: Mapping[str, str]) -> bool:
        return self.answer

    def resolve(self, environ: Mapping[str, str], probes: probes.Probes) -> Topology:
        return Topology(source="boolish", world_size=1, global_rank=0, local_rank=0, node_rank=0)


class Inverted(Detection):
    """A Detection whose truth is not its `matched` field: `_choose` must ask its bool."""

    def __bool__(self) -> bool:
        return not self.matched


class InvertedSource(BoolSource):
    def detect(self, environ: Mapping[str, str]) -> Detection:  # type: ignore[override]
        return Inverted(not self.answer, "inverted")


@pytest.mark.parametrize("kind", [BoolSource, InvertedSource])
def test_detection_order_sources_that_answer_otherwise(kind: type[BoolSource], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "DETECTION_ORDER", (kind(False), kind(True)))
    fake = probes.fake(free_port=5, which={})
    assert resolver.resolve({}, fake).source == "boolish"
    monkeypatch.setattr(detect, "DETECTION_ORDER", (kind(False),))
    assert resolver.resolve({}, fake).source == "lightning"
