"""Real launches of `cluster-topology exec -- PROGRAM`: PROGRAM (tests/launchers/exec_worker.py) finds the
env:// variables equal to the launcher's own truth and forms a gloo group with a plain
`init_process_group("gloo")`.

- SLURM: `srun -N2 -n4` on the local 4-node cluster (nodes ci1..ci4 on this host).
- A single process, no launcher.
- MPI: see tests/launchers/test_mpi.py (two emulated hosts, Open MPI and MPICH).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_tool
from tests.launchers.slurm_cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
WORKER = ROOT / "tests" / "launchers" / "exec_worker.py"
DROP = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")


def rows(directory: Path, count: int) -> list[dict[str, Any]]:
    found = sorted((json.loads(p.read_text()) for p in directory.glob("*.json")), key=lambda r: int(r["env"]["RANK"]))
    assert len(found) == count, f"{len(found)} of {count} PROGRAMs answered"
    return found


@pytest.mark.slurm
def test_srun_two_nodes_four_tasks(slurm_cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "answers"
    out.mkdir()
    res = slurm_cluster.run(
        ["srun", "-N2", "-n4", PY, "-m", "resolver", "exec", "--strict", "--", PY, str(WORKER), str(out)],
        timeout=180,
        env={"PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    found = rows(out, 4)
    nodes = slurm_cluster.run(["scontrol", "show", "hostnames", found[0]["launcher"]["SLURM_STEP_NODELIST"]])
    first = nodes.stdout.split()[0]
    for rank, row in enumerate(found):
        env, truth = row["env"], row["launcher"]
        assert env["RANK"] == truth["SLURM_PROCID"] == str(rank)
        assert env["WORLD_SIZE"] == truth["SLURM_STEP_NUM_TASKS"] == "4"
        assert env["LOCAL_RANK"] == truth["SLURM_LOCALID"]
        assert env["NODE_RANK"] == env["GROUP_RANK"] == truth["SLURM_NODEID"]
        assert env["MASTER_ADDR"] == first
        assert row["all_reduce"] == 10.0 and row["dist"] == {"rank": rank, "world_size": 4}
    assert len({r["env"]["MASTER_PORT"] for r in found}) == 1
    assert sorted(r["env"]["LOCAL_WORLD_SIZE"] for r in found) == sorted(
        str(sum(1 for x in found if x["launcher"]["SLURM_NODEID"] == r["launcher"]["SLURM_NODEID"])) for r in found
    )


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROP and not k.startswith(("SLURM_", "OMPI_", "PMI"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_a_single_process(tmp_path: Path) -> None:
    require_tool("bash")
    pytest.importorskip("torch")
    res = subprocess.run(
        [PY, "-m", "resolver", "exec", "--", PY, str(WORKER), str(tmp_path)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    (row,) = rows(tmp_path, 1)
    assert row["env"] == {
        **row["env"],
        "MASTER_ADDR": "127.0.0.1",
        "WORLD_SIZE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "NODE_RANK": "0",
        "GROUP_RANK": "0",
    }
    assert row["all_reduce"] == 1.0
