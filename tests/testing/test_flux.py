"""resolver.testing.flux, built from flux-environment(7) (no Flux instance runs here, so there is no
capture): the documented variables, block and cyclic task maps as its table shows, F58 job ids."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resolver import testing as rt
from resolver.sources import flux
from resolver.testing.flux import flux_env, flux_job

# flux-environment(7): "JOB ENVIRONMENT" (the job shell) and the pmi plugin's PMI_* variables
DOCUMENTED = {
    "FLUX_JOB_ID",
    "FLUX_JOB_SIZE",
    "FLUX_JOB_NNODES",
    "FLUX_TASK_RANK",
    "FLUX_TASK_LOCAL_ID",
    "FLUX_JOB_TMPDIR",
    "FLUX_KVS_NAMESPACE",
    "FLUX_URI",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_FD",
    "PMI_SPAWNED",
    "FLUX_PMI_LIBRARY_PATH",
}


def test_every_variable_is_a_documented_one() -> None:
    for env in flux_job(n=4, hosts=("n1", "n2")).environs:
        assert set(env) == DOCUMENTED
        assert env["PMI_RANK"] == env["FLUX_TASK_RANK"] and env["PMI_SIZE"] == env["FLUX_JOB_SIZE"]
        for variable, shape in rt.NONDETERMINISTIC["flux"].items():
            assert re.fullmatch(shape, env[variable]), (variable, env[variable])


@pytest.mark.parametrize(
    ("taskmap", "nodes"),
    [("block", [0, 0, 0, 0, 1, 1, 1, 1]), ("cyclic", [0, 1, 0, 1, 0, 1, 0, 1])],
)
def test_the_documented_task_maps(taskmap: str, nodes: list[int]) -> None:
    # flux-environment(7), FLUX_TASK_RANK: 8 tasks on 2 nodes, block 0-3 | 4-7, cyclic 0,2,4,6 | 1,3,5,7;
    # FLUX_TASK_LOCAL_ID: 0-3 on each node
    job = flux_job(n=8, hosts=("node0", "node1"), taskmap=taskmap)  # type: ignore[arg-type]
    assert [p.node for p in job] == nodes
    for node in (0, 1):
        assert sorted(int(p.environ["FLUX_TASK_LOCAL_ID"]) for p in job if p.node == node) == [0, 1, 2, 3]
    rt.assert_consistent(job.resolve(), job)


def test_the_job_id_is_f58() -> None:
    env = flux_env()
    assert env["FLUX_JOB_ID"] == "\u0192uZZybuNNy"  # RFC 19's example, the default id
    assert flux.f58_decode("FLUX_JOB_ID", flux_env(job_id=58)["FLUX_JOB_ID"]) == 58


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: flux_env(rank=2, n=2), "tasks 0..1"),
        (lambda: flux_env(n=1, hosts=("a", "b")), "at least one task per host"),
        (lambda: flux_env(taskmap="manual"), "'block' or 'cyclic'"),  # type: ignore[arg-type]
        (lambda: flux_env(job_id=1 << 64), "64-bit"),
        (lambda: flux_env(hosts=("a", "a"), n=2), "each host once"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_generated_launch_is_one_world(data: st.DataObject) -> None:
    job = data.draw(rt.jobs(launchers=["flux"], max_processes=10))
    tops = job.resolve()
    rt.assert_consistent(tops, job)
    assert {t.main_port for t in tops} == {flux.default_port(job.environs[0])[0]}
