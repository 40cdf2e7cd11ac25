"""Running a real launcher from a test: bounded in time, and nothing of it left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest


def launch(
    args: list[str],
    env: Mapping[str, str],
    *,
    timeout: float,
    answers_in: Path | None = None,
    count: int = 0,
) -> str:
    """Run a launcher in its own session; on timeout, or when it is done, kill what is left of it.

    With `answers_in`, first wait (bounded) until `count` answer files are there: workers spawned
    by the process (Fabric's, say) may still be writing theirs when it exits. Returns the
    output (stdout and stderr); a non-zero exit fails the test with the output's tail.
    """
    with subprocess.Popen(
        args, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"{args!r} did not finish in {timeout} s:\n{output[-5000:]}")
        finally:
            deadline = time.monotonic() + 60
            while answers_in is not None and len(list(answers_in.glob("*.json"))) < count:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{args!r} exited {proc.returncode}:\n{output[-5000:]}"
    return output


# -- MPI launches: bounded by the CPU they use, not by the wall clock ---------------------------
#
# On a loaded machine a wall-clock deadline measures the machine, not the launch. Under another
# session's benchmark (load average 250-430 on this 2-core machine) Open MPI 5's four ranks wrote
# their answers 122 s into the launch and were still tearing down Python and torch when the 150-s
# deadline killed them (issue 27, point 9); a healthy 4-rank launch uses about 9 CPU-seconds in
# all, however long the machine makes it wait. A hang looks different whatever the load: one that
# waits (a collective or a store whose peer never comes) uses no CPU at all, one that spins (a
# polling MPI wait) uses far more than a whole healthy launch. So `watched_launch` runs the
# launcher in a cgroup (v2) of its own and fails it on those two signs only. The cgroup counts every
# process of the launch, also PRRTE's prted, which daemonises out of the launcher's process group
# and session, and cgroup.kill stops whatever of it is left when the launch ends.
# (cpu.stat's usage_usec, writing a pid to cgroup.procs, cgroup.kill: https://docs.kernel.org/admin-guide/cgroup-v2.html)

CPU_BUDGET = 120.0  # CPU-seconds; a healthy 4-rank launch with torch uses about 9 (measured at load 84)
# wall seconds in which the launch uses next to no CPU: a hang. Longer than the MPI worker's own 60-s
# gloo timeout, so that a rank's own error, which names what it waited for, comes first
IDLE_SECONDS = 90.0
IDLE_CPU = 0.05  # CPU-seconds that count as "next to none": a starved but runnable launch gets far more
CEILING = 1800.0  # wall seconds; only for a hang that burns a little CPU forever
_TICK = 0.5  # seconds between looks at the cgroup's CPU time
_GROUPS = iter(range(1 << 62))  # cgroup names: unique within this process


def cgroup2_parent() -> Path | None:
    """This process's own cgroup v2 folder when it can hold a launch's cgroup (as root), else None."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mount = next((fields[1] for fields in map(str.split, mounts) if len(fields) > 2 and fields[2] == "cgroup2"), None)
    path = next((line[3:] for line in own if line.startswith("0::")), None)
    if mount is None or path is None:
        return None
    parent = Path(mount) / path.lstrip("/")
    ok = (parent / "cgroup.procs").exists() and os.access(parent, os.W_OK)
    return parent if ok else None


class LaunchGroup:
    """One launch's cgroup: the CPU time its processes used, and a way to stop them all."""

    def __init__(self, parent: Path) -> None:
        self.path = parent / f"cluster-topology-launch-{os.getpid()}-{next(_GROUPS)}"
        self.path.mkdir()

    def command(self, args: list[str]) -> list[str]:
        """`args`, started inside this cgroup (it joins before exec, so every child is counted)."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(self.path), *args]

    def cpu_seconds(self) -> float:
        """CPU time used by every process that ever ran in the cgroup (cpu.stat usage_usec)."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        raise RuntimeError(f"{self.path / 'cpu.stat'} has no usage_usec line")

    def close(self) -> None:
        """SIGKILL whatever is still in the cgroup (daemons that left the launcher's session too), remove it."""
        deadline = time.monotonic() + 30
        while self.path.exists():
            pids = [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
            if not pids:
                with contextlib.suppress(OSError):  # busy while the kernel still frees the last task
                    self.path.rmdir()
            elif (self.path / "cgroup.kill").exists():
                (self.path / "cgroup.kill").write_text("1")
            else:  # kernels before 5.14
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.path}: processes {pids} still there 30 s after SIGKILL, or it stays busy")
            time.sleep(0.05 if self.path.exists() else 0)


def watched_launch(
    args: list[str],
    env: Mapping[str, str],
    *,
    fallback_timeout: float,
    cpu_budget: float = CPU_BUDGET,
    idle: float = IDLE_SECONDS,
    ceiling: float = CEILING,
) -> str:
    """Run a launcher like `launch`, failing it only on a hang: no CPU used for `idle` s, or `cpu_budget` used.

    Without a cgroup v2 this process may write to (not root, or a read-only cgroupfs) it is
    `launch(args, env, timeout=fallback_timeout)`, bounded by the wall clock.
    """
    parent = cgroup2_parent()
    if parent is None:
        return launch(args, env, timeout=fallback_timeout)
    group = LaunchGroup(parent)
    try:
        with subprocess.Popen(
            group.command(args),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        ) as proc:
            start = busy_since = time.monotonic()
            busy_mark = 0.0
            while True:
                try:
                    output, _ = proc.communicate(timeout=_TICK)
                    break
                except subprocess.TimeoutExpired:
                    pass
                now, used = time.monotonic(), group.cpu_seconds()
                if used - busy_mark >= IDLE_CPU:
                    busy_mark, busy_since = used, now
                problem = _hang(used, now - busy_since, now - start, cpu_budget=cpu_budget, idle=idle, ceiling=ceiling)
                if problem is not None:
                    group.close()
                    output, _ = proc.communicate()
                    pytest.fail(f"{args!r} {problem}; its output:\n{output[-5000:]}")
    finally:
        group.close()
    assert proc.returncode == 0, f"{args!r} exited {proc.returncode}:\n{output[-5000:]}"
    return output


def _hang(used: float, quiet: float, elapsed: float, *, cpu_budget: float, idle: float, ceiling: float) -> str | None:
    """What makes a launch a hang, if anything: `used` CPU-seconds, `quiet` s without CPU, `elapsed` s."""
    if used > cpu_budget:
        return (
            f"used {used:.1f} CPU-seconds, more than the {cpu_budget:g} allowed (a healthy launch uses about 9): "
            "something spins instead of finishing (a polling wait for a rank that never comes?)"
        )
    if quiet >= idle:
        return (
            f"used less than {IDLE_CPU:g} CPU-seconds in {quiet:.0f} s (at most {idle:g} s allowed): every process "
            "of the launch waits on something that never comes (a hang; a starved but runnable launch uses more)"
        )
    if elapsed >= ceiling:
        return (
            f"did not finish in {ceiling:g} s ({used:.1f} CPU-seconds used): slowly spinning, or a machine too loaded"
        )
    return None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait until the block is done (main thread; elsewhere a no-op).

    Starting or stopping daemons takes seconds (slurmctld saves its state): a second Ctrl-C, or the
    SIGTERM that follows one, must not leave half of them running. The signals are delivered when
    the block ends.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
