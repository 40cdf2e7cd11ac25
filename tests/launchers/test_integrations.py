"""The integrations under real launchers: `init_process_group` under torchrun, srun and mpirun, a
2-process CPU Fabric with `TopologyEnvironment`, launched by torchrun and spawned by Fabric itself,
and a 2-process Trainer that spawns its workers and runs fit then test.

Each process runs tests/launchers/integration_worker.py and writes its answer to a JSON file; the
checks are here: the all_reduce summed every rank, and after destroy os.environ is as before.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from resolver.origin import Origin
from tests.conftest import require_tool
from tests.integrations import require_module
from tests.launchers.launching import launch as run_launcher
from tests.launchers.slurm_cluster import Cluster

WORKER = Path(__file__).resolve().with_name("integration_worker.py")
ROOT = WORKER.parents[2]
PY = sys.executable
TIMEOUT = 240.0  # one launch; a hang fails the test, not the CI job
LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "MPI_LOCAL", "MV2_", "SLURM_", "TORCHELASTIC_", "HYDI_")
LAUNCHER_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
OPEN_MPI = {  # as root, and more ranks than cores
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}


@pytest.fixture(autouse=True)
def _torch() -> None:
    require_module("torch", "torch")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    directory = tmp_path / "answers"
    directory.mkdir()
    return directory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(*extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without an enclosing launcher's variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    for more in extra:
        env.update(more)
    return env


def launch(args: list[str], env: Mapping[str, str], *, answers_in: Path | None = None, count: int = 0) -> str:
    return run_launcher(args, env, timeout=TIMEOUT, answers_in=answers_in, count=count)


def answers(directory: Path, count: int, output: str) -> list[dict[str, Any]]:
    """Every process's answer, in global-rank order."""
    found = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    assert len(found) == count, f"{len(found)} of {count} processes answered; launcher output:\n{output[-5000:]}"
    return sorted(found, key=lambda a: a["topology"]["global_rank"])


def check_torch(found: list[dict[str, Any]], source: str) -> None:
    """init_process_group: one world, the all_reduce summed it, and the environment came back."""
    n = len(found)
    for rank, answer in enumerate(found):
        top = answer["topology"]
        assert (top["source"], top["global_rank"], top["world_size"]) == (source, rank, n), top
        assert answer["dist"] == {"rank": rank, "world_size": n}
        assert answer["backend"] == "gloo"
        assert answer["all_reduce"] == n * (n + 1) / 2
        assert answer["during"] == {
            "RANK": str(rank),
            "WORLD_SIZE": str(n),
            "LOCAL_RANK": str(top["local_rank"]),
            "NODE_RANK": str(top["node_rank"]),
            "MASTER_ADDR": top["main_address"],
            "MASTER_PORT": str(top["main_port"]),
        }
        assert answer["initialized_after"] is False
        assert answer["active_after"] is False
        assert answer["env_changed"] == {}, answer["env_changed"]
    assert len({(a["topology"]["main_address"], a["topology"]["main_port"]) for a in found}) == 1


# -- init_process_group ----------------------------------------------------------------------------


@pytest.mark.torchrun
@pytest.mark.parametrize("destroy", ["handle", "torch"])
def test_init_process_group_under_torchrun(out: Path, destroy: str) -> None:
    require_tool("torchrun")
    rdzv = ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}"]
    args = [PY, "-m", "torch.distributed.run", *rdzv, str(WORKER), "torch", str(out), "--destroy", destroy]
    output = launch(args, clean_env())
    found = answers(out, 2, output)
    check_torch(found, "torchelastic")
    for answer in found:  # torchrun's own variables were there before, and are there after
        assert answer["env_before"]["RANK"] == str(answer["topology"]["global_rank"])
        assert answer["env_before"]["NODE_RANK"] is None  # torchrun sets none: ours went again


@pytest.mark.slurm
def test_init_process_group_under_srun(out: Path, slurm_cluster: Cluster) -> None:
    command = f"srun -N2 -n2 {PY} {WORKER} torch {out}"
    try:
        res = slurm_cluster.run(command, env={"PYTHONPATH": str(ROOT)}, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command!r} did not finish in {TIMEOUT} s")
    assert res.returncode == 0, res.stdout + res.stderr
    found = answers(out, 2, res.stdout + res.stderr)
    check_torch(found, "slurm")
    assert [a["topology"]["node_rank"] for a in found] == [0, 1]
    assert [a["topology"]["num_nodes"] for a in found] == [2, 2]
    for answer in found:  # SLURM sets no MASTER_* nor RANK: every key we wrote was absent before, and is again
        assert set(answer["env_before"].values()) == {None}


@pytest.mark.mpi
def test_init_process_group_under_mpirun(out: Path) -> None:
    require_tool("mpirun")
    output = launch(["mpirun", "-n", "2", PY, str(WORKER), "torch", str(out)], clean_env(OPEN_MPI))
    found = answers(out, 2, output)
    check_torch(found, "mpi")
    for answer in found:
        assert set(answer["env_before"].values()) == {None}


# -- Lightning Fabric --------------------------------------------------------------------------------


def check_fabric(found: list[dict[str, Any]]) -> None:
    for rank, answer in enumerate(found):
        assert answer["fabric"] == {"global_rank": rank, "world_size": 2, "local_rank": rank, "node_rank": 0}
        assert answer["dist"] == {"rank": rank, "world_size": 2}
        assert answer["all_reduce"] == 3.0
        top = answer["topology"]
        assert (top["global_rank"], top["world_size"], top["local_rank"]) == (rank, 2, rank)
    assert len({(a["topology"]["main_address"], a["topology"]["main_port"]) for a in found}) == 1


@pytest.mark.torchrun
def test_fabric_launched_by_torchrun(out: Path) -> None:
    require_tool("torchrun")
    require_module("lightning", "lightning")
    rdzv = ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}"]
    output = launch([PY, "-m", "torch.distributed.run", *rdzv, str(WORKER), "fabric", str(out)], clean_env())
    found = answers(out, 2, output)
    check_fabric(found)
    for answer in found:
        assert answer["topology"]["source"] == "torchelastic"
        assert answer["external"] is True
        assert answer["first"] == answer["topology"]  # Lightning's set calls agreed with torchrun


def test_fabric_spawns_its_own_workers(out: Path) -> None:
    require_module("lightning", "lightning")
    output = launch([PY, str(WORKER), "fabric", str(out)], clean_env(), answers_in=out, count=2)
    found = answers(out, 2, output)
    check_fabric(found)
    parent, child = found
    # the parent resolved a spawning record of one process; the first launch made it worker 0 of spawn()
    assert (parent["first"]["creates_processes_externally"], parent["first"]["world_size"]) == (False, 1)
    assert parent["external"] is False
    assert (parent["topology"]["local_world_size"], parent["topology"]["num_nodes"]) == (2, 1)
    assert str(Origin.from_dict(parent["topology"]["provenance"]["world_size"])).startswith("argument:spawn:")
    assert parent["env"]["LOCAL_RANK"] == "0"  # Lightning's launcher wrote it; we did not
    # the child resolved what the launcher gave it (no RANK: rank 0), and Lightning's set_global_rank evolved it
    assert child["first"]["creates_processes_externally"] is True
    assert child["first"]["global_rank"] == 0  # the record it started with is unchanged
    assert (
        str(Origin.from_dict(child["topology"]["provenance"]["global_rank"])) == "argument:lightning:set_global_rank(1)"
    )
    assert child["env"]["RANK"] is None


def test_trainer_spawns_its_workers_once_for_fit_and_test(out: Path) -> None:
    """Lightning's Trainer launches once per fit/test; from the second launch on the workers exist."""
    require_module("lightning", "lightning")
    output = launch([PY, str(WORKER), "trainer", str(out)], clean_env(), answers_in=out, count=2)
    parent, child = answers(out, 2, output)
    for rank, answer in enumerate((parent, child)):
        assert answer["trainer"] == {"global_rank": rank, "world_size": 2}
        assert answer["ranks"] == 3.0  # logged with sync_dist: summed over both ranks
        assert answer["external"] is True
    assert parent["external_after_fit"] is False  # the process that started the workers...
    assert parent["first"]["creates_processes_externally"] is False
    assert str(Origin.from_dict(parent["topology"]["provenance"]["world_size"])).startswith("argument:spawn:")
