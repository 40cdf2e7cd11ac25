"""The registry is data: its candidate variables are a sound filter, and resolve imports only what it needs."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

import resolver
from resolver.sources._registry import (
    DEFAULT,
    DETECTION_ORDER,
    DEVICE_BINDINGS,
    ENDPOINTS,
    ENTRIES,
    ON_REQUEST,
    SCHEDULERS,
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
    for scheduler in SCHEDULERS:
        assert callable(scheduler.offered("job_facts"))
    for scheduler in ENDPOINTS:
        assert callable(scheduler.offered("main_endpoint"))
    for binder in DEVICE_BINDINGS:
        assert callable(binder.offered("device_binding"))


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
