"""Tests of resolver.integrations; `require_module` skips locally and fails in CI when a dependency is absent."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import IN_CI


def require_module(name: str, extra: str) -> ModuleType:
    """Import `name`, or skip (locally) / fail (in CI, where every integration must be tested)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"needs {name} (pip install 'cluster-topology[{extra}]'): {exc}"
        if IN_CI:
            pytest.fail(f"{message}; CI must install it")
        pytest.skip(message, allow_module_level=True)


ROOT = Path(__file__).resolve().parents[2]


def run_python(code: str) -> Any:
    """The JSON on the last line that `code` prints, run in a fresh interpreter."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return json.loads(out.stdout.splitlines()[-1])
