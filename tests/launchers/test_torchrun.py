"""Real torchrun: every worker's topology equals what torchrun set, and a gloo group forms through apply."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_tool

pytestmark = pytest.mark.torchrun
WORKER = Path(__file__).with_name("worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _torch() -> None:
    require_tool("torchrun")
    try:
        import torch  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("torch must be installed in CI (pip install torch==2.13.0)")
        pytest.skip("torch not installed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env() -> dict[str, str]:
    drop = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("SLURM_", "OMPI_", "PMI"))}
    env["PYTHONPATH"] = str(ROOT)
    env["CLUSTER_TOPOLOGY_ALLOW_LOOPBACK"] = "1"  # the "nodes" are agents on this one host
    return env


def torchrun(out: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            *args,
            str(WORKER),
            "--truth",
            "torchelastic",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )


def collect(out: Path, *agents: subprocess.Popen[str]) -> list[dict[str, Any]]:
    for agent in agents:
        _, err = agent.communicate(timeout=240)
        assert agent.returncode == 0, err[-3000:]
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


def check_world(rows: list[dict[str, Any]], world: int, nodes: int) -> None:
    assert len(rows) == world
    for row in rows:
        t = row["topology"]
        assert t["source"] == "torchelastic"
        assert {k: t[k] for k in row["truth"]} == row["truth"]
        assert t["creates_processes_externally"] is True
        assert t["num_nodes"] == nodes
        assert t["local_world_size"] == world // nodes
        assert row["sum"] == world * (world + 1) / 2
    assert sorted(r["topology"]["global_rank"] for r in rows) == list(range(world))
    assert len({(r["topology"]["main_address"], r["topology"]["main_port"]) for r in rows}) == 1


def test_one_agent_two_workers_c10d(tmp_path: Path) -> None:
    rdzv = f"--rdzv-endpoint=127.0.0.1:{free_port()}"
    rows = collect(tmp_path, torchrun(tmp_path, "--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", rdzv))
    check_world(rows, 2, 1)


def test_two_agents_two_workers_each_static(tmp_path: Path) -> None:
    port = free_port()
    common = ["--nnodes=2", "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={port}"]
    rows = collect(tmp_path, *(torchrun(tmp_path, *common, f"--node-rank={rank}") for rank in (0, 1)))
    check_world(rows, 4, 2)
    assert {r["topology"]["main_port"] for r in rows} == {port}
    by_node = {(r["topology"]["node_rank"], r["topology"]["local_rank"]) for r in rows}
    assert by_node == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_two_agents_two_workers_each_c10d(tmp_path: Path) -> None:
    common = [
        "--nnodes=2",
        "--nproc-per-node=2",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "--rdzv-id=job42",
    ]
    rows = collect(tmp_path, *(torchrun(tmp_path, *common) for _ in (0, 1)))
    check_world(rows, 4, 2)
    assert {r["topology"]["job_id"] for r in rows} == {"job42"}
