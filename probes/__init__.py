"""What the resolver may ask the outside world, as injected callables.

A `Probes` bundle holds seven questions: `hostname()`, `comm()` (an mpi4py-shaped communicator),
`xla()` (a torch_xla.runtime-shaped object), `free_port()`, `read_text(path)`, `which(name)` and
`device_count()` (the accelerators on this node, asked only when no visibility variable says).
`system()` answers them for real, importing mpi4py or torch_xla only when asked;
`fake(...)` answers only what it was given and raises `ProbeFailed` naming the probe otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    from probes.fakes import FakeComm, FakeXla

__all__ = ["Comm", "Probes", "XlaRuntime", "fake", "system"]


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
    from resolver.errors import ProbeFailed

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


def system(*, timeout: float | None = None) -> Probes:
    """The live probes of this machine.

    With `timeout` (seconds), a file read and every MPI collective must finish within it, else
    `ProbeFailed` (the other live probes are kernel calls that cannot hang); see
    `probes.bounded`, which also bounds probes of your own. `resolve(environ)` uses
    `system(timeout=120)`.
    """
    if timeout is None:
        from probes import live

        return live.PROBES
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool):
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    from probes import live
    from probes.bounded import LIVE, bounded

    return bounded(live.PROBES, float(timeout), names=LIVE)


def fake(
    *,
    hostname: str | None = None,
    free_port: int | None = None,
    files: Mapping[str, str] | None = None,
    which: Mapping[str, str] | None = None,
    comm: FakeComm | Comm | None = None,
    xla: FakeXla | XlaRuntime | None = None,
    devices: int | None = None,
) -> Probes:
    """Probes that answer only what they were given; any other question raises `ProbeFailed`.

    `devices` is the answer of `device_count()`: the accelerators the node has.
    """
    from probes.fakes import make

    return make(hostname=hostname, free_port=free_port, files=files, which=which, comm=comm, xla=xla, devices=devices)
