"""Real DeepSpeed launcher (0.19, CPU): each worker's record equals what the launcher set, and a gloo
group forms through `resolver.apply`. One node with ``--num_gpus 2``; two emulated nodes with
``--no_ssh --node_rank 0|1`` on this machine (the launcher starts its node's workers only)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_tool

pytestmark = pytest.mark.deepspeed
WORKER = Path(__file__).with_name("worker.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _deepspeed() -> None:
    require_tool("deepspeed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env() -> dict[str, str]:
    drop = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CUDA_VISIBLE_DEVICES")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(("SLURM_", "OMPI_", "PMI"))}
    env["PYTHONPATH"] = str(ROOT)
    env["DS_ACCELERATOR"] = "cpu"  # no GPU here: DeepSpeed's CPU accelerator (gloo)
    env["CLUSTER_TOPOLOGY_ALLOW_LOOPBACK"] = "1"  # the two "nodes" share this host and 127.0.0.1
    return env


def deepspeed(out: Path, *args: str) -> subprocess.Popen[str]:
    command = [shutil.which("deepspeed") or "deepspeed", *args, str(WORKER), "--truth", "deepspeed", "--out", str(out)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env())


def collect(out: Path, *launchers: subprocess.Popen[str]) -> list[dict[str, Any]]:
    for launcher in launchers:
        log, _ = launcher.communicate(timeout=300)
        assert launcher.returncode == 0, log[-3000:]
    return [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]


def check_world(rows: list[dict[str, Any]], world: int, nodes: int, port: int) -> None:
    assert len(rows) == world
    for row in rows:
        t = row["topology"]
        assert t["source"] == "deepspeed"
        assert {k: t[k] for k in row["truth"]} == row["truth"]  # RANK, LOCAL_RANK, CROSS_RANK, sizes
        assert t["local_rank"] == row["argv_local_rank"]  # the --local_rank=N DeepSpeed adds to argv
        assert t["num_nodes"] == nodes and t["creates_processes_externally"] is True
        assert (t["main_address"], t["main_port"]) == ("127.0.0.1", port)
        assert row["sum"] == world * (world + 1) / 2  # gloo all_reduce over the resolved endpoint
    assert sorted(r["topology"]["global_rank"] for r in rows) == list(range(world))


def test_one_node_two_workers(tmp_path: Path) -> None:
    port = free_port()
    rows = collect(tmp_path, deepspeed(tmp_path, "--num_gpus", "2", "--master_port", str(port)))
    check_world(rows, 2, 1, port)
    assert {r["topology"]["node_rank"] for r in rows} == {0}


def test_two_emulated_nodes_without_ssh(tmp_path: Path) -> None:
    port = free_port()
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("node0 slots=2\nnode1 slots=2\n")
    out = tmp_path / "out"
    out.mkdir()
    common = ["--hostfile", str(hostfile), "--no_ssh", "--master_addr", "127.0.0.1", "--master_port", str(port)]
    rows = collect(out, *(deepspeed(out, *common, "--node_rank", str(node)) for node in (0, 1)))
    check_world(rows, 4, 2, port)
    placed = {(r["topology"]["global_rank"], r["topology"]["node_rank"], r["topology"]["local_rank"]) for r in rows}
    assert placed == {(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)}  # before this source: node rank 0 on both
