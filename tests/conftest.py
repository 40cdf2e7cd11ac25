"""Shared test helpers. Real-launcher tests skip locally when a tool is missing, but fail in CI."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CAPTURES = HERE / "captures"  # a copy of the shared captures of real launchers (SLURM, MPI, torchrun)
CAPTURES_HPC = HERE / "captures-hpc"  # a copy of the shared captures-hpc (GPUs, Grid Engine, MPI 5, DeepSpeed)
CAPTURES_LOCAL = HERE / "captures-local"  # captures made by this project's own sessions (heterogeneous SLURM jobs)
IN_CI = bool(os.environ.get("CI"))


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
