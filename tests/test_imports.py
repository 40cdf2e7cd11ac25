"""`import resolver` and a resolve must not pull in torch, mpi4py, torch_xla or importlib.metadata."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "mpi4py", "torch_xla", "numpy", "importlib.metadata", "argparse")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nloaded = sorted(sys.modules)\nimport json\nprint(json.dumps(loaded))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PYTHONPATH": str(Path.cwd())},
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_and_resolve_stay_light() -> None:
    modules = loaded_after("import os, resolver; resolver.resolve(os.environ); resolver.explain(os.environ)")
    assert not {m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY}
    assert "probes.nonblocking" not in modules  # the MPI polling code: only once a comm is asked


TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "none",
    "WORLD_SIZE": "2",
    "RANK": "1",
    "LOCAL_RANK": "1",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
}


SRUN_TASK = {
    "SLURM_JOB_ID": "10",
    "SLURM_STEP_ID": "0",
    "SLURM_NTASKS": "4",
    "SLURM_PROCID": "3",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "1",
    "SLURM_NNODES": "2",
    "SLURM_NODELIST": "ci[1-2]",
    "SLURM_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NODELIST": "ci[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NUM_NODES": "2",
}
CORE = {  # what every resolve loads: the facade, the engine, the kit, the record, the device rule
    "resolver",
    "resolver._detect",
    "resolver._devices",
    "resolver._version",
    "resolver.environ",
    "resolver.errors",
    "resolver.origin",
    "resolver.sources",
    "resolver.sources._kit",
    "resolver.sources._registry",
    "resolver.sources._rules",
    "resolver.topology",
}


@pytest.mark.parametrize(
    ("environ", "source_modules"),
    [
        (TORCHRUN, {"resolver.sources.torchelastic"}),
        (SRUN_TASK, {"resolver.sources.slurm", "resolver.hostlist", "resolver.sources._offers"}),  # SLURM's OFFERS
    ],
    ids=["torchrun", "srun"],
)
def test_a_resolve_imports_its_source_and_the_probes_it_asks(environ: dict[str, str], source_modules: set[str]) -> None:
    """A worker loads its source and, to count devices (no visibility variable is set), the live probes alone."""
    modules = loaded_after(f"import resolver; resolver.resolve({environ!r})")
    ours = {m for m in modules if m.split(".")[0] in ("resolver", "probes")}
    assert ours == CORE | source_modules | {"probes", "probes.live"}
    assert "_socket" not in modules  # only hostname and free_port need it


def test_the_probe_bundle_is_built_only_when_asked_for() -> None:
    modules = loaded_after("import os, resolver; resolver.resolve(os.environ)")
    assert "probes._bundle" not in modules and "probes.bounded" not in modules
    assert "probes._bundle" in loaded_after("import probes; probes.Probes")


COMMAND = """import runpy, sys
sys.argv = ["cluster-topology", {}]
try:
    runpy.run_module("resolver", run_name="__main__")
except SystemExit:
    pass"""


def test_the_command_loads_what_its_format_needs() -> None:
    """What `--format env` does not ask, it does not load (resolver/_exec.py: the TCP comm and the MPI source,
    for MPI ranks under exec; the check and its logging): `exec`'s module and signal load when exec or `--ifname`
    runs, `explain`'s records and the text wrapping with `--explain` (resolver/__main__.py)."""
    env_format = loaded_after(f"import os; os.environ.update({TORCHRUN!r})\n" + COMMAND.format("'--format', 'env'"))
    later = {"resolver._exec", "resolver._explain", "textwrap"}  # not signal: on Python 3.10 attrs loads it
    assert not {"probes.tcp", "socket", "resolver.sources.mpi", "resolver._check", "logging", *later} & env_format
    assert {"resolver._render", "resolver._check_cli"} <= env_format  # the probe really ran the command
    explained = loaded_after(COMMAND.format("'--format', 'env', '--explain', '--ifname'"))
    assert {"resolver._exec", "resolver._explain"} <= explained


def test_every_public_name_is_exported() -> None:
    import resolver

    for name in resolver.__all__:
        assert hasattr(resolver, name), name


def test_the_testing_kit_imports_no_test_dependency() -> None:
    # hypothesis comes with the first strategy; jsonschema is the user's (topology_schema() only reads the file)
    modules = loaded_after("import resolver.testing")
    assert not {m for m in modules if m.split(".")[0] in ("hypothesis", "jsonschema", *HEAVY)}
    assert "resolver.testing.world" in modules  # the probe really imported the kit
    assert not {m for m in modules if m.startswith("resolver.testing.") and m != "resolver.testing.world"}
