"""The benchmarks run as `python -m benchmarks[.NAME]` from the repository's root, and as scripts."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import RUNS


@pytest.mark.parametrize("module", [module for _, (module, *_) in RUNS])
def test_each_benchmark_imports_as_the_runner_starts_it(module: str) -> None:
    loaded = importlib.import_module(f"benchmarks.{module}")
    assert callable(loaded.main)
    assert f"python -m benchmarks.{module}" in (loaded.__doc__ or "")  # the command its docstring gives


@pytest.mark.parametrize("module", [module for _, (module, *_) in RUNS])
def test_each_benchmark_imports_as_a_script(module: str) -> None:
    """`python benchmarks/NAME.py` from anywhere: what its module imports is found (its `main` is not run)."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / f"{module}.py"
    run = f"import runpy; runpy.run_path({str(script)!r}, run_name='imported')"
    done = subprocess.run([sys.executable, "-c", run], cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
