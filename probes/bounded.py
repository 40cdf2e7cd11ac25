"""Probes with a deadline: an answer that does not come in time is a `ProbeFailed` naming the probe.

`bounded(probes)` bounds every probe but `xla`; the live bundle (`probes.system(timeout=...)`)
bounds only those that can hang (`probes.live.MAY_HANG`): `read_text` (a rankfile on a hung NFS
mount) and the MPI collectives.

A probe that hangs (a FIFO as the LSF rankfile, a collective whose peers never arrive) must
not hang `resolve`. Each question runs in a daemon thread and is waited for at most `seconds`;
on a timeout the thread is abandoned (it cannot be killed) and the error says so.
The collectives of a real mpi4py communicator need no thread: every rank first waits, polling,
in a nonblocking barrier (`probes.nonblocking`), whatever thread level MPI was initialised with.
Those of another communicator (a fake, another binding) go through a thread when MPI allows
calls from any thread (`MPI.Query_thread() >= THREAD_SERIALIZED`), else directly.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from resolver.errors import ProbeFailed

if TYPE_CHECKING:
    from probes import Comm, Probes

__all__ = ["ALL", "DEFAULT_TIMEOUT", "BoundedComm", "bound", "bounded", "call"]

DEFAULT_TIMEOUT = 120.0  # seconds; a collective waits for its slowest rank to arrive
_T = TypeVar("_T")


def call(name: str, seconds: float, function: Callable[..., _T], *args: Any) -> _T:
    """`function(*args)` within `seconds`, else ProbeFailed(name); its exceptions pass through."""
    box: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            box.append((True, function(*args)))
        except BaseException as exc:  # handed to the caller below
            box.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name=f"probe-{name}", daemon=True).start()
    if not done.wait(seconds):
        raise ProbeFailed(name, f"no answer within {seconds:g} s (the call is abandoned, still running)")
    ok, value = box[0]
    if ok:
        return value  # type: ignore[no-any-return]
    raise value


def _mpi_allows_threads() -> bool:
    mpi: Any = sys.modules.get("mpi4py.MPI")
    if mpi is None:  # not mpi4py (a fake, or another binding): nothing forbids a thread
        return True
    try:
        return bool(mpi.Query_thread() >= mpi.THREAD_SERIALIZED)
    except Exception:  # an odd binding: be safe and stay on this thread
        return False


class BoundedComm:
    """A communicator whose collectives must start within the deadline on every rank."""

    def __init__(self, comm: Comm, seconds: float) -> None:
        from probes import nonblocking  # only once a comm is asked

        self._comm = comm
        self._seconds = seconds
        self._nonblocking = nonblocking
        self._polled = nonblocking.supports(comm)
        self._threads = not self._polled and _mpi_allows_threads()

    def _bounded(self, name: str, function: Callable[..., _T], *args: Any) -> _T:
        if self._polled:
            self._nonblocking.barrier(self._comm, self._seconds, name)
            return function(*args)
        if self._threads:
            return call(name, self._seconds, function, *args)
        return function(*args)

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's names
        return self._comm.Get_rank()

    def Get_size(self) -> int:  # noqa: N802
        return self._comm.Get_size()

    def allgather(self, sendobj: Any) -> list[Any]:
        return self._bounded("comm.allgather", self._comm.allgather, sendobj)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self._bounded("comm.bcast", self._comm.bcast, obj, root)

    def __getattr__(self, name: str) -> Any:  # anything else: the real communicator's
        return getattr(self._comm, name)


ALL = ("hostname", "free_port", "read_text", "which", "comm", "device_count")


def bounded(probes: Probes, seconds: float = DEFAULT_TIMEOUT, *, names: tuple[str, ...] = ALL) -> Probes:
    """The same probes, the answers of those in `names` due within `seconds`.

    `comm` bounds the collectives (the import, i.e. MPI_Init, stays on the calling thread);
    `xla` is never bounded: torch_xla's runtime must be asked from the thread that runs it.
    """
    _check(seconds)
    unknown = set(names) - set(ALL)
    if unknown:
        raise ValueError(f"names={names!r}: expected names among {', '.join(ALL)}")
    return attrs.evolve(probes, **{name: bound(name, getattr(probes, name), seconds) for name in names})


def bound(name: str, probe: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """One probe whose answer is due within `seconds`; for `comm`, the collectives of what it returns."""
    _check(seconds)
    if name == "comm":
        return lambda: BoundedComm(probe(), seconds)

    def ask(*args: Any) -> Any:
        return call(name, seconds, probe, *args)

    return ask


def _check(seconds: float) -> None:
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, not {seconds!r}")
