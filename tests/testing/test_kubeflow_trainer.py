"""resolver.testing.kubeflow_trainer: a TrainJob's pods as the torch plugin sets them (no capture)."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import testing as rt
from resolver.testing.kubeflow_trainer import kubeflow_trainer_env, kubeflow_trainer_job


def test_the_plugins_variables() -> None:
    pod = kubeflow_trainer_env(node=1, num_nodes=3, nproc_per_node="4", name="bert")
    assert pod == {
        "JOB_COMPLETION_INDEX": "1",
        "PET_MASTER_ADDR": "bert-node-0-0.bert",
        "PET_MASTER_PORT": "29500",
        "PET_NNODES": "3",
        "PET_NODE_RANK": "1",
        "PET_NPROC_PER_NODE": "4",
    }
    t = resolver.resolve(pod, probes.fake())
    assert (t.source, t.node_rank, t.nproc_per_node, t.main_address) == ("kubeflow_trainer", 1, 4, "bert-node-0-0.bert")


def test_a_job_is_one_world_of_agents_and_of_their_workers() -> None:
    job = kubeflow_trainer_job(num_nodes=3, nproc_per_node="2")
    rt.assert_consistent(job.resolve(), job)
    assert [p.hostname for p in job] == ["trainjob-node-0-0", "trainjob-node-0-1", "trainjob-node-0-2"]


@pytest.mark.parametrize("bad", [{"nproc_per_node": "0"}, {"nproc_per_node": "xpu"}, {"num_nodes": 0}])
def test_impossible_launches_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        kubeflow_trainer_job(**bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"nodes 0\.\.1"):
        kubeflow_trainer_env(node=2)
