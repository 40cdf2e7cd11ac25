"""The bundle of probes and the shapes of what two of them return; `probes` re-exports them.

Kept apart from `probes/__init__.py` so that asking one live probe (`resolve` asks `device_count`
on most machines) does not build the bundle class: `probes.live` imports none of this at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from resolver.errors import ProbeFailed

if TYPE_CHECKING:
    from probes.census import Answer, Place
    from probes.network import Route

__all__ = ["Comm", "HostCensus", "Probes", "XlaRuntime"]


@runtime_checkable
class Comm(Protocol):
    """The part of mpi4py's `MPI.Comm` the resolver uses."""

    def Get_rank(self) -> int: ...  # noqa: N802 - mpi4py's names
    def Get_size(self) -> int: ...  # noqa: N802
    def allgather(self, sendobj: Any) -> list[Any]: ...
    def bcast(self, obj: Any, root: int = 0) -> Any: ...


@runtime_checkable
class HostCensus(Comm, Protocol):
    """A `Comm` that also answers the MPI source's collective itself: `census(answer)` gives this rank its
    `probes.census.Place` from every rank's answer without giving it every rank's (probes/tcp.py's
    `TcpComm`, for `cluster-topology exec`). The MPI source asks it instead of `allgather` when a comm
    has it; mpi4py's communicators and `FakeComm` do not, and go through `allgather`."""

    def census(self, answer: Answer) -> Place: ...


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


def _not_built(probe: str) -> Callable[..., Any]:
    """The default of a network probe in a bundle built without it (probes/network.py has the live ones)."""

    def fail(*args: object) -> Any:
        raise ProbeFailed(probe, f"this Probes bundle was built without a {probe} probe")

    return fail


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
    # the network (asked by the preflight and `exec --ifname`, never by `resolve`): this host's
    # interfaces and their addresses, a name's addresses, the interface and address toward a destination
    interfaces: Callable[[], Mapping[str, tuple[str, ...]]] = attrs.field(factory=lambda: _not_built("interfaces"))
    lookup: Callable[[str], tuple[str, ...]] = attrs.field(factory=lambda: _not_built("lookup"))
    route: Callable[[str], Route] = attrs.field(factory=lambda: _not_built("route"))
