"""resolver.testing.slurm against the SLURM 22.05 captures; SLURM's placement rule."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import testing as rt
from tests.conftest import CAPTURES, CAPTURES_HPC, read_capture
from tests.testing.captured import assert_reproduces, assert_reproduces_one, assert_same_variables, case_id, ranks

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


JOBS: list[tuple[tuple[str, ...], Callable[[], rt.Job]]] = [
    (
        ranks("slurm/a_srun_N1_n4/rank{}.env", 4),
        lambda: rt.slurm_job(nodes=("vm",), ntasks=4, tasks_per_node=4, job_id=1, job_name="bash", **S),
    ),
    (ranks("slurm/b_sbatch_n2/step0-rank{}.env", 2), lambda: rt.slurm_job(**ALLOC_B)),
    (ranks("slurm/b_sbatch_n2/step1-rank{}.env", 2), lambda: rt.slurm_job(step_id=1, **ALLOC_B)),
    (ranks("slurm/c_salloc_n2/direct-rank{}.env", 2), lambda: rt.slurm_job(job_id=3, **ALLOC_C)),
    (ranks("slurm/c_salloc_n2/viashell-rank{}.env", 2), lambda: rt.slurm_job(job_id=4, **ALLOC_C)),
    (("slurm/d_array/step0-task0-rank0.env",), lambda: rt.slurm_job(array_task_id=0, **ARRAY)),
    (("slurm/d_array/step0-task1-rank0.env",), lambda: rt.slurm_job(array_task_id=1, **ARRAY)),
    (
        ("slurm/e_jobname_bash/rank0.env",),
        lambda: rt.slurm_job(nodes=("vm",), ntasks=1, job_id=7, job_name="bash", **S),
    ),
    (
        ("slurm/e_jobname_interactive/rank0.env",),
        lambda: rt.slurm_job(nodes=("vm",), ntasks=1, job_id=8, job_name="interactive", **S),
    ),
    (
        ("slurm/e_jobname_default_srun_n1/rank0-srun-env.env",),
        lambda: rt.slurm_job(nodes=("vm",), job_id=9, job_name="env", **S),
    ),
    (
        ranks("slurm/f_2node_srun_N2_n4/rank{}.env", 4),
        lambda: rt.slurm_job(nodes=("ci1", "ci2"), ntasks=4, job_id=10, job_name="bash", **S),
    ),
    (
        ranks("slurm/f_2node_srun_N2_tpn2/rank{}.env", 4),
        lambda: rt.slurm_job(nodes=("ci1", "ci2"), tasks_per_node=2, job_id=11, job_name="bash", **S),
    ),
    (ranks("slurm/f_2node_salloc_N2_n2/rank{}.env", 2), lambda: rt.slurm_job(**ALLOC_F)),
    (ranks("slurm/f_2node_sbatch_N2_n3/step0-rank{}.env", 3), lambda: rt.slurm_job(**ALLOC_F3)),
    (ranks("slurm/g_2node_sbatch_substeps/step0-rank{}.env", 4), lambda: rt.slurm_job(**ALLOC_G)),
    (
        ("slurm/g_2node_sbatch_substeps/step1-rank0.env",),
        lambda: rt.slurm_job(step_id=1, step_nodes=("ci2",), step_ntasks=1, **ALLOC_G),
    ),
    (
        ranks("slurm/g_2node_sbatch_substeps/step2-rank{}.env", 2),
        lambda: rt.slurm_job(step_id=2, step_tasks_per_node=1, **ALLOC_G),
    ),
    (
        ranks("slurm/h_4node_srun_N3_n9_noncontig/rank{}.env", 9),
        lambda: rt.slurm_job(nodes=("ci1", "ci2", "ci4"), ntasks=9, job_id=15, job_name="bash", **S),
    ),
]
# single processes that are not tasks: the batch script and the salloc shell
SINGLE: list[tuple[str, Callable[[], rt.Process]]] = [
    ("slurm/b_sbatch_n2/batch.env", lambda: rt.slurm_batch_env(**ALLOC_B)),
    ("slurm/c_salloc_n2/salloc-shell.env", lambda: rt.slurm_salloc_env(job_id=4, **ALLOC_C)),
    ("slurm/d_array/batch-task0.env", lambda: rt.slurm_batch_env(array_task_id=0, **ARRAY)),
    ("slurm/d_array/batch-task1.env", lambda: rt.slurm_batch_env(array_task_id=1, **ARRAY)),
    ("slurm/f_2node_salloc_N2_n2/salloc-shell.env", lambda: rt.slurm_salloc_env(**ALLOC_F)),
    ("slurm/f_2node_sbatch_N2_n3/batch.env", lambda: rt.slurm_batch_env(**ALLOC_F3)),
    ("slurm/g_2node_sbatch_substeps/batch.env", lambda: rt.slurm_batch_env(**ALLOC_G)),
]


@pytest.mark.parametrize(("files", "make"), JOBS, ids=[case_id(files) for files, _ in JOBS])
def test_the_builder_reproduces_the_captures(files: tuple[str, ...], make: Callable[[], rt.Job]) -> None:
    assert_reproduces(files, "slurm", make())


@pytest.mark.parametrize(("name", "make"), SINGLE, ids=[name for name, _ in SINGLE])
def test_the_non_task_builders_reproduce_the_captures(name: str, make: Callable[[], dict[str, str]]) -> None:
    assert_reproduces_one(name, "slurm", make())


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


def test_builders_are_pure() -> None:
    assert (
        rt.slurm_job(nodes=("ci1", "ci2"), ntasks=3).environs == rt.slurm_job(nodes=("ci1", "ci2"), ntasks=3).environs
    )


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
        (lambda: rt.slurm_salloc_env(allocation="sbatch"), "salloc shell exists only"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


# -- GPUs (tests/captures-hpc/slurm-gpu: SLURM 22.05 with 4 fake GPUs per node) ---------------------------

GPU = "slurm-gpu/"
G: dict[str, Any] = {"submit_dir": "/scratch/cap-slurm/job", "job_name": "cap.sh", **S}
GPU_JOBS: list[tuple[str, int, Callable[[], rt.Job]]] = [
    ("a1_srun_N1_n2_gpus-per-task1", 2, lambda: rt.slurm_job(ntasks=2, gpus_per_task=1, job_id=45, **G)),
    ("a2_srun_N1_n2_gpus-per-node2", 2, lambda: rt.slurm_job(ntasks=2, gpus_per_node=2, job_id=47, **G)),
    (
        "a3a_srun_N1_n4_gres4_bind-single1",
        4,
        lambda: rt.slurm_job(ntasks=4, gpus_per_node=4, gpu_bind="single:1", job_id=48, **G),
    ),
    ("a3b_srun_N1_n4_gres4_nobind", 4, lambda: rt.slurm_job(ntasks=4, gpus_per_node=4, job_id=49, **G)),
    (
        "a4_srun_N2_n4_gpus-per-task1",
        4,
        lambda: rt.slurm_job(nodes=("ci1", "ci2"), ntasks=4, gpus_per_task=1, job_id=54, **G),
    ),
]
GRES_JOB: dict[str, Any] = {
    "ntasks": 2,
    "allocation": "sbatch",
    "gpus_per_node": 2,
    "job_id": 57,
    **G,
    "job_name": "a6_sbatch_N1_gres2_n2.sbatch",
}


def assert_reproduces_gpu_capture(built: Mapping[str, str], name: str) -> None:
    real = read_capture(CAPTURES_HPC / name)
    assert_same_variables(built, real, "slurm")
    fake = probes.fake(free_port=4242, which={})
    assert resolver.resolve(built, fake).to_dict() == resolver.resolve(real, fake).to_dict()


@pytest.mark.parametrize(("case", "ntasks", "make"), GPU_JOBS, ids=[case for case, _, _ in GPU_JOBS])
def test_the_gpu_options_reproduce_the_captures(case: str, ntasks: int, make: Callable[[], rt.Job]) -> None:
    job = make()
    assert len(job) == ntasks
    for task, environ in enumerate(job.environs):
        assert_reproduces_gpu_capture(dict(environ), f"{GPU}{case}/task{task}.env")


def test_a_gres_batch_job_and_its_step_reproduce_the_captures() -> None:
    assert_reproduces_gpu_capture(rt.slurm_batch_env(**GRES_JOB), f"{GPU}a6_sbatch_N1_gres2_n2/batch.env")
    for task, environ in enumerate(rt.slurm_job(**GRES_JOB).environs):
        assert_reproduces_gpu_capture(dict(environ), f"{GPU}a6_sbatch_N1_gres2_n2/step0-task{task}.env")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"gpus_per_task": 1, "gpus_per_node": 1}, "give one"),
        ({"gpus_per_node": 5}, "node_gpus=4"),
        ({"ntasks": 4, "gpus_per_task": 2}, "node_gpus=4"),
        ({"gpus_per_node": 2, "gpu_bind": "closest"}, "single:K"),
        ({"gpu_bind": "single:1"}, "single:K"),
    ],
)
def test_gpu_requests_slurm_would_refuse_are_refused(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        rt.slurm_job(**options)


def test_gpus_per_task_of_two_binds_each_task_to_its_own_pair() -> None:
    job = rt.slurm_job(ntasks=2, gpus_per_task=2)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in job.environs] == ["0,1", "2,3"]
    assert [t.local_device for t in job.resolve()] == [0, 0]  # the first of each task's own


@given(st.data())
def test_every_task_of_a_gpu_launch_gets_a_device_it_sees_and_its_own(data: st.DataObject) -> None:
    nodes = data.draw(st.sampled_from([("ci1",), ("ci1", "ci2")]))
    ntasks = data.draw(st.integers(len(nodes), 4 * len(nodes)))  # 4 CPUs and 4 GPUs per node
    busiest = max(rt.slurm_tasks_per_node(ntasks, len(nodes)))
    options: dict[str, Any] = data.draw(
        st.sampled_from(
            [
                {"gpus_per_task": data.draw(st.integers(1, 4 // busiest))},
                {"gpus_per_node": data.draw(st.integers(busiest, 4))},
                {"gpus_per_node": data.draw(st.integers(busiest, 4)), "gpu_bind": "single:1"},
            ]
        )
    )
    job = rt.slurm_job(nodes=nodes, ntasks=ntasks, **options)
    topologies = job.resolve()
    rt.assert_consistent(topologies, job)
    used: dict[int, list[str]] = {}
    for t, environ in zip(topologies, job.environs, strict=True):
        assert t.visible_devices == tuple(environ["CUDA_VISIBLE_DEVICES"].split(","))
        assert t.local_device is not None, t.warnings
        used.setdefault(t.node_rank, []).append(t.visible_devices[t.local_device])
    for devices in used.values():
        assert len(set(devices)) == len(devices), (job.call, devices)
