"""Tests of resolver.integrations; `require_module` skips locally and fails in CI when a dependency is absent."""

from __future__ import annotations

import importlib
from types import ModuleType

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
