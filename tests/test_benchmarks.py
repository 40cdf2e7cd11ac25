"""The benchmarks run as `python -m benchmarks[.NAME]` from the repository's root: each module imports."""

from __future__ import annotations

import importlib

import pytest

from benchmarks.__main__ import RUNS


@pytest.mark.parametrize("module", [module for _, (module, *_) in RUNS])
def test_each_benchmark_imports_as_the_runner_starts_it(module: str) -> None:
    loaded = importlib.import_module(f"benchmarks.{module}")
    assert callable(loaded.main)
    assert f"python -m benchmarks.{module}" in (loaded.__doc__ or "")  # the command its docstring gives
