"""Whole-process cost of `import resolver` + one resolve, side by side with its floor.

    python -m benchmarks.bench_startup [--runs 40]

Every command is run in interleaved rounds (so machine noise hits all alike); the table gives
the minimum and median wall time and the ratio of each to the floor `python -c "import attrs"`
(attrs is the one runtime dependency). Lightning's environments are measured too when
`lightning` is installed (`pip install 'cluster-topology[bench]'`). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "none",
    "WORLD_SIZE": "8",
    "RANK": "3",
    "LOCAL_RANK": "1",
    "GROUP_RANK": "0",
    "LOCAL_WORLD_SIZE": "4",
    "MASTER_ADDR": "10.1.2.3",
    "MASTER_PORT": "29500",
}
# homogeneous (2 tasks on each of 2 nodes): Lightning refuses --ntasks without --ntasks-per-node
SLURM = {
    "SLURM_NTASKS": "4",
    "SLURM_NTASKS_PER_NODE": "2",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_STEP_ID": "0",
    "SLURM_JOB_ID": "10",
    "SLURM_JOB_NAME": "train",
    "SLURM_NODELIST": "ci[1-2]",
    "SLURM_NNODES": "2",
    "SLURM_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NODELIST": "ci[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NUM_NODES": "2",
}
ENVS = {"default": {}, "torchrun": TORCHRUN, "slurm": SLURM}

LIGHTNING = (
    "import os; from lightning.fabric.plugins.environments import {cls}; e={cls}(); "
    "(e.world_size(), e.global_rank(), e.local_rank(), e.node_rank(), e.main_address, e.main_port)"
)
LIGHTNING_CLASS = {
    "default": "LightningEnvironment",
    "torchrun": "TorchElasticEnvironment",
    "slurm": "SLURMEnvironment",
}


def commands(env_name: str) -> dict[str, str]:
    out = {
        "python -c pass": "pass",
        "import attrs (floor)": "import attrs",
        "import resolver; resolve": "import resolver, os; resolver.resolve(os.environ)",
    }
    if importlib.util.find_spec("lightning") is not None:
        out["lightning environments"] = LIGHTNING.format(cls=LIGHTNING_CLASS[env_name])
    return out


def measure(code: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--envs", nargs="*", default=list(ENVS))
    args = parser.parse_args()
    base = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}
    print(f"python {sys.version.split()[0]}, {args.runs} interleaved runs per command")
    for env_name in args.envs:
        env = {**base, **ENVS[env_name]}
        cmds = commands(env_name)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for code in cmds.values():  # warm the page cache once
            measure(code, env)
        for _ in range(args.runs):
            for name, code in cmds.items():
                times[name].append(measure(code, env))
        floor_min = min(times["import attrs (floor)"])
        floor_med = statistics.median(times["import attrs (floor)"])
        print(f"\n[{env_name} environment]")
        print(f"  {'command':<28} {'min ms':>8} {'median ms':>10} {'min/floor':>10} {'median/floor':>13}")
        for name, values in times.items():
            lo, med = min(values), statistics.median(values)
            print(f"  {name:<28} {lo * 1e3:8.1f} {med * 1e3:10.1f} {lo / floor_min:10.3f} {med / floor_med:13.3f}")
        if "lightning environments" in times:
            ratio = statistics.median(times["lightning environments"]) / statistics.median(
                times["import resolver; resolve"]
            )
            print(f"  lightning / resolver (median): {ratio:.1f}x")


if __name__ == "__main__":
    main()
