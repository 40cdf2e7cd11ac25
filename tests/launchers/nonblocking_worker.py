"""One rank of a real MPI launch checking probes.nonblocking (not collected by pytest).

    python nonblocking_worker.py DIRECTORY equal|deadline [--single]

`equal`: for objects whose encodings sit on either side of every block and slot boundary (and
differ from rank to rank), the polled `bcast` from every root and the polled `allgather` return
what mpi4py's own lowercase collectives return.
`deadline`: rank 0 joins a bcast two seconds late; the other ranks, bounded at 0.3 s, must give up
with ProbeFailed well before rank 0 arrives, and the communicator must still work afterwards.
`--single` initialises MPI with MPI_THREAD_SINGLE, where a thread could not bound anything.
Each rank writes its findings to DIRECTORY/<rank>.json and exits 0.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def sized(total: int, rank: int) -> str:
    """A str whose encoding (b"s" + UTF-8) is `total` bytes, different on every rank."""
    body = f"r{rank}-"
    return (body + "x" * total)[: max(total - 1, 0)]


def payloads(rank: int, size: int) -> list[Any]:
    from probes import nonblocking

    width = nonblocking.slot(size)
    edges = [0, 1, 2, width - 5, width - 4, width - 3, nonblocking.BCAST_BLOCK - 5]
    edges += [nonblocking.BCAST_BLOCK - 4, nonblocking.BCAST_BLOCK - 3, 5000, 200_000]
    out: list[Any] = [sized(n, rank) for n in edges]
    # mixed: only some ranks overflow their slot; and non-str objects (pickled)
    out.append(sized(width * 3, rank) if rank % 2 else "short")
    out.append(("host-" + str(rank), "10.0.0.1", 29500 + rank, None))
    out.append({"rank": rank, "data": list(range(rank * 40))})
    out.append("\udcff surrogate and ünïcode " * rank)
    out.append(None)
    return out


def equal(comm: Any) -> dict[str, Any]:
    from probes import nonblocking

    rank, size = comm.Get_rank(), comm.Get_size()
    mismatches = []
    checked = 0
    for index, obj in enumerate(payloads(rank, size)):
        got = nonblocking.allgather(comm, obj, 30.0)
        want = comm.allgather(obj)
        checked += 1
        if got != want:
            mismatches.append({"op": "allgather", "case": index, "got": repr(got)[:300], "want": repr(want)[:300]})
        for root in range(size):
            got = nonblocking.bcast(comm, obj if rank == root else None, root, 30.0)
            want = comm.bcast(obj if rank == root else None, root=root)
            checked += 1
            if got != want:
                mismatches.append({"op": "bcast", "case": index, "root": root, "got": repr(got)[:300]})
    return {"checked": checked, "mismatches": mismatches}


def deadline(comm: Any) -> dict[str, Any]:
    from probes.bounded import BoundedComm
    from resolver.errors import ProbeFailed

    bounded = BoundedComm(comm, 0.3)
    out: dict[str, Any] = {"polled": bounded._polled}
    comm.Barrier()
    start = time.monotonic()
    if comm.Get_rank() == 0:
        time.sleep(2.0)
        out["value"] = bounded.bcast("late", root=0)
    else:
        try:
            out["value"] = bounded.bcast(None, root=0)
        except ProbeFailed as exc:
            out["error"] = str(exc)
    out["seconds"] = time.monotonic() - start
    out["after"] = comm.allgather(comm.Get_rank())  # the communicator still works
    return out


def main(directory: Path, mode: str, single: bool) -> int:
    import mpi4py

    if single:
        mpi4py.rc.thread_level = "single"
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out: dict[str, Any] = {"rank": comm.Get_rank(), "thread_level": MPI.Query_thread()}
    out.update(equal(comm) if mode == "equal" else deadline(comm))
    (directory / f"{comm.Get_rank()}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2], "--single" in sys.argv[3:]))
