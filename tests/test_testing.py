"""resolver.testing: every builder against every real capture, the one-world property, the JSON Schema."""

from __future__ import annotations

import copy
import inspect
import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import probes
import resolver
from resolver import Topology, TopologyError
from resolver import testing as rt
from resolver.environ import ADDRESS_RE
from resolver.topology import _SOURCE_RE
from tests.conftest import CAPTURES, read_capture

ROOT = Path(__file__).resolve().parent.parent
ROOTS = [CAPTURES]
FAKE = probes.fake(free_port=4242, which={})  # what a non-task (batch script, salloc shell) may ask

# -- builders against the captures ---------------------------------------------------------------------

S: dict[str, Any] = {"submit_host": "vm"}  # every capture was submitted from the machine `vm`
ALLOC_B: dict[str, Any] = {"nodes": ("vm",), "ntasks": 2, "allocation": "sbatch", "job_id": 2, **S}
ALLOC_C: dict[str, Any] = {"nodes": ("vm",), "ntasks": 2, "allocation": "salloc", **S}
ARRAY: dict[str, Any] = {"nodes": ("vm",), "ntasks": 1, "allocation": "sbatch", "job_id": 5, "array": range(2), **S}
ALLOC_F: dict[str, Any] = {"nodes": ("ci1", "ci2"), "ntasks": 2, "allocation": "salloc", "job_id": 12, **S}
ALLOC_F3: dict[str, Any] = {"nodes": ("ci1", "ci2"), "ntasks": 3, "allocation": "sbatch", "job_id": 13, **S}
ALLOC_G: dict[str, Any] = {
    "nodes": ("ci1", "ci2"),
    "ntasks": 4,
    "tasks_per_node": 2,
    "allocation": "sbatch",
    "job_id": 14,
    **S,
}


def ranks(pattern: str, n: int) -> tuple[str, ...]:
    return tuple(pattern.format(i) for i in range(n))


# capture files (in rank order) -> the launcher and the builder call that must reproduce them
JOBS: list[tuple[tuple[str, ...], str, Callable[[], rt.Job]]] = [
    (
        ranks("slurm/a_srun_N1_n4/rank{}.env", 4),
        "slurm",
        lambda: rt.slurm_job(nodes=("vm",), ntasks=4, tasks_per_node=4, job_id=1, job_name="bash", **S),
    ),
    (ranks("slurm/b_sbatch_n2/step0-rank{}.env", 2), "slurm", lambda: rt.slurm_job(**ALLOC_B)),
    (ranks("slurm/b_sbatch_n2/step1-rank{}.env", 2), "slurm", lambda: rt.slurm_job(step_id=1, **ALLOC_B)),
    (ranks("slurm/c_salloc_n2/direct-rank{}.env", 2), "slurm", lambda: rt.slurm_job(job_id=3, **ALLOC_C)),
    (ranks("slurm/c_salloc_n2/viashell-rank{}.env", 2), "slurm", lambda: rt.slurm_job(job_id=4, **ALLOC_C)),
    (("slurm/d_array/step0-task0-rank0.env",), "slurm", lambda: rt.slurm_job(array_task_id=0, **ARRAY)),
    (("slurm/d_array/step0-task1-rank0.env",), "slurm", lambda: rt.slurm_job(array_task_id=1, **ARRAY)),
    (
        ("slurm/e_jobname_bash/rank0.env",),
        "slurm",
        lambda: rt.slurm_job(nodes=("vm",), ntasks=1, job_id=7, job_name="bash", **S),
    ),
    (
        ("slurm/e_jobname_interactive/rank0.env",),
        "slurm",
        lambda: rt.slurm_job(nodes=("vm",), ntasks=1, job_id=8, job_name="interactive", **S),
    ),
    (
        ("slurm/e_jobname_default_srun_n1/rank0-srun-env.env",),
        "slurm",
        lambda: rt.slurm_job(nodes=("vm",), job_id=9, job_name="env", **S),
    ),
    (
        ranks("slurm/f_2node_srun_N2_n4/rank{}.env", 4),
        "slurm",
        lambda: rt.slurm_job(nodes=("ci1", "ci2"), ntasks=4, job_id=10, job_name="bash", **S),
    ),
    (
        ranks("slurm/f_2node_srun_N2_tpn2/rank{}.env", 4),
        "slurm",
        lambda: rt.slurm_job(nodes=("ci1", "ci2"), tasks_per_node=2, job_id=11, job_name="bash", **S),
    ),
    (ranks("slurm/f_2node_salloc_N2_n2/rank{}.env", 2), "slurm", lambda: rt.slurm_job(**ALLOC_F)),
    (ranks("slurm/f_2node_sbatch_N2_n3/step0-rank{}.env", 3), "slurm", lambda: rt.slurm_job(**ALLOC_F3)),
    (ranks("slurm/g_2node_sbatch_substeps/step0-rank{}.env", 4), "slurm", lambda: rt.slurm_job(**ALLOC_G)),
    (
        ("slurm/g_2node_sbatch_substeps/step1-rank0.env",),
        "slurm",
        lambda: rt.slurm_job(step_id=1, step_nodes=("ci2",), step_ntasks=1, **ALLOC_G),
    ),
    (
        ranks("slurm/g_2node_sbatch_substeps/step2-rank{}.env", 2),
        "slurm",
        lambda: rt.slurm_job(step_id=2, step_tasks_per_node=1, **ALLOC_G),
    ),
    (
        ranks("slurm/h_4node_srun_N3_n9_noncontig/rank{}.env", 9),
        "slurm",
        lambda: rt.slurm_job(nodes=("ci1", "ci2", "ci4"), ntasks=9, job_id=15, job_name="bash", **S),
    ),
    (
        ranks("openmpi/n4/rank{}.env", 4),
        "openmpi",
        lambda: rt.openmpi_job(np=4, hosts=("vm",), slots=2, oversubscribe=True, command="bash"),
    ),
    (ranks("mpich/n4/rank{}.env", 4), "mpich", lambda: rt.mpich_job(n=4, hosts=("vm",))),
    (
        ranks("torchrun/1node_c10d/rank{}.env", 2),
        "torchrun",
        lambda: rt.torchrun_job(nproc_per_node=2, hosts=("localhost",), master_port=33987),
    ),
    (
        ranks("torchrun/2node_c10d/rank{}.env", 4),
        "torchrun",
        lambda: rt.torchrun_job(nnodes=2, nproc_per_node=2, hosts=("localhost",) * 2, master_port=36891),
    ),
    (
        ranks("torchrun/2node_static/rank{}.env", 4),
        "torchrun",
        lambda: rt.torchrun_job(nnodes=2, nproc_per_node=2, rdzv="static", master_port=29512),
    ),
]
# single processes that are not tasks: the batch script and the salloc shell
SINGLE: list[tuple[str, Callable[[], dict[str, str]]]] = [
    ("slurm/b_sbatch_n2/batch.env", lambda: rt.slurm_batch_env(**ALLOC_B)),
    ("slurm/c_salloc_n2/salloc-shell.env", lambda: rt.slurm_salloc_env(job_id=4, **ALLOC_C)),
    ("slurm/d_array/batch-task0.env", lambda: rt.slurm_batch_env(array_task_id=0, **ARRAY)),
    ("slurm/d_array/batch-task1.env", lambda: rt.slurm_batch_env(array_task_id=1, **ARRAY)),
    ("slurm/f_2node_salloc_N2_n2/salloc-shell.env", lambda: rt.slurm_salloc_env(**ALLOC_F)),
    ("slurm/f_2node_sbatch_N2_n3/batch.env", lambda: rt.slurm_batch_env(**ALLOC_F3)),
    ("slurm/g_2node_sbatch_substeps/batch.env", lambda: rt.slurm_batch_env(**ALLOC_G)),
]


def assert_same_variables(built: Mapping[str, str], real: Mapping[str, str], launcher: str) -> None:
    """The same keys; the same values except the documented non-deterministic ones, which have their shape."""
    assert sorted(built) == sorted(real), (
        f"extra: {sorted(set(built) - set(real))}, missing: {sorted(set(real) - set(built))}"
    )
    shapes = rt.NONDETERMINISTIC[launcher]
    differ = {k: (built[k], real[k]) for k in real if k not in shapes and built[k] != real[k]}
    assert not differ, differ
    for key, shape in shapes.items():
        for env in (built, real):
            if key in env:
                assert re.fullmatch(shape, env[key]), (key, env[key], shape)


def job_ids(case: tuple[tuple[str, ...], str, object]) -> str:
    return case[0][0].rsplit("/", 1)[0] + "/" + case[0][0].rsplit("/", 1)[1].split("-")[0]


@pytest.mark.parametrize("root", ROOTS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize(("files", "launcher", "make"), JOBS, ids=[job_ids(c) for c in JOBS])
def test_job_builders_reproduce_the_captures(
    root: Path, files: tuple[str, ...], launcher: str, make: Callable[[], rt.Job]
) -> None:
    job = make()
    assert job.launcher == launcher and len(job) == len(files)
    real = [read_capture(root / name) for name in files]
    for built, env in zip(job.environs, real, strict=True):
        assert_same_variables(built, env, launcher)
    # resolving the capture and the builder's environment gives the same record, provenance included
    captured = attrs.evolve(job, processes=tuple(attrs.evolve(p, environ=e) for p, e in zip(job, real, strict=True)))
    assert [t.to_dict() for t in job.resolve()] == [t.to_dict() for t in captured.resolve()]


@pytest.mark.parametrize("root", ROOTS, ids=lambda p: p.parent.name)
@pytest.mark.parametrize(("name", "make"), SINGLE, ids=[name for name, _ in SINGLE])
def test_non_task_builders_reproduce_the_captures(root: Path, name: str, make: Callable[[], dict[str, str]]) -> None:
    built, real = make(), read_capture(root / name)
    assert_same_variables(built, real, "slurm")
    assert resolver.resolve(built, FAKE).to_dict() == resolver.resolve(real, FAKE).to_dict()


def test_every_capture_is_checked_against_a_builder() -> None:
    covered = {name for files, _, _ in JOBS for name in files} | {name for name, _ in SINGLE}
    present = {str(p.relative_to(CAPTURES)) for p in CAPTURES.glob("*/*/*.env")}
    assert present == covered, f"captures without a builder check: {sorted(present - covered)}"


# -- placement rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ntasks", "nodes", "options", "layout"),
    [
        (4, 2, {}, (3, 1)),  # f_2node_srun_N2_n4: not ceil(4/2) = 2,2
        (9, 3, {}, (4, 4, 1)),  # h_4node_srun_N3_n9_noncontig
        (3, 2, {}, (2, 1)),  # f_2node_sbatch_N2_n3
        (4, 2, {"tasks_per_node": 2}, (2, 2)),  # f_2node_srun_N2_tpn2
        (2, 2, {}, (1, 1)),  # f_2node_salloc_N2_n2
        (4, 1, {}, (4,)),  # a_srun_N1_n4
        (5, 3, {"capacity": [1, 4, 4]}, (1, 3, 1)),
        (8, 2, {}, (4, 4)),
    ],
)
def test_slurm_fills_nodes_in_order(ntasks: int, nodes: int, options: dict[str, Any], layout: tuple[int, ...]) -> None:
    assert rt.slurm_tasks_per_node(ntasks, nodes, **options) == layout


def test_slurm_layout_matches_every_capture() -> None:
    for path in CAPTURES.glob("slurm/*/*.env"):
        env = read_capture(path)
        if "SLURM_STEP_TASKS_PER_NODE" in env and "SLURM_NTASKS_PER_NODE" not in env:
            n, tasks = int(env["SLURM_STEP_NUM_NODES"]), int(env["SLURM_STEP_NUM_TASKS"])
            counts = rt.slurm_tasks_per_node(tasks, n, capacity=4)
            built = rt.slurm_env(nodes=tuple(f"n{i}" for i in range(n)), ntasks=tasks)["SLURM_STEP_TASKS_PER_NODE"]
            assert built == env["SLURM_STEP_TASKS_PER_NODE"], (path, counts)


@given(st.integers(1, 6), st.integers(1, 4), st.data())
def test_slurm_layouts_hold_every_task_once(nodes: int, cpus: int, data: st.DataObject) -> None:
    ntasks = data.draw(st.integers(nodes, nodes * cpus))
    layout = rt.slurm_tasks_per_node(ntasks, nodes, capacity=cpus)
    assert sum(layout) == ntasks and all(1 <= c <= cpus for c in layout)
    assert list(layout) == sorted(layout, reverse=True)  # the first nodes fill first


def test_mpich_deals_ranks_in_turns() -> None:
    # measured with two emulated hosts: -hosts nodeA,nodeB -n 4, and -hosts nodeA:2,nodeB:2 -n 3
    assert mpich_hosts(n=4, hosts=("nodeA", "nodeB")) == ["nodeA", "nodeB", "nodeA", "nodeB"]
    assert mpich_hosts(n=3, hosts=("nodeA", "nodeB"), counts=(2, 2)) == ["nodeA", "nodeA", "nodeB"]
    env = rt.mpich_env(rank=2, n=4, hosts=("nodeA", "nodeB"))
    assert (env["MPI_LOCALRANKID"], env["MPI_LOCALNRANKS"], env["HYDI_CONTROL_FD"]) == ("1", "2", "7")
    assert "HYDI_CONTROL_FD" not in rt.mpich_env(rank=1, n=4, hosts=("nodeA", "nodeB"))  # started over ssh


def mpich_hosts(**launch: Any) -> list[str]:
    return [p.hostname for p in rt.mpich_job(**launch)]


def test_open_mpi_maps_by_slot_and_marks_remote_daemons() -> None:
    job = rt.openmpi_job(np=3, hosts=("vm", "nodeB"), slots=2, mpirun_pid=30572)
    assert job.hosts == ("vm", "vm", "nodeB")
    local, remote = job.environs[0], job.environs[2]
    assert local["PMIX_NAMESPACE"] == remote["PMIX_NAMESPACE"] == "462553089"  # measured: mpirun pid 30572 on vm
    assert remote["OMPI_FILE_LOCATION"] == "/tmp/ompi.nodeB.0/jf.7058/0/1"
    assert remote["OMPI_MCA_orte_node_regex"] == "vm,nodeB@0(2)" and "OMPI_MCA_orte_node_regex" not in local
    assert remote["OMPI_MCA_mpi_oversubscribe"] == "0" and remote["OMPI_MCA_orte_bound_at_launch"] == "1"
    over = rt.openmpi_job(np=5, hosts=("a", "b"), slots=2, oversubscribe=True)
    assert over.hosts == ("a", "a", "a", "b", "b")


def test_torchrun_and_kubeflow_defaults() -> None:
    static = rt.torchrun_env(rdzv="static", nnodes=2, node_rank=1)
    assert (static["MASTER_ADDR"], static["MASTER_PORT"], static["RANK"]) == ("127.0.0.1", "29500", "1")
    assert "OMP_NUM_THREADS" not in static  # one worker per agent
    c10d = rt.torchrun_env(nnodes=2, hosts=("a", "b"))
    assert c10d["MASTER_ADDR"] == "a"  # group rank 0's host
    pod = rt.kubeflow_env(rank=2, workers=3, name="bert")
    assert (pod["MASTER_ADDR"], pod["MASTER_PORT"], pod["WORLD_SIZE"], pod["RANK"]) == (
        "bert-master-0",
        "23456",
        "4",
        "2",
    )
    t = resolver.resolve(pod, probes.fake(), source="kubeflow")
    assert (t.world_size, t.global_rank, t.node_rank, t.main_address) == (4, 2, 2, "bert-master-0")


def test_lsf_env_carries_the_rankfile() -> None:
    task = rt.lsf_env(rank=4, hosts=("a01n01", "a01n02"), tasks_per_host=3, job_id=123456)
    assert task.hostname == "a01n02" and task.node == 1
    assert task.files[task.environ["LSB_DJOB_RANKFILE"]] == "batch1\n" + "a01n01\n" * 3 + "a01n02\n" * 3
    t = resolver.resolve(task.environ, task.probes())
    assert (t.source, t.global_rank, t.local_rank, t.node_rank, t.num_nodes) == ("lsf", 4, 1, 1, 2)
    assert (t.main_address, t.main_port) == ("a01n01", 10456)


def test_builders_are_pure() -> None:
    assert (
        rt.slurm_job(nodes=("ci1", "ci2"), ntasks=3).environs == rt.slurm_job(nodes=("ci1", "ci2"), ntasks=3).environs
    )
    assert rt.openmpi_env(np=2, rank=1) == rt.openmpi_env(np=2, rank=1)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.slurm_env(nodes=("a", "b"), ntasks=1), "at least one task on each node"),
        (lambda: rt.slurm_env(nodes=("a",), ntasks=5), "do not fit"),
        (lambda: rt.slurm_env(nodes=("a", "a")), "each host once"),
        (lambda: rt.slurm_env(nodes="ci1"), "sequence of host names"),
        (lambda: rt.slurm_env(step_ntasks=2), "need allocation="),
        (lambda: rt.slurm_env(allocation="sbatch", step_nodes=("x",)), "must be among"),
        (lambda: rt.slurm_env(array=range(2), array_task_id=0), "needs allocation='sbatch'"),
        (lambda: rt.slurm_env(allocation="sbatch", array=range(2), array_task_id=5), "must be in array"),
        (lambda: rt.slurm_env(procid=4, ntasks=4), "tasks 0..3"),
        (lambda: rt.slurm_batch_env(allocation="srun"), "batch script exists only"),
        (lambda: rt.openmpi_env(np=5, slots=2), "oversubscribe=True"),
        (lambda: rt.torchrun_env(nnodes=2, hosts=("a",)), "one per node"),
        (lambda: rt.torchrun_env(local_rank=1), "outside 1x1"),
        (lambda: rt.lsf_env(hosts=("batch1",)), "runs no task"),
        (lambda: rt.mpich_env(n=2, hosts=("a", "b"), counts=(1,)), "capacity"),
        (lambda: rt.kubeflow_env(rank=3), "pods 0..1"),
        (lambda: rt.jobs(launchers=["pbs"]), "expected some of"),
        (lambda: rt.slurm_salloc_env(allocation="sbatch"), "salloc shell exists only"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


# -- typed builders --------------------------------------------------------------------------------------

# every builder -> its launch class and the keywords it adds (the process it describes)
SIGNATURES: list[tuple[Callable[..., object], type, set[str]]] = [
    (rt.slurm_job, rt.SlurmLaunch, set()),
    (rt.slurm_env, rt.SlurmLaunch, {"procid"}),
    (rt.slurm_batch_env, rt.SlurmLaunch, set()),
    (rt.slurm_salloc_env, rt.SlurmLaunch, set()),
    (rt.torchrun_job, rt.TorchrunLaunch, set()),
    (rt.torchrun_env, rt.TorchrunLaunch, {"node_rank", "local_rank"}),
    (rt.kubeflow_job, rt.KubeflowLaunch, set()),
    (rt.kubeflow_env, rt.KubeflowLaunch, {"rank"}),
    (rt.openmpi_job, rt.OpenMpiLaunch, set()),
    (rt.openmpi_env, rt.OpenMpiLaunch, {"rank"}),
    (rt.mpich_job, rt.MpichLaunch, set()),
    (rt.mpich_env, rt.MpichLaunch, {"rank"}),
    (rt.lsf_job, rt.LsfLaunch, set()),
    (rt.lsf_env, rt.LsfLaunch, {"rank"}),
]


@pytest.mark.parametrize(("build", "launch", "added"), SIGNATURES, ids=[b.__name__ for b, _, _ in SIGNATURES])
def test_a_builder_takes_exactly_its_launch_fields(build: Callable[..., object], launch: type, added: set[str]) -> None:
    parameters = inspect.signature(build).parameters
    assert set(parameters) == {field.name for field in attrs.fields(launch)} | added
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert build.__module__ == launch.__module__ and build.__doc__


def test_mypy_refuses_a_keyword_no_launch_has(tmp_path: Path) -> None:
    use = tmp_path / "use_builders.py"
    use.write_text(
        "from resolver.testing import lsf_env, slurm_env\n"
        "slurm_env(procid=3, nodes=('ci1', 'ci2'), ntasks=4)\n"
        "slurm_env(procid=3, node=('a', 'b'))\n"
        "lsf_env(rank='4')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", str(use), "--cache-dir", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, errors
    assert ':3: error: Unexpected keyword argument "node"' in errors[0]
    assert ':4: error: Argument "rank" has incompatible type "str"; expected "int"' in errors[1]
    with pytest.raises(TypeError, match="node"):
        rt.slurm_env(procid=3, node=("a", "b"))  # type: ignore[call-arg]


# -- the one-world property -------------------------------------------------------------------------------


@pytest.mark.parametrize("launcher", rt.LAUNCHERS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_generated_job_resolves_to_one_world(launcher: str, data: st.DataObject) -> None:
    job = data.draw(rt.jobs(launchers=[launcher], max_processes=8), label="job")
    topologies = job.resolve()
    rt.assert_consistent(topologies, job)
    validator = jsonschema.Draft202012Validator(rt.topology_schema())
    for t in topologies:
        validator.validate(t.to_dict())


def test_jobs_mix_launchers() -> None:
    seen: set[str] = set()

    @settings(max_examples=60, deadline=None)
    @given(rt.jobs(max_processes=4))
    def collect(job: rt.Job) -> None:
        seen.add(job.launcher)

    collect()
    assert len(seen) >= 3, seen


def test_consistency_failures_are_named() -> None:
    job = rt.torchrun_job(nnodes=2, nproc_per_node=2)
    good = job.resolve()
    rt.assert_consistent(good, job)
    cases = [
        ((attrs.evolve(good[1], main_port=1), *good[:1], *good[2:]), "main endpoints"),
        ((*good[:3], attrs.evolve(good[3], global_rank=2)), "global ranks"),
        ((*good[:3], attrs.evolve(good[3], local_rank=0)), "local ranks"),
        ((*good[:2], attrs.evolve(good[2], node_rank=0), good[3]), "by node rank"),
        (good[:3], "world sizes"),
    ]
    for topologies, words in cases:
        with pytest.raises(AssertionError, match=words):
            rt.assert_consistent(topologies, job)
    with pytest.raises(AssertionError, match="no topologies"):
        rt.assert_consistent(())


def test_a_failing_rank_fails_the_job() -> None:
    job = rt.mpich_job(n=2, hosts=("a", "b"))
    broken = attrs.evolve(
        job, processes=(attrs.evolve(job.processes[0], environ={**job.environs[0], "PMI_SIZE": "x"}), job.processes[1])
    )
    with pytest.raises(TopologyError):
        broken.resolve(timeout=5)


# -- the JSON Schema ---------------------------------------------------------------------------------------

SCHEMA = rt.topology_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_schema_is_a_valid_2020_12_schema_of_every_field() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    fields = [field.name for field in attrs.fields(Topology)]
    assert SCHEMA["required"] == ["schema", *fields] == list(SCHEMA["properties"])
    assert SCHEMA["properties"]["schema"]["const"] == resolver.SCHEMA
    assert SCHEMA["properties"]["main_address"]["pattern"] == f"^{ADDRESS_RE.pattern}$"
    assert SCHEMA["properties"]["source"]["pattern"] == f"^{_SOURCE_RE.pattern}$"
    assert SCHEMA["properties"]["provenance"]["propertyNames"]["enum"] == fields


def test_the_schema_ships_in_the_package() -> None:
    assert json.loads((ROOT / "resolver" / "topology.schema.json").read_text()) == SCHEMA


@settings(max_examples=300)
@given(rt.topologies())
def test_every_record_validates_and_round_trips(t: Topology) -> None:
    data = t.to_dict()
    VALIDATOR.validate(data)
    VALIDATOR.validate(json.loads(t.to_json()))
    assert Topology.from_dict(data) == t


TAMPERED: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("schema 2", lambda d: d.update(schema=2)),
    ("schema missing", lambda d: d.pop("schema")),
    ("unknown field", lambda d: d.update(rank=0)),
    ("field missing", lambda d: d.pop("world_size")),
    ("world size 0", lambda d: d.update(world_size=0)),
    ("rank as text", lambda d: d.update(global_rank="0")),
    ("rank as bool", lambda d: d.update(global_rank=False)),
    ("negative local rank", lambda d: d.update(local_rank=-1)),
    ("zero nodes", lambda d: d.update(num_nodes=0)),
    ("port 0", lambda d: d.update(main_port=0)),
    ("port 65536", lambda d: d.update(main_port=65536)),
    ("address with a space", lambda d: d.update(main_address="10.0.0.1 x")),
    ("address empty", lambda d: d.update(main_address="")),
    ("address with a trailing newline", lambda d: d.update(main_address="10.0.0.1\n")),
    ("address with shell syntax", lambda d: d.update(main_address="$(reboot)")),
    ("source upper case", lambda d: d.update(source="SLURM")),
    ("external as text", lambda d: d.update(creates_processes_externally="yes")),
    ("job id as int", lambda d: d.update(job_id=7)),
    ("provenance of an unknown field", lambda d: d["provenance"].update(rank="env:RANK")),
    ("provenance not text", lambda d: d["provenance"].update(world_size=1)),
    ("warnings as text", lambda d: d.update(warnings="careful")),
    ("warning not text", lambda d: d.update(warnings=[1])),
    ("negative restart count", lambda d: d.update(restart_count=-1)),
]


@pytest.mark.parametrize(("what", "tamper"), TAMPERED, ids=[what for what, _ in TAMPERED])
def test_tampered_records_are_rejected_by_the_schema_and_by_from_dict(
    what: str, tamper: Callable[[dict[str, Any]], None]
) -> None:
    job = rt.slurm_job(nodes=("ci1", "ci2"), ntasks=3, job_id=77)
    data = copy.deepcopy(job.resolve()[2].to_dict())
    VALIDATOR.validate(data)
    tamper(data)
    assert list(VALIDATOR.iter_errors(data)), f"the schema accepted {what}"
    if what not in ("field missing",):  # from_dict fills omitted optional fields; world_size is required there too
        with pytest.raises(TopologyError):
            Topology.from_dict(data)


# -- imports -----------------------------------------------------------------------------------------------


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=ROOT
    )
    return done.stdout.strip()


def test_import_resolver_does_not_import_the_testing_module() -> None:
    assert run_python("import sys, resolver; print('resolver.testing' in sys.modules)") == "False"


def test_the_builders_work_without_hypothesis() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"  # importing hypothesis now fails
        "import resolver.testing as rt\n"
        "loaded = sys.modules['hypothesis'] is not None\n"
        "print(len(rt.slurm_job(nodes=('a', 'b'), ntasks=3)), loaded)\n"
        "try:\n    rt.jobs()\nexcept ImportError:\n    print('strategies need hypothesis')\n"
    )
    assert run_python(code).splitlines() == ["3 False", "strategies need hypothesis"]
