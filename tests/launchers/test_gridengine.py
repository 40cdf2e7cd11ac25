"""Real Grid Engine jobs: a job script (and a qrsh -inherit task of it), an array job, and Open MPI's
mpirun and MPICH's mpiexec with 4 ranks inside a ``qsub -pe`` job.

Every process runs tests/launchers/gridengine_worker.py, which resolves with the live probes and
writes the launcher's truth beside the topology (Grid Engine's variables, its host name, the first
host of PE_HOSTFILE as it reads it, mpi4py's COMM_WORLD for ranks) and the result of a gloo
all_reduce through `resolver.apply`; the checks are here. The cell is
tests/launchers/gridengine_cluster.py (root; Debian's gridengine-master/-exec/-client).

Run: python -m pytest tests/launchers/test_gridengine.py   (as root)
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI, require_system_tests, terminate_interrupts
from tests.launchers import gridengine_cluster as harness

pytestmark = [pytest.mark.gridengine, pytest.mark.system]

WORKER = Path(__file__).resolve().with_name("gridengine_worker.py")
REPO = WORKER.parents[2]
TIMEOUT = 180.0  # seconds for one job, queueing included
ROOT_MPI = "OMPI_ALLOW_RUN_AS_ROOT=1,OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"  # jobs run as root (see the harness)


def port_of(job: str, task: str = "undefined") -> int:
    """The documented rule, from Grid Engine's own JOB_ID and SGE_TASK_ID."""
    return 20000 + (int(job) * 8191 + (0 if task == "undefined" else int(task))) % 10000


@pytest.fixture(scope="module")
def cell() -> Iterator[harness.Cell]:
    """The machine's Grid Engine cell, its daemons started unless they run (a system test).

    Stopped at the end (also on Ctrl-C, SIGTERM, SIGHUP) by the last run using it, if a run started it.
    """
    require_system_tests("starts Grid Engine's sge_qmaster and sge_execd and configures the cell for root jobs")
    if not harness.installed():
        problem = "Grid Engine is not installed (apt-get install gridengine-master gridengine-exec gridengine-client)"
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    with terminate_interrupts():
        started = harness.start()
        try:
            yield started
        finally:
            started.stop()


def submit(cell: harness.Cell, tmp_path: Path, script: str, *options: str, variables: str = "") -> Path:
    """Write the job script, submit it (waiting for it), and return the folder of the answers."""
    out = tmp_path / "answers"
    out.mkdir()
    job = tmp_path / "job.sh"
    job.write_text("#!/bin/sh\n" + textwrap.dedent(script).format(py=sys.executable, worker=WORKER, out=out))
    job.chmod(0o755)
    env = f"PYTHONPATH={REPO}" + (f",{variables}" if variables else "")
    log = tmp_path / "job.log"
    try:
        cell.qsub(["-cwd", "-j", "y", "-o", str(log), "-S", "/bin/sh", "-v", env, *options, str(job)], timeout=TIMEOUT)
    except harness.CellError as exc:
        output = log.read_text() if log.exists() else "<none>"
        pytest.fail(f"{exc}\njob output:\n{output}\nthe cell:\n{cell.diagnose()}")
    return out


def answers(out: Path, count: int) -> dict[str, list[dict[str, Any]]]:
    """Every answer by the name the job gave its worker; no error among them."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(out.glob("*.json")):
        found.setdefault(path.name.rsplit("-", 1)[0], []).append(json.loads(path.read_text()))
    assert sum(len(v) for v in found.values()) == count, found
    for answer in (a for group in found.values() for a in group):
        assert "error" not in answer, answer
    return found


def test_job_script_and_its_qrsh_inherit_task_are_worlds_of_one(cell: harness.Cell, tmp_path: Path) -> None:
    out = submit(
        cell,
        tmp_path,
        """\
        {py} {worker} {out} script
        qrsh -inherit "$(hostname)" {py} {worker} {out} inherit
        """,
        "-pe",
        "mpi",
        "2",
        "-N",
        "ge_script",
    )
    found = answers(out, 2)
    (script,), (inherit,) = found["script"], found["inherit"]
    for answer in (script, inherit):
        top, env = answer["topology"], answer["env"]
        assert top["source"] == "gridengine"
        assert (top["world_size"], top["global_rank"], top["local_rank"], top["node_rank"]) == (1, 0, 0, 0)
        assert (top["main_address"], top["main_port"]) == ("127.0.0.1", port_of(env["JOB_ID"]))
        assert (top["job_id"], top["array_task_id"]) == (env["JOB_ID"], None)
        assert top["restart_count"] == int(env["RESTARTED"]) == 0
        assert top["creates_processes_externally"] is False
        assert answer["all_reduce"] == 1.0 and answer["dist"] == {"rank": 0, "world_size": 1}
    assert script["env"]["JOB_NAME"] == script["topology"]["job_name"] == "ge_script"
    assert script["topology"]["warnings"] == []
    # Grid Engine names every qrsh -inherit task "petask": not the job's name, so it is left unknown
    assert (inherit["env"]["JOB_NAME"], inherit["topology"]["job_name"]) == ("petask", None)
    # Grid Engine numbers no qrsh -inherit task: the one without PE_HOSTFILE says so
    assert "PE_HOSTFILE" not in inherit["env"] and inherit["env"]["JOB_SCRIPT"] == "QRSH"
    (warning,) = inherit["topology"]["warnings"]
    assert "qrsh -inherit" in warning


def test_array_tasks_take_their_index_and_their_own_port(cell: harness.Cell, tmp_path: Path) -> None:
    out = submit(cell, tmp_path, "{py} {worker} {out} task\n", "-t", "2-5:3", "-N", "ge_array")
    tasks = sorted(answers(out, 2)["task"], key=lambda a: int(a["env"]["SGE_TASK_ID"]))
    assert [a["env"]["SGE_TASK_ID"] for a in tasks] == ["2", "5"]
    for answer in tasks:
        top, env = answer["topology"], answer["env"]
        assert (top["source"], top["world_size"]) == ("gridengine", 1)
        assert (top["job_id"], top["array_job_id"]) == (env["JOB_ID"], env["JOB_ID"])
        assert top["array_task_id"] == env["SGE_TASK_ID"]
        assert top["main_port"] == port_of(env["JOB_ID"], env["SGE_TASK_ID"])
        assert answer["all_reduce"] == 1.0
    assert tasks[0]["topology"]["main_port"] != tasks[1]["topology"]["main_port"]


def check_ranks(found: list[dict[str, Any]], library: str) -> None:
    """Each of 4 ranks against mpi4py's COMM_WORLD and Grid Engine's variables; one world that all_reduced."""
    found = sorted(found, key=lambda a: a["truth"]["global_rank"])
    assert [a["truth"]["global_rank"] for a in found] == [0, 1, 2, 3]
    for answer in found:
        top, truth, env = answer["topology"], answer["truth"], answer["env"]
        where = f"{top} vs {truth}, {env}"
        assert truth["library"].startswith(library), where
        assert top["source"] == "mpi", where
        assert (top["global_rank"], top["world_size"]) == (truth["global_rank"], truth["world_size"]), where
        hosts = truth["hosts"]
        assert (top["node_rank"], top["num_nodes"]) == (0, len(set(hosts))) == (0, 1), where
        assert top["local_rank"] == hosts[: truth["global_rank"]].count(truth["hostname"]), where
        # the main address is PE_HOSTFILE's first host, rank 0's host; the port follows JOB_ID
        assert top["main_address"] == truth["pe_first_host"] == hosts[0], where
        assert top["main_port"] == port_of(env["JOB_ID"]), where
        assert (top["job_id"], top["job_name"]) == (env["JOB_ID"], env["JOB_NAME"]), where
        assert answer["mpi_imported_by_resolve"] is False, where  # no exchange was needed
        assert len({tuple(e) for e in truth["endpoints"]}) == 1, where
        assert answer["all_reduce"] == 10.0 and answer["dist"] == {"rank": truth["global_rank"], "world_size": 4}


def test_open_mpi_mpirun_inside_a_pe(cell: harness.Cell, tmp_path: Path) -> None:
    out = submit(
        cell,
        tmp_path,
        "mpirun.openmpi -n 4 {py} {worker} {out} rank\n",
        "-pe",
        "mpi",
        "4",
        "-N",
        "ge_ompi",
        variables=ROOT_MPI,
    )
    check_ranks(answers(out, 4)["rank"], "Open MPI")


def test_mpich_mpiexec_inside_a_pe(cell: harness.Cell, tmp_path: Path) -> None:
    links = tmp_path / "mpich-abi"  # the mpi4py wheel's MPICH build loads libmpi.so.12 (see test_mpi.py)
    links.mkdir()
    (links / "libmpi.so.12").symlink_to(_library("libmpich.so.12"))
    out = submit(
        cell,
        tmp_path,
        # in the script: Grid Engine drops LD_LIBRARY_PATH from qsub -v (measured)
        f"export MPI4PY_MPIABI=mpich LD_LIBRARY_PATH={links}\n" + "mpiexec.mpich -n 4 {py} {worker} {out} rank\n",
        "-pe",
        "mpi",
        "4",
        "-N",
        "ge_mpich",
    )
    check_ranks(answers(out, 4)["rank"], "MPICH")


def _library(name: str) -> str:
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30, check=False).stdout
    for line in listing.splitlines():
        if line.strip().startswith(name + " ") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    message = f"{name} not found by ldconfig -p (apt-get install mpich)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)
