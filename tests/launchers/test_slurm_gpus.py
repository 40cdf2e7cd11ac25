"""Real SLURM with GPUs that are not there: each task's device against SLURM's own binding.

The harness gives every node `Gres=gpu:4` over mknod'ed /dev/nvidia[0-3] (see slurm_cluster.py);
SLURM schedules and binds them as real GPUs and tells each task, in its `CUDA_VISIBLE_DEVICES`
and `SLURM_STEP_GPUS`, which ones it got; `srun -l` says which task printed what and
`SLURMD_NODENAME` where it ran. The resolver must list exactly those devices, pick one of them,
and never give two tasks of one node the same GPU, or say None with a warning.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from resolver.origin import Origin
from tests.launchers.slurm_cluster import Cluster
from tests.launchers.test_slurm import REPORT, check_step, env, reports, srun

pytestmark = pytest.mark.slurm


def check_devices(rows: dict[int, dict[str, Any]], per_task: int) -> dict[int, str]:
    """Each task lists what SLURM gave it, `per_task` GPUs, and takes one no other task of its node takes."""
    taken: dict[str, list[str]] = defaultdict(list)
    chosen = {}
    for task, row in rows.items():
        t, gpus = row["topology"], row["gpus"]
        given = gpus["CUDA_VISIBLE_DEVICES"].split(",")
        assert gpus["SLURM_STEP_GPUS"].split(",") == given  # no device cgroup: the same list
        assert len(given) == per_task, gpus
        assert t["visible_devices"] == given
        assert str(Origin.from_dict(t["provenance"]["visible_devices"])) == "env:CUDA_VISIBLE_DEVICES"
        assert t["local_device"] is not None, t["warnings"]
        chosen[task] = given[t["local_device"]]
        taken[row["node"]].append(chosen[task])
    for node, gpus in taken.items():
        assert len(set(gpus)) == len(gpus), f"{node}: two tasks take one GPU: {gpus}"
    return chosen


def step(cluster: Cluster, args: str, ntasks: int) -> dict[int, dict[str, Any]]:
    rows = reports(cluster, srun(cluster, args))
    check_step(cluster, rows, ntasks, sorted({r["node"] for r in rows.values()}))
    return rows


@pytest.mark.parametrize(
    ("args", "ntasks", "per_task", "origin"),
    [
        ("-N1 -n2 --gpus-per-task=1", 2, 1, "the only visible device"),
        ("-N2 -n4 --gpus-per-task=1", 4, 1, "the only visible device"),
        ("-N1 -n4 --gres=gpu:4 --gpu-bind=single:1", 4, 1, "the only visible device"),
        ("-N1 -n4 --ntasks-per-gpu=1", 4, 1, "the only visible device"),
        ("-N1 -n2 --gpus-per-task=2", 2, 2, "SLURMD_TRES_BIND=gpu:per_task:2 binds to this process alone"),
        ("-N1 -n2 --gpus-per-node=2", 2, 2, "local_rank"),
        ("-N1 -n4 --gres=gpu:4", 4, 4, "local_rank"),
        ("-N2 -n4 --gpus-per-node=4", 4, 4, "local_rank"),
    ],
)
def test_each_task_takes_a_gpu_slurm_gave_it(
    slurm_cluster: Cluster, args: str, ntasks: int, per_task: int, origin: str
) -> None:
    rows = step(slurm_cluster, args, ntasks)
    check_devices(rows, per_task)
    for row in rows.values():
        t = row["topology"]
        assert origin in str(Origin.from_dict(t["provenance"]["local_device"]))
        if per_task == 1 or "per_task" in origin:
            assert t["local_device"] == 0
        else:
            assert t["local_device"] == t["local_rank"]


def test_tasks_sharing_fewer_gpus_than_they_are_get_none_and_a_warning(slurm_cluster: Cluster) -> None:
    rows = step(slurm_cluster, "-N1 -n4 --gres=gpu:2", 4)
    for row in rows.values():
        t = row["topology"]
        assert t["visible_devices"] == row["gpus"]["CUDA_VISIBLE_DEVICES"].split(",") and len(t["visible_devices"]) == 2
        assert t["local_device"] is None
        assert any("CUDA_VISIBLE_DEVICES=" in w and "local_rank % 2" in w for w in t["warnings"])


def test_sbatch_gres_job_with_a_step_inside(slurm_cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(f"#!/bin/bash\n{REPORT} > {tmp_path}/batch.json\nsrun -l {REPORT} > {tmp_path}/step.txt\n")
    res = slurm_cluster.run(
        ["sbatch", "--wait", "-N1", "-n2", "--gres=gpu:2", "-o", str(tmp_path / "out.txt"), str(script)],
        env=env(),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr + (tmp_path / "out.txt").read_text()
    batch = json.loads((tmp_path / "batch.json").read_text())
    assert batch["gpus"]["SLURM_JOB_GPUS"] == batch["gpus"]["CUDA_VISIBLE_DEVICES"]  # only the script has it first
    assert batch["topology"]["visible_devices"] == batch["gpus"]["CUDA_VISIBLE_DEVICES"].split(",")
    assert batch["topology"]["local_device"] == 0  # one process
    rows = reports(slurm_cluster, (tmp_path / "step.txt").read_text())
    check_step(slurm_cluster, rows, 2, sorted({r["node"] for r in rows.values()}))
    assert check_devices(rows, 2) == {
        0: rows[0]["gpus"]["CUDA_VISIBLE_DEVICES"].split(",")[0],
        1: rows[1]["gpus"]["CUDA_VISIBLE_DEVICES"].split(",")[1],
    }


def check_bound(rows: dict[int, dict[str, Any]], expected: dict[int, str | None]) -> None:
    """Each task lists what SLURM gave it and takes the GPU `expected` names (None: none, with a warning
    naming the binding); no two tasks of a node take one GPU."""
    taken: dict[str, list[str]] = defaultdict(list)
    for task, row in rows.items():
        t, gpus = row["topology"], row["gpus"]
        given = gpus["CUDA_VISIBLE_DEVICES"].split(",")
        assert t["visible_devices"] == given == gpus["SLURM_STEP_GPUS"].split(",")
        chosen = None if t["local_device"] is None else given[t["local_device"]]
        assert chosen == expected[task], (task, gpus, t["warnings"])
        if chosen is None:
            assert f"SLURMD_TRES_BIND={gpus['SLURMD_TRES_BIND']}" in t["warnings"][-1]
        else:
            taken[row["node"]].append(chosen)
    for node, gpus_taken in taken.items():
        assert len(set(gpus_taken)) == len(gpus_taken), f"{node}: two tasks take one GPU: {gpus_taken}"


@pytest.mark.parametrize(
    ("args", "ntasks", "per_node"),
    [
        ("-N1 -n4 --gres=gpu:4 --gpu-bind=closest", 4, 4),  # every task sees the four
        ("-N2 -n4 --gpus-per-node=2 --gpu-bind=closest", 4, 2),  # three tasks on the first node share two
        ("-N1 -n2 --gres=gpu:2 --gpu-bind=verbose,closest", 2, 2),
    ],
)
def test_closest_without_cores_gives_the_tasks_of_a_node_one_list_taken_by_local_rank(
    slurm_cluster: Cluster, args: str, ntasks: int, per_node: int
) -> None:
    """No `Cores=` in gres.conf: every GPU is as close as any, so each task sees all the step's GPUs of its node."""
    rows = step(slurm_cluster, args, ntasks)
    expected: dict[int, str | None] = {}
    for task, row in rows.items():
        given, rank = row["gpus"]["CUDA_VISIBLE_DEVICES"].split(","), row["topology"]["local_rank"]
        assert len(given) == per_node  # all the step's GPUs of the node
        if "SLURMD_TRES_BIND" not in row["gpus"]:  # srun binds nothing for a task alone on its node
            assert row["topology"]["local_world_size"] == 1
            expected[task] = given[0]
        else:
            expected[task] = given[rank] if rank < len(given) else None
    check_bound(rows, expected)
    assert any(v is None for v in expected.values()) == ("-N2" in args)  # the third task on ci1 of two GPUs


def bits(mask: int) -> list[str]:
    return [str(bit) for bit in range(mask.bit_length()) if mask >> bit & 1]


@pytest.mark.parametrize(
    ("args", "ntasks", "masks"),
    [
        ("-N1 -n2 --gres=gpu:4 --gpu-bind=mask_gpu:0x3,0xc", 2, [0x3, 0xC]),  # each task two of its own
        ("-N1 -n4 --gres=gpu:4 --gpu-bind=mask_gpu:0x3,0xc", 4, [0x3, 0xC]),  # the list reused: pairs share
        ("-N2 -n4 --gpus-per-node=4 --gpu-bind=mask_gpu:0x3*2,0xc*2", 4, [0x3, 0x3, 0xC, 0xC]),
    ],
)
def test_mask_gpu_tasks_take_the_gpus_of_their_mask_in_turn(
    slurm_cluster: Cluster, args: str, ntasks: int, masks: list[int]
) -> None:
    rows = step(slurm_cluster, args, ntasks)
    expected: dict[int, str | None] = {}
    for task, row in rows.items():
        given, rank = row["gpus"]["CUDA_VISIBLE_DEVICES"].split(","), row["topology"]["local_rank"]
        if "SLURMD_TRES_BIND" not in row["gpus"]:  # a task alone on its node: not bound
            expected[task] = given[0]
            continue
        mine = masks[rank % len(masks)]
        assert given == bits(mine)  # srun(1): the node's lowest task takes the first mask, the list reused
        turn = sum(1 for other in range(rank) if masks[other % len(masks)] == mine)
        expected[task] = given[turn]
    check_bound(rows, expected)


def test_mask_gpu_naming_gpus_the_step_lacks_says_none_where_slurm_falls_back(slurm_cluster: Cluster) -> None:
    """Mask 0xc names none of the step's two GPUs: slurmstepd binds task 1 to the first, which task 0 sees too."""
    rows = step(slurm_cluster, "-N1 -n2 --gres=gpu:2 --gpu-bind=mask_gpu:0x3,0xc", 2)
    first = rows[0]["gpus"]["CUDA_VISIBLE_DEVICES"].split(",")[0]
    assert rows[1]["gpus"]["CUDA_VISIBLE_DEVICES"] == first  # SLURM's fallback
    check_bound(rows, {0: None, 1: first})
    assert "the masks name 4 GPUs and SLURM_GPUS_ON_NODE=2" in rows[0]["topology"]["warnings"][-1]
