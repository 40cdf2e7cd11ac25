"""Probes with a deadline: an answer that does not come in time is a `ProbeFailed` naming the probe.

Bounded: `read_text` (a rankfile on a hung NFS mount) and the MPI collectives.

A probe that hangs (a FIFO as the LSF rankfile, a collective whose peers never arrive) must
not hang `resolve`. Each question runs in a daemon thread and is waited for at most `seconds`;
on a timeout the thread is abandoned (it cannot be killed) and the error says so.
MPI collectives go through a thread only when MPI allows calls from any thread
(`MPI.Query_thread() >= THREAD_SERIALIZED`); otherwise they are called directly.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import attrs

from probes import Comm, Probes
from resolver.errors import ProbeFailed

__all__ = ["DEFAULT_TIMEOUT", "BoundedComm", "bounded", "call"]

DEFAULT_TIMEOUT = 120.0  # seconds; a collective waits for its slowest rank to arrive
T = TypeVar("T")


def call(name: str, seconds: float, function: Callable[..., T], *args: Any) -> T:
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
    """A communicator whose collectives must finish within the deadline."""

    def __init__(self, comm: Comm, seconds: float) -> None:
        self._comm = comm
        self._seconds = seconds
        self._threads = _mpi_allows_threads()

    def _bounded(self, name: str, function: Callable[..., T], *args: Any) -> T:
        if not self._threads:
            return function(*args)
        return call(f"comm.{name}", self._seconds, function, *args)

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's names
        return self._comm.Get_rank()

    def Get_size(self) -> int:  # noqa: N802
        return self._comm.Get_size()

    def allgather(self, sendobj: Any) -> list[Any]:
        return self._bounded("allgather", self._comm.allgather, sendobj)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        return self._bounded("bcast", self._comm.bcast, obj, root)

    def __getattr__(self, name: str) -> Any:  # anything else: the real communicator's
        return getattr(self._comm, name)


def bounded(probes: Probes, seconds: float = DEFAULT_TIMEOUT) -> Probes:
    """The same probes, each answer due within `seconds`."""
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, not {seconds!r}")
    # hostname, free_port and which are kernel calls that cannot hang, and a thread costs more
    # than the call (hundreds of microseconds on a busy machine); torch_xla's runtime must be
    # asked from the thread that runs it; MPI_Init (the comm probe's import) stays on this thread.
    return attrs.evolve(
        probes,
        read_text=lambda path: call("read_text", seconds, probes.read_text, path),  # NFS can hang
        comm=lambda: BoundedComm(probes.comm(), seconds),
    )
