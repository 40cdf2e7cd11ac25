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
