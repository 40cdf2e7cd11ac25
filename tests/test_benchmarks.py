"""The benchmarks run as `python -m benchmarks[.NAME]` from the repository's root, and as scripts."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import RUNS
from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("module", [module for _, (module, *_) in RUNS])
def test_each_benchmark_imports_as_the_runner_starts_it(module: str) -> None:
    loaded = importlib.import_module(f"benchmarks.{module}")
    assert callable(loaded.main)
    assert f"python -m benchmarks.{module}" in (loaded.__doc__ or "")  # the command its docstring gives


@pytest.mark.parametrize("module", [module for _, (module, *_) in RUNS])
def test_each_benchmark_imports_as_a_script(module: str) -> None:
    """`python benchmarks/NAME.py` from anywhere: what its module imports is found (its `main` is not run)."""
    script = ROOT / "benchmarks" / f"{module}.py"
    run = f"import runpy; runpy.run_path({str(script)!r}, run_name='imported')"
    done = subprocess.run([sys.executable, "-c", run], cwd="/", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_exchange_benchmark_prints_each_run_with_when_rank_0_began(capsys: pytest.CaptureFixture[str]) -> None:
    """A small run of bench_exchange: every case's runs as seconds/rank 0's start, all ok, and the ratio."""
    from benchmarks import bench_exchange

    assert bench_exchange.main(["--ranks", "8", "--repeats", "2", "--no-torch", "--hostile", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[1]: line.split() for line in lines if line.split()[:1] in (["8"], ["4"])}
    for case in ("check", "floor", "hostile"):
        row = rows[case]
        assert row[5] == "True", row  # every report ok
        runs = [run.split("/") for run in row[6:8]]
        assert all(float(seconds) >= float(late) >= 0 for seconds, late in runs), row
        low, high = min(float(seconds) for seconds, _ in runs), max(float(seconds) for seconds, _ in runs)
        assert (float(row[3]), float(row[4])) == (round(low, 2), round(high, 2)), row  # min and max columns
    assert any("check/floor (medians)" in line for line in lines)


def test_the_scale_benchmark_runs_every_case_in_separate_processes(capsys: pytest.CaptureFixture[str]) -> None:
    """A small run of bench_scale: check and floor all ok, the emulated leaders all ok, and at rank 0's limit of
    64 files every one of 600 reports names the limit and `ulimit -n`."""
    from benchmarks import bench_scale

    argv = ["--processes", "2", "--per-process", "16", "--repeats", "1", "--emulate", "64", "--limit-ranks", "600"]
    assert bench_scale.main([*argv, "--cases", "check", "floor", "emulated", "limit"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.split()[:1] in (["32"], ["64"])}
    assert rows["check"][5] == "True" and rows["floor"][5] == "True", out
    assert rows["emulated"][5] == "True", out
    assert "600 of 600 reports name the limit and `ulimit -n`" in out
    assert "ulimit -n 1024" in out


@pytest.mark.valgrind
def test_the_scale_benchmark_counts_each_rank_threads_instructions(capsys: pytest.CaptureFixture[str]) -> None:
    """`--cases instructions`: one worker of 8 ranks (one host) under callgrind for check and for floor, a row
    each with the instructions per rank, the median rank's and rank 0's, and the ratio of the averages."""
    require_tool("valgrind")
    from benchmarks import bench_scale

    assert bench_scale.main(["--cases", "instructions", "--instruction-ranks", "8"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.split()[:1] == ["8"]}
    assert "median" not in out.split("instructions (")[0], out  # no wall-time table without its cases
    for case in ("check", "floor"):
        per_rank, median, zero = (float(rows[case][i]) for i in (2, 4, 6))
        assert 0 < median <= per_rank <= zero, out  # rank 0 does the most, a follower the least
    ratio = float(rows["check/floor"][-1].removesuffix("x"))
    assert abs(ratio - float(rows["check"][2]) / float(rows["floor"][2])) < 0.01, out  # of the rounded averages


def test_the_exec_exchange_benchmark_gives_every_rank_its_place_both_ways(capsys: pytest.CaptureFixture[str]) -> None:
    """A small run of bench_exec_exchange: 24 ranks on 3 hosts of 8, every rank right by census and by
    allgather, and rank 0 takes fewer connections by census (a batch per host) than by allgather (23)."""
    from benchmarks import bench_exec_exchange

    assert bench_exec_exchange.main(["--ranks", "24", "--repeats", "1", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[1]: line.split() for line in out.splitlines() if line.split()[:1] == ["24"]}
    assert rows["census"][-1] == "24/24" and rows["allgather"][-1] == "24/24", out
    connections = {mode: int(row[row.index("connections") + 1]) for mode, row in rows.items() if mode != "median:"}
    assert connections["allgather"] == 23 and 3 <= connections["census"] < 23, out


@pytest.mark.mpi
def test_the_mpi_benchmark_runs_under_mpirun() -> None:
    """A small run of bench_mpi under a real mpirun: its rank mode checks what resolve says of the comm
    before timing (an `Origin`, not text: it once called `.startswith` on it and every run died), and
    the table has every case at 2 ranks."""
    require_tool("mpirun")
    pytest.importorskip("mpi4py")
    out = run_benchmark("bench_mpi", ["--ranks", "2", "--repeats", "3"])
    cases = {line.split()[1] for line in out.splitlines() if line.split()[:1] == ["2"]}
    assert cases == {"allgather", "allgather+cpu", "resolve(env)", "resolve(env)+hosts", "resolve", "resolve+hosts"}


@pytest.mark.parametrize(
    ("module", "argv", "rows"),
    [
        (
            "bench_inprocess",
            ["--number", "5", "--repeat", "1"],
            ["torchelastic", "slurm", "lsf", "lightning", "kubeflow"],
        ),
        ("bench_startup", ["--runs", "1", "--envs", "torchrun"], ["python -c pass", "import attrs (floor)"]),
        ("bench_hostlist", ["--quick"], ["expand", "count", "first", "compress", "growth exponent", "peak memory"]),
    ],
)
def test_the_small_benchmarks_run_and_print_every_row(module: str, argv: list[str], rows: list[str]) -> None:
    """A short run of each benchmark no other test runs: exit 0 and a row for every case, with or without
    lightning installed."""
    out = run_benchmark(module, argv)
    starts = [line.strip() for line in out.splitlines()]
    for row in rows:
        assert any(line.startswith(row) for line in starts), out


def run_benchmark(module: str, argv: list[str]) -> str:
    """`python -m benchmarks.MODULE ARGV` from the repository's root, to success: its output."""
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout
