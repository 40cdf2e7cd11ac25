"""mpi4py's `allgather` and `bcast` with a deadline and no thread: MPI-3 nonblocking collectives, polled.

A blocking collective cannot be interrupted, so a deadline on one used to mean running it in a
thread and abandoning the thread on a timeout: a thread start and two context switches per call
(about 60-90 us here, more than the collective on one node), and impossible when MPI was
initialised without thread support. Here the calling thread starts the nonblocking operation
(`Ibcast`, `Iallgather`) and polls `Test()` until it completes or the deadline passes; on a
timeout the pending operation is abandoned with its buffers kept alive (MPI may still write into
them), and the communicator stays usable, since every rank issued the same collectives in the
same order.

The objects travel in fixed-size blocks, so that the common case is one collective (mpi4py's own
lowercase `bcast` and `allgather` send the pickle's size first, then the pickle: two):

- `bcast`: one `Ibcast` of a BCAST_BLOCK-byte block: a 4-byte length, then the encoded object.
  A longer object sends the rest in a second `Ibcast`, whose size every rank read in the first.
- `allgather`: one `Iallgather` of a slot per rank (`slot(size)` bytes: a length, then the encoded
  object). The overflow of every longer contribution follows in one `Iallgatherv`, whose counts
  every rank read in the slots. The slots shrink with the world size so that the receive buffer
  stays under ALLGATHER_BUDGET bytes (a million ranks: 16-byte slots).

A `str` is encoded as b"s" + its UTF-8 (the hostnames the resolver gathers fit a slot), anything
else as b"p" + its pickle, as mpi4py itself sends objects.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from resolver.errors import ProbeFailed

__all__ = ["ALLGATHER_BUDGET", "BCAST_BLOCK", "allgather", "bcast", "decode", "encode", "slot", "supports"]

BCAST_BLOCK = 1024
ALLGATHER_BUDGET = 16 << 20
MAX_SLOT = 256
MIN_SLOT = 16
LENGTH = 4  # bytes of the length in front of every block and slot
SPIN_TESTS = 32  # Test() calls before the clock is read
SPIN = 0.002  # seconds of sched_yield polling before the poll starts sleeping
MAX_PAUSE = 0.005  # the longest sleep between two polls, once the wait is long
# operations abandoned on a timeout, with the buffers MPI may still write into: kept alive
ABANDONED: list[tuple[Any, ...]] = []


def supports(comm: Any) -> bool:
    """Whether `comm` is an mpi4py intracommunicator of an MPI library with nonblocking collectives."""
    mpi: Any = sys.modules.get("mpi4py.MPI")
    if mpi is None:
        return False
    try:
        return isinstance(comm, mpi.Intracomm) and not comm.Is_inter() and mpi.Get_version() >= (3, 0)
    except Exception:  # an odd build: the thread fallback still bounds it
        return False


def _pickle() -> Any:
    # imported on first use, not with this module: resolve imports it even where MPI never runs
    import pickle

    return pickle


def encode(obj: object) -> bytes:
    if type(obj) is str:
        return b"s" + obj.encode("utf-8", "surrogatepass")
    pickle = _pickle()
    data: bytes = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return b"p" + data


def decode(data: bytes | bytearray | memoryview) -> Any:
    kind = data[0] if len(data) else None
    if kind == 115:  # b"s"
        return bytes(data[1:]).decode("utf-8", "surrogatepass")
    if kind == 112:  # b"p"
        # unpickles what the peers of this MPI job sent, as mpi4py's own collectives do
        return _pickle().loads(data[1:])
    raise ValueError(f"a collective delivered {bytes(data[:16])!r}...: not an encoded object")


def slot(size: int) -> int:
    """Bytes per rank in `allgather`'s first round, a multiple of 4 in MIN_SLOT..MAX_SLOT."""
    return max(MIN_SLOT, min(MAX_SLOT, ALLGATHER_BUDGET // max(size, 1) // 4 * 4))


def _byte() -> Any:
    return sys.modules["mpi4py.MPI"].BYTE


def _length(data: bytes) -> bytes:
    if len(data) >= 2**31:
        raise ValueError(f"an object of {len(data)} bytes encoded: a collective sends less than 2 GiB")
    return len(data).to_bytes(LENGTH, sys.byteorder)


def _wait(request: Any, deadline: float, seconds: float, name: str, keep: tuple[Any, ...]) -> None:
    """Poll `request` until it completes; past the deadline, abandon it and raise ProbeFailed(name)."""
    test = request.Test
    for _ in range(SPIN_TESTS):  # most collectives complete within a few polls: no clock, no syscall
        if test():
            return
    start = time.monotonic()
    pause = 0.00005
    while not test():
        now = time.monotonic()
        if now >= deadline:
            ABANDONED.append((request, *keep))
            raise ProbeFailed(name, f"no answer within {seconds:g} s (the collective is abandoned, still pending)")
        if now - start < SPIN:
            os.sched_yield()  # let the other ranks on this core reach the collective
        else:  # a long wait (a peer still starting): do not burn a core for it
            time.sleep(min(pause, deadline - now))
            pause = min(pause * 2, MAX_PAUSE)


def bcast(comm: Any, obj: object, root: int, seconds: float, name: str = "comm.bcast") -> Any:
    """`comm.bcast(obj, root)`, done within `seconds` or ProbeFailed(name)."""
    deadline = time.monotonic() + seconds
    block = bytearray(BCAST_BLOCK)
    head = BCAST_BLOCK - LENGTH
    is_root = comm.Get_rank() == root
    data = b""
    if is_root:
        data = encode(obj)
        block[:LENGTH] = _length(data)
        block[LENGTH : LENGTH + min(len(data), head)] = data[:head]
    _wait(comm.Ibcast(block, root), deadline, seconds, name, (block,))
    length = int.from_bytes(block[:LENGTH], sys.byteorder)
    if length <= head:
        return decode(memoryview(block)[LENGTH : LENGTH + length])
    rest = bytearray(data[head:]) if is_root else bytearray(length - head)
    _wait(comm.Ibcast(rest, root), deadline, seconds, name, (rest,))
    return decode(bytes(block[LENGTH:]) + rest)


def allgather(comm: Any, obj: object, seconds: float, name: str = "comm.allgather") -> list[Any]:
    """`comm.allgather(obj)`, done within `seconds` or ProbeFailed(name)."""
    deadline = time.monotonic() + seconds
    size = comm.Get_size()
    width = slot(size)
    head = width - LENGTH
    data = encode(obj)
    send = bytearray(width)
    send[:LENGTH] = _length(data)
    send[LENGTH : LENGTH + min(len(data), head)] = data[:head]
    slots = bytearray(width * size)
    _wait(comm.Iallgather(send, slots), deadline, seconds, name, (send, slots))
    view = memoryview(slots)
    lengths = [int.from_bytes(view[i : i + LENGTH], sys.byteorder) for i in range(0, len(slots), width)]
    overflow = [max(0, n - head) for n in lengths]
    extra = bytearray(sum(overflow))
    offsets = [0] * size
    if extra:
        total = 0
        for i, n in enumerate(overflow):
            offsets[i] = total
            total += n
        mine = bytearray(data[head:])
        request = comm.Iallgatherv(mine, [extra, (overflow, offsets), _byte()])
        _wait(request, deadline, seconds, name, (mine, extra))
    out = []
    for i, n in enumerate(lengths):
        start = i * width + LENGTH
        if overflow[i]:
            out.append(decode(bytes(view[start : start + head]) + extra[offsets[i] : offsets[i] + overflow[i]]))
        else:
            out.append(decode(view[start : start + n]))
    return out
