"""The preflight's exchange at 1,024 and 4,096 ranks (threads in one process), beside its floor.

    python -m benchmarks.bench_exchange [--ranks 1024 4096] [--repeats 5] [--no-torch]

Every rank is a thread with its own torchrun-shaped environment (64 workers per emulated host, no
TORCHELASTIC_USE_AGENT_STORE, so rank 0 listens) and its own fake probes. Released together by a
barrier, each round times, until the last thread is done:

- `check`: `resolver.check(environ, probes)`: resolve, meet at the main endpoint through
  probes/exchange.py, rank 0 judges and answers each rank (every report must be ok);
- `floor`: the same threads resolving the same records, moving the same JSON to rank 0 through a
  bare selector loop that does nothing else (no greeting, no checks, no verdict) and taking back a
  two-byte answer: what any gather-and-answer over TCP costs in this harness;
- `tcpstore`: torch's `TCPStore` doing the same gather-and-answer (rank 0 the master: every rank
  `set`s its record, rank 0 `wait`s for all, `set`s the answer, every rank `wait`s and `get`s it);
  context, not the yardstick (it is noisy here, and its first use in a process stalls);
- `hostile` (64 ranks by default): `check` while one connection to rank 0 never speaks and one sends
  it 8 MiB of garbage (the issue's goal: under 5 s, every report ok).

The cases run in rounds (check, floor, tcpstore, then again), so that a change in the machine's load
hits each alike; every run is printed as its seconds and, after a slash, the seconds after the
release at which rank 0's thread began (a run whose rank 0 began late measured the harness: see
`timed`), with the median, range and check/floor of the medians, and the load average before and
after. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import selectors
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import resolver
from probes.exchange import retry_cap
from resolver._check import check, record
from resolver.testing import Job, torchrun_job

PER_HOST = 64
TIMEOUT = 60.0  # seconds any one case may take before its threads give up (a failed run, reported not ok)


def free_port() -> int:
    """A port nothing listens on, below the ephemeral range, as MASTER_PORT usually is (torch's 29500).

    Not one the kernel deals out: thousands of connections retried while rank 0 is not yet listening
    take ephemeral ports, and one that draws the main port itself connects to itself (TCP's
    simultaneous open) and holds the port rank 0 then fails to bind.
    """
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for port in random.sample(range(max(1024, low - 8192), low), 256):
        with socket.socket() as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {max(1024, low - 8192)}..{low - 1}")


def world(ranks: int, port: int) -> tuple[Job, list[dict[str, str]]]:
    per_host = min(PER_HOST, ranks)
    job = torchrun_job(
        nnodes=ranks // per_host,
        nproc_per_node=per_host,
        hosts=tuple(f"n{i:04d}" for i in range(ranks // per_host)),
        master_addr="127.0.0.1",
        master_port=port,
    )
    envs = []
    for p in job:
        e = {**p.environ, "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"}
        e.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        envs.append(e)
    return job, envs


def timed(ranks: int, work: Callable[[int], Any]) -> tuple[float, list[Any], float]:
    """Seconds from the barrier's release until the last of `ranks` threads finished `work(rank)`, the
    results, and the seconds after the release at which rank 0's thread began.

    The last figure says what a run measured. Released threads leave `threading.Barrier` one at a time
    through its lock, and each needs the interpreter lock to leave; when the threads already out are
    busy (resolving, retrying their connections), one thread may wait there for many seconds. When
    that thread is rank 0, everyone waits for it: the run measures the harness's scheduling, and the
    check rightly reports rank 0 missing when it began after the timeout. Seen here at 4,096 ranks in
    both the check and its floor (rank 0 began 68 s late in a check run whose median thread began at
    2.3 s, 64 s late in a floor run). Releases without the barrier's line (a lock per thread, a pipe,
    a common start time) were worse: thousands of threads wanting the interpreter lock at once.
    """
    barrier = threading.Barrier(ranks + 1)
    results: list[Any] = [None] * ranks
    began = [0.0]

    def run(rank: int) -> None:
        barrier.wait()
        if rank == 0:
            began[0] = time.perf_counter()
        try:
            results[rank] = work(rank)
        except Exception as exc:
            results[rank] = exc

    threads = [threading.Thread(target=run, args=(r,), daemon=True) for r in range(ranks)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    for t in threads:
        t.join(max(0.0, started + TIMEOUT + 10 - time.perf_counter()))
    late = began[0] - started if began[0] else float("inf")
    return time.perf_counter() - started, results, late


Run = tuple[float, bool, float]  # seconds, every report ok, seconds after the release at which rank 0 began


# -- the cases ---------------------------------------------------------------------------------------


def case_check(ranks: int) -> Run:
    job, envs = world(ranks, free_port())
    seconds, reports, late = timed(ranks, lambda r: check(envs[r], job.processes[r].probes(), timeout=TIMEOUT))
    return seconds, all(getattr(rep, "ok", False) for rep in reports), late


def _floor_serve(port: int, ranks: int, line: bytes) -> None:
    server = socket.create_server(("", port), backlog=4096)
    server.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ)
    buffers: dict[socket.socket, bytearray] = {}
    done: list[socket.socket] = []
    while len(done) < ranks - 1:
        for key, _ in selector.select():
            if key.fileobj is server:
                while True:
                    try:
                        conn, _ = server.accept()
                    except OSError:  # none left (BlockingIOError), or one that went away before its turn
                        break
                    conn.setblocking(False)
                    buffers[conn] = bytearray()
                    selector.register(conn, selectors.EVENT_READ)
                continue
            conn = key.fileobj  # type: ignore[assignment]
            chunk = conn.recv(65536)
            if not chunk:
                raise ConnectionError("a rank hung up before it sent its record")
            buffers[conn] += chunk
            if buffers[conn].endswith(b"\n"):
                json.loads(buffers[conn])
                selector.unregister(conn)
                done.append(conn)
    for conn in done:
        conn.setblocking(True)
        conn.sendall(b"1\n")
    for conn in done:
        conn.recv(1)
        conn.close()
    server.close()
    selector.close()


def _floor_join(port: int, line: bytes, ranks: int) -> bool:
    """Connect (retrying as `probes.exchange.join` does: doubling from 10 ms, jittered, capped at
    `retry_cap(ranks)`, so that both cases spend the same while rank 0 is not listening yet), send,
    read the answer."""
    deadline = time.monotonic() + TIMEOUT
    delay = 0.01
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(delay * (1 + random.random()))  # noqa: S311
            delay = min(retry_cap(ranks), delay * 2)
    with conn:
        conn.sendall(line)
        return conn.recv(16) == b"1\n"


def case_floor(ranks: int) -> Run:
    port = free_port()
    job, envs = world(ranks, port)

    def work(r: int) -> bool:
        topology = resolver.resolve(envs[r], job.processes[r].probes())
        line = json.dumps(record(topology, job.processes[r].hostname)).encode() + b"\n"
        if r == 0:
            _floor_serve(port, ranks, line)
            return True
        return _floor_join(port, line, ranks)

    seconds, results, late = timed(ranks, work)
    return seconds, all(x is True for x in results), late


def case_tcpstore(ranks: int) -> Run:
    from datetime import timedelta

    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    port = free_port()
    job, envs = world(ranks, port)
    master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=TIMEOUT))

    def work(r: int) -> bool:
        topology = resolver.resolve(envs[r], job.processes[r].probes())
        mine = json.dumps(record(topology, job.processes[r].hostname))
        store = master if r == 0 else TCPStore("127.0.0.1", port, timeout=timedelta(seconds=TIMEOUT))
        store.set(f"record/{r}", mine)
        if r == 0:
            store.wait([f"record/{i}" for i in range(ranks)])
            store.set("answer", "1")
        store.wait(["answer"])
        return bool(store.get("answer") == b"1")

    seconds, results, late = timed(ranks, work)
    return seconds, all(x is True for x in results), late


def case_hostile(ranks: int) -> Run:
    """`ranks` processes checking while one connection to rank 0 never speaks and one sends 8 MiB of garbage."""
    port = free_port()
    job, envs = world(ranks, port)
    intruders: list[socket.socket] = []
    over = threading.Event()  # rank 0 is done: an intruder that has not reached it yet never will

    def intrude(kind: str) -> bool:
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port))
                break
            except OSError:
                if over.is_set():
                    return False
                time.sleep(0.01)
        intruders.append(conn)
        if kind == "garbage":
            chunk = b"\x00garbage" * 8192
            with contextlib.suppress(OSError):  # rank 0 cuts it off after RECORD_LIMIT bytes
                for _ in range((8 << 20) // len(chunk)):
                    conn.sendall(chunk)
        return True

    def work(r: int) -> Any:
        if r >= ranks:
            return intrude("silent" if r == ranks else "garbage")
        try:
            return check(envs[r], job.processes[r].probes(), timeout=TIMEOUT)
        finally:
            if r == 0:
                over.set()

    seconds, results, late = timed(ranks + 2, work)
    for conn in intruders:
        conn.close()
    if results[ranks:] != [True, True]:
        print(f"(hostile: an intruder did not reach rank 0 in time: {results[ranks:]})", file=sys.stderr)
    return seconds, all(getattr(rep, "ok", False) for rep in results[:ranks]), late


def _line(head: str, done: list[Run], tail: str = "") -> float:
    """Print one case's runs; return their median seconds."""
    times = [seconds for seconds, _, _ in done]
    median = statistics.median(times)
    ok = all(good for _, good, _ in done)
    each = " ".join(f"{seconds:.2f}/{late:.2f}" for seconds, _, late in done)
    print(f"{head} {median:>9.2f} {min(times):>7.2f} {max(times):>7.2f} {ok!s:>7}  {each}{tail}", flush=True)
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_exchange")
    parser.add_argument("--ranks", type=int, nargs="+", default=[1024, 4096])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-torch", action="store_true", help="leave out torch's TCPStore")
    parser.add_argument("--hostile", type=int, default=64, help="ranks of the silent + 8 MiB garbage case (0: skip)")
    args = parser.parse_args(argv)
    threading.stack_size(512 * 1024)
    cases: dict[str, Callable[[int], Run]] = {"check": case_check, "floor": case_floor}
    if not args.no_torch:
        # torch's c10d logs a warning ("The hostname of the client socket cannot be retrieved") for each
        # client whose peer name the store cannot look up, thousands of times at 4,096 ranks; it changes
        # nothing the store does or what is timed. Errors still print; set the variable to see warnings.
        # Read once, when torch loads its C++ logging: so before the import.
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        try:
            import torch.distributed  # noqa: F401
        except ImportError:
            print("(tcpstore skipped: torch is not installed)")
        else:
            cases["tcpstore"] = case_tcpstore
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("runs: seconds/when rank 0's thread began after the release (a late rank 0 measures the harness)")
    print(f"{'ranks':>6} {'case':<9} {'median s':>9} {'min s':>7} {'max s':>7} {'all ok':>7}  runs")
    for ranks in args.ranks:
        runs: dict[str, list[Run]] = {name: [] for name in cases}
        for _ in range(args.repeats):  # in rounds, so that a change in the machine's load hits every case alike
            for name, case in cases.items():
                runs[name].append(case(ranks))
        medians = {name: _line(f"{ranks:>6} {name:<9}", done) for name, done in runs.items()}
        print(f"{ranks:>6} check/floor (medians) {medians['check'] / medians['floor']:.2f}x", flush=True)
    if args.hostile:
        done = [case_hostile(args.hostile) for _ in range(args.repeats)]
        _line(
            f"{args.hostile:>6} {'hostile':<9}", done, "  (+ a silent connection and 8 MiB of garbage; goal under 5 s)"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
