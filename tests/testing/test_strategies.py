"""resolver.testing.strategies: every generated launch resolves to one world whose records fit the schema."""

from __future__ import annotations

import re
from collections.abc import Callable

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resolver import testing as rt
from resolver.schema import topology_schema


@pytest.mark.parametrize("launcher", rt.LAUNCHERS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_generated_job_resolves_to_one_world(launcher: str, data: st.DataObject) -> None:
    job = data.draw(rt.jobs(launchers=[launcher], max_processes=8), label="job")
    topologies = job.resolve()
    rt.assert_consistent(topologies, job)
    validator = jsonschema.Draft202012Validator(topology_schema())
    for t in topologies:
        validator.validate(t.to_dict())


def test_jobs_mix_launchers() -> None:
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None)
    @given(rt.jobs(max_processes=4))
    def collect(job: rt.Job) -> None:
        seen.add(job.launcher)

    collect()
    assert len(seen) >= 3, seen


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.jobs(launchers=["condor"]), "expected some of"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()
