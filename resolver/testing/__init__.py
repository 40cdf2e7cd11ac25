"""Environments shaped exactly like real launchers', for testing code that resolves a topology.

Builders (no dependency beyond this library): each describes one launch with keywords and gives
what the launcher puts in each process's environment, variable for variable, as measured in the
captures under ``tests/captures`` (SLURM 22.05, Open MPI 4.1.4, MPICH 4.0.2, torchrun):

    slurm_env(procid=3, nodes=("ci1", "ci2"), ntasks=4)   -> Process: one srun task
    slurm_job(nodes=("ci1", "ci2"), ntasks=4)             -> Job: every task of that launch

Every launcher has such a pair, ``<launcher>_env`` and ``<launcher>_job``; docs/testing.md lists
them with their keywords. Every ``*_env`` gives a `Process`: a read-only mapping of the process's
environment (``resolver.resolve(process, ...)``, ``process["SLURM_PROCID"]``, ``{**process, ...}``)
that also knows its ``.hostname``, the ``.files`` it can read (LSF's rankfile, PBS's node file,
SageMaker's resource config) and gives fake ``.probes()`` answering both. The keywords of each pair
are the fields of its launch class (`SlurmLaunch`, `TorchrunLaunch`, ...), and the builders'
signatures are those classes' (mypy refuses ``slurm_env(node=...)``). Values a launcher picks at
random (ports, pids, temporary directories) are plausible and derived from the keywords, so a
builder is a pure function; `NONDETERMINISTIC` lists them with the shape of their values.

The world harness (`resolver.testing.world`): a `Job` holds every process of one launch with the
host it runs on; ``job.resolve()`` resolves each with its own fake probes and `assert_consistent`
checks that the answers form one world. Strategies (`resolver.testing.strategies`): `jobs()` and
`topologies()` return Hypothesis strategies; hypothesis is imported only when one is called.
Nothing here is imported by ``import resolver``.

One module per launcher, named by the source registry (a private module of `resolver.sources`: each
entry's ``builders``, usually the source's name). This package re-exports what each of those modules
lists in its ``__all__`` (its builders and launch classes; not its ``LAUNCHER``) from the registry,
when first asked (PEP 562): a new launcher's module needs no edit here, and ``import resolver.testing``
imports no launcher's module. Type checkers cannot see names made this way, so they are `Any` to mypy;
the typed import is the launcher's module, ``from resolver.testing.slurm import slurm_env``.
CONTRIBUTING.md ("Adding a source") says what a new launcher's module holds; docs/testing.md's table
of builders is generated from the same registry.
"""

from __future__ import annotations

import importlib
from typing import Any

from resolver.schema import topology_schema as topology_schema
from resolver.testing.world import Job as Job
from resolver.testing.world import Launcher as Launcher
from resolver.testing.world import Process as Process
from resolver.testing.world import assert_consistent as assert_consistent

# The kit's own lazy names, by module: the strategies and the launcher tables import every launcher's
# module (the tables list them), so they wait, like the builders, until they are asked for.
_KIT = {
    "jobs": "resolver.testing.strategies",
    "topologies": "resolver.testing.strategies",
    "LAUNCHERS": "resolver.testing._registry",
    "NONDETERMINISTIC": "resolver.testing._registry",
    "REGISTRY": "resolver.testing._registry",
}
_EAGER = ("Job", "Launcher", "Process", "assert_consistent", "topology_schema")
_exports: dict[str, str] | None = None  # every lazy name -> its module, once the registry is read


def _lazy() -> dict[str, str]:
    """Every name this package serves lazily -> the module that defines it, in the registry's order.

    Reading a builder module's ``__all__`` imports it, so the first lazy name asked for imports every
    launcher's module the registry names (what ``import resolver.testing`` did before it was lazy).
    """
    global _exports  # noqa: PLW0603 - the table is built once, on first use
    if _exports is None:
        from resolver.testing._registry import MODULES

        table = dict(_KIT)
        for module in MODULES:
            for name in importlib.import_module(module).__all__:
                if name != "LAUNCHER":  # each module's has the same name: the registry's tables hold them
                    table[name] = module
        _exports = table
    return _exports


def __getattr__(name: str) -> Any:  # Any: a lazy name has its module's type, which mypy cannot see here
    if name == "__all__":
        return sorted([*_EAGER, *_lazy()])
    module = _KIT.get(name) or (None if name.startswith("__") else _lazy().get(name))
    if module is None:
        raise AttributeError(f"module 'resolver.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EAGER, *_lazy()})
