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
    assert t.local_device in truth["visible_gpus"]  # an ordinal the task can open
    assert str(t.provenance["visible_devices"]) == "env:CUDA_VISIBLE_DEVICES"
    assert not t.warnings or truth["file"] == "batch.env"  # the batch script warns that it is one process


def test_no_two_tasks_of_a_node_take_the_same_gpu() -> None:
    taken: dict[tuple[str, int], list[str]] = defaultdict(list)
    for truth in GPU_TRUTH:
        if truth["file"] == "batch.env":
            continue  # the batch script runs beside its steps' tasks, not as one of them
        t = resolver.resolve(capture(truth["case"], truth["file"]), fake())
        assert t.visible_devices is not None and t.local_device is not None
        taken[(truth["case"], t.node_rank)].append(t.visible_devices[t.local_device])
    assert len(taken) == 7  # six launches, one of them on two nodes
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


@pytest.mark.parametrize("binding", ["gpu:closest", "gpu:map_gpu:0,1", "gpu:mask_gpu:0x3", "gpu:per_task:4"])
def test_a_binding_that_does_not_make_the_list_the_tasks_own_says_none(binding: str) -> None:
    env = {**capture("a2_srun_N1_n2_gpus-per-node2", "task1.env"), "SLURMD_TRES_BIND": binding}
    t = resolver.resolve(env, fake())
    assert t.visible_devices == ("0", "1") and t.local_device is None
    assert "SLURMD_TRES_BIND" in t.warnings[-1] and "CUDA_VISIBLE_DEVICES=0,1" in t.warnings[-1]


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
