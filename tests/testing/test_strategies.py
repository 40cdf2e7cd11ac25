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


def test_a_launchers_jobs_span_one_to_three_hosts_and_mpi_ones_an_optional_master() -> None:
    from resolver.testing._launch import jobs_on_hosts
    from resolver.testing.flux import FluxLaunch

    def launch(draw: st.DrawFn, count: int) -> FluxLaunch:
        return FluxLaunch(n=count, hosts=tuple(f"h{i}" for i in range(count)))

    seen: dict[str, set[object]] = {"few": set(), "many": set(), "master": set()}

    @settings(max_examples=80, deadline=None)
    @given(jobs_on_hosts(2, launch), jobs_on_hosts(10, launch, master=True))
    def collect(few: rt.Job, many: rt.Job) -> None:
        seen["few"].add(len(few.processes))
        seen["many"].add(len(many.processes))
        masters = {(p.environ.get("MASTER_ADDR"), p.environ.get("MASTER_PORT")) for p in many}
        assert len(masters) == 1, masters  # every rank has the same, or none has it
        seen["master"].add(masters.pop() != (None, None))
        assert all("MASTER_ADDR" not in p.environ for p in few)

    collect()
    assert seen == {"few": {1, 2}, "many": {1, 2, 3}, "master": {True, False}}, seen
