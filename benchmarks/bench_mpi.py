"""Cost of resolving under a real mpirun, side by side with one bare allgather of the hostnames.

    python -m benchmarks.bench_mpi [--ranks 2 4 8] [--repeats 300]

For each world size it starts `mpirun -n N --oversubscribe` (Open MPI; as root it sets the two
OMPI_ALLOW_RUN_AS_ROOT variables) running this file in rank mode. With MPI already initialised,
every rank times, in interleaved rounds after a barrier:

- `resolve(env)`: `resolver.resolve(environ)` as users call it, with the default live probes, and
  no MASTER_ADDR/MASTER_PORT, so the comm supplies rank 0's hostname and a free port. On one
  machine Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE == OMPI_COMM_WORLD_SIZE says "one node", so this
  is one `bcast`; the default probes put a polled `Ibarrier` before it, against a deadline
  (`probes.nonblocking`);
- `resolve(env)+hosts`: the same with OMPI_COMM_WORLD_LOCAL_SIZE/LOCAL_RANK removed, as on
  several nodes: the node and local ranks come from one `allgather` of (hostname, rank 0's
  endpoint), after a polled `Ibarrier`;
- `resolve`, `resolve+hosts`: the same two with `probes.system()` (no deadline), whose comm is
  mpi4py's COMM_WORLD itself: its lowercase `bcast`/`allgather`;
- `allgather`: `COMM_WORLD.allgather(socket.gethostname())`, the reference;
- `allgather+cpu`: that allgather, then a resolve that needs no comm (MASTER_ADDR/MASTER_PORT set):
  what any design with one collective must at least cost, since every rank still detects its
  launcher and builds its record. On a machine with fewer cores than ranks this CPU serialises.

A round's time is the slowest rank's (a collective is as slow as its slowest member). The table
gives min and median over rounds and their ratios to `allgather` (x) and to `allgather+cpu` (/floor).
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DROP = ("MASTER_ADDR", "MASTER_PORT")
MULTI_NODE_DROP = ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK")


def rank_main(repeats: int) -> None:
    sys.path.insert(0, str(ROOT))
    from mpi4py import MPI

    import probes
    import resolver

    comm = MPI.COMM_WORLD
    live = probes.system()
    one_node = {k: v for k, v in os.environ.items() if k not in DROP}
    multi_node = {k: v for k, v in one_node.items() if k not in MULTI_NODE_DROP}
    no_comm = {**one_node, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert resolver.resolve(one_node, live).source == "mpi"
    node_rank = resolver.resolve(multi_node).provenance["node_rank"]  # an Origin: the hostnames came from the comm
    assert node_rank.kind == "probe", node_rank
    assert node_rank.name.startswith("comm.allgather"), node_rank

    cases: dict[str, Callable[[], object]] = {
        "allgather": lambda: comm.allgather(socket.gethostname()),
        "allgather+cpu": lambda: (comm.allgather(socket.gethostname()), resolver.resolve(no_comm, live)),
        "resolve(env)": lambda: resolver.resolve(one_node),  # the default probes, as users call it
        "resolve(env)+hosts": lambda: resolver.resolve(multi_node),
        "resolve": lambda: resolver.resolve(one_node, live),
        "resolve+hosts": lambda: resolver.resolve(multi_node, live),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(20):  # warm up every path
        for run in cases.values():
            run()
    for _ in range(repeats):
        for name, run in cases.items():
            comm.Barrier()
            start = time.perf_counter()
            run()
            elapsed = time.perf_counter() - start
            times[name].append(comm.allreduce(elapsed, op=MPI.MAX))
    if comm.Get_rank() == 0:
        print("BENCH " + json.dumps({"ranks": comm.Get_size(), "times": times}), flush=True)


def launch(ranks: int, repeats: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k not in DROP}
    env.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
        PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    )
    args = [
        "mpirun",
        "-n",
        str(ranks),
        "--oversubscribe",
        sys.executable,
        __file__,
        "--rank",
        "--repeats",
        str(repeats),
    ]
    res = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
    for line in res.stdout.splitlines():
        if line.startswith("BENCH "):
            data: dict[str, Any] = json.loads(line[6:])
            return data
    raise SystemExit(f"{' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)  # one rank of a run
    args = parser.parse_args()
    if args.rank:
        rank_main(args.repeats)
        return
    if shutil.which("mpirun") is None:
        raise SystemExit("needs Open MPI's mpirun (apt-get install openmpi-bin) and mpi4py")
    header = ("ranks", "case", "min us", "median us", "min x", "median x", "min /floor", "median /floor")
    print("{:>5} {:<18} {:>9} {:>10} {:>6} {:>9} {:>11} {:>14}".format(*header))
    for ranks in args.ranks:
        times = launch(ranks, args.repeats)["times"]
        ref = min(times["allgather"]), statistics.median(times["allgather"])
        floor = min(times["allgather+cpu"]), statistics.median(times["allgather+cpu"])
        for name, values in times.items():
            low, mid = min(values), statistics.median(values)
            print(
                f"{ranks:>5} {name:<18} {low * 1e6:>9.1f} {mid * 1e6:>10.1f} {low / ref[0]:>6.2f} "
                f"{mid / ref[1]:>9.2f} {low / floor[0]:>11.2f} {mid / floor[1]:>14.2f}"
            )


if __name__ == "__main__":
    main()
