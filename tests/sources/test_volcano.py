"""Volcano: pods of a vcjob from its env, svc and pytorch plugins' documented variables."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, TopologyError


def pytorch_pod(task: str, index: int, **extra: str) -> dict[str, str]:
    """A pod of job `pj` (1 master, 2 workers) with the env, svc and pytorch plugins (how_to_use_pytorch_plugin.md)."""
    rank = 0 if task == "master" else index + 1
    env = {
        "VC_TASK_INDEX": str(index),
        "VK_TASK_INDEX": str(index),
        "VC_MASTER_HOSTS": "pj-master-0.pj",
        "VC_MASTER_NUM": "1",
        "VC_WORKER_HOSTS": "pj-worker-0.pj,pj-worker-1.pj",
        "VC_WORKER_NUM": "2",
        "MASTER_ADDR": "pj-master-0.pj",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": str(rank),
    }
    return {**env, **extra}


def one_task_pod(index: int, **extra: str) -> dict[str, str]:
    """A pod of job `mnist`, one task `trainer` of 3 replicas, env and svc plugins only (how_to_use_env_plugin.md)."""
    env = {
        "VC_TASK_INDEX": str(index),
        "VK_TASK_INDEX": str(index),
        "VC_TRAINER_HOSTS": "mnist-trainer-0.mnist,mnist-trainer-1.mnist,mnist-trainer-2.mnist",
        "VC_TRAINER_NUM": "3",
    }
    return {**env, **extra}


def test_the_pytorch_plugin_gives_node_ranks_master_first() -> None:
    pods = [pytorch_pod("master", 0), pytorch_pod("worker", 0), pytorch_pod("worker", 1)]
    records = [resolver.resolve(p, probes.fake()) for p in pods]
    assert [t.node_rank for t in records] == [0, 1, 2]
    assert {(t.source, t.num_nodes, t.main_address, t.main_port) for t in records} == {
        ("volcano", 3, "pj-master-0.pj", 23456)
    }
    assert not any(t.creates_processes_externally for t in records)
    assert [w.global_rank for w in resolver.spawn(records[2], devices=2)] == [4, 5]


def test_one_task_without_the_pytorch_plugin() -> None:
    records = [resolver.resolve(one_task_pod(i), probes.fake()) for i in range(3)]
    assert [t.node_rank for t in records] == [0, 1, 2]
    assert {(t.main_address, t.main_port, t.num_nodes) for t in records} == {("mnist-trainer-0.mnist", 29500, 3)}
    assert resolver.resolve(one_task_pod(1, MASTER_PORT="8008"), probes.fake()).main_port == 8008
    only_vk = {k: v for k, v in one_task_pod(2).items() if k != "VC_TASK_INDEX"}
    assert resolver.resolve(only_vk, probes.fake()).node_rank == 2


def test_a_launcher_inside_the_pod_wins() -> None:
    worker = {**pytorch_pod("worker", 0), "LOCAL_RANK": "1", "TORCHELASTIC_RUN_ID": "none", "GROUP_RANK": "1"}
    assert resolver.resolve(worker, probes.fake()).source == "torchelastic"


@pytest.mark.parametrize(
    ("environ", "variable", "error"),
    [
        (pytorch_pod("worker", 1, RANK="3"), "RANK", InvalidVariable),
        (pytorch_pod("worker", 1, WORLD_SIZE="0"), "WORLD_SIZE", InvalidVariable),
        (pytorch_pod("worker", 1, MASTER_PORT="70000"), "MASTER_PORT", InvalidVariable),
        (pytorch_pod("worker", 1, MASTER_ADDR="pj master"), "MASTER_ADDR", InvalidVariable),
        (one_task_pod(1, VC_TRAINER_NUM="2"), "VC_TRAINER_NUM", InvalidVariable),
        (one_task_pod(1, VC_TRAINER_HOSTS="a,,b"), "VC_TRAINER_HOSTS", InvalidVariable),
        (one_task_pod(3), "VC_TASK_INDEX", InvalidVariable),
        (one_task_pod(1, VC_TASK_INDEX="one"), "VC_TASK_INDEX", InvalidVariable),
        ({"VC_TASK_INDEX": "0"}, "VC_<TASK>_NUM", MissingVariable),
    ],
)
def test_errors_name_the_variable(environ: dict[str, str], variable: str, error: type[TopologyError]) -> None:
    with pytest.raises(error) as info:
        resolver.resolve(environ, probes.fake())
    assert info.value.variable == variable


def test_several_tasks_without_the_pytorch_plugin_are_refused_not_guessed() -> None:
    environ = {k: v for k, v in pytorch_pod("worker", 1).items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}
    with pytest.raises(InvalidVariable, match="tasks MASTER, WORKER") as info:
        resolver.resolve(environ, probes.fake())
    assert info.value.variable == "VC_TASK_INDEX"
