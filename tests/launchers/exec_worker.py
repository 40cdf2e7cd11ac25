"""PROGRAM of `cluster-topology exec -- python exec_worker.py OUT [--mpi]`: its only distributed code is
`init_process_group("gloo")` (env://). Writes OUT/<pid>.json: its env:// variables, the launcher's own
variables (the truth, compared by the test), the all_reduce result, and with --mpi what mpi4py says
(MPI initialised in PROGRAM itself, after exec).
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
from pathlib import Path

ENV_INIT = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
)
PREFIXES = ("SLURM_", "OMPI_COMM_WORLD_", "PMI_", "MPI_LOCAL", "CLUSTER_TOPOLOGY_")


def main() -> int:
    out = Path(sys.argv[1])
    row: dict[str, object] = {
        "pid": os.getpid(),
        "hostname": socket.gethostname(),
        "env": {k: os.environ.get(k) for k in ENV_INIT},
        "launcher": {k: v for k, v in os.environ.items() if k.startswith(PREFIXES)},
    }
    if "--mpi" in sys.argv:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        row["mpi"] = {"rank": comm.Get_rank(), "size": comm.Get_size(), "hosts": comm.allgather(socket.gethostname())}
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    value = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(value)
    row["all_reduce"] = value.item()
    row["dist"] = {"rank": dist.get_rank(), "world_size": dist.get_world_size()}
    dist.destroy_process_group()
    if "--mpi" in sys.argv:
        from mpi4py import MPI

        MPI.COMM_WORLD.Barrier()  # MPI still works after the gloo group
    (out / f"{os.getpid()}.json").write_text(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
