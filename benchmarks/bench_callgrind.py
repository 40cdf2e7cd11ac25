"""Start-up cost in instructions, side by side with `python -c "import attrs"` (the one runtime dependency).

    python -m benchmarks.bench_callgrind      (or: python benchmarks/bench_callgrind.py)

Each command runs once under `valgrind --tool=callgrind` and the table gives the instructions it
executed (callgrind's `Ir` total) and their ratio to the floor. A plain run before it compiles any
module edited since its last import to .pyc, outside the measured run. Instruction counts do not
move with the load of a noisy machine, unlike wall time, and with the hash seed fixed a second run
gives the same counts. Every command runs with the same small environment (PATH, HOME, PYTHONPATH,
PYTHONHASHSEED=0) plus the launcher's variables, in the same empty working folder, so site-packages,
`.pth` files and the folder it is started from cost the same on both sides. Nothing is asserted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # as a script, too: python benchmarks/bench_callgrind.py

from benchmarks.bench_startup import SLURM, TORCHRUN

ROOT = Path(__file__).resolve().parents[1]
RESOLVE = "import os, resolver; resolver.resolve(os.environ)"
CASES = [  # (name, arguments to python, launcher variables)
    ("import attrs (floor)", ["-c", "import attrs"], {}),
    ("resolve: default", ["-c", RESOLVE], {}),
    ("resolve: torchrun", ["-c", RESOLVE], TORCHRUN),
    ("resolve: slurm", ["-c", RESOLVE], SLURM),
    ("python -m resolver --format env", ["-m", "resolver", "--format", "env"], TORCHRUN),
]
GOALS = {"resolve": 1.25, "python -m resolver": 1.40}  # issue 25's guard, as ratios to the floor


def instructions(arguments: list[str], variables: dict[str, str], workdir: str) -> int:
    """Callgrind's instruction total for `python ARGUMENTS`, started in `workdir` (an empty folder:
    `python -c` puts the working folder first on sys.path, so what it holds is listed and searched)."""
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(ROOT),
        "PYTHONHASHSEED": "0",  # string hashing decides dict and set layouts: one seed, one count
        **variables,
    }
    # once without valgrind first: a module edited since its last import is compiled to .pyc there,
    # not in the measured run
    subprocess.run([sys.executable, *arguments], env=environ, cwd=workdir, capture_output=True, check=False)
    (total,) = callgrind([sys.executable, *arguments], env=environ, cwd=workdir).values()
    return total


def callgrind(
    command: list[str], *, env: dict[str, str], cwd: str | Path, stdin: str = "", threads: bool = False
) -> dict[str, int]:
    """Run `command` once under `valgrind --tool=callgrind` and return callgrind's instruction total per
    output: one for the whole process, or with `threads` one per thread (`--separate-threads=yes`), keyed
    by valgrind's thread number ("01" is the main thread). SystemExit when the command fails."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        options = ["--separate-threads=yes"] if threads else []
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", *options, f"--callgrind-out-file={out}", *command],
            input=stdin,
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"{command[1:]} failed under valgrind:\n{done.stderr[-2000:]}")
        totals = {}
        for path in sorted(Path(folder).glob("callgrind.out-*")) if threads else [out]:
            match = re.search(r"^(?:summary|totals): (\d+)", path.read_text(), re.MULTILINE)
            if match is None:
                raise SystemExit(f"no instruction total in callgrind's output {path.name} for {command[1:]}")
            totals[path.name.rpartition("-")[2] if threads else "all"] = int(match[1])
        return totals


def missing() -> bool:
    """Whether valgrind is missing here; then it says so (a benchmark that needs it is skipped, not failed)."""
    if shutil.which("valgrind") is not None:
        return False
    print("valgrind is not installed (apt-get install valgrind): skipped", flush=True)
    return True


def main() -> int:
    if missing():
        return 0
    with tempfile.TemporaryDirectory() as workdir:
        counts = {name: instructions(arguments, variables, workdir) for name, arguments, variables in CASES}
    floor = counts["import attrs (floor)"]
    print(f"{'command':<34} {'instructions':>14} {'vs attrs':>9}  goal")
    for name, count in counts.items():
        goal = next((f"<= {g:.2f}x" for prefix, g in GOALS.items() if name.startswith(prefix)), "")
        print(f"{name:<34} {count:>14,} {count / floor:>8.3f}x  {goal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
