"""Benchmark resolver.hostlist against python-hostlist, side by side in one run.

    python -m benchmarks.bench_hostlist [--quick]

For each list shape (simple ``n[1-N]``, zero-padded ``n[0000001-N]``, two-dimensional
``rack[1-R]-node[0001-C]``) and N in 10**3 .. 10**6 it times expand (into a list), count, first and
compress with timeit (several repeats; min and median), and the python-hostlist equivalents
(``expand_hostlist``; ``len(expand_hostlist())`` and ``expand_hostlist()[0]``, since it has no count
or first; ``collect_hostlist``, which also sorts and de-duplicates). Then the growth exponent (slope
of log time over log N) of every operation, and peak memory (tracemalloc) of expanding into a list
against count and first. Nothing is asserted: the numbers are for reading.
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
import timeit
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from resolver.hostlist import compress, count, expand, first

try:
    import hostlist as pyhostlist
except ImportError:
    theirs: ModuleType | None = None
else:
    theirs = pyhostlist
    pyhostlist.MAX_SIZE = 10**8  # python-hostlist refuses ranges of more than 100000 hosts by default

QUICK = "--quick" in sys.argv
SIZES = [10**3, 10**4, 10**5] if QUICK else [10**3, 10**4, 10**5, 10**6]
REPEAT = 3 if QUICK else 5
MIN_RUN = 0.02  # seconds: small cases are looped until one measurement takes at least this long


def shapes(size: int) -> dict[str, str]:
    digits = round(math.log10(size))
    columns = 10 ** ((digits + 1) // 2)  # 10**3 -> 10 x 100, 10**6 -> 1000 x 1000
    return {
        "simple": f"n[1-{size}]",
        "padded": f"n[{1:07d}-{size:07d}]",
        "2-dim": f"rack[1-{size // columns}]-node[{1:04d}-{columns:04d}]",
    }


def measure(call: Callable[[], object]) -> tuple[float, float]:
    """(min, median) seconds per call over REPEAT measurements."""
    timer = timeit.Timer(call)
    number = 1
    while True:
        if timer.timeit(number) >= MIN_RUN or number >= 10**6:
            break
        number *= 10
    times = [elapsed / number for elapsed in timer.repeat(repeat=REPEAT, number=number)]
    return min(times), statistics.median(times)


def operations(hostlist: str, hosts: list[str]) -> dict[str, tuple[Callable[[], object], Callable[[], object] | None]]:
    """Each operation: (ours, python-hostlist's equivalent or None)."""
    limit = len(hosts)
    ours: dict[str, Callable[[], object]] = {
        "expand": lambda: list(expand(hostlist, limit=limit)),
        "count": lambda: count(hostlist),
        "first": lambda: first(hostlist),
        "compress": lambda: compress(hosts),
    }
    if theirs is None:
        return {name: (call, None) for name, call in ours.items()}
    module = theirs
    return {
        "expand": (ours["expand"], lambda: module.expand_hostlist(hostlist)),
        "count": (ours["count"], lambda: len(module.expand_hostlist(hostlist))),
        "first": (ours["first"], lambda: module.expand_hostlist(hostlist)[0]),
        "compress": (ours["compress"], lambda: module.collect_hostlist(hosts)),
    }


def seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:7.2f} {unit}"
    return f"{value / 1e-9:7.0f} ns"


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(N)."""
    xs = [math.log(size) for size, _ in points]
    ys = [math.log(time) for _, time in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum((x - mean_x) ** 2 for x in xs)


def peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak


def main() -> None:
    print(f"python {sys.version.split()[0]}; repeat={REPEAT}; times are per call")
    if theirs is None:
        print("python-hostlist is not importable: its columns are skipped (pip install python-hostlist)")
    else:
        print(f"python-hostlist {getattr(theirs, '__version__', '?')} (MAX_SIZE raised to 10**8)")
        print("  its count/first are len(expand_hostlist(s)) / expand_hostlist(s)[0]; its compress is")
        print("  collect_hostlist, which also sorts and de-duplicates")
    print()
    header = f"{'op':9} {'shape':7} {'N':>8} | {'ours min':>10} {'ours med':>10} |"
    header += f" {'theirs min':>10} {'theirs med':>10} | {'speed-up':>9}" if theirs else ""
    print(header)
    print("-" * len(header))
    growth: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for op in ("expand", "count", "first", "compress"):
        for shape in ("simple", "padded", "2-dim"):
            for size in SIZES:
                hostlist = shapes(size)[shape]
                hosts = list(expand(hostlist, limit=size))
                assert len(hosts) == size
                ours, other = operations(hostlist, hosts)[op]
                our_min, our_median = measure(ours)
                growth.setdefault((op, shape, "ours"), []).append((size, our_min))
                line = f"{op:9} {shape:7} {size:>8} | {seconds(our_min)} {seconds(our_median)} |"
                if other is not None:
                    their_min, their_median = measure(other)
                    growth.setdefault((op, shape, "theirs"), []).append((size, their_min))
                    line += f" {seconds(their_min)} {seconds(their_median)} | {their_min / our_min:8.1f}x"
                print(line, flush=True)
        print()

    print("growth exponent (slope of log time over log N; 1 = linear, 0 = constant)")
    print(f"{'op':9} {'shape':7} | {'ours':>6} | {'theirs':>6}")
    for op in ("expand", "count", "first", "compress"):
        for shape in ("simple", "padded", "2-dim"):
            mine = f"{slope(growth[(op, shape, 'ours')]):6.2f}"
            points = growth.get((op, shape, "theirs"))
            print(f"{op:9} {shape:7} | {mine} | {f'{slope(points):6.2f}' if points else '     -'}")
    print()

    lightning_first()

    print("peak memory (tracemalloc) at the largest N")
    for shape in ("simple", "padded", "2-dim"):
        hostlist = shapes(SIZES[-1])[shape]
        print(f"  {shape} {hostlist}")
        for name, peak in memory(hostlist, SIZES[-1]):
            print(f"    {name:20} {peak:>14,} bytes")


def lightning_first() -> None:
    """Lightning's own nodelist resolver (SLURMEnvironment.resolve_root_node_address) vs `first`."""
    try:
        from lightning.fabric.plugins.environments.slurm import SLURMEnvironment
    except ImportError:
        print("lightning is not importable: its nodelist column is skipped (pip install lightning)")
        return
    print("first host: ours vs Lightning's SLURMEnvironment.resolve_root_node_address")
    print(f"{'shape':7} {'N':>8} | {'ours min':>10} {'lightning min':>13} | {'ratio':>7} | ours / Lightning's answer")
    for size in SIZES:
        for shape, text in shapes(size).items():
            our_min, _ = measure(functools.partial(first, text))
            their_min, _ = measure(functools.partial(SLURMEnvironment.resolve_root_node_address, text))
            answers = f"{first(text)} / {SLURMEnvironment.resolve_root_node_address(text)}"
            print(
                f"{shape:7} {size:>8} | {seconds(our_min)} {seconds(their_min):>13} | {their_min / our_min:6.1f}x | "
                f"{answers}"
            )
    print()


def memory(hostlist: str, size: int) -> list[tuple[str, int]]:
    rows = [
        ("list(expand())", peak_bytes(lambda: list(expand(hostlist, limit=size)))),
        ("for _ in expand()", peak_bytes(lambda: sum(1 for _ in expand(hostlist, limit=size)))),
        ("count()", peak_bytes(lambda: count(hostlist))),
        ("first()", peak_bytes(lambda: first(hostlist))),
    ]
    if theirs is not None:
        module = theirs
        rows.append(("expand_hostlist()", peak_bytes(lambda: module.expand_hostlist(hostlist))))
    return rows


if __name__ == "__main__":
    main()
