"""Every benchmark, one after the other, in one run: `python -m benchmarks`.

Needs `pip install -e '.[bench,mpi]'` (lightning, python-hostlist, mpi4py) and Open MPI's mpirun;
a comparison whose tool is missing says so and is skipped. Prints ratios measured side by side;
asserts nothing (the machine is noisy).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = [
    (
        "start-up in instructions (valgrind callgrind): import + one resolve, and the CLI, vs import attrs",
        ["bench_callgrind"],
    ),
    (
        "start-up: import + one resolve, vs import attrs, python -c pass and Lightning",
        ["bench_startup", "--runs", "30"],
    ),
    ("in process: one resolve per source vs Lightning's classes", ["bench_inprocess"]),
    ("hostlists: expand/count/first/compress, 10^3..10^6 hosts, vs python-hostlist", ["bench_hostlist"]),
    ("MPI: resolve at 2, 4, 8 ranks vs one allgather of hostnames", ["bench_mpi", "--ranks", "2", "4", "8"]),
    (
        "exec's exchange: the census through host leaders vs the allgather, 256 and 1,024 ranks on hosts of 8",
        ["bench_exec_exchange", "--ranks", "256", "1024", "--repeats", "3"],
    ),
]


def main() -> int:
    failed = 0
    for title, (module, *args) in RUNS:
        print(f"\n## {title}\n", flush=True)
        if module == "bench_mpi" and shutil.which("mpirun") is None:
            print("(skipped: mpirun not on PATH)")
            continue
        command = [sys.executable, "-m", f"benchmarks.{module}", *args]  # each imports its siblings as benchmarks.*
        failed += subprocess.run(command, cwd=HERE.parent, check=False).returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
