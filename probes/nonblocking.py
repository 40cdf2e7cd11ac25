"""A deadline for mpi4py's collectives without a thread: a polled nonblocking barrier first.

A blocking collective cannot be interrupted, and a thread cannot bound one when MPI was
initialised without thread support. So each rank enters `Ibarrier` (MPI-3) and polls `Test()`
until every rank has entered it or the deadline passes; a rank that never comes makes the others
raise `ProbeFailed` at the deadline. Once the barrier completes, every rank is at the collective,
and mpi4py's own `bcast`/`allgather` runs as usual.

On a timeout the barrier is left pending: MPI cannot cancel a collective. A late rank completes
it and goes on into its collective; the ranks that gave up can meet it there by calling the same
collective again (tests/launchers/test_mpi.py runs this under Open MPI and MPICH).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from resolver.errors import ProbeFailed

__all__ = ["barrier", "supports"]


def supports(comm: Any) -> bool:
    """Whether `comm` is an mpi4py intracommunicator of an MPI library with nonblocking collectives."""
    mpi: Any = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return False
    try:
        return isinstance(comm, mpi.Intracomm) and mpi.Get_version() >= (3, 0)
    except Exception:  # an odd build: the thread fallback in probes.bounded still bounds it
        return False


def barrier(comm: Any, seconds: float, name: str) -> None:
    """Return once every rank of `comm` has called this; after `seconds`, raise ProbeFailed(name)."""
    request = comm.Ibarrier()
    start = time.monotonic()
    while not request.Test():
        now = time.monotonic()
        if now - start >= seconds:
            raise ProbeFailed(name, f"no answer within {seconds:g} s (not every rank reached the collective)")
        # for the first millisecond only yield the core (the other ranks are usually that close),
        # then sleep between polls rather than burn a core waiting for a rank still starting
        time.sleep(0 if now - start < 0.001 else min(0.001, start + seconds - now))
