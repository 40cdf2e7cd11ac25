"""The Flux source: tasks of Flux's job shell, from environments shaped as flux-environment(7) documents them."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, Origin, ProbeFailed
from resolver import testing as rt
from resolver.sources import flux
from resolver.testing.flux import flux_env, flux_job

FAKE = probes.fake()  # one node: no probe is asked

# task 3 of `flux run -N1 -n4` (job ƒuZZybuNNy = 6731191091817518, RFC 19's example)
ONE_NODE = {
    "FLUX_JOB_ID": "\u0192uZZybuNNy",
    "FLUX_JOB_NNODES": "1",
    "FLUX_JOB_SIZE": "4",
    "FLUX_JOB_TMPDIR": "/tmp/flux-abc123/jobtmp-0-\u0192uZZybuNNy",
    "FLUX_KVS_NAMESPACE": "job-6731191091817518",
    "FLUX_TASK_LOCAL_ID": "3",
    "FLUX_TASK_RANK": "3",
    "FLUX_URI": "local:///tmp/flux-abc123/local-0",
    "PMI_FD": "7",
    "PMI_RANK": "3",
    "PMI_SIZE": "4",
    "PMI_SPAWNED": "0",
}
PORT = 20000 + 6731191091817518 % 10000


def test_one_node_needs_no_probe() -> None:
    t = resolver.resolve(ONE_NODE, FAKE)
    assert (t.source, t.world_size, t.global_rank, t.local_rank) == ("flux", 4, 3, 3)
    assert (t.node_rank, t.num_nodes, t.local_world_size) == (0, 1, 4)
    assert (t.main_address, t.main_port) == ("127.0.0.1", PORT)
    assert t.job_id == "\u0192uZZybuNNy" and t.creates_processes_externally
    assert t.provenance["main_port"] == Origin.formula(
        "20000 + FLUX_JOB_ID mod 10000 (20000 + 6731191091817518 mod 10000)", variables=("FLUX_JOB_ID",)
    )
    assert t.warnings == ()


def test_flux_comes_before_the_pmi_rule() -> None:
    explanation = resolver.explain(ONE_NODE)
    assert explanation.chosen == "flux"
    matched = [c.name for c in explanation.candidates if c.detection.matched]
    assert matched[:2] == ["flux", "mpi"]  # the PMI rule would match too, without the local rank


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("\u0192uZZybuNNy", 6731191091817518),  # RFC 19's example
        ("fuZZybuNNy", 6731191091817518),  # FLUX_F58_FORCE_ASCII
        ("\u01921", 0),
        ("6731191091817518", 6731191091817518),
        ("\u0192jpXCZedGfVQ", (1 << 64) - 1),
    ],
)
def test_f58_decodes_to_the_integer(raw: str, value: int) -> None:
    assert flux.f58_decode("FLUX_JOB_ID", raw) == value


@pytest.mark.parametrize(
    "raw", ["", "\u0192", "\u01920OIl", "\u0192jpXCZedGfVR", "18446744073709551616", " \u0192uZZybuNNy", "0x17e9"]
)
def test_f58_refuses_what_is_not_a_job_id(raw: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        flux.f58_decode("FLUX_JOB_ID", raw)
    assert info.value.variable == "FLUX_JOB_ID"


@given(st.integers(0, (1 << 64) - 1))
def test_the_builders_f58_round_trips(job: int) -> None:
    assert flux.f58_decode("FLUX_JOB_ID", flux_env(job_id=job)["FLUX_JOB_ID"]) == job


def test_one_task_per_node_numbers_nodes_by_task_rank_and_asks_only_the_endpoint() -> None:
    job = flux_job(n=3, hosts=("n1", "n2", "n3"))
    tops = job.resolve()
    rt.assert_consistent(tops, job)
    assert [t.node_rank for t in tops] == [0, 1, 2]
    assert {(t.main_address, t.main_port) for t in tops} == {("n1", PORT)}
    assert str(tops[2].provenance["node_rank"]).startswith("formula:FLUX_TASK_RANK")
    assert str(tops[2].provenance["main_address"]).startswith("probe:comm.bcast")


@pytest.mark.parametrize("taskmap", ["block", "cyclic"])
def test_several_tasks_per_node_exchange_host_names(taskmap: str) -> None:
    job = flux_job(n=5, hosts=("n1", "n2"), taskmap=taskmap)  # type: ignore[arg-type]
    tops = job.resolve()
    rt.assert_consistent(tops, job)
    assert [t.local_world_size for t in tops] == [3 if p.hostname == "n1" else 2 for p in job]
    assert {t.main_address for t in tops} == {"n1"}
    assert all(t.warnings == () for t in tops)


def test_master_addr_and_port_win_and_a_disagreeing_node_count_is_told() -> None:
    job = flux_job(n=4, hosts=("n1", "n2"))
    extra = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    # Flux says two nodes, but every task has one host name: node ranks follow the host names
    same = [attrs.evolve(p, environ={**p.environ, **extra}, hostname="same") for p in job]
    tops = attrs.evolve(job, processes=tuple(same)).resolve()
    assert {(t.main_address, t.main_port, t.num_nodes, t.node_rank) for t in tops} == {("10.0.0.1", 29500, 1, 0)}
    assert all(any("FLUX_JOB_NNODES=2 but the tasks' host names show 1" in w for w in t.warnings) for t in tops)


def test_across_nodes_without_mpi_the_error_says_what_the_comm_was_for() -> None:
    env = flux_env(rank=1, n=4, hosts=("n1", "n2"))
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve(env, probes.fake(hostname="n1"))
    assert info.value.probe == "comm"
    assert "the node rank" in str(info.value) and "the main address" in str(info.value)


def test_an_mpirun_rank_inside_a_flux_task_is_mpi_with_the_flux_job_id() -> None:
    env = {
        **flux_env(n=1),
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "PMIX_NAMESPACE": "prterun-vm-1234@1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "29500",
    }
    assert resolver.explain(env).chosen == "mpi"
    t = resolver.resolve(env, FAKE)
    assert (t.source, t.job_id, t.provenance["job_id"]) == ("mpi", "\u0192uZZybuNNy", Origin.env("FLUX_JOB_ID"))


def test_the_initial_program_is_one_process_with_a_warning() -> None:
    env = {"FLUX_URI": "local:///tmp/flux-abc123/local-0", "HOME": "/home/u"}
    t = resolver.resolve(env, probes.fake(free_port=4242, which={}))
    assert t.source == "lightning" and t.world_size == 1
    assert any("Flux's initial program" in w for w in t.warnings)
    (row,) = [c for c in resolver.explain(env).candidates if c.name == "flux"]
    assert row.detection.variables == ("FLUX_URI",) and not row.detection.matched


def test_a_cc_copy_records_its_index() -> None:
    t = resolver.resolve({**ONE_NODE, "FLUX_JOB_CC": "3"}, FAKE)
    assert (t.array_task_id, t.provenance["array_task_id"]) == ("3", Origin.env("FLUX_JOB_CC"))


@pytest.mark.parametrize("variable", ["FLUX_JOB_SIZE", "FLUX_TASK_LOCAL_ID", "FLUX_JOB_NNODES", "FLUX_JOB_ID"])
def test_missing_variables_are_named(variable: str) -> None:
    env = {k: v for k, v in ONE_NODE.items() if k != variable}
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(env, FAKE, source="flux")
    assert info.value.variable == variable
    assert "Flux" in str(info.value)


@pytest.mark.parametrize(
    ("change", "variable", "expected"),
    [
        ({"FLUX_TASK_RANK": "4"}, "FLUX_TASK_RANK", "< world_size (4)"),
        ({"FLUX_TASK_LOCAL_ID": "4"}, "FLUX_TASK_LOCAL_ID", "< local_world_size (4)"),
        ({"FLUX_JOB_NNODES": "5"}, "FLUX_JOB_NNODES", "<= world_size"),
        ({"FLUX_JOB_SIZE": "0"}, "FLUX_JOB_SIZE", ">= 1"),
        ({"FLUX_JOB_ID": "\u0192O0"}, "FLUX_JOB_ID", "F58"),
        ({"FLUX_JOB_CC": "x"}, "FLUX_JOB_CC", "decimal"),
        ({"MASTER_PORT": "0"}, "MASTER_PORT", "1..65535"),
    ],
)
def test_bad_values_name_the_variable(change: dict[str, str], variable: str, expected: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**ONE_NODE, **change}, FAKE)
    assert info.value.variable == variable
    assert expected in str(info.value)


def test_one_task_per_node_needs_local_id_zero() -> None:
    env = {**flux_env(rank=1, n=2, hosts=("n1", "n2")), "FLUX_TASK_LOCAL_ID": "1", "MASTER_ADDR": "n1"}
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(env, FAKE)
    assert info.value.variable == "FLUX_TASK_LOCAL_ID"
