"""Kubeflow Trainer (PET_*): the node agent of a TrainJob pod, torchrun's workers staying TorchElastic's
(the real PET_* capture), a Lightning-started worker declining, and errors naming their variable."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, TopologyError
from tests.conftest import CAPTURES_HPC, read_capture

FAKE = probes.fake()  # a node agent asks no probe
# pod 1 of TrainJob "bert" with numNodes=3, numProcPerNode=4, as the torch plugin sets it (torch.go)
POD = {
    "PET_NNODES": "3",
    "PET_NPROC_PER_NODE": "4",
    "PET_NODE_RANK": "1",
    "PET_MASTER_ADDR": "bert-node-0-0.bert",
    "PET_MASTER_PORT": "29500",
    "JOB_COMPLETION_INDEX": "1",
}
PET_CAPTURE = CAPTURES_HPC / "torchrun/pet-env-nnodes1-nproc2"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (POD, {"node_rank": 1, "num_nodes": 3, "nproc_per_node": 4, "main_address": "bert-node-0-0.bert"}),
        ({**POD, "PET_NODE_RANK": "0"}, {"node_rank": 0, "global_rank": 0, "world_size": 3}),
        ({**POD, "PET_NPROC_PER_NODE": "auto"}, {"nproc_per_node": None}),  # torchrun counts the devices
        ({**POD, "PET_NPROC_PER_NODE": "gpu"}, {"nproc_per_node": None}),
        ({**POD, "PET_MASTER_PORT": "23456", "MASTER_PORT": "1"}, {"main_port": 23456}),  # the platform's wins
        ({k: v for k, v in POD.items() if k != "PET_MASTER_PORT"}, {"main_port": 29500}),  # torchrun's default
        ({"PET_NNODES": "1", "PET_NPROC_PER_NODE": "2"}, {"node_rank": 0, "main_address": "127.0.0.1"}),
        # Kubeflow v1 PyTorchJob: node-level WORLD_SIZE/RANK beside the PET_* (pod 2 of 3, nprocPerNode=1)
        (
            {
                "PET_NNODES": "3",
                "PET_NODE_RANK": "2",
                "PET_MASTER_ADDR": "pj-master-0",
                "PET_MASTER_PORT": "23456",
                "PET_NPROC_PER_NODE": "1",
                "WORLD_SIZE": "3",
                "RANK": "2",
                "MASTER_ADDR": "pj-master-0",
                "MASTER_PORT": "23456",
            },
            {"node_rank": 2, "global_rank": 2, "world_size": 3, "nproc_per_node": 1, "main_port": 23456},
        ),
    ],
)
def test_a_pod_without_torchrun_is_its_nodes_agent(environ: dict[str, str], expected: dict[str, object]) -> None:
    t = resolver.resolve(environ, FAKE)
    assert t.source == "kubeflow_trainer"
    assert (t.local_rank, t.local_world_size, t.creates_processes_externally) == (0, 1, False)
    assert t.world_size == t.num_nodes and t.global_rank == t.node_rank
    assert {k: getattr(t, k) for k in expected} == expected


def test_spawn_gives_the_pods_workers() -> None:
    workers = resolver.spawn(resolver.resolve(POD, FAKE))
    assert [(w.global_rank, w.local_rank, w.world_size) for w in workers] == [
        (4, 0, 12),
        (5, 1, 12),
        (6, 2, 12),
        (7, 3, 12),
    ]
    assert {(w.main_address, w.main_port) for w in workers} == {("bert-node-0-0.bert", 29500)}


@pytest.mark.parametrize("path", sorted(PET_CAPTURE.glob("rank*.env")), ids=lambda p: p.name)
def test_torchruns_workers_inherit_pet_and_stay_torchelastic(path: object) -> None:
    environ = read_capture(PET_CAPTURE / str(path))
    assert "PET_NNODES" in environ
    assert resolver.resolve(environ, FAKE).source == "torchelastic"
    candidates = {c.name: c.detection for c in resolver.explain(environ).candidates}
    assert not candidates["kubeflow_trainer"].matched  # LOCAL_RANK: a launcher started it


def test_a_worker_that_lightning_or_apply_started_is_not_the_agent() -> None:
    worker = {
        **POD,
        "LOCAL_RANK": "2",
        "WORLD_SIZE": "12",
        "RANK": "6",
        "NODE_RANK": "1",
        "MASTER_ADDR": "h",
        "MASTER_PORT": "29500",
    }
    t = resolver.resolve(worker, FAKE)
    assert (t.source, t.global_rank, t.creates_processes_externally) == ("lightning", 6, True)
    reason = next(c for c in resolver.explain(worker).candidates if c.name == "kubeflow_trainer").detection.reason
    assert "LOCAL_RANK is set" in reason


@pytest.mark.parametrize(
    ("change", "variable", "error"),
    [
        ({"PET_NNODES": "1:4"}, "PET_NNODES", InvalidVariable),
        ({"PET_NNODES": "0"}, "PET_NNODES", InvalidVariable),
        ({"PET_NODE_RANK": "3"}, "PET_NODE_RANK", InvalidVariable),  # 3 nodes: 0..2
        ({"PET_NODE_RANK": None}, "PET_NODE_RANK", MissingVariable),
        ({"PET_MASTER_ADDR": None}, "PET_MASTER_ADDR", MissingVariable),
        ({"PET_MASTER_ADDR": "a b"}, "PET_MASTER_ADDR", InvalidVariable),
        ({"PET_MASTER_PORT": "0"}, "PET_MASTER_PORT", InvalidVariable),
        ({"PET_NPROC_PER_NODE": "0"}, "PET_NPROC_PER_NODE", InvalidVariable),
        ({"PET_NPROC_PER_NODE": "xpu"}, "PET_NPROC_PER_NODE", InvalidVariable),
    ],
)
def test_errors_name_the_variable(change: dict[str, str | None], variable: str, error: type[TopologyError]) -> None:
    environ = {k: v for k, v in {**POD, **change}.items() if v is not None}
    with pytest.raises(error) as info:
        resolver.resolve(environ, FAKE)
    assert info.value.variable == variable
