"""The DeepSpeed source: its launcher's workers, from the capture and environments shaped like it."""

from __future__ import annotations

from pathlib import Path

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, Origin
from tests.conftest import CAPTURES_HPC, read_capture

FAKE = probes.fake()  # the source asks no probe: any question would raise ProbeFailed
CAPTURED = sorted((CAPTURES_HPC / "deepspeed").glob("*/rank*.env"))

# worker 3 of `deepspeed --hostfile H --master_addr 10.0.0.1` on two hosts with slots=2 each
NODE1_WORKER = {
    "CROSS_RANK": "1",
    "CROSS_SIZE": "2",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "LOCAL_RANK": "1",
    "LOCAL_SIZE": "2",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "RANK": "3",
    "WORLD_SIZE": "4",
}


def test_the_captures_exist() -> None:
    assert len(CAPTURED) == 2


@pytest.mark.parametrize("path", CAPTURED, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_deepspeed_captures(path: Path) -> None:
    env = read_capture(path)
    t = resolver.resolve(env, FAKE)
    assert t.source == "deepspeed"
    assert (t.world_size, t.global_rank, t.local_rank) == (2, int(env["RANK"]), int(env["LOCAL_RANK"]))
    assert (t.node_rank, t.num_nodes, t.local_world_size) == (0, 1, 2)
    assert (t.main_address, t.main_port) == ("127.0.0.1", 29500)
    assert t.creates_processes_externally
    assert t.provenance["node_rank"] == Origin.env("CROSS_RANK")
    assert t.provenance["num_nodes"] == Origin.env("CROSS_SIZE")
    assert t.warnings == ()
    resolver.validate(t, devices=2, num_nodes=1)


def test_a_worker_on_the_second_node_has_node_rank_one() -> None:
    t = resolver.resolve(NODE1_WORKER, FAKE)
    assert (t.source, t.global_rank, t.local_rank, t.node_rank, t.num_nodes) == ("deepspeed", 3, 1, 1, 2)
    assert (t.main_address, t.main_port) == ("10.0.0.1", 29500)
    # what the default source made of it before: node rank 0 on every node
    assert resolver.resolve(NODE1_WORKER, FAKE, source="lightning").node_rank == 0


def test_explain_names_the_variables() -> None:
    explanation = resolver.explain(NODE1_WORKER)
    assert explanation.chosen == "deepspeed"
    (row,) = [c for c in explanation.candidates if c.name == "deepspeed"]
    assert row.detection.variables == ("CROSS_RANK", "CROSS_SIZE")


@pytest.mark.parametrize(
    ("env", "chosen"),
    [
        ({**NODE1_WORKER, "TORCHELASTIC_RUN_ID": "none", "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, "torchelastic"),
        ({**NODE1_WORKER, "SLURM_NTASKS": "1", "SLURM_JOB_ID": "77", "ENVIRONMENT": "BATCH"}, "deepspeed"),
        ({k: v for k, v in NODE1_WORKER.items() if k != "CROSS_SIZE"}, "lightning"),
        ({k: v for k, v in NODE1_WORKER.items() if k != "CROSS_RANK"}, "lightning"),
    ],
    ids=["elastic-agent", "inside-sbatch", "no-cross-size", "no-cross-rank"],
)
def test_precedence(env: dict[str, str], chosen: str) -> None:
    assert resolver.explain(env).chosen == chosen


def test_inside_a_slurm_job_the_record_has_the_jobs_facts() -> None:
    env = {**NODE1_WORKER, "SLURM_NTASKS": "1", "SLURM_JOB_ID": "77", "SLURM_JOB_NAME": "train"}
    t = resolver.resolve(env, FAKE)
    assert (t.source, t.node_rank, t.job_id, t.job_name) == ("deepspeed", 1, "77", "train")
    assert t.provenance["job_id"] == Origin.env("SLURM_JOB_ID")


@pytest.mark.parametrize("variable", ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "MASTER_ADDR", "MASTER_PORT"])
def test_every_variable_is_required(variable: str) -> None:
    env = {k: v for k, v in NODE1_WORKER.items() if k != variable}
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(env, FAKE)
    assert info.value.variable == variable
    assert "DeepSpeed" in str(info.value)


@pytest.mark.parametrize(
    ("change", "variable", "expected"),
    [
        ({"RANK": "4"}, "RANK", "< world_size (4)"),
        ({"CROSS_RANK": "2"}, "CROSS_RANK", "< num_nodes (2)"),
        ({"CROSS_SIZE": "0"}, "CROSS_SIZE", ">= 1"),
        ({"LOCAL_RANK": "2"}, "LOCAL_RANK", "< local_world_size (2)"),
        ({"LOCAL_SIZE": "5"}, "LOCAL_SIZE", "<= world_size"),
        ({"CROSS_SIZE": "5"}, "CROSS_SIZE", "<= world_size"),
        ({"MASTER_PORT": "0"}, "MASTER_PORT", "1..65535"),
        ({"MASTER_ADDR": "a b"}, "MASTER_ADDR", "host name"),
    ],
)
def test_bad_values_name_the_variable(change: dict[str, str], variable: str, expected: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**NODE1_WORKER, **change}, FAKE)
    assert info.value.variable == variable
    assert expected in str(info.value)
