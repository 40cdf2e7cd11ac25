"""torch_xla for real (PJRT_DEVICE=CPU), the FakeXla contract, and no torch_xla for any other source.

torch_xla 2.9.0 installs only beside torch 2.9.0, so its tests run in a venv of their own, built by
`tests/launchers/xla_venv.sh`. Tests marked `xla` need torch_xla in this interpreter; in the main
venv they skip, and `test_xla_tests_in_their_venv` runs them with the venv's python instead
(`XLA_PYTHON`, default /opt/cluster-topology-xla-venv/bin/python), failing in CI when it is missing.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
import typing
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import resolver
from probes import XlaRuntime
from probes.fakes import FakeXla
from resolver.sources.xla import FUNCTIONS
from tests.conftest import IN_CI

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_XLA_PYTHON = Path("/opt/cluster-topology-xla-venv/bin/python")
HAS_TORCH_XLA = importlib.util.find_spec("torch_xla") is not None
XLA_SKIP = "torch_xla is not importable here: test_xla_tests_in_their_venv runs this in the xla venv"

# One process of a job: resolve with the live probes (the first to touch the runtime), then ask
# the live probe and torch_xla.runtime itself. `launch` runs it in each of torch_xla.launch's workers.
WORKER = """
import json, os, sys, threading

import probes
import resolver

FUNCTIONS = ("world_size", "global_ordinal", "local_ordinal", "host_index")
PRINT = threading.Lock()  # the workers are threads of one process: keep their lines whole


def worker(index):
    imported_before = "torch_xla" in sys.modules
    topology = resolver.resolve(os.environ, source="xla")
    live = probes.system().xla()
    import torch_xla.runtime as xr

    row = {
        "index": index,
        "imported_before": imported_before,
        "topology": topology.to_dict(),
        "probe": {name: getattr(live, name)() for name in FUNCTIONS},
        "truth": {name: getattr(xr, name)() for name in FUNCTIONS},
        "types": sorted({type(getattr(xr, name)()).__name__ for name in FUNCTIONS}),
        "probe_is_runtime": live is xr,
    }
    with PRINT:
        print("ROW " + json.dumps(row), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "single":
        worker(None)
    else:
        import torch_xla

        torch_xla.launch(worker)
"""

# Every source but xla, forced and auto-detected, with the live probes (xla among them) except for
# those that would need a real cluster; then `explain`. torch_xla must stay out of sys.modules.
OTHER_SOURCES = """
import json, os, sys, tempfile

import attrs

import probes
import resolver
from probes.fakes import FakeComm

folder = tempfile.mkdtemp()
rankfile = os.path.join(folder, "rankfile")
with open(rankfile, "w") as handle:
    handle.write("batch1\\nh1\\n")
env = {
    "TORCHELASTIC_RUN_ID": "r", "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0",
    "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
    "SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0", "SLURM_NTASKS": "1",
    "SLURM_NODELIST": "h1", "SLURM_JOB_NAME": "job", "SLURM_STEP_ID": "0", "SLURM_TASKS_PER_NODE": "1",
    "LSB_JOBID": "7", "LSB_DJOB_RANKFILE": rankfile, "JSM_NAMESPACE_SIZE": "1", "JSM_NAMESPACE_RANK": "0",
    "JSM_NAMESPACE_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "PMI_RANK": "0", "PMI_SIZE": "1",
}
bundle = attrs.evolve(
    probes.system(), hostname=lambda: "h1", comm=lambda: FakeComm(rank=0, size=1), which=lambda name: None
)
resolved, failed = [], []
for source in resolver.registered():
    if source.name == "xla":
        continue
    for subset in (env, {}):
        try:
            resolved.append(resolver.resolve(subset, bundle, source=source.name).source)
        except resolver.TopologyError as exc:
            failed.append(f"{source.name}: {exc}")
for variable in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "LSB_JOBID", "OMPI_COMM_WORLD_RANK"):
    auto = {k: v for k, v in env.items() if k != variable}
    try:
        resolved.append(resolver.resolve(auto, bundle).source)
    except resolver.TopologyError as exc:
        failed.append(f"auto: {exc}")
    str(resolver.explain(auto))
loaded = sorted(m for m in sys.modules if m.split(".")[0] == "torch_xla")
print(json.dumps({"loaded": loaded, "resolved": sorted(set(resolved)), "failed": failed}))
"""


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without launcher variables (torch_xla.launch obeys TORCHELASTIC_*), plus `extra`."""
    launchers = ("TORCHELASTIC_", "SLURM_", "OMPI_", "PMI", "LSB_", "JSM_", "PJRT_", "CPU_NUM_DEVICES", "TPU_")
    ranks = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")
    env = {k: v for k, v in os.environ.items() if not k.startswith(launchers) and k not in ranks}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def other_sources_report(python: str) -> dict[str, Any]:
    out = subprocess.run(
        [python, "-c", OTHER_SOURCES], capture_output=True, text=True, timeout=300, env=clean_env(), cwd=ROOT
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    return report


def check_other_sources(python: str) -> None:
    report = other_sources_report(python)
    assert report["loaded"] == []
    assert {"torchelastic", "lsf", "kubeflow", "lightning"} <= set(report["resolved"]), report["failed"]


def test_other_sources_never_import_torch_xla() -> None:
    check_other_sources(sys.executable)


@pytest.mark.xla
def test_other_sources_never_import_torch_xla_where_it_is_installed() -> None:
    if not HAS_TORCH_XLA:
        pytest.skip(XLA_SKIP)
    check_other_sources(sys.executable)


def xla_python() -> str | None:
    configured = os.environ.get("XLA_PYTHON")
    if configured:
        return configured
    return str(DEFAULT_XLA_PYTHON) if DEFAULT_XLA_PYTHON.exists() else None


def test_xla_tests_in_their_venv(tmp_path: Path) -> None:
    """The `xla` tests of this file, run by the xla venv's pytest; none may skip there."""
    if HAS_TORCH_XLA:
        pytest.skip("this interpreter has torch_xla: the xla tests run here directly")
    python = xla_python()
    if python is None or not Path(python).exists():
        message = f"no xla venv python (XLA_PYTHON={python!r}): build it with tests/launchers/xla_venv.sh"
        if IN_CI:
            pytest.fail(f"{message} (CI must build it: see .ci/run)")
        pytest.skip(message)
    junit = tmp_path / "xla.xml"
    command = [python, "-m", "pytest", "-m", "xla", "-p", "no:cacheprovider", "-W", "error", "-q"]
    out = subprocess.run(
        [*command, f"--junitxml={junit}", str(Path(__file__).relative_to(ROOT))],
        capture_output=True,
        text=True,
        timeout=900,
        env=clean_env(),
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stdout[-5000:] + out.stderr[-3000:]
    suite = ET.parse(junit).getroot()  # noqa: S314 - the report our own pytest run just wrote
    suite = suite if suite.tag == "testsuite" else suite[0]
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    assert counts["failures"] == counts["errors"] == counts["skipped"] == 0, out.stdout[-5000:]
    assert counts["tests"] >= 4, counts


# -- in the xla venv -----------------------------------------------------------------------------


@pytest.fixture
def worker(tmp_path: Path) -> Path:
    if not HAS_TORCH_XLA:
        pytest.skip(XLA_SKIP)
    path = tmp_path / "xla_worker.py"  # a file: torch_xla.launch's spawned process re-imports __main__
    path.write_text(WORKER)
    return path


def run_worker(path: Path, mode: str, **extra: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [sys.executable, str(path), mode],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(PJRT_DEVICE="CPU", **extra),
        cwd=path.parent,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    return [json.loads(line[4:]) for line in out.stdout.splitlines() if line.startswith("ROW ")]


def check_row(row: dict[str, Any]) -> resolver.Topology:
    """The live probe's answers and the resolved record equal what torch_xla.runtime says there."""
    assert row["probe_is_runtime"]
    assert row["probe"] == row["truth"]
    assert row["types"] == ["int"]
    t = resolver.Topology.from_dict(row["topology"])
    truth = row["truth"]
    assert (t.world_size, t.global_rank, t.local_rank, t.node_rank) == (
        truth["world_size"],
        truth["global_ordinal"],
        truth["local_ordinal"],
        truth["host_index"],
    )
    assert (t.source, t.main_address, t.main_port, t.creates_processes_externally) == ("xla", None, None, False)
    return t


@pytest.mark.xla
def test_one_cpu_process(worker: Path) -> None:
    rows = run_worker(worker, "single")
    assert len(rows) == 1
    assert rows[0]["imported_before"] is False  # importing resolver and probes did not import torch_xla
    t = check_row(rows[0])
    assert (t.world_size, t.global_rank, t.local_rank, t.node_rank) == (1, 0, 0, 0)


@pytest.mark.xla
def test_two_cpu_devices_under_torch_xla_launch(worker: Path) -> None:
    single = check_row(run_worker(worker, "single")[0])
    rows = run_worker(worker, "launch", CPU_NUM_DEVICES="2")
    assert sorted(row["index"] for row in rows) == [0, 1]
    tops = sorted((check_row(row) for row in rows), key=lambda t: t.global_rank)
    assert [(t.world_size, t.global_rank, t.local_rank, t.node_rank) for t in tops] == [(2, 0, 0, 0), (2, 1, 1, 0)]
    # the workers are what spawn plans from the one process's view (resolved in another process:
    # asking the runtime before torch_xla.launch initializes it, and launch then refuses to start)
    plan = resolver.spawn(single, devices=2, num_nodes=1)
    fields = ("world_size", "global_rank", "local_rank", "node_rank", "main_address", "main_port")
    assert [[getattr(t, f) for f in fields] for t in tops] == [[getattr(p, f) for f in fields] for p in plan]


@pytest.mark.xla
def test_fake_xla_keeps_to_the_real_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """FakeXla, the XlaRuntime protocol and the source use torch_xla.runtime's names, arities and types.

    The answers' types are checked on the real runtime in the workers above (`types`).
    """
    if not HAS_TORCH_XLA:
        pytest.skip(XLA_SKIP)
    monkeypatch.setenv("PJRT_DEVICE", "CPU")  # else importing torch_xla looks for a TPU and sets it in os.environ
    import torch_xla.runtime as xr  # importing does not initialize the runtime

    protocol = sorted(name for name in vars(XlaRuntime) if not name.startswith("_"))
    fake_methods = sorted(name for name in vars(FakeXla) if not name.startswith("_") and callable(vars(FakeXla)[name]))
    assert protocol == fake_methods == sorted(function for _, function in FUNCTIONS)
    for name in protocol:
        real, fake = getattr(xr, name), getattr(FakeXla(), name)
        for function in (real, fake):
            required = [
                p
                for p in inspect.signature(function).parameters.values()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
            ]
            assert required == [], (name, function)
        assert typing.get_type_hints(real).get("return") is int, name
        assert typing.get_type_hints(getattr(FakeXla, name)).get("return") is int, name
    assert isinstance(xr, XlaRuntime)
    assert isinstance(FakeXla(), XlaRuntime)
