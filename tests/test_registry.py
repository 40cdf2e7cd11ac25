"""The registry is data: its candidate variables are a sound filter, and resolve imports only what it needs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
import resolver
from resolver.sources import Candidates, Detection
from resolver.sources._offers import Offers
from resolver.sources._registry import (
    DEFAULT,
    DETECTION_ORDER,
    DEVICE_BINDINGS,
    ENDPOINTS,
    ENTRIES,
    ON_REQUEST,
    SCHEDULERS,
    Entry,
)
from resolver.sources._registry import entry as registry_entry
from tests.conftest import CAPTURES, CAPTURES_HPC, read_capture
from tests.test_imports import loaded_after

REAL = [read_capture(path) for root in (CAPTURES, CAPTURES_HPC) for path in sorted(root.glob("**/*.env"))]
NAMES = sorted({name for env in REAL for name in env} | {c for e in DETECTION_ORDER for c in e.candidates.names})
VALUES = [*sorted({value for env in REAL for value in env.values() if len(value) < 40}), "0", "1", "2", "4", ""]


def sound(environ: Mapping[str, str]) -> None:
    for entry in DETECTION_ORDER:
        if not entry.is_candidate(environ):
            detection = entry.load().detect(environ)
            assert not detection, f"{entry.name} matches {dict(environ)} but is filtered out by {entry.candidates}"


def test_the_filter_keeps_every_real_capture_s_source() -> None:
    for environ in REAL:
        sound(environ)


@settings(max_examples=500)
@given(st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=25))
def test_the_filter_never_drops_a_source_that_would_match(environ: dict[str, str]) -> None:
    sound(environ)


@given(st.sampled_from(REAL), st.sets(st.sampled_from(NAMES), max_size=10))
def test_the_filter_holds_on_real_environments_missing_some_variables(real: dict[str, str], drop: set[str]) -> None:
    sound({k: v for k, v in real.items() if k not in drop})


def test_names_are_unique_and_each_entry_loads_the_source_it_names() -> None:
    entries = (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)
    assert len({e.name for e in entries}) == len(entries)
    for entry in entries:
        source = entry.load()
        assert isinstance(source, resolver.Source)
        assert (source.name, source.auto) == (entry.name, entry.auto)


def test_an_entry_declares_exactly_what_its_module_offers() -> None:
    for entry in ENTRIES:
        offers = entry.offers() or Offers()
        for declared, offered in (
            (entry.facts, offers.job_facts),
            (entry.endpoint, offers.main_endpoint),
            (entry.devices, offers.device_binding),
        ):
            assert (declared is None) == (offered is None), entry.name
    assert {e.name for e in SCHEDULERS} == {e.name for e in ENTRIES if (e.offers() or Offers()).job_facts is not None}
    assert all(callable(e.main_endpoint()) for e in ENDPOINTS)
    assert all(callable(e.device_binding()) for e in DEVICE_BINDINGS)
    with pytest.raises(LookupError, match="has no job_facts"):
        registry_entry("torchelastic").job_facts()


# -- declarations against behaviour: the variables an entry declares are the ones its module reads -------


class Recording(Mapping[str, str]):
    """A mapping that notes every variable asked for, present or not."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = dict(environ)
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return self.environ[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return key in self.environ

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)


def launched(entry: Entry) -> list[dict[str, str]]:
    """Every process's environment of a default launch of each of the entry's builder modules, and the
    real captures."""
    found = []
    for name in entry.builders:
        module = importlib.import_module(f"resolver.testing.{name}")
        for builder in (n for n in module.__all__ if n.endswith("_job")):
            options = {"openmpi": {"np": 2}, "mpich": {"n": 2}}.get(name, {})
            found += [dict(process) for process in getattr(module, builder)(**options)]
    return found + REAL + list(EXTRA)


# variables of real launchers that no builder or capture here sets
EXTRA = [
    {"MV2_COMM_WORLD_SIZE": "2", "MV2_COMM_WORLD_RANK": "1", "MV2_COMM_WORLD_LOCAL_RANK": "1"},
    {"PALS_RANKID": "1", "PALS_NODEID": "0", "PALS_LOCAL_RANKID": "1", "PMI_SIZE": "2", "PMI_RANK": "1"},
    {"TF_CONFIG": '{"cluster": {"chief": ["h0:2222"]}, "task": {"type": "chief", "index": 0}, "environment": "cloud"}'},
    {"VC_MASTER_HOSTS": "j-master-0", "VC_MASTER_NUM": "1", "VC_TASK_INDEX": "0"},
    {"VC_WORKER_HOSTS": "j-worker-0", "VC_WORKER_NUM": "1", "VK_TASK_INDEX": "0"},
    {"AZUREML_RUN_ID": "r1", "AZ_BATCH_MASTER_NODE": "10.0.0.4:6105", "OMPI_COMM_WORLD_SIZE": "2"},
    {"AZUREML_RUN_ID": "r1", "AZ_BATCHAI_MPI_MASTER_NODE": "10.0.0.4", "OMPI_COMM_WORLD_SIZE": "2"},
    {"SLURM_JOB_ID": "7", "SLURM_NTASKS": "1", "SLURMD_TRES_BIND": "gpu:per_task:1"},
    {"FLUX_URI": "local:///run/flux/local", "FLUX_JOB_ID": "f2Mv4A7"},  # Flux's initial program
]


def without(environ: Mapping[str, str], names: Iterable[str]) -> dict[str, str]:
    return {k: v for k, v in environ.items() if k not in set(names)}


def hold(declared: Candidates, envs: list[dict[str, str]], answers: Callable[[Mapping[str, str]], bool]) -> None:
    """`declared` are exactly the variables that make `answers` answer: each `any_of` name alone does
    (with the others removed), each `all_of` name is needed; and each is asked for."""
    names = declared.names
    for name in names:
        others = () if declared.every else set(names) - {name}
        having = [e for e in envs if name in e and answers(without(e, others))]
        assert having, f"no environment where {name} is set (alone of {names}) gets an answer: is {name} misspelt?"
        recording = Recording(without(having[0], others))
        answers(recording)
        assert name in recording.asked, f"{name} is declared but never read"
        if declared.every:
            assert not answers(without(having[0], [name])), f"answers without {name}, which all_of needs"
    for environ in envs:  # a real launch whose answer the declaration would hide
        assert declared.met(environ) or not answers(environ), f"answers outside {declared}: {sorted(environ)}"


@pytest.mark.parametrize("entry", SCHEDULERS, ids=lambda e: e.name)
def test_facts_declares_the_variables_job_facts_answers_on(entry: Entry) -> None:
    assert entry.facts is not None
    hold(entry.facts, launched(entry), lambda environ: bool(entry.job_facts()(environ)))


@pytest.mark.parametrize("entry", ENDPOINTS, ids=lambda e: e.name)
def test_endpoint_declares_the_variables_main_endpoint_answers_on(entry: Entry) -> None:
    assert entry.endpoint is not None
    files = probes.fake(hostname="ci1", files={}, which={})
    hold(entry.endpoint, launched(entry), lambda environ: bool(entry.main_endpoint()(environ, files, one_node=False)))


@pytest.mark.parametrize("entry", DETECTION_ORDER, ids=lambda e: e.name)
def test_candidates_declare_the_variables_detect_matches_on(entry: Entry) -> None:
    source = entry.load()

    def answers(environ: Mapping[str, str]) -> bool:  # matched, or declined with a warning for the record
        found = source.detect(environ)
        return bool(found) or (isinstance(found, Detection) and found.warning is not None)

    envs = [e for e in launched(entry) if entry.is_candidate(e)]
    names = entry.candidates.names
    for name in names:
        others = () if entry.candidates.every else set(names) - {name}
        having = [e for e in envs if name in e and answers(without(e, others))]
        assert having, f"no environment where {name} is set (alone of {names}) is detected: is {name} misspelt?"
        recording = Recording(without(having[0], others))
        answers(recording)
        assert name in recording.asked, f"{name} is declared but detect never reads it"
    for environ in launched(entry):
        assert not answers(without(environ, names)), f"{entry.name} answers with none of {names}"


def test_every_list_is_a_view_of_the_one_table() -> None:
    assert {e.name for e in ENTRIES} == {e.name for e in (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)}
    assert len({e.name for e in ENTRIES}) == len(ENTRIES)
    for view in (DETECTION_ORDER, ON_REQUEST, SCHEDULERS, ENDPOINTS, DEVICE_BINDINGS):
        assert all(e is registry_entry(e.name) for e in view)
        positions = [ENTRIES.index(e) for e in view]
        assert positions == sorted(positions)  # each view keeps the table's order


def test_a_torchrun_worker_imports_no_other_source() -> None:
    env = {"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "GROUP_RANK": "0"}
    modules = loaded_after(f"import probes, resolver; resolver.resolve({env!r}, probes.fake())")
    sources = {m for m in modules if m.startswith("resolver.sources.") and not m.startswith("resolver.sources._")}
    assert sources == {"resolver.sources.torchelastic"}


def test_explain_imports_every_source_and_lists_them_in_registry_order() -> None:
    names = [c.name for c in resolver.explain({}).candidates]
    assert names == [e.name for e in (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)]
