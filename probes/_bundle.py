"""The bundle of probes and the shapes of what two of them return; `probes` re-exports all three.

Kept apart from `probes/__init__.py` so that asking one live probe (`resolve` asks `device_count`
on most machines) does not build the bundle class: `probes.live` imports none of this at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import attrs

from resolver.errors import ProbeFailed

__all__ = ["Comm", "Probes", "XlaRuntime"]


@runtime_checkable
class Comm(Protocol):
    """The part of mpi4py's `MPI.Comm` the resolver uses."""

    def Get_rank(self) -> int: ...  # noqa: N802 - mpi4py's names
    def Get_size(self) -> int: ...  # noqa: N802
    def allgather(self, sendobj: Any) -> list[Any]: ...
    def bcast(self, obj: Any, root: int = 0) -> Any: ...


@runtime_checkable
class XlaRuntime(Protocol):
    """The part of `torch_xla.runtime` the resolver uses."""

    def world_size(self) -> int: ...
    def global_ordinal(self) -> int: ...
    def local_ordinal(self) -> int: ...
    def host_index(self) -> int: ...


def _no_device_count() -> int:
    """The default of a bundle built without a device probe: it cannot answer (the device fields stay None)."""
    raise ProbeFailed("device_count", "this Probes bundle was built without a device_count probe")


@attrs.frozen(kw_only=True)
class Probes:
    """A bundle of probes; build one with `system()` or `fake(...)`, or `attrs.evolve` one of those."""

    hostname: Callable[[], str]
    comm: Callable[[], Comm]
    xla: Callable[[], XlaRuntime]
    free_port: Callable[[], int]
    read_text: Callable[[str], str]
    which: Callable[[str], str | None]
    device_count: Callable[[], int] = _no_device_count
