"""resolver/_devices.py: which accelerator is mine, for every source, against SLURM's own binding."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import InvalidSettings, InvalidVariable, Topology
from resolver._devices import VISIBILITY, bind, parse_devices
from tests.conftest import CAPTURES_HPC, read_capture

GPU_CAPTURES = CAPTURES_HPC / "slurm-gpu"
TRUTH: list[dict[str, Any]] = json.loads((GPU_CAPTURES / "truth.json").read_text())
GPU_TRUTH = [t for t in TRUTH if t["visible_gpus"]]

# The --gpu-bind=closest (c*) and mask_gpu (d*) captures: the GPU each task takes (its SLURM_STEP_GPUS id) by the
# binding srun applied (its command.txt), or None where the environment does not say which one is the task's.
BOUND: dict[str, dict[str, int | None]] = {
    # closest, every task sees the step's four: one each, by local rank
    "c1_srun_N1_n4_gres4_bind-closest": {"task0.env": 0, "task1.env": 1, "task2.env": 2, "task3.env": 3},
    # closest, three tasks on ci1 share its two GPUs (the third is left out); task 3 alone on ci2 is not bound
    "c2_srun_N2_n4_gpus-per-node2_bind-closest": {"task0.env": 0, "task1.env": 1, "task2.env": None, "task3.env": 0},
    # a step of 2 GPUs inside a job of 4: SLURM_GPUS_ON_NODE is the step's, so each task sees all the step's
    "c3_sbatch_N1_gres4_step-gres2_bind-closest": {"step0-task0.env": 0, "step0-task1.env": 1},
    # mask_gpu:0x3,0xc: task 0 GPUs 0,1, task 1 GPUs 2,3, each the first of its own
    "d1_srun_N1_n2_gres4_bind-mask": {"task0.env": 0, "task1.env": 2},
    # the list reused for four tasks: 0 and 2 share 0,1, 1 and 3 share 2,3, in local-rank order
    "d2_srun_N1_n4_gres4_bind-mask": {"task0.env": 0, "task1.env": 2, "task2.env": 1, "task3.env": 3},
    # mask_gpu:0x3*2,0xc*2: 0 and 1 share 0,1, 2 and 3 share 2,3
    "d3_srun_N1_n4_gres4_bind-mask-repeated": {"task0.env": 0, "task1.env": 1, "task2.env": 2, "task3.env": 3},
    # two nodes: the masks count from each node's lowest task; task 3 alone on ci2 is not bound
    "d4_srun_N2_n4_gpus-per-node4_bind-mask": {"task0.env": 0, "task1.env": 2, "task2.env": 1, "task3.env": 0},
    # mask 0xc names no GPU of the step's two: slurmstepd binds task 1 to GPU 0, which task 0 also sees
    "d5_srun_N1_n2_gres2_bind-mask-outside": {"task0.env": None, "task1.env": 0},
    # mask_gpu:0x3,0x6: tasks see 0,1 and 1,2; which one each should take is not said
    "d6_srun_N1_n2_gres4_bind-mask-overlapping": {"task0.env": None, "task1.env": None},
}
BOUND_TRUTH = [t for t in GPU_TRUTH if t["case"] in BOUND]


def capture(case: str, file: str) -> dict[str, str]:
    return read_capture(GPU_CAPTURES / case / file)


def fake(**kw: Any) -> probes.Probes:
    return probes.fake(hostname="ci1", free_port=29500, **kw)


TORCHRUN = {
    "TORCHELASTIC_RUN_ID": "none",
    "GROUP_RANK": "0",
    "WORLD_SIZE": "4",
    "RANK": "2",
    "LOCAL_RANK": "2",
    "LOCAL_WORLD_SIZE": "4",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "29500",
}
MPIRUN = {
    "OMPI_COMM_WORLD_SIZE": "4",
    "OMPI_COMM_WORLD_RANK": "3",
    "OMPI_COMM_WORLD_LOCAL_RANK": "3",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
}


# -- SLURM's own binding (the captures) -------------------------------------------------------------------


@pytest.mark.parametrize("truth", GPU_TRUTH, ids=[f"{t['case']}/{t['file']}" for t in GPU_TRUTH])
def test_each_captured_task_gets_a_device_slurm_gave_it(truth: dict[str, Any]) -> None:
    t = resolver.resolve(capture(truth["case"], truth["file"]), fake())
    assert t.visible_devices == tuple(str(gpu) for gpu in truth["physical_gpus"])
    assert str(t.provenance["visible_devices"]) == "env:CUDA_VISIBLE_DEVICES"
    if BOUND.get(truth["case"], {}).get(truth["file"], 0) is None:
        assert t.local_device is None and t.warnings
        return
    assert t.local_device in truth["visible_gpus"]  # an ordinal the task can open
    assert not t.warnings or truth["file"] == "batch.env"  # the batch script warns that it is one process


def test_every_closest_and_mask_gpu_capture_is_in_the_table() -> None:
    cases = {t["case"] for t in TRUTH if t["case"][0] in "cd"}
    assert cases == set(BOUND)
    assert sorted((t["case"], t["file"]) for t in BOUND_TRUTH) == sorted(
        (case, file) for case, files in BOUND.items() for file in files
    )


@pytest.mark.parametrize("truth", BOUND_TRUTH, ids=[f"{t['case']}/{t['file']}" for t in BOUND_TRUTH])
def test_closest_and_mask_gpu_give_each_task_the_gpu_its_binding_says(truth: dict[str, Any]) -> None:
    """srun --gpu-bind=closest / mask_gpu (issue 27, point 12): the GPU, or None with a warning naming the binding."""
    env = capture(truth["case"], truth["file"])
    t = resolver.resolve(env, fake())
    expected = BOUND[truth["case"]][truth["file"]]
    taken = None if t.local_device is None else int(t.visible_devices[t.local_device])  # type: ignore[index]
    assert taken == expected, t.warnings
    if expected is None:
        assert "SLURMD_TRES_BIND=" + env["SLURMD_TRES_BIND"] in t.warnings[-1]
        assert f"CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}" in t.warnings[-1]
    elif "SLURMD_TRES_BIND" in env and len(truth["physical_gpus"]) > 1:
        origin = t.provenance["local_device"]
        assert origin.kind == "formula" and "SLURMD_TRES_BIND" in origin.variables
        assert "SLURM_LOCALID" in origin.variables  # the local rank chose among the set


@pytest.mark.parametrize(
    ("case", "file", "words"),
    [
        ("c2_srun_N2_n4_gpus-per-node2_bind-closest", "task2.env", "(local_rank 2) is number 3 of them"),
        ("d5_srun_N1_n2_gres2_bind-mask-outside", "task0.env", "the masks name 4 GPUs and SLURM_GPUS_ON_NODE=2"),
        ("d6_srun_N1_n2_gres4_bind-mask-overlapping", "task1.env", "the masks 0x3 and 0x6 share GPUs"),
    ],
)
def test_a_binding_that_cannot_say_tells_why(case: str, file: str, words: str) -> None:
    t = resolver.resolve(capture(case, file), fake())
    assert t.local_device is None and words in t.warnings[-1]


def test_no_two_tasks_of_a_node_take_the_same_gpu() -> None:
    taken: dict[tuple[str, int], list[str]] = defaultdict(list)
    for truth in GPU_TRUTH:
        if truth["file"] == "batch.env":
            continue  # the batch script runs beside its steps' tasks, not as one of them
        t = resolver.resolve(capture(truth["case"], truth["file"]), fake())
        assert t.visible_devices is not None
        if t.local_device is not None:
            taken[(truth["case"], t.node_rank)].append(t.visible_devices[t.local_device])
    # the six launches of a*, one of them on two nodes; c1-c3, d1-d5 (d6 says None for both tasks), c2 and d4 on two
    assert len(taken) == 7 + 3 + 1 + 5 + 1
    for (case, node), gpus in taken.items():
        assert len(set(gpus)) == len(gpus), f"{case} node {node}: {gpus}"


@pytest.mark.parametrize(
    ("changes", "device", "origin"),
    [
        # --gpus-per-task=2: each task sees its own two, and uses the first
        ({"CUDA_VISIBLE_DEVICES": "2,3", "SLURMD_TRES_BIND": "gpu:per_task:2"}, 0, "SLURMD_TRES_BIND=gpu:per_task:2"),
        ({"CUDA_VISIBLE_DEVICES": "2,3", "SLURMD_TRES_BIND": "gpu:verbose,per_task:2"}, 0, "binds to this process"),
        # --gpu-bind=none binds nothing: the tasks share the list, by local rank
        ({"CUDA_VISIBLE_DEVICES": "0,1", "SLURMD_TRES_BIND": "gpu:none"}, 1, "local_rank"),
    ],
)
def test_slurm_binding_of_several_gpus(changes: dict[str, str], device: int, origin: str) -> None:
    env = {**capture("a2_srun_N1_n2_gpus-per-node2", "task1.env"), **changes}
    t = resolver.resolve(env, fake())
    assert t.local_device == device
    assert origin in str(t.provenance["local_device"])


@pytest.mark.parametrize(
    "binding", ["gpu:map_gpu:0,1", "gpu:per_task:4", "gpu:single:2", "gpu:mask_gpu:0x1,0x3", "gpu:mask_gpu:0xf"]
)
def test_a_binding_that_does_not_make_the_list_the_tasks_own_says_none(binding: str) -> None:
    env = {**capture("a2_srun_N1_n2_gpus-per-node2", "task1.env"), "SLURMD_TRES_BIND": binding}
    t = resolver.resolve(env, fake())
    assert t.visible_devices == ("0", "1") and t.local_device is None
    assert "SLURMD_TRES_BIND" in t.warnings[-1] and "CUDA_VISIBLE_DEVICES=0,1" in t.warnings[-1]


@pytest.mark.parametrize(
    ("changes", "device"),
    [
        ({"SLURMD_TRES_BIND": "gpu:closest"}, 1),  # both tasks see the step's two GPUs: by local rank
        ({"SLURMD_TRES_BIND": "gpu:verbose,closest"}, 1),
        ({"SLURMD_TRES_BIND": "gpu:closest", "SLURM_GPUS_ON_NODE": "4"}, None),  # narrowed: the others' lists unknown
        ({"SLURMD_TRES_BIND": "gpu:closest", "SLURM_GPUS_ON_NODE": None}, None),
        ({"SLURMD_TRES_BIND": "gpu:mask_gpu:0x3"}, 1),  # one mask for both: they share it in turn
        ({"SLURMD_TRES_BIND": "gpu:mask_gpu:0x3,0x3"}, 1),
        ({"SLURMD_TRES_BIND": "gpu:mask_gpu:0x3*3"}, 1),
        ({"SLURMD_TRES_BIND": "gpu:mask_gpu:0x3,0xc", "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "2,3"}, 0),
        ({"SLURMD_TRES_BIND": "gpu:mask_gpu:3,c", "SLURM_GPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "2,3"}, None),
    ],
)
def test_closest_and_mask_gpu_on_a_captured_task(changes: dict[str, str | None], device: int | None) -> None:
    env = capture("a2_srun_N1_n2_gpus-per-node2", "task1.env")  # local rank 1 of 2, GPUs 0,1
    for name, value in changes.items():
        if value is None:
            del env[name]
        else:
            env[name] = value
    for name in VISIBILITY:
        if name in env and name != "HIP_VISIBLE_DEVICES":
            env[name] = env["CUDA_VISIBLE_DEVICES"]
    t = resolver.resolve(env, fake())
    assert t.local_device == device
    if device is None:
        assert f"SLURMD_TRES_BIND={env['SLURMD_TRES_BIND']}" in t.warnings[-1]
    else:
        assert not t.warnings and "SLURMD_TRES_BIND" in t.provenance["local_device"].variables


def test_a_process_past_the_devices_of_its_set_gets_none() -> None:
    # mask_gpu:0x3 for four tasks: all four share GPUs 0,1; local ranks 2 and 3 come after them
    env = {**capture("a3b_srun_N1_n4_gres4_nobind", "task2.env"), "SLURMD_TRES_BIND": "gpu:mask_gpu:0x3"}
    for name in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL"):
        env[name] = "0,1"
    t = resolver.resolve(env, fake())
    assert t.local_device is None
    assert "(local_rank 2) is number 3 of them" in t.warnings[-1] and "at most 2 processes" in t.warnings[-1]


def test_fewer_shared_gpus_than_tasks_is_none_with_a_warning_naming_the_variables() -> None:
    # srun -n4 --gres=gpu:2: four tasks see the same two GPUs
    env = {**capture("a3b_srun_N1_n4_gres4_nobind", "task3.env")}
    for name in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL"):
        env[name] = "0,1"
    t = resolver.resolve(env, fake())
    assert t.visible_devices == ("0", "1") and t.local_device is None
    (warning,) = t.warnings
    assert "CUDA_VISIBLE_DEVICES=0,1" in warning and "SLURM_STEP_TASKS_PER_NODE" in warning
    assert "local_rank % 2" in warning


def test_slurm_step_gpus_alone_cannot_say_the_ordinal() -> None:
    env = {k: v for k, v in capture("a1_srun_N1_n2_gpus-per-task1", "task1.env").items() if k not in VISIBILITY}
    t = resolver.resolve(env, fake(devices=4))
    assert (t.visible_devices, t.local_device) == (None, None)
    assert "SLURM_STEP_GPUS=1" in t.warnings[0] and "CUDA_VISIBLE_DEVICES" in t.warnings[0]


# -- any launcher: the visibility variables ------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "visible", "device"),
    [
        pytest.param({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, ("0", "1", "2", "3"), 2, id="torchrun-shared"),
        pytest.param(
            {**TORCHRUN, "CUDA_VISIBLE_DEVICES": "4,5,6,7,0,1,2,3"},
            ("4", "5", "6", "7", "0", "1", "2", "3"),
            2,
            id="torchrun-more-than-needed",
        ),
        pytest.param({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1"}, ("0", "1"), None, id="torchrun-too-few"),
        pytest.param({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "3"}, ("3",), 0, id="torchrun-one-each"),
        pytest.param(
            {**TORCHRUN, "CUDA_VISIBLE_DEVICES": "GPU-8932f937,GPU-1a2b3c4d,MIG-5d3c0b3e/1/0,GPU-77"},
            ("GPU-8932f937", "GPU-1a2b3c4d", "MIG-5d3c0b3e/1/0", "GPU-77"),
            2,
            id="uuids-and-mig",
        ),
        pytest.param({**MPIRUN, "CUDA_VISIBLE_DEVICES": "3"}, ("3",), 0, id="mpirun-per-rank-wrapper"),
        pytest.param({**MPIRUN, "HIP_VISIBLE_DEVICES": "0,1,2,3"}, ("0", "1", "2", "3"), 3, id="amd-hip"),
        pytest.param(
            {**MPIRUN, "ROCR_VISIBLE_DEVICES": "1,2,3", "HIP_VISIBLE_DEVICES": "0"}, ("0",), 0, id="hip-within-rocr"
        ),
        pytest.param({**MPIRUN, "ZE_AFFINITY_MASK": "0.0,0.1,1.0,1.1"}, ("0.0", "0.1", "1.0", "1.1"), 3, id="intel"),
        pytest.param({**MPIRUN, "GPU_DEVICE_ORDINAL": "0,2,4,6"}, ("0", "2", "4", "6"), 3, id="amd-opencl"),
        pytest.param({**MPIRUN, "CUDA_VISIBLE_DEVICES": ""}, (), None, id="empty-hides-all"),
        pytest.param({**MPIRUN, "CUDA_VISIBLE_DEVICES": "-1"}, (), None, id="minus-one-hides-all"),
        pytest.param({**MPIRUN, "CUDA_VISIBLE_DEVICES": "NoDevFiles"}, (), None, id="slurm-no-device-files"),
        pytest.param({"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "1,0"}, ("1", "0"), 0, id="one-process"),
    ],
)
def test_visibility_variables(environ: dict[str, str], visible: tuple[str, ...], device: int | None) -> None:
    t = resolver.resolve(environ, fake())
    assert t.visible_devices == visible
    assert t.local_device == device
    if device is None and visible:
        assert any(name in t.warnings[-1] for name in VISIBILITY)


def test_a_negative_index_ends_the_list_as_cuda_documents() -> None:
    t = resolver.resolve({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,2,-1,1"}, fake())
    assert t.visible_devices == ("0", "2")
    assert t.local_device is None  # two devices for four processes
    assert any("stops at -1" in w and "CUDA_VISIBLE_DEVICES=0,2,-1,1" in w for w in t.warnings)


def test_an_ordinal_must_exist_under_every_vendors_variable() -> None:
    # on AMD, ROCR exposes one device and CUDA_VISIBLE_DEVICES indexes into it: ordinal 2 would not exist
    t = resolver.resolve({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1,2,3", "ROCR_VISIBLE_DEVICES": "0"}, fake())
    assert t.visible_devices == ("0", "1", "2", "3") and t.local_device is None
    assert "ROCR_VISIBLE_DEVICES=0" in t.warnings[-1]
    rank0 = resolver.resolve(
        {**TORCHRUN, "RANK": "0", "LOCAL_RANK": "0", "ROCR_VISIBLE_DEVICES": "0", "CUDA_VISIBLE_DEVICES": "0,1,2,3"},
        fake(),
    )
    assert rank0.local_device == 0  # valid under both


@pytest.mark.parametrize(
    "value",
    [
        "0,,1",
        ",",
        "0,",
        "0,0",
        "1,2,1",
        " 0",
        "0 ",
        "0, 1",
        "abc",
        "0x1",
        "1e3",
        "٣",
        "１",
        "1.2.3",
        "GPU-",
        "9" * 10,
        "0;1",
        "0\n",
        "0,-1,abc",
        "gpu-1",
    ],
)
@pytest.mark.parametrize("variable", [*VISIBILITY])
def test_a_malformed_list_is_an_error_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**TORCHRUN, variable: value}, fake())
    assert info.value.variable == variable and info.value.value == value


@pytest.mark.parametrize("variable", ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"])
def test_subdevices_belong_to_level_zero_and_uuids_not(variable: str) -> None:
    with pytest.raises(InvalidVariable):
        resolver.resolve({**TORCHRUN, variable: "0.1"}, fake())
    with pytest.raises(InvalidVariable):
        resolver.resolve({**TORCHRUN, "ZE_AFFINITY_MASK": "GPU-8932f937"}, fake())


@pytest.mark.parametrize("value", ["gpu:per_task:", "gpu:per_task:0", "gpu:per_task:x", "gpu:per_task:-1"])
def test_a_malformed_binding_is_an_error_naming_it(value: str) -> None:
    env = {**capture("a2_srun_N1_n2_gpus-per-node2", "task1.env"), "SLURMD_TRES_BIND": value}
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(env, fake())
    assert info.value.variable == "SLURMD_TRES_BIND"


@given(st.lists(st.integers(0, 99), unique=True, max_size=9), st.integers(1, 9), st.data())
def test_an_ordinal_is_always_one_the_process_can_open(gpus: list[int], local: int, data: st.DataObject) -> None:
    rank = data.draw(st.integers(0, local - 1))
    env = {
        **TORCHRUN,
        "WORLD_SIZE": str(local),
        "LOCAL_WORLD_SIZE": str(local),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, gpus)),
    }
    t = resolver.resolve(env, fake())
    assert t.visible_devices == tuple(map(str, gpus))
    if t.local_device is None:
        assert len(gpus) != 1 and (len(gpus) < local or not gpus)
    else:
        assert t.local_device < len(gpus)
        assert t.local_device == (0 if len(gpus) == 1 else rank)  # shared lists: distinct ranks, distinct GPUs


# -- no variable: the device-count probe ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "visible", "device"),
    [(4, ("0", "1", "2", "3"), 2), (8, tuple(map(str, range(8))), 2), (2, ("0", "1"), None)],
)
def test_the_probe_counts_when_no_variable_says(count: int, visible: tuple[str, ...], device: int | None) -> None:
    t = resolver.resolve(TORCHRUN, fake(devices=count))
    assert (t.visible_devices, t.local_device) == (visible, device)
    assert str(t.provenance["visible_devices"]) == "probe:device_count"


@pytest.mark.parametrize("answer", [{}, {"devices": 0}])
def test_a_probe_without_an_answer_or_a_node_without_devices_says_none(answer: dict[str, int]) -> None:
    t = resolver.resolve(TORCHRUN, fake(**answer))
    assert (t.visible_devices, t.local_device, t.warnings) == (None, None, ())
    assert "visible_devices" not in t.provenance


def test_a_probe_is_not_asked_when_a_variable_says() -> None:
    asked: list[str] = []

    def count() -> int:
        asked.append("device_count")
        return 8

    bundle = attrs.evolve(fake(), device_count=count)
    assert resolver.resolve({**TORCHRUN, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}, bundle).visible_devices == (
        "0",
        "1",
        "2",
        "3",
    )
    assert asked == []
    assert resolver.resolve(TORCHRUN, bundle).visible_devices == tuple(map(str, range(8)))
    assert asked == ["device_count"]


def test_a_bundle_built_without_the_device_probe_still_resolves() -> None:
    bare = probes.Probes(
        hostname=lambda: "h",
        comm=probes.system().comm,
        xla=probes.system().xla,
        free_port=lambda: 1,
        read_text=probes.system().read_text,
        which=lambda name: None,
    )
    assert resolver.resolve(TORCHRUN, bare).visible_devices is None


# -- what the record carries on ---------------------------------------------------------------------------


class Pinned:
    """A third-party source that knows its devices itself."""

    name = "pinned"
    auto = False

    def detect(self, environ: Mapping[str, str]) -> bool:
        return True

    def resolve(self, environ: Mapping[str, str], probes: probes.Probes) -> Topology:
        return Topology(
            source="pinned",
            world_size=1,
            global_rank=0,
            local_rank=0,
            node_rank=0,
            visible_devices=("7",),
            local_device=0,
        )


def test_a_source_that_sets_the_devices_is_kept() -> None:
    t = resolver.resolve({"CUDA_VISIBLE_DEVICES": "0,1"}, fake(), source=Pinned())
    assert t.visible_devices == ("7",)


def test_spawned_workers_each_take_their_own_device() -> None:
    parent = resolver.resolve({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, fake())
    assert parent.local_device == 0
    workers = resolver.spawn(parent, devices=4, num_nodes=1)
    assert [w.local_device for w in workers] == [0, 1, 2, 3]
    assert str(workers[3].provenance["local_device"]).startswith("argument:spawn: worker index")
    too_many = resolver.spawn(parent, devices=8, num_nodes=1)
    assert {w.local_device for w in too_many} == {None}
    assert all("local_device" not in w.provenance for w in too_many)


def test_parse_devices_keeps_the_order_and_says_what_it_dropped() -> None:
    assert parse_devices("CUDA_VISIBLE_DEVICES", "3,1,2") == (("3", "1", "2"), None)
    devices, note = parse_devices("CUDA_VISIBLE_DEVICES", "1,-1,0")
    assert devices == ("1",) and note is not None and "0 stay hidden" in note
    assert parse_devices("CUDA_VISIBLE_DEVICES", "1,-1") == (("1",), None)


# -- bind: the narrowing `exec --bind-device` applies ----------------------------------------------------


def test_bind_narrows_every_variable_slurm_set_to_the_tasks_device() -> None:
    env = capture("a3b_srun_N1_n4_gres4_nobind", "task1.env")
    changes = bind(resolver.resolve(env, fake()), env)
    assert changes == dict.fromkeys(
        ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL"), "1"
    )
    narrowed = resolver.resolve({**env, **changes}, fake())
    assert (narrowed.visible_devices, narrowed.local_device) == (("1",), 0)  # the same GPU, now cuda:0


def test_bind_after_the_probe_sets_cuda_visible_devices() -> None:
    t = resolver.resolve(TORCHRUN, fake(devices=4))
    assert bind(t, TORCHRUN) == {"CUDA_VISIBLE_DEVICES": "2"}


def test_bind_keeps_uuids() -> None:
    env = {**TORCHRUN, "CUDA_VISIBLE_DEVICES": "GPU-a1,GPU-b2,GPU-c3,GPU-d4"}
    assert bind(resolver.resolve(env, fake()), env) == {"CUDA_VISIBLE_DEVICES": "GPU-c3"}


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, "local_device=None"),  # two GPUs, four processes
        ({}, "visible_devices=None"),  # nothing says, the probe cannot answer
        ({"CUDA_VISIBLE_DEVICES": "0,1,2,3", "ROCR_VISIBLE_DEVICES": "4,5,6,7"}, "depends on the vendor"),
    ],
)
def test_bind_refuses_what_it_cannot_narrow_without_guessing(changes: dict[str, str], words: str) -> None:
    env = {**TORCHRUN, **changes}
    with pytest.raises(InvalidSettings, match=words):
        bind(resolver.resolve(env, fake()), env)
