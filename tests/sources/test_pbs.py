"""The PBS source (PBS Professional, OpenPBS, Torque): the job script and pbsdsh tasks as worlds of one
with the job's facts; MPI ranks inside a job as MPI, with PBS's job facts and endpoint."""

from __future__ import annotations

import attrs
import pytest

import probes
import resolver
from resolver import InvalidSettings, InvalidVariable, MissingVariable
from resolver import testing as rt
from resolver.sources import pbs
from resolver.testing.pbs import PbsLaunch, pbs_env

FAKE = probes.fake(hostname="node1")


def port(sequence: int, index: int = 0) -> int:
    return 20000 + (sequence * 8191 + index) % 10000


def test_the_job_script_is_a_world_of_one_with_the_jobs_facts() -> None:
    script = pbs_env(hosts=("node1",), ncpus=4, sequence=4711, name="train")
    t = resolver.resolve(script.environ, script.probes())
    assert (t.source, t.world_size, t.global_rank, t.num_nodes) == ("pbs", 1, 0, 1)
    assert not t.creates_processes_externally
    assert (t.main_address, t.main_port) == ("127.0.0.1", port(4711))
    assert (t.job_id, t.job_name) == ("4711.pbsserver", "train")
    assert t.array_task_id is None and t.warnings == ()
    assert str(t.provenance["job_id"]) == "env:PBS_JOBID"


def test_a_job_on_several_hosts_warns_from_the_node_file_or_torques_count() -> None:
    script = pbs_env(hosts=("node1", "node2"), ncpus=2)
    (warning,) = resolver.resolve(script.environ, script.probes()).warnings
    assert "has 2 hosts" in warning and "MPI launcher" in warning
    torque = pbs_env(hosts=("node1", "node2", "node3"), flavor="torque")
    unreadable = probes.fake(hostname="node1", files={})  # Torque's PBS_NUM_NODES says it without the file
    assert "has 3 hosts" in resolver.resolve(torque.environ, unreadable).warnings[0]


@pytest.mark.parametrize(
    ("launch", "array_job", "task", "variable"),
    [
        ({"array_index": 7}, "1234[].pbsserver", "7", "PBS_ARRAY_INDEX"),  # qsub -J
        ({"array_index": 7, "flavor": "torque"}, None, "7", "PBS_ARRAYID"),  # qsub -t
    ],
)
def test_a_subjob_records_its_index_and_takes_its_own_port(
    launch: dict[str, object], array_job: str | None, task: str, variable: str
) -> None:
    script = pbs_env(**launch)  # type: ignore[arg-type]
    t = resolver.resolve(script.environ, script.probes())
    assert (t.job_id, t.array_job_id, t.array_task_id) == ("1234[7].pbsserver", array_job, task)
    assert str(t.provenance["array_task_id"]) == f"env:{variable}"
    assert t.main_port == port(1234, 7) != port(1234, 8)


def test_a_pbsdsh_task_is_one_process_and_says_why() -> None:
    task = pbs_env(vnode=3, hosts=("node1", "node2"), ncpus=2)
    assert task.hostname == "node2" and task.files == {}  # the node file is on the mother superior
    t = resolver.resolve(task.environ, task.probes())
    assert (t.source, t.world_size, t.global_rank) == ("pbs", 1, 0)
    (warning,) = t.warnings
    assert "pbsdsh" in warning and "not ranks" in warning
    (row,) = [c for c in resolver.explain(task.environ).candidates if c.name == "pbs"]
    assert row.detection.variables == ("PBS_JOBID", "PBS_ENVIRONMENT", "PBS_TASKNUM", "PBS_NODENUM", "PBS_VNODENUM")


def test_an_interactive_job() -> None:
    shell = pbs_env(interactive=True)
    t = resolver.resolve(shell.environ, shell.probes())
    assert (t.source, t.job_name) == ("pbs", "STDIN")


@pytest.mark.parametrize(
    ("extra", "chosen"),
    [
        ({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}, "lightning"),  # a launcher inside the job
        ({"PMI_RANK": "0", "PMI_SIZE": "1"}, "pbs"),  # a singleton MPI program: still the job script
        ({"PALS_RANKID": "1", "PMI_SIZE": "4", "PALS_LOCAL_RANKID": "1", "PMI_LOCAL_SIZE": "2"}, "mpi"),
    ],
    ids=["rank-variables", "mpi-singleton", "cray-pals"],
)
def test_who_resolves_what_inside_a_job(extra: dict[str, str], chosen: str) -> None:
    env = {**pbs_env().environ, **extra}
    assert resolver.explain(env).chosen == chosen


def test_forcing_pbs_on_an_mpi_rank_is_refused() -> None:
    env = {**pbs_env().environ, "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}
    with pytest.raises(InvalidSettings, match="OMPI_COMM_WORLD_SIZE"):
        resolver.resolve(env, FAKE, source="pbs")


# -- MPI ranks inside a PBS job: the job's facts, its port, and the mother superior on one node --------------


def ranks_in(launch: PbsLaunch, job: rt.Job) -> rt.Job:
    """`job`'s ranks with the job script's variables (the MPI launchers forward them) and the node file."""
    script = launch.process()
    processes = tuple(
        attrs.evolve(p, environ={**script.environ, **p.environ}, files=dict(script.files) if p.node == 0 else {})
        for p in job
    )
    return attrs.evolve(job, processes=processes)


def test_mpi_ranks_on_one_node_need_no_collective() -> None:
    launch = PbsLaunch(hosts=("node1",), ncpus=4, sequence=99)
    job = ranks_in(launch, rt.mpich_job(n=4, hosts=("node1",)))
    tops = [resolver.resolve(p.environ, p.probes()) for p in job]  # no comm: the fakes would refuse it
    rt.assert_consistent(tops, job)
    assert {(t.source, t.main_address, t.main_port, t.job_id) for t in tops} == {
        ("mpi", "node1", port(99), "99.pbsserver")
    }
    assert str(tops[0].provenance["main_address"]).startswith("formula:first host of PBS_NODEFILE")
    assert str(tops[0].provenance["job_id"]) == "env:PBS_JOBID"


def test_on_another_host_than_the_mother_superior_the_ranks_ask_rank_0() -> None:
    launch = PbsLaunch(hosts=("node1", "node2"), sequence=99)
    job = ranks_in(launch, rt.mpich_job(n=2, hosts=("node2",)))  # mpiexec -hosts node2 -n 2
    readable = attrs.evolve(
        job, processes=tuple(attrs.evolve(p, files={launch.nodefile_path: launch.nodefile()}) for p in job)
    )
    tops = readable.resolve()
    rt.assert_consistent(tops, readable)
    assert {t.main_address for t in tops} == {"node2"}  # rank 0's host from the bcast, not node1
    assert {t.main_port for t in tops} == {port(99)}


def test_mpi_ranks_across_nodes_take_the_address_from_the_exchange() -> None:
    launch = PbsLaunch(hosts=("node1", "node2"), ncpus=2, sequence=99)
    job = ranks_in(launch, rt.openmpi_job(np=4, hosts=("node1", "node2"), slots=2))
    tops = job.resolve()
    rt.assert_consistent(tops, job)
    assert {(t.main_address, t.main_port) for t in tops} == {("node1", port(99))}
    assert str(tops[3].provenance["main_address"]).startswith("probe:comm")


# -- the module's pieces -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("job_id", "sequence", "index"),
    [
        ("1234.pbsserver", 1234, None),
        ("1234", 1234, None),
        ("1234[].srv", 1234, None),
        ("1234[7].srv", 1234, 7),
        ("1234-7.torque.example.org", 1234, 7),
    ],
)
def test_job_ids(job_id: str, sequence: int, index: int | None) -> None:
    env = {"PBS_JOBID": job_id, "PBS_ENVIRONMENT": "PBS_BATCH"}
    assert pbs.default_port(env)[0] == port(sequence, index or 0)


def test_node_file_lines() -> None:
    assert pbs.node_hosts("n1\nn1\n\nn2\n", "/f") == ["n1", "n1", "n2"]
    with pytest.raises(InvalidVariable) as info:
        pbs.node_hosts("n1\nbad host\n", "/f")
    assert info.value.variable == "PBS_NODEFILE" and "line 2" in str(info.value)
    with pytest.raises(InvalidVariable, match="empty"):
        pbs.node_hosts("\n", "/f")


def test_main_host_only_on_the_mother_superior() -> None:
    launch = PbsLaunch(hosts=("node1.cluster", "node2"))
    env, files = launch.script_variables(), {launch.nodefile_path: launch.nodefile()}
    host, origin = pbs.main_host(env, probes.fake(hostname="node1", files=files)) or ("", None)
    assert (host, str(origin)) == (
        "node1.cluster",
        f"formula:first host of PBS_NODEFILE ({launch.nodefile_path}), this host",
    )
    assert pbs.main_host(env, probes.fake(hostname="node2", files=files)) is None
    assert pbs.main_host(env, probes.fake(hostname="node1", files={})) is None
    by_address = PbsLaunch(hosts=("10.0.0.1", "10.0.0.2"))  # a node file of addresses: no short names
    env, files = by_address.script_variables(), {by_address.nodefile_path: by_address.nodefile()}
    assert pbs.main_host(env, probes.fake(hostname="10.0.0.2", files=files)) is None
    assert pbs.main_host(env, probes.fake(hostname="10.0.0.1", files=files)) is not None
    assert pbs.main_endpoint(env, probes.fake(), one_node=False) == {"main_port": pbs.default_port(env)}
    assert pbs.main_endpoint({}, probes.fake(), one_node=True) == {}


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"PBS_JOBID": "server.1234"}, "PBS_JOBID"),
        ({"PBS_ENVIRONMENT": "PBS_SHELL"}, "PBS_ENVIRONMENT"),
        ({"PBS_ARRAY_INDEX": "x"}, "PBS_ARRAY_INDEX"),
        ({"PBS_NUM_NODES": "0"}, "PBS_NUM_NODES"),
        ({"PBS_VNODENUM": "-1"}, "PBS_VNODENUM"),
        ({"MASTER_PORT": "0"}, "MASTER_PORT"),
    ],
)
def test_bad_values_name_the_variable(change: dict[str, str], variable: str) -> None:
    env = {**pbs_env(flavor="torque").environ, **change}
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(env, probes.fake(hostname="node1", files={}))
    assert info.value.variable == variable


def test_the_node_file_is_named_when_malformed() -> None:
    script = pbs_env()
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(script.environ, probes.fake(files={script.environ["PBS_NODEFILE"]: "a;b\n"}))
    assert info.value.variable == "PBS_NODEFILE"


def test_forced_without_the_job_variables_names_them() -> None:
    with pytest.raises(MissingVariable) as info:
        resolver.resolve({"PBS_JOBID": "1.s"}, FAKE, source="pbs")
    assert info.value.variable == "PBS_ENVIRONMENT"
    assert resolver.explain({"PBS_JOBID": "1.s"}).chosen == "lightning"


def test_the_job_script_offers_this_host_s_slots_as_the_workers_per_node() -> None:
    """`--format torchrun` in a job script gives --nproc-per-node (issue 27, point 11): Torque's
    PBS_NUM_PPN, else the node file's lines for this host (the mother superior)."""
    script = pbs_env(hosts=("node1", "node2"), ncpus=3)
    t = resolver.resolve(script.environ, script.probes())
    assert t.nproc_per_node == 3 and t.provenance["nproc_per_node"].kind == "formula"
    torque = pbs_env(hosts=("node1", "node2"), ncpus=2, flavor="torque")
    assert resolver.resolve(torque.environ, probes.fake(hostname="node1", files={})).nproc_per_node == 2
    elsewhere = probes.fake(hostname="node2", files=dict(script.files))
    assert resolver.resolve(script.environ, elsewhere).nproc_per_node is None  # not the mother superior


def test_the_node_file_is_read_once_per_resolve() -> None:
    task = pbs_env(hosts=("node1", "node2"), ncpus=2)
    fake = task.probes()
    reads: list[str] = []

    def read_text(path: str) -> str:
        reads.append(path)
        return fake.read_text(path)

    t = resolver.resolve(task, attrs.evolve(fake, read_text=read_text))
    assert t.source == "pbs" and t.nproc_per_node == 2 and len(t.warnings) == 1
    assert reads == [task["PBS_NODEFILE"]]
