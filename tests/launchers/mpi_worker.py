"""One rank of a real MPI launch, run by tests/launchers/test_mpi.py (not collected by pytest).

Resolves its topology from `os.environ` with the live probes, then asks the launcher's truth
(mpi4py's COMM_WORLD: rank, size, every rank's hostname), forms a gloo process group through
`resolver.apply(..., ranks=True)` and `init_method="env://"`, runs an all_reduce, and writes its
answer as JSON to `<directory>/<pid>.json` (launchers split and interleave long output lines).
A TopologyError from resolve is reported the same way, then it exits 0, so the test sees every
rank's answer. Usage: `python mpi_worker.py DIRECTORY`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

# the launcher variables the test may want to see next to the answer
SHOWN = (
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "MPI_LOCALNRANKS",
    "PMIX_HOSTNAME",
    "PMI_HOSTNAME",
    "SLURM_PROCID",
    "SLURM_STEP_ID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "ENVIRONMENT",
    "TMPDIR",
    "PMIX_SERVER_TMPDIR",  # Open MPI 5's session directory on this rank's host
)


def report(directory: Path, out: dict[str, Any]) -> None:
    part = directory / f"{os.getpid()}.part"
    part.write_text(json.dumps(out, sort_keys=True))
    part.rename(directory / f"{os.getpid()}.json")  # the test never reads a half-written answer


def main(directory: Path) -> int:
    environ = dict(os.environ)
    out: dict[str, Any] = {"env": {k: environ[k] for k in SHOWN if k in environ}, "pid": os.getpid()}
    import resolver

    out["explain"] = resolver.explain(environ).to_dict()
    start = time.perf_counter()
    try:
        topology = resolver.resolve(environ)
    except resolver.TopologyError as exc:
        out["error"] = {"type": type(exc).__name__, "message": str(exc), "probe": getattr(exc, "probe", None)}
        report(directory, out)
        return 0
    out["resolve_seconds"] = time.perf_counter() - start
    out["topology"] = topology.to_dict()
    # resolve must not have initialised MPI unless it needed the comm
    out["mpi_imported_by_resolve"] = "mpi4py.MPI" in sys.modules

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    host = socket.gethostname()
    hosts: list[str] = comm.allgather(host)
    distinct = sorted(set(hosts))
    on_host = [r for r, h in enumerate(hosts) if h == host]
    endpoints = comm.allgather((topology.main_address, topology.main_port))
    out["truth"] = {
        "world_size": comm.Get_size(),
        "global_rank": comm.Get_rank(),
        "hosts": hosts,
        "node_rank": distinct.index(host),
        "num_nodes": len(distinct),
        "host_local_rank": on_host.index(comm.Get_rank()),
        "host_local_size": len(on_host),
        "endpoints": [list(e) for e in endpoints],
        "library": MPI.Get_library_version().splitlines()[0].strip("\x00 "),
    }

    import torch
    import torch.distributed as dist

    with resolver.apply(topology, ranks=True):
        dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=60))
        try:
            value = torch.tensor([float(topology.global_rank + 1)])
            dist.all_reduce(value)
            out["all_reduce"] = value.item()
            out["dist"] = {"rank": dist.get_rank(), "world_size": dist.get_world_size()}
        finally:
            dist.destroy_process_group()
    report(directory, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
