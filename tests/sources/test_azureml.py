"""Azure ML: the PyTorch distribution's node agent, its run id as the job id, and its MPI jobs' main node."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, ProbeFailed

MARKS = {
    "AZUREML_RUN_ID": "bert_1701600000_5f3c2a1b",
    "AZUREML_EXPERIMENT_ID": "0c5e-41ab",
    "AZUREML_ARM_WORKSPACE_NAME": "ws",
}


def node(rank: int, **extra: str) -> dict[str, str]:
    """Node `rank` of 2 under the PyTorch distribution with one process per node (the per-node launch)."""
    env = {**MARKS, "MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6105", "NODE_RANK": str(rank), "WORLD_SIZE": "2"}
    return {**env, **extra}


def test_one_process_per_node_is_the_nodes_agent() -> None:
    records = [resolver.resolve(node(r), probes.fake()) for r in (0, 1)]
    assert [t.node_rank for t in records] == [0, 1]
    assert {(t.source, t.num_nodes, t.main_address, t.main_port, t.job_id) for t in records} == {
        ("azureml", 2, "10.0.0.4", 6105, "bert_1701600000_5f3c2a1b")
    }
    assert not records[0].creates_processes_externally


def test_a_process_azure_ml_started_per_process_is_a_worker_with_the_runs_facts() -> None:
    worker = node(1, WORLD_SIZE="8", RANK="5", LOCAL_RANK="1")
    t = resolver.resolve(worker, probes.fake())
    assert (t.source, t.world_size, t.global_rank, t.local_rank, t.node_rank) == ("lightning", 8, 5, 1, 1)
    assert t.job_id == "bert_1701600000_5f3c2a1b" and t.creates_processes_externally


def test_a_job_without_a_distribution_is_one_process_with_the_runs_facts() -> None:
    t = resolver.resolve(dict(MARKS), probes.fake(free_port=4000, which={}))
    assert (t.source, t.world_size, t.job_id) == ("lightning", 1, "bert_1701600000_5f3c2a1b")


def openmpi_rank(rank: int, **extra: str) -> dict[str, str]:
    """Rank `rank` of an Azure ML MPI job on one node (process_count_per_node=2)."""
    env = {
        **MARKS,
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_RANK": str(rank),
        "OMPI_COMM_WORLD_LOCAL_RANK": str(rank),
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "OMPI_COMM_WORLD_NODE_RANK": "0",
        "OMPI_UNIVERSE_SIZE": "2",
        "OMPI_MCA_orte_hnp_uri": "2882928640.0;tcp://10.0.0.4:42617",
    }
    return {**env, **extra}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"AZ_BATCH_MASTER_NODE": "10.0.0.4:6105"}, ("10.0.0.4", 6105)),
        ({"AZ_BATCHAI_MPI_MASTER_NODE": "10.0.0.4", "MASTER_PORT": "29400"}, ("10.0.0.4", 29400)),
    ],
)
def test_mpi_ranks_take_the_main_node_azure_ml_names(extra: dict[str, str], expected: tuple[str, int]) -> None:
    records = [resolver.resolve(openmpi_rank(r, **extra), probes.fake()) for r in (0, 1)]
    assert {(t.source, t.main_address, t.main_port, t.job_id) for t in records} == {
        ("mpi", *expected, "bert_1701600000_5f3c2a1b")
    }
    assert "AZ_BATCH" in str(records[1].provenance["main_address"])


def test_outside_azure_ml_the_batch_variables_are_not_read() -> None:
    environ = {k: v for k, v in openmpi_rank(1, AZ_BATCH_MASTER_NODE="10.0.0.4:6105").items() if k not in MARKS}
    with pytest.raises(ProbeFailed, match="needed for the main address"):  # the comm would be asked instead
        resolver.resolve(environ, probes.fake())


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        (node(2), "NODE_RANK"),
        (node(0, WORLD_SIZE="0"), "WORLD_SIZE"),
        (node(0, MASTER_ADDR="10.0.0.4 x"), "MASTER_ADDR"),
        (node(0, MASTER_PORT="0"), "MASTER_PORT"),
        (openmpi_rank(1, AZ_BATCH_MASTER_NODE="10.0.0.4"), "AZ_BATCH_MASTER_NODE"),
        (openmpi_rank(1, AZ_BATCH_MASTER_NODE="10.0.0.4:port"), "AZ_BATCH_MASTER_NODE"),
        (openmpi_rank(1, AZ_BATCHAI_MPI_MASTER_NODE="a b"), "AZ_BATCHAI_MPI_MASTER_NODE"),
    ],
)
def test_errors_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(environ, probes.fake(free_port=1))
    assert info.value.variable == variable
