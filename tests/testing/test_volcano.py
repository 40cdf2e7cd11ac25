"""resolver.testing.volcano: a vcjob's pods as Volcano's plugin guides give them (no capture)."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import testing as rt


def test_the_documented_variables() -> None:
    pod = rt.volcano_env(node=2, workers=2, name="pj")
    assert pod["VC_WORKER_HOSTS"] == "pj-worker-0.pj,pj-worker-1.pj"
    assert (pod["VC_TASK_INDEX"], pod["RANK"], pod["WORLD_SIZE"], pod["MASTER_ADDR"], pod["MASTER_PORT"]) == (
        "1",
        "2",
        "3",
        "pj-master-0.pj",
        "23456",
    )
    plain = rt.volcano_env(node=1, pytorch=False, name="pj")
    assert "RANK" not in plain and plain["VC_TRAINER_NUM"] == "2"
    assert resolver.resolve(plain, probes.fake()).node_rank == 1


@pytest.mark.parametrize("pytorch", [True, False])
def test_a_job_is_one_world(pytorch: bool) -> None:
    job = rt.volcano_job(workers=3, pytorch=pytorch)
    rt.assert_consistent(job.resolve(), job)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"pods 0\.\.1"):
        rt.volcano_env(node=2)
