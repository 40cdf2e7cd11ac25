"""One process of a real Grid Engine job, run by tests/launchers/test_gridengine.py (not collected by pytest).

Resolves `os.environ` with the live probes, then records the launcher's truth beside it: Grid Engine's
own variables, this host's name, the first host of PE_HOSTFILE as read here, and for an MPI rank
mpi4py's COMM_WORLD (rank, size, every rank's host name). It forms a gloo group through
`resolver.apply(..., ranks=True)` and `init_method="env://"`, runs an all_reduce, and writes its
answer as JSON to `<directory>/<name>-<pid>.json`. A TopologyError is reported the same way (exit
0), so the test sees every answer. Usage: `python gridengine_worker.py DIRECTORY NAME`.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

SGE = ("JOB_ID", "JOB_NAME", "SGE_TASK_ID", "NSLOTS", "NHOSTS", "PE", "PE_HOSTFILE", "RESTARTED", "JOB_SCRIPT")
MPI_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def report(directory: Path, name: str, out: dict[str, Any]) -> None:
    part = directory / f"{name}-{os.getpid()}.part"
    part.write_text(json.dumps(out, sort_keys=True))
    part.rename(part.with_suffix(".json"))  # the test never reads a half-written answer


def first_pe_host(environ: dict[str, str]) -> str | None:
    try:
        return Path(environ["PE_HOSTFILE"]).read_text().split()[0]
    except (KeyError, OSError, IndexError):
        return None


def main(directory: Path, name: str) -> int:
    environ = dict(os.environ)
    out: dict[str, Any] = {"env": {k: environ[k] for k in SGE if k in environ}, "pid": os.getpid()}
    import resolver

    out["explain"] = resolver.explain(environ).to_dict()
    try:
        topology = resolver.resolve(environ)
    except resolver.TopologyError as exc:
        out["error"] = {"type": type(exc).__name__, "message": str(exc)}
        report(directory, name, out)
        return 0
    out["topology"] = topology.to_dict()
    out["mpi_imported_by_resolve"] = "mpi4py.MPI" in sys.modules
    truth: dict[str, Any] = {"hostname": socket.gethostname(), "pe_first_host": first_pe_host(environ)}
    if any(marker in environ for marker in MPI_MARKERS):
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        truth |= {
            "global_rank": comm.Get_rank(),
            "world_size": comm.Get_size(),
            "hosts": comm.allgather(truth["hostname"]),
            "endpoints": comm.allgather((topology.main_address, topology.main_port)),
            "library": MPI.Get_library_version().splitlines()[0].strip("\x00 "),
        }
    out["truth"] = truth

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
    report(directory, name, out)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2]))
