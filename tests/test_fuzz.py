"""A short run of the coverage-guided hostlist fuzzer (fuzz/fuzz_hostlist.py, atheris)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import IN_CI

FUZZER = Path(__file__).resolve().parents[1] / "fuzz" / "fuzz_hostlist.py"


def test_a_short_fuzz_run_finds_nothing() -> None:
    try:
        import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("atheris must be installed in CI (the fuzz extra: .ci/run installs it)")
        pytest.skip("atheris not installed")
    out = subprocess.run(
        [sys.executable, str(FUZZER), "-runs=5000", "-seed=1"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Done 5000 runs" in out.stderr
