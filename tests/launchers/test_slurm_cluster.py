"""Smoke tests of the local SLURM cluster harness (tests/launchers/slurm_cluster.py).

Run: python -m pytest tests/launchers/test_slurm_cluster.py  (marker `slurm`)

Every SLURM command here tolerates extra stderr lines such as
"srun: job 13 queued and waiting for resources": back-to-back jobs print them and
then succeed.  Only return codes and stdout are checked.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from tests.launchers import slurm_cluster as harness
from tests.launchers.slurm_cluster import Cluster

# The session fixture `slurm_cluster` lives in tests/launchers/conftest.py.
pytestmark = pytest.mark.slurm

OMPI_ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def _ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, f"{res.args!r} exited {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    return res


def _labelled(stdout: str) -> dict[int, list[str]]:
    """Parse `srun -l` output ("3: value") into {task: [values in order]}."""
    out: dict[int, list[str]] = {}
    for line in stdout.splitlines():
        task, sep, value = line.partition(": ")
        if sep and task.strip().isdigit():
            out.setdefault(int(task), []).append(value.strip())
    return out


def _job_id(sbatch_stdout: str) -> str:
    return sbatch_stdout.strip().split(";")[0]


def _wait_for_text(path: Path, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            content = path.read_text()
        except FileNotFoundError:
            content = ""
        if text in content:
            return content
        time.sleep(0.1)
    raise AssertionError(
        f"{text!r} not in {path} after {timeout} s:\n{path.read_text() if path.exists() else '<missing>'}"
    )


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/bash\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def test_cluster_shape(slurm_cluster: Cluster) -> None:
    assert slurm_cluster.nodes == ["ci1", "ci2", "ci3", "ci4"]
    assert slurm_cluster.env()["SLURM_CONF"] == str(slurm_cluster.state_dir / "slurm.conf")
    assert slurm_cluster.node_states() == dict.fromkeys(slurm_cluster.nodes, "idle")
    res = _ok(slurm_cluster.run(["sinfo", "-h", "-o", "%P %D %c"], timeout=30))
    assert res.stdout.split() == ["debug*", "4", "4"]


def test_srun_two_nodes(slurm_cluster: Cluster) -> None:
    res = _ok(
        slurm_cluster.run(["srun", "-l", "-N2", "-n4", "printenv", "SLURM_PROCID", "SLURMD_NODENAME"], timeout=60)
    )
    tasks = _labelled(res.stdout)
    assert tasks == {0: ["0", "ci1"], 1: ["1", "ci1"], 2: ["2", "ci1"], 3: ["3", "ci2"]}


def test_srun_shapes_fit(slurm_cluster: Cluster) -> None:
    res = _ok(slurm_cluster.run(["srun", "-l", "-N3", "-n9", "printenv", "SLURMD_NODENAME"], timeout=60))
    nodes = [v[0] for _, v in sorted(_labelled(res.stdout).items())]
    assert nodes == ["ci1"] * 4 + ["ci2"] * 4 + ["ci3"]
    res = _ok(
        slurm_cluster.run(["srun", "-l", "-N2", "--ntasks-per-node=2", "printenv", "SLURMD_NODENAME"], timeout=60)
    )
    nodes = [v[0] for _, v in sorted(_labelled(res.stdout).items())]
    assert nodes == ["ci1", "ci1", "ci2", "ci2"]


def test_srun_mpi_pmix_two_nodes(slurm_cluster: Cluster) -> None:
    # Several slurmd's on one host: needs the per-node TmpFS of the harness.
    res = _ok(
        slurm_cluster.run(
            ["srun", "--mpi=pmix", "-l", "-N2", "-n3", "printenv", "PMIX_RANK", "SLURMD_NODENAME"], timeout=60
        )
    )
    assert _labelled(res.stdout) == {0: ["0", "ci1"], 1: ["1", "ci1"], 2: ["2", "ci2"]}


def test_sbatch_wait_with_srun_inside(slurm_cluster: Cluster, tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "job.sh",
        """\
        echo "batch procid=$SLURM_PROCID env=$ENVIRONMENT node=$SLURMD_NODENAME"
        srun -l -n2 printenv SLURM_PROCID
        """,
    )
    out = tmp_path / "out.txt"
    _ok(
        slurm_cluster.run(
            ["sbatch", "--wait", "-N1", "-n2", f"--chdir={tmp_path}", f"--output={out}", str(script)], timeout=90
        )
    )
    text = out.read_text()
    assert "batch procid=0 env=BATCH node=ci1" in text
    assert _labelled(text) == {0: ["0"], 1: ["1"]}


def test_salloc_with_command(slurm_cluster: Cluster) -> None:
    res = _ok(
        slurm_cluster.run(
            ["salloc", "-N1", "-n2", "srun", "-l", "printenv", "SLURM_PROCID", "SLURMD_NODENAME"], timeout=60
        )
    )
    assert _labelled(res.stdout) == {0: ["0", "ci1"], 1: ["1", "ci1"]}


def test_back_to_back_jobs(slurm_cluster: Cluster) -> None:
    for _ in range(6):
        res = _ok(slurm_cluster.run(["srun", "-N4", "-n16", "true"], timeout=60))
        # stderr may say "queued and waiting for resources" / "has been allocated
        # resources": that is fine.
        assert res.stdout == ""


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="Open MPI not installed")
def test_mpirun_inside_sbatch(slurm_cluster: Cluster, tmp_path: Path) -> None:
    script = _script(
        tmp_path,
        "mpi.sh",
        """\
        mpirun -n 4 bash -c 'echo "rank=$OMPI_COMM_WORLD_RANK size=$OMPI_COMM_WORLD_SIZE node=$SLURMD_NODENAME"'
        """,
    )
    out = tmp_path / "mpi.txt"
    _ok(
        slurm_cluster.run(
            ["sbatch", "--wait", "-N2", "-n4", f"--output={out}", str(script)], env=OMPI_ROOT_ENV, timeout=120
        )
    )
    lines = sorted(ln for ln in out.read_text().splitlines() if ln.startswith("rank="))
    assert lines == [
        "rank=0 size=4 node=ci1",
        "rank=1 size=4 node=ci1",
        "rank=2 size=4 node=ci1",
        "rank=3 size=4 node=ci2",
    ], out.read_text()


def test_requeue_running_batch_job(slurm_cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "runs.txt"
    script = _script(
        tmp_path,
        "requeue.sh",
        f"""\
        echo "run restart=${{SLURM_RESTART_COUNT:-unset}}" >> {log}
        if [ -z "$SLURM_RESTART_COUNT" ]; then sleep 120 & wait; fi
        echo "done restart=${{SLURM_RESTART_COUNT:-unset}}" >> {log}
        """,
    )
    res = _ok(slurm_cluster.run(["sbatch", "--parsable", f"--output={tmp_path}/o.txt", str(script)], timeout=30))
    job = _job_id(res.stdout)
    try:
        _wait_for_text(log, "run restart=unset", 30)
        t0 = time.monotonic()
        _ok(slurm_cluster.run(["scontrol", "requeue", job], timeout=30))
        # Requeued jobs wait AuthInfo=cred_expire (5 s here, Slurm default 120 s).
        text = _wait_for_text(log, "done restart=1", 45)
        assert text.splitlines() == ["run restart=unset", "run restart=1", "done restart=1"]
        assert time.monotonic() - t0 < 30
    finally:
        slurm_cluster.run(["scancel", job], timeout=30)


def test_scancel_signal_to_batch_script(slurm_cluster: Cluster, tmp_path: Path) -> None:
    log = tmp_path / "sig.txt"
    script = _script(
        tmp_path,
        "sig.sh",
        f"""\
        trap 'echo got USR1 >> {log}; exit 0' USR1
        echo started >> {log}
        sleep 120 & wait
        """,
    )
    res = _ok(slurm_cluster.run(["sbatch", "--parsable", f"--output={tmp_path}/o.txt", str(script)], timeout=30))
    job = _job_id(res.stdout)
    try:
        _wait_for_text(log, "started", 30)
        _ok(slurm_cluster.run(["scancel", "--signal=USR1", "--batch", job], timeout=30))
        _wait_for_text(log, "got USR1", 15)
    finally:
        slurm_cluster.run(["scancel", job], timeout=30)


def test_sbatch_signal_before_time_limit(slurm_cluster: Cluster, tmp_path: Path) -> None:
    # slurmctld checks time limits every 30 s (fixed in Slurm) and may send the signal
    # up to that much early, so with --time=1 and @50 it arrives 0-30 s after start.
    log = tmp_path / "sig.txt"
    script = _script(
        tmp_path,
        "sig.sh",
        f"""\
        trap 'echo got USR1 >> {log}; exit 0' USR1
        echo started >> {log}
        sleep 120 & wait
        """,
    )
    res = _ok(
        slurm_cluster.run(
            ["sbatch", "--parsable", "--time=1", "--signal=B:USR1@50", f"--output={tmp_path}/o.txt", str(script)],
            timeout=30,
        )
    )
    job = _job_id(res.stdout)
    try:
        _wait_for_text(log, "started", 30)
        _wait_for_text(log, "got USR1", 50)
    finally:
        slurm_cluster.run(["scancel", job], timeout=30)


def test_fast_path_reuses_running_cluster(slurm_cluster: Cluster) -> None:
    t0 = time.monotonic()
    again = harness.start(4, state_dir=slurm_cluster.state_dir)
    assert again.reused
    assert again.pids["slurmctld"] == slurm_cluster.pids["slurmctld"]
    assert time.monotonic() - t0 < 15


def test_node_names_resolve_locally(slurm_cluster: Cluster) -> None:
    for name in slurm_cluster.nodes:
        assert socket.gethostbyname(name) == "127.0.0.1"
