"""The preflight's exchange at 16,384 ranks and more, in separate OS processes, beside its floor and TCPStore.

    python -m benchmarks.bench_scale [--processes 64] [--per-process 256] [--repeats 3] [--no-torch]
                                     [--cases check floor tcpstore emulated limit instructions]
                                     [--instruction-ranks 128]

Every case starts `--processes` worker processes (Python, each under a soft limit of 1,024 open files,
`RLIMIT_NOFILE`, as many clusters give a job), each running `--per-process` ranks as threads with their
own torchrun-shaped environment and fake host-name probe: hosts of 8 ranks (`n00000`, `n00001`, ...), a
host never split between two processes. The workers build their ranks, say they are ready, and are
released together; a run is the seconds from the release until the last rank is done (the workers'
start-up is not counted). The cases:

- `check`: every rank runs `resolver.check` (the real thing: host leaders elected by bind, rank 0
  listening); every report must be ok;
- `floor`: the same ranks resolving the same records and moving them the same two-level way through
  bare loops that do nothing else: each host's lowest rank (fixed, no election; rank 1 on rank 0's host)
  takes its host's record lines over an abstract Unix socket bound before the release, sends them in one
  write over one TCP connection to rank 0's bare selector loop, and relays its two-byte answer;
- `tcpstore`: torch's `TCPStore` (libuv backend, torch's default) doing the same gather and answer, every
  rank a client (rank 0 the master, whose process raises its soft limit to the hard limit as the check's
  rank 0 does: under 1,024 it cannot hold 16,384 clients);
- `emulated`: `--emulate` ranks (131,072) as host leaders carrying 8 records each (16,384 leaders, and
  one for rank 0's host-mates), spread over the workers, each one TCP connection that sends the line a
  host leader sends through `probes.exchange.join` (its host's batch) and reads rank 0's greeting and
  answer, its first connect spread as `probes.hostlocal.pace` spreads a leader's; a worker drives its
  leaders from one selector loop, not a thread each: 16,384 threads calling `join` spent 20-31 s of CPU
  on their interpreter locks, starving the rank 0 this case measures on the same two cores (real
  leaders run on hosts of their own; the `check` case runs the real leaders). Rank 0 runs the real
  `resolver.check` alone in its own process: its CPU time (its thread's) and wall time, and whether
  every answer is ok;
- `limit`: `--limit-ranks` ranks (600) on hosts of 8 running `check`, rank 0 alone in a process whose
  soft and hard limit are 64 open files: the seconds until every rank has its report, and whether each
  names the limit and the fix (`ulimit -n`); one report's line is printed.

- `instructions` (not run unless named, it needs valgrind): one worker of `--instruction-ranks` ranks
  (128, a world of its own) under `valgrind --tool=callgrind --separate-threads=yes`, for `check` and
  for `floor`: the instructions each rank's thread executed, on average, for the median rank (a
  follower) and for rank 0. The load does not move these, unlike wall time: the ratio of the averages
  is the figure that compares two commits on a noisy machine.

Cases run in rounds (check, floor, tcpstore, then again) so that a change in the machine's load hits each
alike; the median, range and check/floor and check/TCPStore of the medians are printed. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import probes
import resolver
from benchmarks.bench_callgrind import callgrind
from benchmarks.bench_callgrind import missing as valgrind_missing
from benchmarks.bench_exchange import free_port
from probes.exchange import PROTOCOL, _line
from probes.hostlocal import compact, spread
from probes.limits import raise_open_files
from resolver._check import check, record

PER_HOST = 8
TIMEOUT = 120.0  # seconds a rank may take before it gives up (a failed run, reported not ok)
SOFT_LIMIT = 1024


# -- a rank's world, by formula (a 131,072-rank job's environments are not built whole in every worker) --


def host_of(rank: int) -> str:
    return f"n{rank // PER_HOST:05d}"


def env_of(rank: int, world: int, port: int) -> dict[str, str]:
    """A torchrun worker's environment (no agent store: rank 0 listens), on hosts of PER_HOST."""
    nodes = -(-world // PER_HOST)
    return {
        "GROUP_RANK": str(rank // PER_HOST),
        "GROUP_WORLD_SIZE": str(nodes),
        "LOCAL_RANK": str(rank % PER_HOST),
        "LOCAL_WORLD_SIZE": str(PER_HOST),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": str(rank),
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "default",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": "bench",
        "WORLD_SIZE": str(world),
        "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1",
    }


def resolved(rank: int, world: int, port: int) -> tuple[dict[str, str], resolver.Topology]:
    env = env_of(rank, world, port)
    return env, resolver.resolve(env, probes.fake(hostname=host_of(rank)))


# -- the workers -----------------------------------------------------------------------------------------


def threads(ranks: list[int], work: Callable[[int], Any]) -> tuple[list[Any], float]:
    """Run `work(rank)` for every rank in a thread; the results and when the last finished (monotonic)."""
    results: list[Any] = [None] * len(ranks)

    def run(i: int) -> None:
        try:
            results[i] = work(ranks[i])
        except Exception as exc:
            results[i] = exc

    pool = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(ranks))]
    for t in pool:
        t.start()
    for t in pool:
        t.join(TIMEOUT + 30)
    return results, time.monotonic()


def ready_and_wait() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def work_check(ranks: list[int], world: int, port: int) -> dict[str, Any]:
    envs = {r: env_of(r, world, port) for r in ranks}
    cpu0: list[float] = []
    # start-up is not counted on either side: the modules a first resolve imports (the source's, the fake
    # probes') are imported before the release, as the floor's are when it resolves its lines
    resolved(ranks[0], world, port)
    ready_and_wait()

    cpu: list[float] = []

    def one(r: int) -> Any:
        start = time.thread_time()
        report = check(envs[r], probes.fake(hostname=host_of(r)), timeout=TIMEOUT)
        if r == 0:
            cpu0.append(time.thread_time() - start)
        cpu.append(time.thread_time() - start)
        return report

    reports, end = threads(ranks, one)
    limit = [p.message for rep in reports if hasattr(rep, "problems") for p in rep.problems if p.kind == "limit"]
    return {
        "ok": sum(1 for rep in reports if getattr(rep, "ok", False)),
        "limit": sum(1 for rep in reports if any(p.kind == "limit" for p in getattr(rep, "problems", ()))),
        "fix": sum(1 for rep in reports if any("ulimit -n" in p.message for p in getattr(rep, "problems", ()))),
        "line": limit[0] if limit else None,
        "errors": [repr(rep)[:300] for rep in reports if not hasattr(rep, "ok")][:3]
        + [
            f"rank {r}: {p.message[:300]}"
            for r, rep in zip(ranks, reports, strict=True)
            if not getattr(rep, "ok", True)
            for p in rep.problems[:2]
        ][:4],
        "n": len(ranks),
        "end": end,
        "cpu0": cpu0[0] if cpu0 else None,
        "cpu": sum(cpu),
        "process_cpu": time.process_time(),
    }


def _floor_leader(rank: int, world: int) -> int:
    first = rank // PER_HOST * PER_HOST
    return 1 if first == 0 else first


def work_floor(ranks: list[int], world: int, port: int) -> dict[str, Any]:
    lines = {r: json.dumps(record(resolved(r, world, port)[1], host_of(r))).encode() + b"\n" for r in ranks}
    if 0 in ranks:  # rank 0 holds a connection per host, as the check's does: it raises its limit too
        raise_open_files(2 * -(-world // PER_HOST) + len(ranks) * 4)
    listeners: dict[int, socket.socket] = {}
    for r in ranks:
        if r != 0 and _floor_leader(r, world) == r:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(f"\0bench-floor/{port}/{host_of(r)}".encode())
            s.listen(PER_HOST)
            listeners[r] = s
    ready_and_wait()

    cpu: list[float] = []

    def one(r: int) -> bool:
        start = time.thread_time()
        try:
            return floor_one(r)
        finally:
            cpu.append(time.thread_time() - start)

    def floor_one(r: int) -> bool:
        lines[r] = json.dumps(record(resolved(r, world, port)[1], host_of(r))).encode() + b"\n"  # resolve, as a check
        if r == 0:
            return _floor_serve(port, world)
        if r in listeners:
            mates = min(world, r // PER_HOST * PER_HOST + PER_HOST) - r - 1
            return _floor_lead(listeners[r], mates, lines[r], port)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(f"\0bench-floor/{port}/{host_of(r)}".encode())
            s.sendall(lines[r])
            return s.recv(16) == b"1\n"

    results, end = threads(ranks, one)
    ok = sum(1 for x in results if x is True)
    return {"ok": ok, "n": len(ranks), "end": end, "cpu0": None, "cpu": sum(cpu), "process_cpu": time.process_time()}


def _floor_lead(listener: socket.socket, mates: int, mine: bytes, port: int) -> bool:
    followers = []
    data = bytearray(mine)
    for _ in range(mates):
        conn, _ = listener.accept()
        buf = bytearray()
        while not buf.endswith(b"\n"):
            buf += conn.recv(65536)
        data += buf
        followers.append(conn)
    listener.close()
    delay = 0.01
    while True:
        try:
            tcp = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            time.sleep(delay)
            delay = min(0.5, delay * 2)
    with tcp:
        tcp.sendall(data)
        ok = tcp.recv(16) == b"1\n"
    for conn in followers:
        conn.sendall(b"1\n")
        conn.close()
    return ok


def _floor_serve(port: int, world: int) -> bool:
    server = socket.create_server(("", port), backlog=4096)
    server.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ)
    conns: list[socket.socket] = []
    records = 1
    while records < world:
        for key, _ in selector.select():
            if key.fileobj is server:
                while True:
                    try:
                        conn, _ = server.accept()
                    except OSError:
                        break
                    conn.setblocking(False)
                    conns.append(conn)
                    selector.register(conn, selectors.EVENT_READ)
                continue
            conn = key.fileobj  # type: ignore[assignment]
            chunk = conn.recv(1 << 20)
            if not chunk:
                selector.unregister(conn)
                continue
            records += chunk.count(b"\n")
    for conn in conns:
        conn.setblocking(True)
        conn.sendall(b"1\n")
        conn.close()
    server.close()
    selector.close()
    return True


def work_tcpstore(ranks: list[int], world: int, port: int) -> dict[str, Any]:
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    master = None
    if 0 in ranks:
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        master = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=TIMEOUT))
    ready_and_wait()

    def one(r: int) -> bool:
        mine = json.dumps(record(resolved(r, world, port)[1], host_of(r)))
        store = master if r == 0 else TCPStore("127.0.0.1", port, timeout=timedelta(seconds=TIMEOUT))
        assert store is not None
        store.set(f"record/{r}", mine)
        if r == 0:
            store.wait([f"record/{i}" for i in range(world)])
            store.set("answer", "1")
        store.wait(["answer"])
        return bool(store.get("answer") == b"1")

    results, end = threads(ranks, one)
    return {"ok": sum(1 for x in results if x is True), "n": len(ranks), "end": end, "cpu0": None}


def leader_lines(leaders: list[int], world: int, port: int) -> dict[int, bytes]:
    """What each host leader sends rank 0 (`probes.exchange.join`'s line): its host's batch (probes/hostlocal.py)
    with the round, the job and its patience."""
    lines: dict[int, bytes] = {}
    for first in leaders:
        ranks = range(first, min(world, first // PER_HOST * PER_HOST + PER_HOST))
        records = [record(resolved(r, world, port)[1], host_of(r)) for r in ranks]
        me = {"id": records[0]["id"], "rank": first, "pid": os.getpid(), "host": host_of(first)}
        batch = {"host": host_of(first), "leader": me, **compact(records)}
        said = {**batch, "protocol": PROTOCOL, "round": "check", "job": "bench", "wait": TIMEOUT}
        lines[first] = _line(said)
    return lines


def work_emulated(leaders: list[int], world: int, port: int) -> dict[str, Any]:
    """Host leaders (a leader is named by its host's first rank, the rank-0 host's by rank 1) carrying
    their host's records, driven from one selector loop per worker: each leader is one TCP connection
    that sends the batch a host leader sends (`probes.exchange.join`'s line: the batch of
    probes/hostlocal.py with the round, job and patience) and reads rank 0's greeting and answer, its
    first connect spread over the seconds `probes.hostlocal.pace` spreads them, a refused one tried
    again 0.1 s later. Not 256 threads calling `join`: on one machine their interpreter-lock traffic
    (20-31 s of CPU for 16,384 joins) starved the rank 0 this case measures, and real leaders run on
    hosts of their own."""
    nodes = -(-world // PER_HOST)
    lines = leader_lines(leaders, world, port)
    seconds = spread(nodes)
    ready_and_wait()
    cpu = time.process_time()
    start = time.monotonic()
    due = sorted((start + random.uniform(0, seconds), first) for first in leaders)  # noqa: S311
    selector = selectors.DefaultSelector()
    got: dict[int, bytearray] = {}
    ok: dict[int, bool] = {}
    deadline = start + TIMEOUT

    def connect(first: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        got[first] = bytearray()
        selector.register(sock, selectors.EVENT_WRITE, first)

    while len(ok) < len(leaders) and time.monotonic() < deadline:
        now = time.monotonic()
        while due and due[0][0] <= now:
            connect(heapq.heappop(due)[1])
        wait = max(0.0, due[0][0] - now) if due else 1.0
        for key, events in selector.select(min(wait, 1.0)):
            sock, first = key.fileobj, key.data
            assert isinstance(sock, socket.socket)
            if events & selectors.EVENT_WRITE:
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):  # refused: rank 0 not up yet
                    selector.unregister(sock)
                    sock.close()
                    heapq.heappush(due, (time.monotonic() + 0.1, first))
                    continue
                sock.sendall(lines[first])  # 2-3 KB: the socket's buffer takes it at once
                selector.modify(sock, selectors.EVENT_READ, first)
                continue
            chunk = sock.recv(65536)
            got[first] += chunk
            parts = bytes(got[first]).split(b"\n")
            if chunk and len(parts) < 3:  # the greeting, then the answer
                continue
            answer = json.loads(parts[1]).get("answer") if len(parts) >= 3 else None
            ok[first] = isinstance(answer, dict) and not answer.get("problems") and not answer.get("missing")
            selector.unregister(sock)
            sock.close()  # after reading its answer, as a leader does: the TIME_WAIT stays on this side
    end = time.monotonic()
    selector.close()
    count = sum(min(world, f // PER_HOST * PER_HOST + PER_HOST) - f for f in leaders if ok.get(f))
    return {
        "ok": count,
        "n": sum(min(world, f // PER_HOST * PER_HOST + PER_HOST) - f for f in leaders),
        "end": end,
        "cpu": time.process_time() - cpu,
    }


ROOT = Path(__file__).resolve().parents[1]  # the repository: the workers run `python -m benchmarks.bench_scale` there


def worker_env() -> dict[str, str]:
    """This environment, with the repository first on the workers' path."""
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def instructions(case: str, ranks: int) -> list[int]:
    """The instructions each rank's thread of one `case` worker executed (callgrind's total per thread; the
    worker's main thread, which imports and starts them, left out), `ranks` ranks making the whole world."""
    env = {**worker_env(), "PYTHONHASHSEED": "0"}
    worker = [sys.executable, "-m", "benchmarks.bench_scale", "--worker", case, str(ranks), str(free_port())]
    command = [*worker, ",".join(map(str, range(ranks))), str(SOFT_LIMIT)]
    per_thread = callgrind(command, env=env, cwd=ROOT, stdin="go\n", threads=True)
    totals = [total for thread, total in per_thread.items() if thread != "01"]  # valgrind's thread 1: the main one
    if len(totals) != ranks:
        raise SystemExit(f"callgrind wrote {len(totals)} rank threads' totals for the {case} worker, not {ranks}")
    return totals


def print_instructions(ranks: int) -> None:
    if valgrind_missing():
        return
    print(
        f"instructions (callgrind, one worker of {ranks} ranks in threads, hosts of {PER_HOST}; the load does "
        "not move these)",
        flush=True,
    )
    print(f"{'ranks':>7} {'case':<9} {'per rank':>10} {'median rank':>12} {'rank 0':>9}", flush=True)
    averages = {}
    for case in ("check", "floor"):
        totals = instructions(case, ranks)
        averages[case] = sum(totals) / len(totals)
        print(
            f"{ranks:>7} {case:<9} {averages[case] / 1e6:>8.3f} M {statistics.median(totals) / 1e6:>10.3f} M "
            f"{max(totals) / 1e6:>7.2f} M",
            flush=True,
        )
    print(f"{ranks:>7} check/floor (instructions per rank) {averages['check'] / averages['floor']:.2f}x", flush=True)


def worker(argv: list[str]) -> int:
    case, world, port = argv[0], int(argv[1]), int(argv[2])
    ranks = [int(x) for x in argv[3].split(",")] if argv[3] else []
    limit = int(argv[4]) if len(argv) > 4 else SOFT_LIMIT
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard if limit >= SOFT_LIMIT else limit))
    threading.stack_size(512 * 1024)
    work = {
        "check": work_check,
        "limit": work_check,
        "floor": work_floor,
        "tcpstore": work_tcpstore,
        "emulated": work_emulated,
    }[case]
    result = work_check([0], world, port) if case == "emulated" and ranks == [0] else work(ranks, world, port)
    print(json.dumps(result), flush=True)
    return 0


# -- the driver -----------------------------------------------------------------------------------------


Run = tuple[float, bool, dict[str, Any]]  # seconds, every report ok, rank 0's figures


def run_case(case: str, parts: list[list[int]], world: int, limits: list[int]) -> Run:
    port = free_port()
    env = worker_env()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_scale",
                "--worker",
                case,
                str(world),
                str(port),
                ",".join(map(str, part)),
                str(limit),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if case == "tcpstore" else None,  # torch warns once per client
            text=True,
            env=env,
            cwd=ROOT,
        )
        for part, limit in zip(parts, limits, strict=True)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"a {case} worker did not start: {line!r}")
        released = time.monotonic()
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = [_result(p, released) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    seconds = max(r["end"] for r in results) - released
    ok = all(r["ok"] == r["n"] for r in results)
    if not ok:
        bad = [r for r in results if r["ok"] != r["n"]]
        print(
            f"        ({case}: {sum(r['n'] - r['ok'] for r in results)} ranks not ok in {len(bad)} workers; "
            f"{next((r.get('errors') for r in bad if r.get('errors')), None)})",
            flush=True,
        )
    zero = results[0]
    zero["end0"] = zero["end"] - released
    zero["all"] = results
    return seconds, ok, zero


def _result(p: subprocess.Popen[str], released: float) -> dict[str, Any]:
    """A worker's last line (its figures), or a failed run's when it printed none in time."""
    try:
        out, _ = p.communicate(timeout=max(1.0, released + TIMEOUT + 60 - time.monotonic()))
        figures: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return {"ok": 0, "n": 1, "end": float("inf"), "cpu0": None, "fix": 0, "line": None}
    return figures


def split(ranks: list[int], processes: int) -> list[list[int]]:
    """`ranks` in `processes` parts of whole hosts."""
    hosts: dict[str, list[int]] = {}
    for r in ranks:
        hosts.setdefault(host_of(r), []).append(r)
    groups = list(hosts.values())
    per = -(-len(groups) // processes)
    return [[r for g in groups[i : i + per] for r in g] for i in range(0, len(groups), per)]


def line(head: str, done: list[Run], tail: str = "") -> float:
    times = [s for s, _, _ in done]
    median = statistics.median(times)
    ok = all(good for _, good, _ in done)
    each = " ".join(f"{s:.2f}" for s in times)
    print(f"{head} {median:>9.2f} {min(times):>7.2f} {max(times):>7.2f} {ok!s:>7}  {each}{tail}", flush=True)
    return median


def main(argv: list[str] | None = None) -> int:  # noqa: PLR0915 - the cases in order, each printed
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        return worker(argv[1:])
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_scale")
    parser.add_argument("--processes", type=int, default=64)
    parser.add_argument("--per-process", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--emulate", type=int, default=131072)
    parser.add_argument("--limit-ranks", type=int, default=600)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--instruction-ranks", type=int, default=128)
    parser.add_argument(
        "--cases",
        nargs="+",
        default=["check", "floor", "tcpstore", "emulated", "limit"],
        choices=["check", "floor", "tcpstore", "emulated", "limit", "instructions"],
    )
    args = parser.parse_args(argv)
    world = args.processes * args.per_process
    cases = [c for c in ("check", "floor", "tcpstore") if c in args.cases]
    if args.no_torch and "tcpstore" in cases:
        cases.remove("tcpstore")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    if set(args.cases) - {"instructions"}:  # the wall-time table
        workers = f"{args.processes} worker processes x {args.per_process} ranks"
        print(f"{workers}, hosts of {PER_HOST}, soft limit {SOFT_LIMIT}")
        print(f"{'ranks':>7} {'case':<9} {'median s':>9} {'min s':>7} {'max s':>7} {'all ok':>7}  runs", flush=True)
    if cases:
        parts = split(list(range(world)), args.processes)
        runs: dict[str, list[Run]] = {c: [] for c in cases}
        for _ in range(args.repeats):
            for c in cases:
                runs[c].append(run_case(c, parts, world, [SOFT_LIMIT] * len(parts)))
        medians = {c: line(f"{world:>7} {c:<9}", done) for c, done in runs.items()}
        if "check" in runs:
            walls = " ".join(f"{z['end0']:.2f}" for _, _, z in runs["check"])
            cpus = " ".join(f"{z['cpu0']:.2f}" for _, _, z in runs["check"])
            print(f"{world:>7} check's rank 0: wall {walls} s, CPU {cpus} s", flush=True)
        for c, done in runs.items():
            each = [sum(r.get("cpu", 0) for r in z["all"]) for _, _, z in done]
            whole = [sum(r.get("process_cpu", 0) for r in z["all"]) for _, _, z in done]
            print(
                f"{world:>7} {c}: the ranks' CPU {' '.join(f'{x:.1f}' for x in each)} s, "
                f"the workers' {' '.join(f'{x:.1f}' for x in whole)} s",
                flush=True,
            )
        if "check" in medians and "floor" in medians:
            print(f"{world:>7} check/floor (medians) {medians['check'] / medians['floor']:.2f}x", flush=True)
        if "check" in medians and "tcpstore" in medians:
            print(f"{world:>7} check/tcpstore (medians) {medians['check'] / medians['tcpstore']:.2f}x", flush=True)
    if "emulated" in args.cases:
        nodes = -(-args.emulate // PER_HOST)
        leaders = [1] + [h * PER_HOST for h in range(1, nodes)]
        parts = [[0], *[leaders[i :: args.processes] for i in range(args.processes)]]
        done = []
        for _ in range(args.repeats):
            seconds, ok, zero = run_case("emulated", parts, args.emulate, [SOFT_LIMIT] * len(parts))
            done.append((seconds, ok, zero))
            print(
                f"        emulated run: {seconds:.2f} s to the last leader's answer; rank 0 wall {zero['end0']:.2f} s, "
                f"CPU {zero['cpu0']:.2f} s; the leaders' CPU {sum(r.get('cpu', 0) for r in zero['all'][1:]):.2f} s; "
                f"all ok {ok}",
                flush=True,
            )
        line(
            f"{args.emulate:>7} {'emulated':<9}",
            done,
            f"  ({len(leaders)} leaders x {PER_HOST} records; goal under 10 s)",
        )
        print(
            f"{args.emulate:>7} rank 0 CPU (median) {statistics.median(z['cpu0'] for _, _, z in done):.2f} s, "
            f"wall (median) {statistics.median(z['end0'] for _, _, z in done):.2f} s",
            flush=True,
        )
    if "limit" in args.cases:
        ranks = list(range(1, args.limit_ranks))
        parts = [[0], *split(ranks, 4)]
        seconds, ok, zero = run_case("limit", parts, args.limit_ranks, [64] + [SOFT_LIMIT] * (len(parts) - 1))
        named = sum(r["fix"] for r in zero["all"])
        print(
            f"{args.limit_ranks:>7} limit 64  {seconds:.2f} s until every report; {named} of {args.limit_ranks} "
            f"reports name the limit and `ulimit -n` (goal: all, within 20 s)",
            flush=True,
        )
        print(f"        the line: problem: {zero['line'] or next((r['line'] for r in zero['all'] if r['line']), None)}")
    if "instructions" in args.cases:
        print_instructions(args.instruction_ranks)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
