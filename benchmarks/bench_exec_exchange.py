"""`cluster-topology exec`'s exchange (probes/tcp.py) at 256, 1,024 and 4,096 ranks: the census through
host leaders against the allgather every rank used to do.

    python -m benchmarks.bench_exec_exchange [--ranks 256 1024 4096] [--repeats 3] [--workers 8]

What runs: rank 0 alone in one OS process, the other ranks as threads spread over `--workers` further
OS processes (separate processes for every rank would need gigabytes at 4,096 on this machine; a
thread per rank in a few processes keeps rank 0's own figures its own). Ranks sit on emulated hosts
of 8 (`h00000` for ranks 0-7, ...): each sends the MPI source's answer (its host name; rank 0's with
its endpoint) through a `TcpComm` at 127.0.0.1, every process released at one wall-clock instant.

- `census`: `TcpComm.census`, what exec does now: the ranks of a host meet their leader over an
  abstract Unix socket, the leader carries the host's 8 answers to rank 0 and hands each rank its
  own seat (`local_size=8`, as mpirun's OMPI_COMM_WORLD_LOCAL_SIZE tells exec);
- `allgather`: `TcpComm.allgather`, what exec did before (main's probes/tcp.py, kept as the comm's
  allgather): every rank connects to rank 0 and receives every rank's answer.

Printed for each run: the wall time from the release to the last rank's answer, rank 0's CPU time,
the connections rank 0 took, its peak of open file descriptors (sampled every 10 ms), the bytes rank 0
sent (counted at its sockets' `send`), and how many ranks got the right place (node rank, node count,
local rank, local size) or the right objects. The cases alternate (census, allgather, census, ...),
so a change in the machine's load hits both alike; the medians and their ratio end each size.
Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_exchange import free_port  # below the ephemeral range: see there
from probes.census import Seat
from probes.tcp import TcpComm

PER_HOST = 8
TIMEOUT = 120.0


def host(rank: int) -> str:
    return f"h{rank // PER_HOST:05d}"


def answer(rank: int, port: int) -> tuple[str, str | None, int | None, None]:
    return (host(rank), "127.0.0.1", port, None) if rank == 0 else (host(rank), None, None, None)


def expected_seat(rank: int, size: int) -> Seat:
    hosts = -(-size // PER_HOST)
    last = size - (hosts - 1) * PER_HOST
    return Seat(rank // PER_HOST, hosts, rank % PER_HOST, PER_HOST if rank // PER_HOST < hosts - 1 else last)


# -- one OS process of the run -----------------------------------------------------------------------------


def run_ranks(mode: str, ranks: list[int], size: int, port: int) -> dict[str, Any]:
    """Run `ranks` (threads): say "ready" once every thread waits, read the wall-clock start from stdin,
    release them all then; rank 0's process also counts what rank 0 sent."""
    sent = [0]
    if ranks == [0]:  # rank 0 alone in this process: count every byte its sockets send
        plain_send = socket.socket.send

        def counting_send(self: socket.socket, data: Any, *args: Any) -> int:
            n = plain_send(self, data, *args)
            sent[0] += n
            return n

        socket.socket.send = counting_send  # type: ignore[method-assign,assignment]
    peak = [0]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.01):
            peak[0] = max(peak[0], len(os.listdir("/proc/self/fd")))

    results: dict[int, Any] = {}
    ends: dict[int, float] = {}
    comms = {
        r: TcpComm(r, size, "127.0.0.1", port, timeout=TIMEOUT, local_size=PER_HOST, local_rank=r % PER_HOST)
        for r in ranks
    }
    go = threading.Event()
    start = [0.0]

    def run(rank: int) -> None:
        comm = comms[rank]
        go.wait()
        time.sleep(max(0.0, start[0] - time.time()))
        try:
            if mode == "census":
                results[rank] = comm.census(answer(rank, port)).seat == expected_seat(rank, size)
            else:
                got = comm.allgather(answer(rank, port))
                results[rank] = len(got) == size and got[rank] == answer(rank, port) and got[0] == answer(0, port)
        except Exception as exc:  # a failed rank is reported, not raised
            results[rank] = repr(exc)[:300]
        ends[rank] = time.time()

    sampler = threading.Thread(target=sample, daemon=True)
    if ranks == [0]:
        sampler.start()
    cpu = time.process_time()
    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in ranks]
    for t in threads:
        t.start()
    print("ready", flush=True)
    start[0] = float(sys.stdin.readline())
    go.set()
    for t in threads:
        t.join(TIMEOUT + 30)
    sampling.set()
    out: dict[str, Any] = {
        "ok": sum(1 for v in results.values() if v is True),
        "errors": sorted({v for v in results.values() if isinstance(v, str)})[:3],
        "end": max(ends.values(), default=time.time()),
    }
    if ranks == [0]:
        out.update(cpu=time.process_time() - cpu, sent=sent[0], connections=comms[0].connections, peak_fds=peak[0])
    return out


# -- the run -----------------------------------------------------------------------------------------------


def one_run(mode: str, size: int, workers: int) -> dict[str, Any]:
    port = free_port()
    others = list(range(1, size))
    parts = [others[i::workers] for i in range(workers)]
    procs = []
    for ranks in [[0], *parts]:
        if not ranks:
            continue
        spec = json.dumps({"mode": mode, "ranks": ranks, "size": size, "port": port})
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "benchmarks.bench_exec_exchange", "--worker", spec],
                cwd=Path(__file__).resolve().parents[1],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for proc in procs:  # every process has its threads waiting: release them together, a moment from now
        said = proc.stdout.readline().strip() if proc.stdout is not None else ""
        if said != "ready":
            raise RuntimeError(f"a worker said {said!r} instead of ready")
    start = time.time() + 0.2
    for proc in procs:
        assert proc.stdin is not None  # made with stdin=PIPE
        proc.stdin.write(f"{start}\n")
        proc.stdin.close()
    reports = []
    for proc in procs:
        assert proc.stdout is not None  # made with stdout=PIPE
        with proc.stdout:
            out = proc.stdout.read()
        proc.wait(timeout=TIMEOUT + 60)
        reports.append(json.loads(out.strip().splitlines()[-1]))
    root = reports[0]
    return {
        "wall": max(r["end"] for r in reports) - start,
        "cpu0": root["cpu"],
        "connections": root["connections"],
        "peak_fds": root["peak_fds"],
        "sent": root["sent"],
        "ok": sum(r["ok"] for r in reports),
        "errors": [e for r in reports for e in r["errors"]][:3],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8, help="OS processes holding the ranks 1..N-1 as threads")
    parser.add_argument("--modes", nargs="+", default=["census", "allgather"], choices=["census", "allgather"])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        spec = json.loads(args.worker)
        print(json.dumps(run_ranks(spec["mode"], spec["ranks"], spec["size"], spec["port"])))
        return 0
    print(f"hosts of {PER_HOST}; rank 0 in its own process, ranks 1..N-1 as threads in {args.workers} processes")
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for size in args.ranks:
        runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in args.modes}
        for _ in range(args.repeats):
            for mode in args.modes:
                r = one_run(mode, size, args.workers)
                runs[mode].append(r)
                print(
                    f"{size:>6} {mode:<9} wall {r['wall']:7.2f} s  rank 0 cpu {r['cpu0']:6.2f} s  "
                    f"connections {r['connections']:>5}  peak fds {r['peak_fds']:>5}  "
                    f"sent {r['sent'] / 1e6:9.3f} MB  ok {r['ok']}/{size}"
                    + (f"  {r['errors']}" if r["errors"] else ""),
                    flush=True,
                )
        medians = {m: statistics.median(r["wall"] for r in rs) for m, rs in runs.items()}
        sent = {m: statistics.median(r["sent"] for r in rs) for m, rs in runs.items()}
        line = "  ".join(f"{m} {medians[m]:.2f} s / {sent[m] / 1e6:.3f} MB" for m in medians)
        ratio = (
            f"; allgather/census wall {medians['allgather'] / medians['census']:.1f}x, "
            f"sent {sent['allgather'] / max(1, sent['census']):.0f}x"
            if len(medians) == 2
            else ""
        )
        print(f"{size:>6} median: {line}{ratio}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
