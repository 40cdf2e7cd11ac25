"""In one process: one `resolve` per source vs reading the same properties from Lightning's classes.

    python -m benchmarks.bench_inprocess [--number 2000]

Both read the same mapping (Lightning reads os.environ, so the mapping is installed there for the
run). Lightning's SLURM and LSF classes write MASTER_ADDR/MASTER_PORT as a side effect of reading
them; the environment is restored after every Lightning call so each call does the same work.
Prints min and median per call over repeats, and the ratio Lightning / resolver. Needs
`pip install 'cluster-topology[bench]'` (lightning).
"""

from __future__ import annotations

import argparse
import functools
import os
import socket
import statistics
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import probes
import resolver
from benchmarks.bench_startup import SLURM, TORCHRUN

LSF = {  # LSB_DJOB_RANKFILE: a file of this run's own (`cases`), so that two runs at once do not share one
    "LSB_JOBID": "1234",
    "JSM_NAMESPACE_LOCAL_RANK": "1",
    "JSM_NAMESPACE_SIZE": "4",
    "JSM_NAMESPACE_RANK": "3",
    "JSM_NAMESPACE_LOCAL_SIZE": "2",
}


def cases(rankfile: str) -> dict[str, tuple[dict[str, str], str]]:
    """Each source's environment and the Lightning class that reads it; LSF's rank file is `rankfile`."""
    return {
        "torchelastic": (TORCHRUN, "TorchElasticEnvironment"),
        "slurm": (SLURM, "SLURMEnvironment"),
        "lsf": ({**LSF, "LSB_DJOB_RANKFILE": rankfile}, "LSFEnvironment"),
        "lightning": ({"MASTER_PORT": "29500"}, "LightningEnvironment"),
        "kubeflow": ({"WORLD_SIZE": "4", "RANK": "1", "MASTER_ADDR": "m", "MASTER_PORT": "1"}, "KubeflowEnvironment"),
    }


def lightning_reader(cls_name: str) -> Callable[[], Any] | None:
    try:
        from lightning.fabric.plugins import environments
    except ImportError:
        return None
    cls = getattr(environments, cls_name)

    def read() -> Any:
        saved = dict(os.environ)
        e = cls()
        out = (e.world_size(), e.global_rank(), e.local_rank(), e.node_rank(), e.main_address, e.main_port)
        if os.environ != saved:  # undo the side effects so every call does the same work
            os.environ.clear()
            os.environ.update(saved)
        return out

    return read


def measure(fn: Callable[[], Any], number: int, repeat: int) -> tuple[float, float]:
    times = [t / number for t in timeit.repeat(fn, number=number, repeat=repeat)]
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    host = socket.gethostname()
    with tempfile.TemporaryDirectory(prefix="cluster-topology-bench-") as tmp:
        rankfile = os.path.join(tmp, "rankfile")
        with open(rankfile, "w") as handle:  # this host must be a compute host for both
            handle.write(f"batch1\nother\nother\n{host}\n{host}\n")
        run(cases(rankfile), args.number, args.repeat)


def run(table: dict[str, tuple[dict[str, str], str]], number: int, repeat: int) -> None:
    live = probes.system()
    print(
        f"{'source':<13} {'resolver min':>13} {'median':>9} {'lightning min':>14} {'median':>9} {'ratio (median)':>15}"
    )
    for source, (environ, cls_name) in table.items():
        r_min, r_med = measure(functools.partial(resolver.resolve, environ, live, source=source), number, repeat)
        reader = lightning_reader(cls_name)
        if reader is None:
            print(f"{source:<13} {r_min * 1e6:11.1f}us {r_med * 1e6:7.1f}us   (lightning not installed)")
            continue
        before = dict(os.environ)
        os.environ.clear()
        os.environ.update({"PATH": before.get("PATH", ""), **environ})
        try:
            reader()  # first call imports what it needs
            l_min, l_med = measure(reader, number, repeat)
        finally:
            os.environ.clear()
            os.environ.update(before)
        print(
            f"{source:<13} {r_min * 1e6:11.1f}us {r_med * 1e6:7.1f}us {l_min * 1e6:12.1f}us {l_med * 1e6:7.1f}us "
            f"{l_med / r_med:14.2f}x"
        )


if __name__ == "__main__":
    main()
