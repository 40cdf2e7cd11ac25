"""Shared test helpers. Real-launcher tests skip locally when a tool is missing, but fail in CI.

System tests (marker `system`) change the machine they run on: they start daemons (SLURM with
munge, Grid Engine), add lines to /etc/hosts and create /dev/nvidia* device nodes. They run only
when CLUSTER_TOPOLOGY_SYSTEM_TESTS=1 (and as root), which .ci/run sets; in CI a run without it
fails instead of skipping them. See the README's "System tests".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import settings

# No per-example deadline: on a 2-core CI machine shared with daemons and MPI jobs, an example's time
# says how busy the machine is, not whether the code is slow (a deadline there fails healthy tests).
settings.register_profile("cluster-topology", deadline=None)
settings.load_profile("cluster-topology")

HERE = Path(__file__).resolve().parent
CAPTURES = HERE / "captures"  # a copy of the shared captures of real launchers (SLURM, MPI, torchrun)
CAPTURES_HPC = HERE / "captures-hpc"  # a copy of the shared captures-hpc (GPUs, Grid Engine, MPI 5, DeepSpeed)
CAPTURES_LOCAL = HERE / "captures-local"  # captures made by this project's own sessions (heterogeneous SLURM jobs)
IN_CI = bool(os.environ.get("CI"))
SYSTEM_TESTS = "CLUSTER_TOPOLOGY_SYSTEM_TESTS"  # "1": run the tests that change this machine
# fixtures that change the machine: their tests get the `system` marker
SYSTEM_FIXTURES = ("slurm_cluster", "emulated_hosts")
WHAT_SYSTEM_TESTS_DO = (
    "they start daemons (SLURM's munged, slurmctld and slurmd; Grid Engine's sge_qmaster and sge_execd), "
    "add lines to /etc/hosts, create /dev/nvidia0-3 device nodes, create network namespaces and /etc/netns/<host>, "
    "and undo all of it when they end"
)


def system_tests_enabled() -> bool:
    """True when CLUSTER_TOPOLOGY_SYSTEM_TESTS=1; unset, empty or 0 is False; anything else is a usage error."""
    value = os.environ.get(SYSTEM_TESTS, "")
    if value not in ("", "0", "1"):
        expected = "expected 1 (run the system tests), or 0 or unset (skip them)"
        raise pytest.UsageError(f"{SYSTEM_TESTS}={value!r}: {expected}")
    return value == "1"


def how_to_enable() -> str:
    return f"set {SYSTEM_TESTS}=1 and run as root to run them ({WHAT_SYSTEM_TESTS_DO}; README: System tests)"


def require_system_tests(what: str) -> None:
    """Skip a test that changes this machine unless the user asked for such tests.

    `what` says what this one does. In CI (CI set) a missing opt-in fails instead: CI must run
    every system test, and a skip would hide that it did not. Asked for but not root: fails too.
    """
    if system_tests_enabled():
        if os.geteuid() != 0:
            pytest.fail(f"{SYSTEM_TESTS}=1 but not root (uid {os.geteuid()}): {what} needs root")
        return
    message = f"system test, not run: {what}; {how_to_enable()}"
    if IN_CI:
        pytest.fail(f"{message}. CI must run every system test: .ci/run exports {SYSTEM_TESTS}=1")
    pytest.skip(message)


_INTERRUPTING = {"open": 0}  # how many terminate_interrupts blocks are open
_HANDLERS_BEFORE: dict[signal.Signals, Any] = {}  # what signal.signal returned: restored at the end


@contextlib.contextmanager
def terminate_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP interrupt like Ctrl-C (KeyboardInterrupt).

    Python's default for SIGTERM ends the process at once, without pytest's teardown: the daemons
    a fixture started would keep running. As a KeyboardInterrupt, pytest stops the run and tears
    the fixtures down (what they started is stopped). Blocks may overlap in any order (a module's
    fixture inside the session's): the handlers from before are restored when the last one ends.
    Main thread only; elsewhere a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")

    if _INTERRUPTING["open"] == 0:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            _HANDLERS_BEFORE[sig] = signal.signal(sig, interrupt)
    _INTERRUPTING["open"] += 1
    try:
        yield
    finally:
        _INTERRUPTING["open"] -= 1
        if _INTERRUPTING["open"] == 0:
            for sig, handler in _HANDLERS_BEFORE.items():
                signal.signal(sig, handler)
            _HANDLERS_BEFORE.clear()


def pytest_configure(config: pytest.Config) -> None:
    system_tests_enabled()  # a wrong value is a usage error before anything runs


def pytest_report_header(config: pytest.Config) -> str:
    if system_tests_enabled():
        return f"system tests: on ({SYSTEM_TESTS}=1): {WHAT_SYSTEM_TESTS_DO}"
    return f"system tests: off; {how_to_enable()}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that use a fixture changing the machine carry the `system` marker (`-m "not system"`)."""
    for item in items:
        if set(SYSTEM_FIXTURES) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.system)


def require_tool(*names: str) -> None:
    """Skip (locally) or fail (in CI, where every launcher must run) unless all tools are on PATH."""
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        message = f"needs {', '.join(missing)} on PATH"
        if IN_CI:
            pytest.fail(f"{message} (CI must install it: see .ci/run)")
        pytest.skip(message)


def read_capture(path: Path) -> dict[str, str]:
    """One process's captured environment: `KEY=value` lines."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            key, _, value = line.partition("=")
            out[key] = value
    return out


def captures(pattern: str) -> list[Path]:
    """Capture files under tests/captures matching a glob; none is a failure, not a silent pass."""
    found = sorted(CAPTURES.glob(pattern))
    if not found:
        pytest.fail(f"no captures match {pattern!r} under {CAPTURES}")
    return found
