"""The launchers the testing kit builds, derived from the source registry: each source's builder
modules (`Entry.builders`: `resolver.testing.<name>`, or the launchers it lists, such as Open MPI
and MPICH for `mpi`), in the registry's order. A new source's builder module is listed here by its
registry entry alone; tests/testing/test_init.py checks that every one exists and is re-exported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from resolver.sources._registry import ENTRIES
from resolver.testing.world import Launcher

__all__ = ["LAUNCHERS", "MODULES", "NONDETERMINISTIC", "REGISTRY"]

MODULES: tuple[str, ...] = tuple(f"resolver.testing.{name}" for entry in ENTRIES for name in entry.builders)
REGISTRY: tuple[Launcher, ...] = tuple(importlib.import_module(module).LAUNCHER for module in MODULES)
LAUNCHERS: tuple[str, ...] = tuple(launcher.name for launcher in REGISTRY)
# Variables whose values each launcher picks at random or from the machine's state: the builders give
# plausible values of this shape (a regular expression); every other value is exactly the launcher's.
NONDETERMINISTIC: Mapping[str, Mapping[str, str]] = {launcher.name: launcher.nondeterministic for launcher in REGISTRY}
