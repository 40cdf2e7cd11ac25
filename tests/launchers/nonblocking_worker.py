"""One rank of a real MPI launch checking the deadline of probes.bounded (not collected by pytest).

    python nonblocking_worker.py DIRECTORY [--single]

Rank 0 joins a bcast two seconds late; the other ranks, bounded at 0.3 s, must give up with
ProbeFailed well before rank 0 arrives. Then they call the plain bcast again, which must meet
rank 0's (the abandoned barrier does not derail the communicator), and every rank allgathers.
`--single` initialises MPI with MPI_THREAD_SINGLE, where a thread could not bound anything.
Each rank writes its findings to DIRECTORY/<rank>.json and exits 0.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


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
            out["retry"] = comm.bcast(None, root=0)  # meets rank 0's bcast once it comes
    out["after"] = comm.allgather(comm.Get_rank())  # the communicator still works
    return out


def main(directory: Path, single: bool) -> int:
    import mpi4py

    if single:
        mpi4py.rc.thread_level = "single"
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    out: dict[str, Any] = {"rank": comm.Get_rank(), "thread_level": MPI.Query_thread()}
    out.update(deadline(comm))
    (directory / f"{comm.Get_rank()}.json").write_text(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), "--single" in sys.argv[2:]))
