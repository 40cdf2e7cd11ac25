"""A run that changes the machine puts it back, also when it is interrupted or a fixture fails.

Each case starts pytest in a subprocess on a tiny test file that uses the `slurm_cluster` fixture
(tests/launchers/conftest.py), or calls the harness directly, and interrupts or breaks it. Then no
process of that cluster runs, /etc/hosts is byte for byte what it was (but for the lines other
harness runs on this machine added or took out meanwhile: alone, as in CI, the whole file), the
/dev/nvidia* nodes it made are gone (unless another cluster's slurmd still runs: they are shared) and so is its folder.
A last case runs two clusters at once: neither sees the other's ports, munged or /etc/hosts line.

Run: CLUSTER_TOPOLOGY_SYSTEM_TESTS=1 python -m pytest tests/launchers/test_system_cleanup.py (as root)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, SYSTEM_TESTS, require_system_tests
from tests.launchers import slurm_cluster as harness

pytestmark = [pytest.mark.slurm, pytest.mark.system]

REPO = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0  # seconds for the child run to get ready, and again to end after the signal
GPU_NODES = [Path(f"/dev/nvidia{k}") for k in range(harness.GPUS_PER_NODE)]

CHILD_TESTS = """\
import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.launchers import slurm_cluster as harness

# SIGINT as a terminal's Ctrl-C finds it: a run started in a script's background (`bash .ci/run &`,
# nohup) inherits SIGINT ignored and Python keeps it so, and this run would sleep through the signal
signal.signal(signal.SIGINT, signal.default_int_handler)


def ready(cluster):
    info = {"state_dir": str(cluster.state_dir), "pids": cluster.pids}
    Path(os.environ["CT_READY"]).write_text(json.dumps(info))


def test_holds_the_cluster(slurm_cluster):
    ready(slurm_cluster)
    time.sleep(600)  # until the signal


@pytest.fixture
def broken(slurm_cluster):
    ready(slurm_cluster)
    raise RuntimeError("a fixture that fails after the cluster started")


def test_with_a_failing_fixture(broken):
    pass


def test_start_that_fails_half_way():
    state_dir = Path(os.environ["CT_STATE_DIR"])
    with pytest.raises(harness.ClusterError, match="within 0 s"):  # slurmctld's answer or the nodes
        harness.start(4, state_dir=state_dir, timeout=0.01)
"""


@pytest.fixture(autouse=True)
def _needs_the_cluster() -> None:
    require_system_tests("starts SLURM clusters and interrupts them")
    if not harness.installed():
        message = "SLURM is not installed (apt-get install slurm-wlm munge)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def machine() -> dict[str, Any]:
    """What the machine looked like before: /etc/hosts' bytes and which GPU nodes existed."""
    return {"hosts": harness.HOSTS_FILE.read_bytes(), "gpus": {str(p) for p in GPU_NODES if p.exists()}}


def leftovers(state_dir: str) -> list[str]:
    """Live processes whose command line names the cluster's folder (its daemons, munged, reapers)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            argv = harness._cmdline(int(entry.name))
            if any(state_dir in arg for arg in argv) and harness._alive(int(entry.name)):
                found.append(f"{entry.name}: {' '.join(argv)}")
    return found


def other_runs_aside(hosts: bytes) -> bytes:
    """/etc/hosts without the lines of other harness runs (their marker): a run on its own sees no change."""
    marker = harness.HOSTS_MARKER.encode()
    return b"".join(line for line in hosts.splitlines(keepends=True) if marker not in line)


def check_restored(machine: dict[str, Any], state_dir: str, output: str) -> None:
    deadline = time.monotonic() + 10  # a reaper may take a moment to follow its slurmd
    while leftovers(state_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert leftovers(state_dir) == [], output
    after = harness.HOSTS_FILE.read_bytes()
    assert state_dir.encode() not in after, output
    # byte for byte, but for lines other harness runs on this machine added or took out meanwhile
    assert other_runs_aside(after) == other_runs_aside(machine["hosts"]), (after, machine["hosts"], output)
    made = {str(p) for p in GPU_NODES if p.exists()} - machine["gpus"]
    assert not made or harness._other_slurmd_running(), f"left {sorted(made)} behind:\n{output}"


def child(tmp_path: Path, test: str, **extra: str) -> tuple[subprocess.Popen[str], Path]:
    """pytest on one test of CHILD_TESTS, in its own folder, as a process of its own."""
    folder = tmp_path / "child"
    folder.mkdir()
    (folder / "test_child.py").write_text(CHILD_TESTS)
    (folder / "pytest.ini").write_text("[pytest]\n")  # not the repo's options: this is a run of its own
    ready = tmp_path / "ready.json"
    env = {**os.environ, SYSTEM_TESTS: "1", "CT_READY": str(ready), "PYTHONPATH": str(REPO), **extra}
    env.pop("CLUSTER_TOPOLOGY_SLURM_STATE_DIR", None)
    plugin = ["-p", "tests.launchers.conftest"]  # the slurm_cluster fixture under test
    args = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, "-q", f"test_child.py::{test}"]
    proc = subprocess.Popen(args, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, ready


def wait_ready(proc: subprocess.Popen[str], ready: Path) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the child run never got its cluster up:\n{proc.communicate()[0]}")
        time.sleep(0.2)
    time.sleep(0.2)  # the file is written in one call; let the writer close it
    info: dict[str, Any] = json.loads(ready.read_text())
    return info


def finish(proc: subprocess.Popen[str]) -> str:
    try:
        output, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the child run did not end within {TIMEOUT} s:\n{proc.communicate()[0]}")
    return output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_to_pytest_stops_the_cluster_and_restores_etc_hosts(
    tmp_path: Path, machine: dict[str, Any], sig: signal.Signals
) -> None:
    proc, ready = child(tmp_path, "test_holds_the_cluster")
    info = wait_ready(proc, ready)
    assert harness.HOSTS_FILE.read_bytes() != machine["hosts"]  # the run did map ci1..ci4 (our line)
    assert set(info["pids"]["slurmd"]) == {"ci1", "ci2", "ci3", "ci4"}
    proc.send_signal(sig)
    output = finish(proc)
    assert proc.returncode != 0, output
    check_restored(machine, info["state_dir"], output)
    assert not Path(info["state_dir"]).exists(), output


def test_a_failing_fixture_still_stops_the_cluster(tmp_path: Path, machine: dict[str, Any]) -> None:
    proc, ready = child(tmp_path, "test_with_a_failing_fixture")
    output = finish(proc)
    info = json.loads(ready.read_text())
    assert proc.returncode == 1 and "a fixture that fails after the cluster started" in output, output
    check_restored(machine, info["state_dir"], output)
    assert not Path(info["state_dir"]).exists(), output


def test_a_start_that_fails_half_way_stops_what_it_started(tmp_path: Path, machine: dict[str, Any]) -> None:
    state_dir = harness.new_state_dir()
    try:
        proc, _ = child(tmp_path, "test_start_that_fails_half_way", CT_STATE_DIR=str(state_dir))
        output = finish(proc)
        assert proc.returncode == 0 and "1 passed" in output, output  # it saw the ClusterError it expected
        check_restored(machine, str(state_dir), output)
    finally:
        harness.stop(state_dir, remove=True)


def test_two_clusters_at_once_do_not_collide(machine: dict[str, Any]) -> None:
    first = harness.start(4)
    try:
        second = harness.start(4)
        try:
            assert first.state_dir != second.state_dir
            assert not set(first.pids["ports"]) & set(second.pids["ports"])
            for cluster in (first, second):
                done = cluster.run(["srun", "-N2", "-n2", "printenv", "SLURM_CONF"], timeout=60)
                assert done.returncode == 0, done.stderr
                assert done.stdout.split() == [str(cluster.conf)] * 2
        finally:
            second.stop(remove=True)
        assert first.healthy()  # the other's stop took nothing of this one's: names still resolve
        assert first.run(["srun", "-N4", "-n4", "true"], timeout=60).returncode == 0
    finally:
        first.stop(remove=True)
    check_restored(machine, str(first.state_dir), "")
    check_restored(machine, str(second.state_dir), "")
