"""Grid Engine: the real captures (job script, binary job, array tasks, qrsh, qrsh -inherit, MPI ranks in a PE),
the job facts, the port rule, PE_HOSTFILE, and errors naming their variable."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import InvalidSettings, InvalidVariable, MissingVariable, ProbeFailed
from resolver import testing as rt
from resolver.origin import Origin
from resolver.sources import gridengine as ge
from tests.conftest import CAPTURES_HPC, CAPTURES_LOCAL, read_capture

HPC = CAPTURES_HPC / "gridengine"
LOCAL = CAPTURES_LOCAL / "gridengine"  # see tests/captures-local/gridengine/README.md
FAKE = probes.fake(free_port=4242, which={})  # a single process asks nothing; this answers if it did
# a job script of `qsub -pe mpi 8` on two hosts, as Grid Engine sets it (the measured variables)
TWO_HOSTS = {
    "ENVIRONMENT": "BATCH",
    "JOB_ID": "4711",
    "JOB_NAME": "train",
    "NHOSTS": "2",
    "NQUEUES": "2",
    "NSLOTS": "8",
    "PE": "mpi",
    "PE_HOSTFILE": "/var/spool/gridengine/execd/node1/active_jobs/4711.1/pe_hostfile",
    "QUEUE": "all.q",
    "RESTARTED": "0",
    "SGE_TASK_ID": "undefined",
    "SGE_TASK_FIRST": "undefined",
    "SGE_TASK_LAST": "undefined",
    "SGE_TASK_STEPSIZE": "undefined",
}
HOSTFILE = "node1 4 all.q@node1 UNDEFINED\nnode2 4 all.q@node2 UNDEFINED\n"


def port(job: int, task: int = 0) -> int:
    return 20000 + (job * 8191 + task) % 10000


# -- the one process Grid Engine starts ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "job_id", "job_name"),
    [
        (HPC / "a_qsub_pe/jobscript.env", "3", "ge_mpi"),
        (HPC / "a_qsub_pe/binary.env", "2", "ge_a_binary"),
        (LOCAL / "pe/jobscript.env", "4", "ge_pe"),
        (LOCAL / "qrsh/qrsh.env", "6", "ge_qrsh"),
    ],
    ids=lambda v: str(v.relative_to(v.parents[2])) if isinstance(v, Path) else v,
)
def test_a_job_script_binary_or_qrsh_is_a_world_of_one_with_the_jobs_facts(
    path: Path, job_id: str, job_name: str
) -> None:
    environ = read_capture(path)
    t = resolver.resolve(environ, FAKE)
    assert t.source == "gridengine"
    assert (t.world_size, t.global_rank, t.local_rank, t.node_rank) == (1, 0, 0, 0)
    assert (t.num_nodes, t.local_world_size) == (1, 1)
    assert (t.main_address, t.main_port) == ("127.0.0.1", port(int(job_id)))
    assert t.creates_processes_externally is False
    assert (t.job_id, t.job_name, t.array_job_id, t.array_task_id, t.restart_count) == (job_id, job_name, None, None, 0)
    assert t.warnings == ()
    assert str(t.provenance["job_id"]) == "env:JOB_ID"
    assert (
        str(t.provenance["main_port"]) == f"formula:20000 + JOB_ID * 8191 mod 10000 (20000 + {job_id} * 8191 mod 10000)"
    )


def test_the_hpc_truth_of_the_single_processes() -> None:
    for truth in json.loads((HPC / "truth.json").read_text()):
        if not truth["file"].startswith("a_"):
            continue
        t = resolver.resolve(read_capture(HPC / truth["file"]), FAKE)
        assert (t.global_rank, t.world_size, t.local_rank, t.local_world_size, t.node_rank, t.num_nodes) == (
            truth["global_rank"],
            truth["world_size"],
            truth["local_rank"],
            truth["local_world_size"],
            truth["node_rank"],
            truth["num_nodes"],
        )


@pytest.mark.parametrize("task", [2, 5])
def test_array_tasks_record_their_index_and_take_their_own_port(task: int) -> None:
    environ = read_capture(LOCAL / f"array/task{task}.env")
    t = resolver.resolve(environ, FAKE)
    assert (t.source, t.world_size, t.job_id, t.array_job_id, t.array_task_id) == ("gridengine", 1, "5", "5", str(task))
    assert t.main_port == port(5, task)
    assert str(t.provenance["array_task_id"]) == "env:SGE_TASK_ID"
    assert "SGE_TASK_ID" in str(t.provenance["main_port"])


def test_qrsh_inherit_task_is_one_process_and_says_it_is_not_numbered() -> None:
    environ = read_capture(LOCAL / "pe/qrsh-inherit.env")
    assert "PE_HOSTFILE" not in environ and environ["PE"] == "mpi"  # what the rule reads
    t = resolver.resolve(environ, FAKE)
    assert (t.source, t.world_size, t.job_id) == ("gridengine", 1, "4")
    assert environ["JOB_NAME"] == "petask" and t.job_name is None  # Grid Engine's name for every such task
    (warning,) = t.warnings
    assert "qrsh -inherit" in warning and "RANK, WORLD_SIZE" in warning


def test_the_master_task_of_a_multi_host_job_warns_that_it_is_one_process() -> None:
    t = resolver.resolve(TWO_HOSTS, FAKE)
    assert (t.source, t.world_size, t.main_address) == ("gridengine", 1, "127.0.0.1")
    (warning,) = t.warnings
    assert "NHOSTS=2" in warning and "mpirun" in warning


def test_master_variables_win() -> None:
    t = resolver.resolve({**TWO_HOSTS, "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}, FAKE)
    assert (t.main_address, t.main_port) == ("node1", 29500)
    assert (str(t.provenance["main_address"]), str(t.provenance["main_port"])) == (
        "env:MASTER_ADDR",
        "env:MASTER_PORT",
    )


@pytest.mark.parametrize(
    ("restarted", "count", "origin"),
    [
        ("0", 0, "env:RESTARTED"),
        ("1", 1, "formula:RESTARTED=1: restarted at least once"),
        ("2", 1, "formula:RESTARTED=2: restarted at least once"),
    ],
)
def test_restarted_is_a_flag(restarted: str, count: int, origin: str) -> None:
    t = resolver.resolve({**TWO_HOSTS, "RESTARTED": restarted}, FAKE)
    assert (t.restart_count, str(t.provenance["restart_count"])) == (count, origin)


# -- what Grid Engine does not resolve ----------------------------------------------------------------


@pytest.mark.parametrize("rank", range(4))
def test_open_mpi_ranks_in_a_pe_are_mpi_with_the_jobs_facts(rank: int) -> None:
    environ = read_capture(HPC / f"b_openmpi/rank{rank}.env")
    found = ge.GridEngine().detect(environ)
    assert not found and "OMPI_COMM_WORLD_SIZE" in found.reason and "MPI source" in found.reason
    assert resolver.explain(environ).chosen == "mpi"
    assert ge.job_facts(environ) == {
        "job_id": ("3", Origin.env("JOB_ID")),
        "job_name": ("ge_mpi", Origin.env("JOB_NAME")),
        "restart_count": (0, Origin.env("RESTARTED")),
    }
    assert ge.default_port(environ)[0] == port(3)
    with pytest.raises(InvalidSettings, match="OMPI_COMM_WORLD_SIZE='4'"):
        resolver.resolve(environ, FAKE, source="gridengine")


@pytest.mark.parametrize("rank", range(4))
def test_hydra_ranks_in_a_pe_are_mpi(rank: int) -> None:
    environ = read_capture(LOCAL / f"pe/hydra-rank{rank}.env")
    assert environ["PMI_RANK"] == str(rank)
    assert resolver.explain(environ).chosen == "mpi"
    assert "MPI_LOCALNRANKS" in ge.GridEngine().detect(environ).reason


def on_master_host(environ: dict[str, str], text: str) -> probes.Probes:
    """The probes of a rank on the master host (the PE_HOSTFILE's first host), where that file is."""
    return probes.fake(hostname=text.split(maxsplit=1)[0], files={environ["PE_HOSTFILE"]: text})


@pytest.mark.parametrize(
    ("folder", "pattern", "pe_hostfile", "job_id"),
    [
        (HPC, "b_openmpi/rank{}.env", HPC / "b_openmpi/rank0.pe_hostfile", "3"),
        (LOCAL, "pe/hydra-rank{}.env", LOCAL / "pe/jobscript.pe_hostfile", "4"),
    ],
    ids=["openmpi", "hydra"],
)
def test_mpi_ranks_on_the_master_host_need_no_exchange(
    folder: Path, pattern: str, pe_hostfile: Path, job_id: str
) -> None:
    truths = {t["file"]: t for t in json.loads((HPC / "truth.json").read_text())}
    for rank in range(4):
        environ = read_capture(folder / pattern.format(rank))
        t = resolver.resolve(environ, on_master_host(environ, pe_hostfile.read_text()))  # no comm: no exchange
        assert (t.source, t.global_rank, t.world_size, t.local_rank, t.node_rank, t.num_nodes) == (
            "mpi",
            rank,
            4,
            rank,
            0,
            1,
        )
        assert (t.main_address, t.main_port) == ("vm", port(int(job_id)))
        assert (
            str(t.provenance["main_address"])
            == f"formula:first host of PE_HOSTFILE ({environ['PE_HOSTFILE']}), this host"
        )
        assert (t.job_id, str(t.provenance["job_id"]), t.restart_count) == (job_id, "env:JOB_ID", 0)
        truth = truths.get(pattern.format(rank))
        if truth is not None:
            assert (t.global_rank, t.world_size, t.main_address) == (
                truth["global_rank"],
                truth["world_size"],
                truth["main_host"],
            )


def test_mpi_ranks_off_the_master_host_take_rank_0s_address_from_the_exchange() -> None:
    sge = {k: v for k, v in TWO_HOSTS.items() if k not in ("NHOSTS", "NQUEUES")}
    job = rt.openmpi_job(np=4, hosts=("node1", "node2"), slots=2)
    # the PE_HOSTFILE is on node1 only; each rank gets Grid Engine's variables, as Open MPI forwards them
    processes = tuple(
        attrs.evolve(
            p, environ={**p.environ, **sge}, files={sge["PE_HOSTFILE"]: HOSTFILE} if p.hostname == "node1" else {}
        )
        for p in job
    )
    found = attrs.evolve(job, processes=processes).resolve()
    rt.assert_consistent(found)
    assert {(t.main_address, t.main_port) for t in found} == {("node1", port(4711))}
    assert [t.node_rank for t in found] == [0, 0, 1, 1]
    assert {t.provenance["main_port"] for t in found} == {ge.default_port(sge)[1]}
    assert {t.job_id for t in found} == {"4711"}


def test_one_node_without_the_file_takes_the_exchange_on_every_rank() -> None:
    job = rt.openmpi_job(np=2, hosts=("node2",), slots=2)
    processes = tuple(attrs.evolve(p, environ={**p.environ, **TWO_HOSTS}) for p in job)
    found = attrs.evolve(job, processes=processes).resolve()
    assert {(t.main_address, t.main_port) for t in found} == {("node2", port(4711))}


def test_one_node_off_the_master_host_takes_the_exchange_where_every_host_reads_the_file() -> None:
    """mpirun -host node2 inside a job whose master host is node1, with a spool every host reads: the
    first PE host runs no rank, so it must not be the main address (the ranks would wait there)."""
    job = rt.openmpi_job(np=2, hosts=("node2",), slots=2)
    shared = {TWO_HOSTS["PE_HOSTFILE"]: HOSTFILE}  # node1 first
    processes = tuple(attrs.evolve(p, environ={**p.environ, **TWO_HOSTS}, files=shared) for p in job)
    found = attrs.evolve(job, processes=processes).resolve()
    assert {(t.main_address, t.main_port) for t in found} == {("node2", port(4711))}
    assert {str(t.provenance["main_address"]) for t in found} != {
        f"formula:first host of PE_HOSTFILE ({TWO_HOSTS['PE_HOSTFILE']}), this host"
    }


@pytest.mark.parametrize(
    "extra",
    [{"WORLD_SIZE": "8", "RANK": "3", "LOCAL_RANK": "3"}, {"LOCAL_RANK": "1"}],
)
def test_a_launcher_inside_the_job_leaves_its_ranks_to_the_default(extra: dict[str, str]) -> None:
    environ = {**TWO_HOSTS, **extra, "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}
    found = ge.GridEngine().detect(environ)
    assert not found and "default source" in found.reason
    t = resolver.resolve(environ, FAKE)
    assert t.source == "lightning" and t.local_rank == int(extra["LOCAL_RANK"])


def test_an_mpi_world_of_one_is_the_job_itself() -> None:
    environ = {**TWO_HOSTS, "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}
    assert resolver.resolve(environ, FAKE).source == "gridengine"


@pytest.mark.parametrize(
    ("environ", "reason"),
    [
        ({}, "JOB_ID and SGE_TASK_ID are not set"),
        ({"JOB_ID": "7"}, "SGE_TASK_ID not set"),
        ({"SGE_ROOT": "/var/lib/gridengine", "SGE_CELL": "default"}, "JOB_ID and SGE_TASK_ID are not set"),
    ],
)
def test_outside_a_job_it_declines(environ: dict[str, str], reason: str) -> None:
    found = ge.GridEngine().detect(environ)
    assert not found and reason in found.reason
    assert ge.job_facts(environ) == {}
    assert ge.main_host(environ, FAKE) is None


def test_explain_names_the_variables() -> None:
    text = str(resolver.explain(read_capture(LOCAL / "array/task5.env")))
    assert "* gridengine" in text and "[JOB_ID, SGE_TASK_ID]" in text and "SGE_TASK_ID='5'" in text


# -- errors name the variable ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("JOB_ID", "0", "a Grid Engine job id"),
        ("JOB_ID", "12a", "a Grid Engine job id"),
        ("SGE_TASK_ID", "0", "an array task index >= 1, or 'undefined'"),
        ("SGE_TASK_ID", "Undefined", "an array task index >= 1, or 'undefined'"),
        ("RESTARTED", "3", "0, 1 (restarted after a crash or migration) or 2"),
        ("NHOSTS", "0", "a decimal integer >= 1"),
        ("MASTER_PORT", "70000", "a TCP port"),
    ],
)
def test_malformed_values_name_their_variable(variable: str, value: str, expected: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**TWO_HOSTS, variable: value}, FAKE)
    assert (info.value.variable, info.value.value) == (variable, value)
    assert expected in (info.value.expected or "")


@pytest.mark.parametrize("missing", ["JOB_ID", "SGE_TASK_ID"])
def test_forced_outside_a_job_names_the_missing_variable(missing: str) -> None:
    environ = {k: v for k, v in TWO_HOSTS.items() if k != missing}
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(environ, FAKE, source="gridengine")
    assert info.value.variable == missing


# -- PE_HOSTFILE and the main host of MPI ranks -------------------------------------------------------------


def test_pe_hostfile_lines() -> None:
    text = (LOCAL / "pe/jobscript.pe_hostfile").read_text()
    assert ge.pe_hosts(text, "f") == [("vm", 4)]
    assert ge.pe_hosts("\n" + HOSTFILE + "\n", "f") == [("node1", 4), ("node2", 4)]
    assert ge.pe_hosts("node1.cluster 2 all.q@node1.cluster 0,0:0,1\n", "f") == [("node1.cluster", 2)]


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("", "it is empty"),
        ("\n \n", "it is empty"),
        ("node1\n", "line 1 is 'node1'"),
        ("node1 4 all.q UNDEFINED\nnode2 four all.q UNDEFINED\n", "line 2 is 'node2 four all.q UNDEFINED'"),
        ("$(id) 4 all.q UNDEFINED\n", "line 1"),
        ("node1 ４ all.q UNDEFINED\n", "line 1"),
    ],
)
def test_a_malformed_pe_hostfile_names_the_variable_and_the_line(text: str, fault: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        ge.pe_hosts(text, "/spool/pe_hostfile")
    assert (info.value.variable, info.value.value) == ("PE_HOSTFILE", "/spool/pe_hostfile")
    assert fault in (info.value.expected or "")


def test_main_host_is_the_first_pe_host_where_the_file_is_and_it_is_this_host() -> None:
    path = TWO_HOSTS["PE_HOSTFILE"]
    master = probes.fake(hostname="node1.cluster", files={path: HOSTFILE})  # the same host by short name
    host, origin = ge.main_host(TWO_HOSTS, master) or ("", None)
    assert (host, str(origin)) == ("node1", f"formula:first host of PE_HOSTFILE ({path}), this host")
    assert ge.main_host(TWO_HOSTS, probes.fake(files={})) is None  # a slave host: the MPI exchange decides
    shared_spool = probes.fake(hostname="node2", files={path: HOSTFILE})  # the file is readable, the host is not it
    assert ge.main_host(TWO_HOSTS, shared_spool) is None
    assert ge.main_host({k: v for k, v in TWO_HOSTS.items() if k != "PE_HOSTFILE"}, master) is None
    with pytest.raises(InvalidVariable, match="PE_HOSTFILE"):
        ge.main_host(TWO_HOSTS, probes.fake(files={path: "garbage\n"}))


def test_main_host_reads_the_real_file(tmp_path: Path) -> None:
    hostfile = tmp_path / "pe_hostfile"
    hostfile.write_text(HOSTFILE)
    live = attrs.evolve(probes.system(), hostname=lambda: "node1")  # the live file reader, on node1
    host, origin = ge.main_host({**TWO_HOSTS, "PE_HOSTFILE": str(hostfile)}, live) or ("", None)
    assert (host, str(origin)) == (
        "node1",
        f"formula:first host of PE_HOSTFILE ({hostfile}), this host",
    )
    assert ge.main_host({**TWO_HOSTS, "PE_HOSTFILE": str(tmp_path / "absent")}, live) is None


def test_a_probe_answering_garbage_is_named() -> None:
    def garbage(path: str) -> Any:
        return 42

    bad = attrs.evolve(probes.fake(), read_text=garbage)
    with pytest.raises(ProbeFailed, match="read_text"):
        ge.main_host(TWO_HOSTS, bad)


# -- the port rule --------------------------------------------------------------------------------------


@given(job=st.integers(1, 10**12), task=st.one_of(st.none(), st.integers(1, 10**6)))
def test_the_port_is_below_the_ephemeral_range_and_the_same_for_every_rank(job: int, task: int | None) -> None:
    environ = {"JOB_ID": str(job), "SGE_TASK_ID": ge.UNDEFINED if task is None else str(task)}
    value, origin = ge.default_port(environ)
    assert 20000 <= value < 30000
    assert value == ge.default_port(dict(environ))[0] == port(job, task or 0)
    assert origin.kind == "formula" and "JOB_ID" in origin.variables


@given(first=st.integers(1, 10**9))
def test_consecutive_jobs_get_distinct_ports(first: int) -> None:
    ports = {ge.default_port({"JOB_ID": str(job), "SGE_TASK_ID": "undefined"})[0] for job in range(first, first + 500)}
    assert len(ports) == 500


@given(environ=st.dictionaries(st.sampled_from(["JOB_ID", "SGE_TASK_ID", "RESTARTED", "NHOSTS", "PE"]), st.text()))
def test_any_values_give_a_topology_or_a_named_error(environ: dict[str, str]) -> None:
    try:
        t = resolver.resolve(environ, FAKE, source="gridengine")
    except (InvalidVariable, MissingVariable) as exc:
        named = exc.variable
    else:
        assert t.world_size == 1 and 20000 <= (t.main_port or 0) < 30000
        return
    assert named in environ or named in ge.CANDIDATES.names


def test_a_job_on_one_host_offers_its_slots_as_the_workers_per_node() -> None:
    """`--format torchrun` in a one-host job script gives --nproc-per-node=NSLOTS (issue 27, point 11)."""
    one_host = {**TWO_HOSTS, "NHOSTS": "1", "NSLOTS": "4"}
    t = resolver.resolve(one_host, FAKE)
    assert t.nproc_per_node == 4 and t.provenance["nproc_per_node"].variables == ("NSLOTS", "NHOSTS")
    assert resolver.resolve(TWO_HOSTS, FAKE).nproc_per_node is None  # NSLOTS counts both hosts' slots
