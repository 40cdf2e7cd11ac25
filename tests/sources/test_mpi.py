"""The MPI source over real captures and launcher-shaped dict literals, with fake probes.

A whole simulated world runs each rank in its own thread over `FakeComm.connected`, so the
collectives really meet: every rank must make the same calls and reach the same answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
import resolver
from probes.fakes import FakeComm
from resolver import InvalidVariable, MissingVariable, Origin, ProbeFailed, Topology, TopologyError
from resolver.sources import any_of
from resolver.sources._registry import entry
from resolver.sources.mpi import LAUNCHERS, Mpi, started_by_mpirun
from tests.conftest import CAPTURES_HPC, captures, read_capture

MASTER = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
COLLECTIVES = ("allgather", "bcast")


def collectives(comm: FakeComm) -> list[str]:
    return [call for call in comm.calls if call in COLLECTIVES]


def run_world(
    envs: Sequence[Mapping[str, str]],
    hosts: Sequence[str],
    ports: Sequence[int] | None = None,
    comms: Sequence[FakeComm] | None = None,
    *,
    source: str | None = None,
) -> tuple[list[Topology | TopologyError], tuple[FakeComm, ...]]:
    """Resolve every rank of a simulated world, each in its own thread; a rank's error is its answer."""
    n = len(envs)
    world = tuple(comms) if comms is not None else FakeComm.connected(n, timeout=10)
    results: list[Topology | TopologyError | None] = [None] * n

    def rank(i: int) -> None:
        fakes = probes.fake(hostname=hosts[i], free_port=None if ports is None else ports[i], comm=world[i])
        try:
            results[i] = resolver.resolve(envs[i], fakes, source=source)
        except TopologyError as exc:
            results[i] = exc
            meeting = world[i].meeting
            if meeting is not None:
                meeting.abort()  # the others fail now instead of at the timeout

    threads = [threading.Thread(target=rank, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
        assert not thread.is_alive(), "a rank hung"
    done = [r for r in results if r is not None]
    assert len(done) == n
    return done, world


def topologies(results: Sequence[Topology | TopologyError]) -> list[Topology]:
    for result in results:
        if isinstance(result, TopologyError):
            raise result
    return [r for r in results if isinstance(r, Topology)]


# -- real captures -------------------------------------------------------------------------------


def capture_ids(path: Path) -> str:
    return f"{path.parent.parent.name}/{path.stem}"


@pytest.mark.parametrize("path", captures("openmpi/n4/*.env") + captures("mpich/n4/*.env"), ids=capture_ids)
def test_real_captures_with_master_variables_ask_no_probe(path: Path) -> None:
    env = {**read_capture(path), **MASTER}
    t = resolver.resolve(env, probes.fake())  # any probe question would raise ProbeFailed
    openmpi = "OMPI_COMM_WORLD_SIZE" in env
    rank, size, local, local_size = (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
        if openmpi
        else ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
    )
    assert t.source == "mpi"
    assert (t.world_size, t.global_rank, t.local_rank) == (int(env[size]), int(env[rank]), int(env[local]))
    assert (t.node_rank, t.num_nodes, t.local_world_size) == (0, 1, int(env[local_size]))
    assert (t.main_address, t.main_port) == ("10.0.0.1", 29500)
    assert t.creates_processes_externally
    assert t.job_id == (env["PMIX_NAMESPACE"] if openmpi else None)
    assert t.provenance["global_rank"] == Origin.env(rank)
    assert t.provenance["node_rank"] == Origin.formula(
        f"0 ({local_size} == {size}: one node)", variables=(local_size, size)
    )
    assert t.warnings == ()
    if openmpi:  # the rank within the node and the slot count are not the node's index or the world
        assert env["OMPI_COMM_WORLD_NODE_RANK"] == str(t.local_rank)
        assert env["OMPI_UNIVERSE_SIZE"] != str(t.world_size)


@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_a_captured_world_without_master_variables_meets_once(family: str) -> None:
    envs = [read_capture(p) for p in captures(f"{family}/n4/*.env")]
    results, world = run_world(envs, ["vm"] * 4, ports=[41000 + i for i in range(4)])
    tops = topologies(results)
    assert [t.global_rank for t in tops] == [0, 1, 2, 3]
    assert {(t.main_address, t.main_port) for t in tops} == {("vm", 41000)}  # rank 0's hostname and port
    assert tops[0].provenance["main_port"] == Origin.probe("free_port")
    assert tops[1].provenance["main_port"] == Origin.probe("comm.bcast", "rank 0's MASTER_PORT or free port")
    # one node by the launcher's own count: no hostnames needed, one bcast of rank 0's endpoint
    assert [collectives(c) for c in world] == [["bcast"]] * 4


def test_importing_and_resolving_with_the_environment_never_imports_mpi4py() -> None:
    env = {**read_capture(captures("openmpi/n4/rank1.env")[0]), **MASTER}
    code = (
        "import sys, resolver, probes\n"
        f"t = resolver.resolve({env!r}, probes.system())\n"
        f"e = resolver.explain({env!r})\n"
        "assert t.source == e.chosen == 'mpi', (t, e)\n"
        "assert 'mpi4py' not in sys.modules, sorted(m for m in sys.modules if 'mpi' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# Open MPI 5.0 (PRRTE), MPICH 5.0 and Intel MPI 2021 from their PyPI wheels, `-n 4` on one host:
# the launcher's variables of each rank, and truth.json, what the launcher itself decided.
WHEEL_CAPTURES = {
    "openmpi5": ("OMPI_COMM_WORLD_LOCAL_RANK", "prterun-vm-29434@1"),
    "mpich5": ("MPI_LOCALRANKID", None),
    "impi": ("MPI_LOCALRANKID", None),
}


def wheel_capture(family: str) -> list[tuple[dict[str, str], dict[str, object]]]:
    """Each rank's environment with its truth, in global-rank order."""
    folder = CAPTURES_HPC / family / "single-node-n4"
    truths = json.loads((folder / "truth.json").read_text())
    return [(read_capture(folder / str(truth["file"])), truth) for truth in truths]


@pytest.mark.parametrize("family", sorted(WHEEL_CAPTURES))
def test_mpi_wheel_captures_resolve_to_the_launchers_truth(family: str) -> None:
    local_variable, job_id = WHEEL_CAPTURES[family]
    ranks = wheel_capture(family)
    tops = [resolver.resolve({**env, **MASTER}, probes.fake()) for env, _ in ranks]  # no probe is asked
    for t, (env, truth) in zip(tops, ranks, strict=True):
        assert t.source == "mpi"
        assert (t.global_rank, t.world_size) == (truth["global_rank"], truth["world_size"])
        assert (t.node_rank, t.num_nodes, t.local_world_size) == (
            truth["node_rank"],
            truth["num_nodes"],
            truth["local_world_size"],
        )
        assert t.local_rank == int(env[local_variable])  # the launcher's own local rank
        assert t.job_id == job_id
        assert t.warnings == ()
    # Hydra numbers local ranks in world-rank order; Open MPI 5 in its mapping order (rank 1 had local
    # rank 2 here), which truth.json, counting ranks per host, does not follow: both are a numbering of
    # the host's ranks, and the launcher's is the one its processes bind by
    assert sorted(t.local_rank for t in tops) == [0, 1, 2, 3]
    if family != "openmpi5":
        assert [t.local_rank for t in tops] == [truth["local_rank"] for _, truth in ranks]


@pytest.mark.parametrize("family", sorted(WHEEL_CAPTURES))
def test_mpi_wheel_captures_meet_once_for_rank_0s_endpoint(family: str) -> None:
    ranks = wheel_capture(family)
    hosts = [str(truth["hostname"]) for _, truth in ranks]
    results, world = run_world([env for env, _ in ranks], hosts, ports=[41000 + i for i in range(4)])
    tops = topologies(results)
    assert [t.global_rank for t in tops] == [truth["global_rank"] for _, truth in ranks]
    assert {(t.main_address, t.main_port) for t in tops} == {(hosts[0], 41000)}
    assert [collectives(c) for c in world] == [["bcast"]] * 4  # the launcher says one node: no hostnames


# -- detection -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "matched", "variable"),
    [
        ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "1"}, True, "OMPI_COMM_WORLD_SIZE"),
        ({"MV2_COMM_WORLD_SIZE": "2", "MV2_COMM_WORLD_RANK": "0"}, True, "MV2_COMM_WORLD_SIZE"),
        ({"PMI_SIZE": "4", "PMI_RANK": "0", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "4"}, True, "PMI_SIZE"),
        ({"PALS_RANKID": "3", "PALS_NODEID": "1", "PMI_SIZE": "8"}, True, "PMI_SIZE"),
        ({"PMI_SIZE": "2", "PMI_RANK": "1"}, True, "PMI_SIZE"),
        ({"PMIX_RANK": "0", "PMIX_NAMESPACE": "job"}, True, "PMIX_RANK"),
        ({"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}, False, "OMPI_COMM_WORLD_SIZE"),
        ({"PMI_SIZE": "1", "PMI_RANK": "0", "MPI_LOCALNRANKS": "1"}, False, "PMI_SIZE"),
        ({"OMPI_COMM_WORLD_SIZE": "x"}, True, "OMPI_COMM_WORLD_SIZE"),  # resolve names the bad value
        ({"OMPI_UNIVERSE_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": "0"}, False, None),
        ({}, False, None),
    ],
)
def test_detect(env: dict[str, str], matched: bool, variable: str | None) -> None:
    found = Mpi().detect(env)
    assert found.matched is matched
    if variable is None:
        assert "never asks mpi4py" in found.reason
    else:
        assert variable in found.reason
    if env.get("OMPI_COMM_WORLD_SIZE") == "1" or env.get("PMI_SIZE") == "1":
        assert "a world of size 1 is not MPI" in found.reason


def test_the_registry_asks_mpi_on_each_launchers_marker() -> None:
    assert entry("mpi").candidates == any_of(*(found.marker for found in LAUNCHERS))


def test_detection_order_puts_mpi_after_slurm_and_lsf() -> None:
    names = [s.name for s in resolver.registered(auto_only=True)]
    assert names.index("mpi") > names.index("torchelastic")
    for earlier in ("slurm", "lsf"):
        if earlier in names:
            assert names.index("mpi") > names.index(earlier)
    assert names[-1] == "lightning"


def test_launcher_table_is_consistent() -> None:
    markers = [launcher.marker for launcher in LAUNCHERS]
    assert len(set(markers)) == len(markers)
    for launcher in LAUNCHERS:
        assert launcher.marker in launcher.variables()
    # only the variables srun never writes mark a process as mpirun's
    assert [launcher.marker for launcher in LAUNCHERS if launcher.mpirun_only] == [
        "OMPI_COMM_WORLD_SIZE",
        "MV2_COMM_WORLD_SIZE",
        "MPI_LOCALNRANKS",
    ]


# Launcher variables of rank 3 of `sbatch -N2 -n4` running `mpirun -n 4` / `mpiexec.hydra -n 4` /
# `srun --mpi=pmi2 -n 4` (SLURM 22.05, Open MPI 4.1.4, MPICH 4.0.2, this machine's local cluster).
# mpirun and Hydra start their daemons with srun: the ranks carry that step's SLURM_PROCID (the
# daemon's index) and SLURM_STEP_NUM_TASKS=2 (one daemon per node).
SLURM_JOB = {
    "SLURM_CLUSTER_NAME": "ci",
    "SLURM_JOB_ID": "4",
    "SLURM_JOBID": "4",
    "SLURM_JOB_NAME": "job2.sh",
    "SLURM_JOB_NODELIST": "ci[1-2]",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NNODES": "2",
    "SLURM_NODELIST": "ci[1-2]",
    "SLURM_STEP_NODELIST": "ci[1-2]",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_SUBMIT_HOST": "vm",
    "SLURMD_NODENAME": "ci2",
    "ENVIRONMENT": "BATCH",
}
MPIRUN_IN_SBATCH = {
    **SLURM_JOB,
    "OMPI_COMM_WORLD_LOCAL_RANK": "2",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "3",
    "OMPI_COMM_WORLD_NODE_RANK": "2",
    "OMPI_COMM_WORLD_RANK": "3",
    "OMPI_COMM_WORLD_SIZE": "4",
    "PMIX_NAMESPACE": "1129906177",
    "PMIX_RANK": "3",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1",
    "SLURM_NPROCS": "2",
    "SLURM_NTASKS": "2",
    "SLURM_NTASKS_PER_NODE": "1",
    "SLURM_PROCID": "1",
    "SLURM_STEP_ID": "0",
    "SLURM_STEPID": "0",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
    "SLURM_TASKS_PER_NODE": "1(x2)",
}
HYDRA_IN_SBATCH = {
    **SLURM_JOB,
    "MPI_LOCALNRANKS": "3",
    "MPI_LOCALRANKID": "2",
    "PMI_FD": "9",
    "PMI_RANK": "3",
    "PMI_SIZE": "4",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1",
    "SLURM_NPROCS": "2",
    "SLURM_NTASKS": "4",
    "SLURM_PROCID": "1",
    "SLURM_STEP_ID": "1",
    "SLURM_STEPID": "1",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
    "SLURM_TASKS_PER_NODE": "1(x2)",
}
SRUN_PMI2 = {
    **SLURM_JOB,
    "PMI_FD": "15",
    "PMI_JOBID": "4.2",
    "PMI_RANK": "3",
    "PMI_SIZE": "4",
    "SLURM_LOCALID": "2",
    "SLURM_MPI_TYPE": "pmi2",
    "SLURM_NODEID": "1",
    "SLURM_NPROCS": "4",
    "SLURM_NTASKS": "4",
    "SLURM_PROCID": "3",
    "SLURM_STEP_ID": "2",
    "SLURM_STEPID": "2",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_TASKS_PER_NODE": "1,3",
    "SLURM_TASKS_PER_NODE": "1,3",
}


@pytest.mark.parametrize(
    ("env", "marker"), [(MPIRUN_IN_SBATCH, "OMPI_COMM_WORLD_SIZE"), (HYDRA_IN_SBATCH, "MPI_LOCALNRANKS")]
)
def test_mpirun_inside_sbatch_is_mpi_whatever_slurm_says(env: dict[str, str], marker: str) -> None:
    assert started_by_mpirun(env) == marker
    explanation = resolver.explain(env)
    assert explanation.chosen == "mpi", str(explanation)
    mpi = next(c for c in explanation.candidates if c.name == "mpi")
    assert "mpirun/mpiexec started this process" in mpi.detection.reason
    assert "win over SLURM step variables" in mpi.detection.reason  # the rule, as explain shows it
    # the whole job: ranks 0-2 on the first SLURM node, rank 3 on the second; all carry the step's SLURM_*
    rank_var, size_var = (
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE") if "OMPI" in marker else ("PMI_RANK", "MPI_LOCALNRANKS")
    )
    local_var = "OMPI_COMM_WORLD_LOCAL_RANK" if "OMPI" in marker else "MPI_LOCALRANKID"
    envs = [
        {**env, rank_var: str(r), local_var: str(r % 3), size_var: "3" if r < 3 else "1", "SLURM_PROCID": str(r // 3)}
        for r in range(4)
    ]
    tops = topologies(run_world(envs, ["ci1", "ci1", "ci1", "ci2"], ports=[5000, 0, 0, 0])[0])
    assert [(t.source, t.global_rank, t.world_size, t.local_rank, t.node_rank) for t in tops] == [
        ("mpi", 0, 4, 0, 0),
        ("mpi", 1, 4, 1, 0),
        ("mpi", 2, 4, 2, 0),
        ("mpi", 3, 4, 0, 1),
    ]
    assert {(t.main_address, t.main_port) for t in tops} == {("ci1", 5000)}


def test_srun_with_a_pmi_plugin_is_not_mpirun() -> None:
    """srun --mpi=pmi2 writes PMI_RANK/PMI_SIZE too: that is a SLURM launch, which comes first."""
    assert started_by_mpirun(SRUN_PMI2) is None
    assert Mpi().detect(SRUN_PMI2).matched  # the PMI family matches, but SLURM is earlier
    assert "SLURM, earlier in the order, wins" in Mpi().detect(SRUN_PMI2).reason
    if "slurm" in [s.name for s in resolver.registered()]:
        assert resolver.explain(SRUN_PMI2).chosen == "slurm"
    for pmix in ({"PMIX_RANK": "3"}, {"PALS_RANKID": "3", "PALS_NODEID": "1"}):
        assert started_by_mpirun({**SRUN_PMI2, **pmix}) is None
    assert started_by_mpirun({**SRUN_PMI2, "OMPI_COMM_WORLD_SIZE": "1"}) is None  # a one-rank mpirun


# -- what the comm is asked ------------------------------------------------------------------------

PALS_RANK = {  # Cray PALS with everything: the node index too
    "PALS_RANKID": "5",
    "PALS_LOCAL_RANKID": "1",
    "PALS_NODEID": "1",
    "PALS_APID": "a1b2",
    "PMI_RANK": "5",
    "PMI_SIZE": "8",
    "PMI_LOCAL_SIZE": "4",
}


def test_pals_with_master_variables_asks_no_probe() -> None:
    t = resolver.resolve({**PALS_RANK, **MASTER}, probes.fake())
    assert (t.world_size, t.global_rank, t.local_rank, t.local_world_size, t.node_rank) == (8, 5, 1, 4, 1)
    assert t.num_nodes is None  # nobody said
    assert t.job_id == "a1b2"
    assert t.provenance["node_rank"] == Origin.env("PALS_NODEID")


def test_multi_node_open_mpi_with_master_variables_asks_one_allgather_only() -> None:
    hosts = ["b", "b", "a", "a"]
    envs = [{**family_env("openmpi", r, hosts), **MASTER} for r in range(4)]
    results, world = run_world(envs, hosts)  # no free_port: nobody may ask it
    tops = topologies(results)
    assert [t.node_rank for t in tops] == [1, 1, 0, 0]  # index among the sorted host names
    assert {t.num_nodes for t in tops} == {2}
    assert {(t.main_address, t.main_port) for t in tops} == {("10.0.0.1", 29500)}
    assert [collectives(c) for c in world] == [["allgather"]] * 4


def test_rank_0_of_a_fake_world_of_hostnames_resolves() -> None:
    """FakeComm.world gives the other ranks' slots as bare hostnames, as a plain allgather would."""
    comm = FakeComm.world(["b", "a", "b"])[0]
    t = resolver.resolve({"PMIX_RANK": "0", **MASTER}, probes.fake(hostname="b", comm=comm))
    assert (t.world_size, t.node_rank, t.num_nodes, t.local_rank, t.local_world_size) == (3, 1, 2, 0, 2)
    assert collectives(comm) == ["allgather"]


def test_forced_without_any_launcher_variable_asks_the_comm_for_everything() -> None:
    results, world = run_world([{}, {}, {}], ["h", "h", "g"], ports=[7000, 7001, 7002], source="mpi")
    tops = topologies(results)
    assert [(t.global_rank, t.world_size, t.local_rank, t.node_rank) for t in tops] == [
        (0, 3, 0, 1),
        (1, 3, 1, 1),
        (2, 3, 0, 0),
    ]
    assert tops[1].provenance["global_rank"] == Origin.probe("comm.Get_rank")
    assert {(t.main_address, t.main_port) for t in tops} == {("h", 7000)}
    assert [collectives(c) for c in world] == [["allgather"]] * 3


def test_pmix_alone_takes_the_world_size_from_the_comm() -> None:
    envs = [{"PMIX_RANK": str(r), "PMIX_NAMESPACE": "ns"} for r in range(2)]
    tops = topologies(run_world(envs, ["x", "x"], ports=[1, 2])[0])
    assert [(t.world_size, t.local_rank, t.local_world_size, t.job_id) for t in tops] == [
        (2, 0, 2, "ns"),
        (2, 1, 2, "ns"),
    ]
    assert tops[0].provenance["world_size"] == Origin.probe("comm.Get_size")


def test_remote_ranks_without_master_variables_learn_rank_0s() -> None:
    """Open MPI over ssh forwards MASTER_* only with -x: ranks lacking them take rank 0's."""
    base = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    envs = [{**base, "OMPI_COMM_WORLD_RANK": "0", **MASTER}, {**base, "OMPI_COMM_WORLD_RANK": "1"}]
    tops = topologies(run_world(envs, ["n1", "n2"], ports=[1111, 2222])[0])
    assert {(t.main_address, t.main_port) for t in tops} == {("10.0.0.1", 29500)}
    assert tops[1].provenance["main_port"] == Origin.probe("comm.allgather", "rank 0's MASTER_PORT or free port")


def test_a_rank_whose_own_master_variables_differ_from_rank_0s_is_warned() -> None:
    base = {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"}
    envs = [
        {**base, "OMPI_COMM_WORLD_RANK": "0", **MASTER},
        {**base, "OMPI_COMM_WORLD_RANK": "1", "MASTER_ADDR": "10.9.9.9", "MASTER_PORT": "1"},
    ]
    tops = topologies(run_world(envs, ["n1", "n2"])[0])
    assert tops[0].warnings == ()
    assert tops[1].warnings == (
        "MASTER_ADDR=10.9.9.9 here but rank 0 uses 10.0.0.1: the ranks will not meet",
        "MASTER_PORT=1 here but rank 0 uses 29500: the ranks will not meet",
    )


def test_launcher_and_host_names_disagreeing_is_warned() -> None:
    """mpirun inside SLURM on this machine: two SLURM nodes, one host name for all ranks."""
    sizes = (3, 3, 3, 1)
    envs = [
        {
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_RANK": str(r),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(r if r < 3 else 0),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(sizes[r]),
        }
        for r in range(4)
    ]
    tops = topologies(run_world(envs, ["vm"] * 4, ports=[9, 9, 9, 9])[0])
    assert [(t.node_rank, t.num_nodes, t.local_rank, t.local_world_size) for t in tops] == [
        (0, 1, 0, 3),
        (0, 1, 1, 3),
        (0, 1, 2, 3),
        (0, 1, 0, 1),
    ]
    assert tops[3].warnings == (
        "OMPI_COMM_WORLD_LOCAL_SIZE=1 but 4 ranks have host name 'vm': the launcher and the host names "
        "disagree about what a node is; node_rank follows the host names",
    )


# -- errors ----------------------------------------------------------------------------------------

OMPI = {
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    **MASTER,
}


@pytest.mark.parametrize(
    ("change", "error", "variable", "expected"),
    [
        ({"OMPI_COMM_WORLD_RANK": None}, MissingVariable, "OMPI_COMM_WORLD_RANK", "needed by source 'mpi'"),
        ({"OMPI_COMM_WORLD_RANK": "2"}, InvalidVariable, "OMPI_COMM_WORLD_RANK", "< world_size (2)"),
        ({"OMPI_COMM_WORLD_RANK": "-1"}, InvalidVariable, "OMPI_COMM_WORLD_RANK", "decimal integer"),
        ({"OMPI_COMM_WORLD_SIZE": "x"}, InvalidVariable, "OMPI_COMM_WORLD_SIZE", "decimal integer >= 1"),
        ({"OMPI_COMM_WORLD_SIZE": "0"}, InvalidVariable, "OMPI_COMM_WORLD_SIZE", ">= 1"),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "2"}, InvalidVariable, "OMPI_COMM_WORLD_LOCAL_RANK", "< local_world_size"),
        ({"OMPI_COMM_WORLD_LOCAL_RANK": "١"}, InvalidVariable, "OMPI_COMM_WORLD_LOCAL_RANK", "decimal integer"),
        ({"OMPI_COMM_WORLD_LOCAL_SIZE": "3"}, InvalidVariable, "OMPI_COMM_WORLD_LOCAL_SIZE", "<= world_size"),
        ({"MASTER_PORT": "70000"}, InvalidVariable, "MASTER_PORT", "TCP port"),
        ({"MASTER_ADDR": "a b"}, InvalidVariable, "MASTER_ADDR", "a host name (RFC 1123"),
    ],
)
def test_bad_variables_are_named(
    change: dict[str, str | None], error: type[TopologyError], variable: str, expected: str
) -> None:
    env = {k: v for k, v in {**OMPI, **change}.items() if v is not None}
    with pytest.raises(error) as info:
        resolver.resolve(env, probes.fake())
    assert info.value.variable == variable
    assert variable in str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MPI_LOCALNRANKS": "2", "PMI_SIZE": "2", **MASTER}, "PMI_RANK"),
        ({"MPI_LOCALNRANKS": "2", "PMI_RANK": "0", **MASTER}, "PMI_SIZE"),
        ({**PALS_RANK, "PALS_NODEID": "one", **MASTER}, "PALS_NODEID"),
        ({**PALS_RANK, "PMI_LOCAL_SIZE": "0", **MASTER}, "PMI_LOCAL_SIZE"),
        ({"PMIX_RANK": "", **MASTER}, "PMIX_RANK"),
    ],
)
def test_other_launchers_name_their_variables(env: dict[str, str], variable: str) -> None:
    with pytest.raises((MissingVariable, InvalidVariable)) as info:
        resolver.resolve(env, probes.fake(), source="mpi")
    error = info.value
    assert isinstance(error, (MissingVariable, InvalidVariable))
    assert error.variable == variable


def test_a_comm_that_disagrees_with_the_launcher_is_a_fault_with_the_mpich_hint() -> None:
    env = read_capture(captures("mpich/n4/rank2.env")[0])
    fakes = probes.fake(hostname="vm", free_port=1, comm=FakeComm(rank=0, size=1))  # the wheel's singleton
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve(env, fakes)
    message = str(info.value)
    assert info.value.probe == "comm"
    assert "COMM_WORLD says rank 0 of 1, but the launcher set PMI_RANK=2 and PMI_SIZE=4" in message
    assert "MPI4PY_MPIABI=mpich" in message
    assert "libmpi.so.12 -> libmpich.so.12" in message
    comm = FakeComm(rank=1, size=4)
    with pytest.raises(ProbeFailed, match="says rank 1 of 4, but the launcher set PMI_RANK=2"):
        resolver.resolve(env, probes.fake(hostname="vm", free_port=1, comm=comm))
    assert collectives(comm) == []  # checked before any collective


def test_the_comm_is_asked_only_when_needed_and_its_failure_says_why() -> None:
    env = read_capture(captures("openmpi/n4/rank1.env")[0])
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve(env, probes.fake(hostname="vm", free_port=1))  # no comm given
    assert info.value.probe == "comm"
    assert "needed for the main address (MASTER_ADDR), the main port (MASTER_PORT)" in str(info.value)
    assert resolver.resolve({**env, **MASTER}, probes.fake()).global_rank == 1


def test_mpi4py_missing_is_probe_failed_with_the_cause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # `from mpi4py import MPI` raises ImportError
    env = read_capture(captures("openmpi/n4/rank1.env")[0])
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve(env, probes.system())
    assert info.value.probe == "comm"
    assert "mpi4py is not importable" in str(info.value)
    assert "needed for the main address" in str(info.value)
    assert resolver.resolve({**env, **MASTER}, probes.system()).source == "mpi"  # not needed: no error


def test_a_missing_libmpi_gets_the_abi_hint() -> None:
    def comm() -> probes.Comm:
        raise ProbeFailed("comm", "mpi4py is not importable (libmpi.so.12: cannot open shared object file)")

    base = probes.fake(hostname="vm", free_port=1)
    fakes = probes.Probes(
        hostname=base.hostname,
        free_port=base.free_port,
        comm=comm,
        xla=base.xla,
        read_text=base.read_text,
        which=base.which,
    )
    with pytest.raises(ProbeFailed, match=r"Debian and Ubuntu name libmpich\.so\.12: put a directory holding a libmpi"):
        resolver.resolve(read_capture(captures("mpich/n4/rank0.env")[0]), fakes)


def test_a_failing_collective_is_probe_failed() -> None:
    class Broken(FakeComm):
        def allgather(self, sendobj: object) -> list[object]:
            raise RuntimeError("MPI_ERR_OTHER")

    env = {"PMIX_RANK": "0", **MASTER}
    with pytest.raises(ProbeFailed, match="allgather of the hostnames failed: RuntimeError"):
        resolver.resolve(env, probes.fake(hostname="h", comm=Broken(rank=0, size=2)))
    garbage = FakeComm(rank=0, size=2, gathered=[None, 7])  # not what the ranks send
    with pytest.raises(ProbeFailed, match="allgather returned"):
        resolver.resolve(env, probes.fake(hostname="h", comm=garbage))
    nameless = FakeComm(rank=0, size=2, gathered=[None, (None, None, None, None)])
    with pytest.raises(ProbeFailed, match="a rank sent no hostname"):
        resolver.resolve(env, probes.fake(hostname="h", comm=nameless))
    with pytest.raises(ProbeFailed, match="bcast returned 'x'"):
        resolver.resolve(
            read_capture(captures("mpich/n4/rank1.env")[0]),
            probes.fake(comm=FakeComm(rank=1, size=4, bcast_values={0: "x"})),
        )
    with pytest.raises(ProbeFailed, match="Get_size"):
        resolver.resolve(env, probes.fake(hostname="h", comm=FakeComm(rank=0, size=0)))


def test_every_rank_fails_alike_when_rank_0_cannot_answer() -> None:
    envs = [{**read_capture(p)} for p in captures("openmpi/n4/*.env")]
    results, _ = run_world(envs, ["vm"] * 4, ports=None)  # rank 0 has no free_port to give
    assert all(isinstance(r, ProbeFailed) for r in results), results
    assert isinstance(results[0], ProbeFailed)
    assert results[0].probe == "free_port"
    assert all("rank 0 could not answer" in str(r) for r in results[1:])


def test_rank_0s_unusable_host_name_fails_every_rank() -> None:
    envs = [{"PMIX_RANK": str(r), "MASTER_PORT": "5"} for r in range(2)]
    results, _ = run_world(envs, ["bad host", "ok"])
    assert all(isinstance(r, ProbeFailed) and "rank 0's host name 'bad host'" in str(r) for r in results), results


def test_connected_fake_comm_refuses_mismatched_collectives() -> None:
    world = FakeComm.connected(2, timeout=5)
    errors: list[BaseException] = []

    def call(comm: FakeComm) -> None:
        try:
            comm.allgather(1) if comm.rank == 0 else comm.bcast(1)
        except ProbeFailed as exc:
            errors.append(exc)

    threads = [threading.Thread(target=call, args=(c,)) for c in world]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(errors) == 2
    assert all("different collectives" in str(e) for e in errors)


# -- the property: any world of n ranks on k hosts ------------------------------------------------

HOSTS = ("n1", "n2", "n10", "gpu-a", "b")
FAMILIES = ("openmpi", "hydra", "pals", "pmi", "pmix")


def family_env(family: str, rank: int, hosts: Sequence[str]) -> dict[str, str]:
    n, here = len(hosts), hosts[rank]
    local = sum(1 for h in hosts[:rank] if h == here)
    local_size = sum(1 for h in hosts if h == here)
    node = sorted(set(hosts)).index(here)
    return {
        "openmpi": {
            "OMPI_COMM_WORLD_SIZE": str(n),
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(local_size),
            "OMPI_COMM_WORLD_NODE_RANK": str(local),
            "PMIX_RANK": str(rank),
            "PMIX_NAMESPACE": "7",
        },
        "hydra": {
            "PMI_SIZE": str(n),
            "PMI_RANK": str(rank),
            "MPI_LOCALRANKID": str(local),
            "MPI_LOCALNRANKS": str(local_size),
        },
        "pals": {
            "PALS_RANKID": str(rank),
            "PALS_LOCAL_RANKID": str(local),
            "PALS_NODEID": str(node),
            "PMI_SIZE": str(n),
            "PMI_LOCAL_SIZE": str(local_size),
        },
        "pmi": {"PMI_SIZE": str(n), "PMI_RANK": str(rank)},
        "pmix": {"PMIX_RANK": str(rank)},
    }[family]


@settings(max_examples=60, deadline=None)
@given(
    hosts=st.lists(st.sampled_from(HOSTS), min_size=2, max_size=8),
    family=st.sampled_from(FAMILIES),
    master=st.booleans(),
)
def test_every_rank_of_any_world_reaches_one_consistent_answer(hosts: list[str], family: str, master: bool) -> None:
    n = len(hosts)
    envs = [{**family_env(family, r, hosts), **(MASTER if master else {})} for r in range(n)]
    ports = [20000 + r for r in range(n)]
    results, world = run_world(envs, hosts, ports)
    tops = topologies(results)
    distinct = sorted(set(hosts))

    assert {t.source for t in tops} == {"mpi"}
    assert sorted(t.global_rank for t in tops) == list(range(n))
    assert {t.world_size for t in tops} == {n}
    expected_main = ("10.0.0.1", 29500) if master else (hosts[0], 20000)
    assert {(t.main_address, t.main_port) for t in tops} == {expected_main}
    for r, t in enumerate(tops):
        assert t.global_rank == r
        assert t.node_rank == distinct.index(hosts[r])
        assert t.num_nodes in (None, len(distinct))
        assert t.local_rank == sum(1 for h in hosts[:r] if h == hosts[r])
        assert t.local_world_size in (None, hosts.count(hosts[r]))
        assert t.warnings == ()
    same_node = {
        (a.node_rank == b.node_rank) == (hosts[i] == hosts[j]) for i, a in enumerate(tops) for j, b in enumerate(tops)
    }
    assert same_node == {True}

    # the comm: the same calls on every rank, one collective at most, none when the environment sufficed
    calls = [collectives(c) for c in world]
    assert len({tuple(c) for c in calls}) == 1
    gives_local = family in ("openmpi", "hydra", "pals")
    gives_node = family == "pals" or (gives_local and len(distinct) == 1)
    if gives_local and gives_node:
        assert calls[0] == ([] if master else ["bcast"])
        if master:
            assert all(c.calls == [] for c in world)  # not even Get_rank: the comm was never asked for
    else:
        assert calls[0] == ["allgather"]


def test_a_launcher_whose_local_size_is_the_world_needs_no_local_rank() -> None:
    env = {"PMI_SIZE": "3", "PMI_RANK": "2", "PMI_LOCAL_SIZE": "3", **MASTER}  # Cray PMI without PMI_LOCAL_RANK
    t = resolver.resolve(env, probes.fake())
    assert (t.local_rank, t.node_rank, t.num_nodes) == (2, 0, 1)
    assert t.provenance["local_rank"] == Origin.formula(
        "global rank (PMI_LOCAL_SIZE == PMI_SIZE: one node)", variables=("PMI_RANK", "PMI_LOCAL_SIZE", "PMI_SIZE")
    )


def test_a_comm_or_collective_raising_is_probe_failed_naming_what_was_needed() -> None:
    class Exploding(FakeComm):
        def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
            raise RuntimeError("MPI_Init_thread failed")

    env = read_capture(captures("mpich/n4/rank1.env")[0])
    with pytest.raises(ProbeFailed, match=r"RuntimeError\('MPI_Init_thread failed'\) \(the comm was needed for"):
        resolver.resolve(env, probes.fake(comm=Exploding(rank=1, size=4)))

    class BadBcast(FakeComm):
        def bcast(self, obj: object, root: int = 0) -> object:
            raise RuntimeError("MPI_ERR_TRUNCATE")

    with pytest.raises(ProbeFailed, match="bcast of the main address and port failed"):
        resolver.resolve(env, probes.fake(comm=BadBcast(rank=1, size=4)))
    bad_port = FakeComm(rank=1, size=4, bcast_values={0: ("vm", "vm", 0, None)})
    with pytest.raises(ProbeFailed, match="rank 0's main port 0 is not a TCP port"):
        resolver.resolve(env, probes.fake(comm=bad_port))


def test_a_rank_whose_hostname_probe_fails_fails_every_rank_after_the_collective() -> None:
    envs = [{"PMIX_RANK": str(r), **MASTER} for r in range(3)]
    world = FakeComm.connected(3, timeout=10)
    results: list[object] = [None] * 3

    def rank(i: int) -> None:
        fakes = probes.fake(hostname=None if i == 2 else "h", comm=world[i])  # rank 2 cannot tell its name
        try:
            resolver.resolve(envs[i], fakes)
        except ProbeFailed as exc:
            results[i] = exc

    threads = [threading.Thread(target=rank, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [getattr(r, "probe", None) for r in results] == ["comm", "comm", "hostname"]
    assert all("rank 2 could not answer" in str(r) for r in results[:2])
    assert [collectives(c) for c in world] == [["allgather"]] * 3  # every rank still met once


def test_connected_fake_comm_does_not_hang_when_a_rank_stays_away() -> None:
    lonely = FakeComm.connected(2, timeout=0.2)[0]
    with pytest.raises(ProbeFailed, match=r"not every rank reached allgather within 0\.2 s"):
        lonely.allgather("h")


def test_a_collective_that_times_out_keeps_its_own_probe_name() -> None:
    class Late(FakeComm):
        def allgather(self, sendobj: object) -> list[object]:
            raise ProbeFailed("comm.allgather", "no answer within 1 s")

        def bcast(self, obj: object, root: int = 0) -> object:
            raise ProbeFailed("comm.bcast", "no answer within 1 s")

    with pytest.raises(ProbeFailed) as info:
        resolver.resolve({"PMIX_RANK": "1", **MASTER}, probes.fake(hostname="h", comm=Late(rank=1, size=2)))
    assert info.value.probe == "comm.allgather"
    env = read_capture(captures("mpich/n4/rank1.env")[0])
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve(env, probes.fake(comm=Late(rank=1, size=4)))
    assert info.value.probe == "comm.bcast"


HAND_SET = {
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_RANK": "3",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
}


def test_mpi_variables_with_no_launcher_behind_them_are_said_to_be_so() -> None:
    """OMPI_COMM_WORLD_* set by hand (or inherited outside mpirun): MPI starts a world of one; the error
    names the variables and how to start the program, not an mpi4py/MPI mismatch (issue 27, point 3)."""
    from probes.fakes import FakeComm

    singleton = probes.fake(hostname="n1", comm=FakeComm(rank=0, size=1))
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(HAND_SET, singleton)
    assert info.value.variable == "OMPI_COMM_WORLD_SIZE"
    assert "no launcher stands behind them" in str(info.value) and "mpirun -np 4" in str(info.value)
    assert "OMPI_COMM_WORLD_RANK=3" in str(info.value) and "MPI4PY_MPIABI" not in str(info.value)
    with_launcher = {**HAND_SET, "PMIX_SERVER_URI41": "prterun-n1-1@0.0;tcp4://127.0.0.1:40000"}
    with pytest.raises(ProbeFailed, match="MPI4PY_MPIABI"):  # a launcher is there: mpi4py loads another MPI
        resolver.resolve(with_launcher, singleton)
    hydra = {"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    with pytest.raises(InvalidVariable, match="no launcher stands behind them"):
        resolver.resolve(hydra, singleton)


def test_hostnames_come_from_the_gathered_host_names_in_node_rank_order() -> None:
    """The allgather that numbers the nodes knows the job's hosts: hostnames[node_rank] is this rank's."""
    from resolver.testing import openmpi_job

    for t in openmpi_job(np=4, hosts=("n2", "n1"), slots=2).resolve():
        assert t.hostnames == ("n1", "n2") and t.hostnames[t.node_rank] in ("n1", "n2")
