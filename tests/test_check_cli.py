"""`cluster-topology check` and `exec --check` as processes: exit status, stdout, stderr."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DROP = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def base() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in DROP and not k.startswith(("SLURM", "OMPI_", "PMI", "TORCHELASTIC"))
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def worker(rank: int, size: int, port: int, **extra: str) -> dict[str, str]:
    return {
        **base(),
        "TORCHELASTIC_RUN_ID": "cli",
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_WORLD_SIZE": str(size),
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        **extra,
    }


def run_all(
    envs: Sequence[Mapping[str, str]], *args: str, timeout: float = 60
) -> list[subprocess.CompletedProcess[str]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "resolver", *args],
            env=dict(e),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for e in envs
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def test_one_process_checks_out() -> None:
    (res,) = run_all([base()], "check", "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)  # stdout holds the one object and nothing else
    assert data["ok"] is True and data["world_size"] == 1 and data["missing"] == [] and data["problems"] == []
    assert data["nodes"][0]["ranks"] == [0]


def test_three_processes_text_and_exit_0() -> None:
    port = free_port()
    results = run_all([worker(r, 3, port) for r in range(3)], "check", "--timeout", "20")
    assert [r.returncode for r in results] == [0, 0, 0], [r.stderr for r in results]
    first = results[0].stdout.splitlines()
    assert first[0].startswith(f"3 processes on 1 node agree: torchelastic job cli, main 127.0.0.1:{port}, ")
    assert len(first) == 2 and first[1].endswith("node 0  ranks 0-2  via lo 127.0.0.1")  # the interface toward rank 0
    assert all(len(r.stdout.splitlines()) == 1 for r in results[1:])


def test_a_duplicate_rank_exits_3_on_every_process() -> None:
    port = free_port()
    envs = [worker(r, 3, port) for r in range(3)]
    envs[2]["RANK"] = "1"
    results = run_all(envs, "check", "--timeout", "20", "--format", "json")
    assert [r.returncode for r in results] == [3, 3, 3]
    for r in results:
        data = json.loads(r.stdout)
        assert data["ok"] is False and data["missing"] == [2]
        (dup,) = (p for p in data["problems"] if p["kind"] == "duplicate")
        assert dup["ranks"] == [1] and dup["variable"] == "RANK" and dup["hosts"]


def test_an_unreadable_environment_without_an_endpoint_exits_2() -> None:
    env = {**base(), "TORCHELASTIC_RUN_ID": "x", "RANK": "0", "WORLD_SIZE": "two"}
    (res,) = run_all([env], "check", "--format", "json")
    assert res.returncode == 2
    assert res.stderr.startswith("error: WORLD_SIZE='two'")
    assert json.loads(res.stdout)["error"]["variable"] == "WORLD_SIZE"


def test_exec_check_starts_the_program_only_when_the_job_is_healthy(tmp_path: Path) -> None:
    port = free_port()
    program = [sys.executable, "-c", "import os; print('started', os.environ['RANK'])"]
    good = run_all([worker(r, 2, port) for r in range(2)], "exec", "--check", "--", *program)
    assert [r.returncode for r in good] == [0, 0], [r.stderr for r in good]
    assert [r.stdout for r in good] == ["started 0\n", "started 1\n"]
    assert all(r.stderr.startswith("check: 2 processes on 1 node agree") for r in good)

    port = free_port()
    envs = [worker(r, 2, port) for r in range(2)]
    envs[1]["TORCHELASTIC_RUN_ID"] = "another"
    bad = run_all(envs, "exec", "--check", "--check-timeout", "2", "--", *program)
    assert [r.returncode for r in bad] == [3, 3]
    assert [r.stdout for r in bad] == ["", ""]
    assert "problem:" in bad[0].stderr and "turned this process away" in bad[1].stderr
