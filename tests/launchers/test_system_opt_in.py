"""System tests run only when asked: CLUSTER_TOPOLOGY_SYSTEM_TESTS=1 (tests/conftest.py).

Each case runs pytest in a subprocess on a system test of this repository with the variable unset,
set wrong, or unset in CI, and reads what that run said. None of them starts anything: without the
opt-in the fixture skips (or fails) before it changes the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import SYSTEM_TESTS

REPO = Path(__file__).resolve().parents[2]
SYSTEM_TEST = "tests/launchers/test_slurm_cluster.py::test_cluster_shape"  # uses the slurm_cluster fixture


def pytest_run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in (SYSTEM_TESTS, "CI")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args],
        cwd=REPO,
        env={**base, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_without_the_opt_in_a_system_test_skips_and_says_how_to_enable_it() -> None:
    done = pytest_run(SYSTEM_TEST)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout, done.stdout
    assert "system tests: off; set CLUSTER_TOPOLOGY_SYSTEM_TESTS=1 and run as root to run them" in done.stdout
    skip = next(line for line in done.stdout.splitlines() if line.startswith("SKIPPED"))
    assert "system test, not run: starts a SLURM cluster" in skip, skip
    assert "set CLUSTER_TOPOLOGY_SYSTEM_TESTS=1 and run as root" in skip, skip
    assert "/etc/hosts" in skip and "daemons" in skip, skip


def test_in_ci_a_missing_opt_in_fails_instead_of_skipping() -> None:
    done = pytest_run(SYSTEM_TEST, CI="true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 error" in done.stdout, done.stdout  # the fixture fails: an error, not a skip
    assert "CI must run every system test: .ci/run exports CLUSTER_TOPOLOGY_SYSTEM_TESTS=1" in done.stdout


def test_a_value_other_than_0_or_1_is_a_usage_error_naming_it() -> None:
    done = pytest_run(SYSTEM_TEST, **{SYSTEM_TESTS: "yes"})
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error: nothing ran
    expected = "CLUSTER_TOPOLOGY_SYSTEM_TESTS='yes': expected 1 (run the system tests), or 0 or unset (skip them)"
    assert expected in done.stderr, done.stderr


def test_zero_is_off() -> None:
    done = pytest_run(SYSTEM_TEST, **{SYSTEM_TESTS: "0"})
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout + done.stderr


def test_the_system_marker_selects_the_tests_that_change_the_machine() -> None:
    done = pytest_run("--collect-only", "-q", "-m", "system", "tests/launchers")
    assert done.returncode == 0, done.stdout + done.stderr
    selected = {line.split("::")[0] for line in done.stdout.splitlines() if "::" in line}
    # every module whose tests use slurm_cluster or the Grid Engine cell, and no other
    assert {
        "tests/launchers/test_slurm_cluster.py",
        "tests/launchers/test_gridengine.py",
        "tests/launchers/test_system_cleanup.py",
        "tests/launchers/test_slurm.py",
        "tests/launchers/test_slurm_gpus.py",
    } <= selected, selected
    assert "tests/launchers/test_torchrun.py" not in selected
    assert "tests/launchers/test_system_opt_in.py" not in selected
    mpi = {line for line in done.stdout.splitlines() if line.startswith("tests/launchers/test_mpi.py")}
    assert mpi == {"tests/launchers/test_mpi.py::test_mpirun_inside_sbatch_is_mpi_not_copies_of_the_batch_step"}, mpi
