from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import HostlistSyntaxError, InvalidSettings, InvalidVariable, MissingVariable
from resolver.sources import slurm
from resolver.sources._offers import DeviceBinding
from resolver.sources.slurm import Slurm, local_tasks, parse_tasks_per_node
from tests.conftest import CAPTURES_LOCAL, captures, read_capture

FAKE = probes.fake(which={"srun": "/usr/bin/srun"}, free_port=4242)
TASKS = [p for p in captures("slurm/*/*.env") if "rank" in p.stem]
NOT_TASKS = {  # capture -> why the default source resolves it
    "b_sbatch_n2/batch": "batch script",
    "c_salloc_n2/salloc-shell": "salloc shell",
    "d_array/batch-task0": "batch script",
    "d_array/batch-task1": "batch script",
    "f_2node_salloc_N2_n2/salloc-shell": "salloc shell",
    "f_2node_sbatch_N2_n3/batch": "batch script",
    "g_2node_sbatch_substeps/batch": "batch script",
    "e_jobname_bash/rank0": "one-task step named bash",
    "e_jobname_interactive/rank0": "one-task step named interactive",
}


def name(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


HET = sorted((CAPTURES_LOCAL / "slurm-het").glob("*/*.env"))  # see tests/captures-local/slurm-het/README.md


@pytest.mark.parametrize("path", [p for p in TASKS if name(p) not in NOT_TASKS] + HET, ids=name)
def test_every_real_srun_task(path: Path) -> None:
    env = read_capture(path)
    t = resolver.resolve(env, FAKE)
    assert t.source == "slurm"
    assert t.world_size == int(env["SLURM_STEP_NUM_TASKS"])
    assert t.global_rank == int(env["SLURM_PROCID"])
    assert t.local_rank == int(env["SLURM_LOCALID"])
    assert t.node_rank == int(env["SLURM_NODEID"])
    assert t.num_nodes == int(env["SLURM_STEP_NUM_NODES"])
    # step 0 keeps Lightning's port; later steps are offset by 7919 per step id (mod 10000)
    step = int(env["SLURM_STEP_ID"])
    assert t.main_port == 15000 + (int(env["SLURM_JOB_ID"][-4:]) + 7919 * step) % 10000
    assert t.creates_processes_externally
    assert (t.job_id, t.step_id) == (env["SLURM_JOB_ID"], env["SLURM_STEP_ID"])
    assert str(t.provenance["world_size"]) == "env:SLURM_STEP_NUM_TASKS"
    assert t.warnings == ()


@pytest.mark.parametrize("path", [p for p in captures("slurm/*/*.env") if name(p) in NOT_TASKS], ids=name)
def test_shells_and_batch_scripts_go_to_the_default(path: Path) -> None:
    t = resolver.resolve(read_capture(path), FAKE)
    assert (t.source, t.world_size, t.global_rank) == ("lightning", 1, 0)
    why = NOT_TASKS[name(path)]
    # issue 27: the srun hint only for a process inside the allocation that srun did not start and that no
    # other note covers: the salloc shell (the batch script has its own note; srun --pty bash is srun's)
    assert any("not started by srun" in w for w in t.warnings) == (why == "salloc shell")
    if why == "batch script":
        assert any("batch script itself" in w for w in t.warnings)
    (slurm,) = [c for c in resolver.explain(read_capture(path)).candidates if c.name == "slurm"]
    reason = slurm.detection.reason
    assert {"batch script": "batch script itself", "salloc shell": "salloc shell"}.get(
        why, "interactive shell"
    ) in reason


def files(folder: str) -> list[Path]:
    """A folder of real task environments: `het/...` under slurm_het, else a shared SLURM capture."""
    if folder.startswith("het/"):
        found = sorted((CAPTURES_LOCAL / "slurm-het" / folder[4:]).glob("*rank*.env"))
        assert found, folder
        return found
    return captures(f"slurm/{folder}/*rank*.env")


def job(folder: str) -> list[resolver.Topology]:
    return [resolver.resolve(read_capture(p), FAKE) for p in files(folder)]


@pytest.mark.parametrize(
    ("folder", "step", "address", "layout"),
    [
        ("f_2node_srun_N2_n4", "", "ci1", [(0, 0, 3), (1, 0, 3), (2, 0, 3), (3, 1, 1)]),
        ("f_2node_srun_N2_tpn2", "", "ci1", [(0, 0, 2), (1, 0, 2), (2, 1, 2), (3, 1, 2)]),
        ("h_4node_srun_N3_n9_noncontig", "", "ci1", [(r, r // 4, 4 if r < 8 else 1) for r in range(9)]),
        ("f_2node_sbatch_N2_n3", "step0", "ci1", [(0, 0, 2), (1, 0, 2), (2, 1, 1)]),
        ("g_2node_sbatch_substeps", "step1", "ci2", [(0, 0, 1)]),  # a one-node step inside a two-node job
        ("g_2node_sbatch_substeps", "step2", "ci1", [(0, 0, 1), (1, 1, 1)]),
        # heterogeneous steps: SLURM merges the components' tasks into one step (global PROCID, NODEID)
        ("het/srun_N2_n3_N1_n2", "", "ci1", [(0, 0, 2), (1, 0, 2), (2, 1, 1), (3, 2, 2), (4, 2, 2)]),
        ("het/sbatch", "step0", "ci1", [(0, 0, 2), (1, 0, 2), (2, 1, 1)]),  # srun --het-group=0,1
        ("het/sbatch", "step1", "ci2", [(0, 0, 1)]),  # srun --het-group=1: the second component alone
    ],
)
def test_whole_jobs_agree(folder: str, step: str, address: str, layout: list[tuple[int, int, int]]) -> None:
    tops = [t for p, t in zip(files(folder), job(folder), strict=True) if p.stem.startswith(step)]
    assert sorted((t.global_rank, t.node_rank, t.local_world_size) for t in tops) == layout
    assert {(t.main_address, t.main_port) for t in tops} == {(address, tops[0].main_port)}


def test_explain_says_a_heterogeneous_step_is_one_world() -> None:
    env = read_capture(files("het/srun_N2_n3_N1_n2")[3])
    detection = Slurm().detect(env)
    assert detection.matched
    assert detection.reason == (
        "an srun task of a step of a heterogeneous job (SLURM_HET_SIZE=2 components): the tasks of every "
        "component the step runs form one world of SLURM_STEP_NUM_TASKS=5"
    )
    assert detection.variables == ("SLURM_STEP_ID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_HET_SIZE")
    plain = read_capture(captures("slurm/f_2node_srun_N2_n4/rank0.env")[0])
    assert "heterogeneous" not in Slurm().detect(plain).reason


def test_array_tasks_and_the_step_port_scheme() -> None:
    t0, t1 = (read_capture(p) for p in captures("slurm/d_array/step0-task*-rank0.env"))
    a, b = resolver.resolve(t0, FAKE), resolver.resolve(t1, FAKE)
    assert (a.array_job_id, a.array_task_id, b.array_task_id) == ("5", "0", "1")
    step = Slurm(port_scheme="step")
    pa, pb = resolver.resolve(t0, FAKE, source=step), resolver.resolve(t1, FAKE, source=step)
    assert pa.main_port != pb.main_port
    assert str(pa.provenance["main_port"]).startswith("formula:10000 + (SLURM_JOB_ID * 8191")
    # steps of one job running at once get different ports
    s0 = {**t0, "SLURM_JOB_ID": "20005", "SLURM_STEP_ID": "0"}
    s1 = {**s0, "SLURM_STEP_ID": "1"}
    assert resolver.resolve(s0, FAKE, source=step).main_port != resolver.resolve(s1, FAKE, source=step).main_port
    # ... and Lightning's formula collides on the last four digits
    assert resolver.resolve(s0, FAKE).main_port == resolver.resolve({**s0, "SLURM_JOB_ID": "10005"}, FAKE).main_port
    with pytest.raises(InvalidSettings, match="port_scheme='random' is invalid"):
        Slurm(port_scheme="random")  # type: ignore[arg-type]


BASE = read_capture(captures("slurm/f_2node_srun_N2_n4/rank3.env")[0])


def test_srun_bash_c_with_four_tasks_is_a_launch() -> None:
    assert BASE["SLURM_JOB_NAME"] == "bash"  # captured from `srun -N2 -n4 bash -c ...`
    assert resolver.resolve(BASE, FAKE).source == "slurm"


def test_master_variables_win() -> None:
    t = resolver.resolve({**BASE, "MASTER_ADDR": "10.0.0.9", "MASTER_PORT": "2222"}, FAKE)
    assert (t.main_address, t.main_port) == ("10.0.0.9", 2222)
    no_job = {k: v for k, v in BASE.items() if k != "SLURM_JOB_ID"}
    assert resolver.resolve(no_job, FAKE).main_port == 12910


def test_job_scope_without_step_variables() -> None:
    env = {k: v for k, v in BASE.items() if not k.startswith("SLURM_STEP_")} | {"SLURM_PROCID": "3"}
    t = resolver.resolve(env, FAKE)
    assert (t.world_size, t.local_world_size, str(t.provenance["world_size"])) == (4, 1, "env:SLURM_NTASKS")


@pytest.mark.parametrize(
    ("change", "variable", "expected"),
    [
        ({"SLURM_PROCID": "4"}, "SLURM_PROCID", "< world_size (4) (world_size from SLURM_STEP_NUM_TASKS=4)"),
        ({"SLURM_PROCID": "-1"}, "SLURM_PROCID", "decimal integer"),
        ({"SLURM_LOCALID": "1"}, "SLURM_LOCALID", "< local_world_size (1)"),
        ({"SLURM_NODEID": "2"}, "SLURM_NODEID", "< num_nodes (2)"),
        ({"SLURM_STEP_NUM_TASKS": "x"}, "SLURM_STEP_NUM_TASKS", "decimal integer >= 1"),
        ({"SLURM_STEP_NUM_NODES": "3"}, "SLURM_STEP_NUM_NODES", "the number of hosts in SLURM_STEP_NODELIST"),
        ({"SLURM_STEP_TASKS_PER_NODE": "3(x"}, "SLURM_STEP_TASKS_PER_NODE", "tasks-per-node list"),
        ({"SLURM_STEP_TASKS_PER_NODE": "2,2,1"}, "SLURM_STEP_TASKS_PER_NODE", "it describes 3 node(s) holding 5"),
        ({"SLURM_STEP_TASKS_PER_NODE": "0(x2)"}, "SLURM_STEP_TASKS_PER_NODE", "counts >= 1"),
        ({"SLURM_JOB_ID": "1x"}, "SLURM_JOB_ID", "decimal integer"),
        ({"SLURM_RESTART_COUNT": "once"}, "SLURM_RESTART_COUNT", "decimal integer"),
        ({"MASTER_PORT": "65536"}, "MASTER_PORT", "TCP port"),
    ],
)
def test_bad_values_name_the_variable(change: dict[str, str], variable: str, expected: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**BASE, **change}, FAKE)
    assert info.value.variable == variable
    assert expected in str(info.value)


def test_bad_nodelist_points_at_the_column() -> None:
    with pytest.raises(HostlistSyntaxError) as info:
        resolver.resolve({**BASE, "SLURM_STEP_NODELIST": "ci[2-1]"}, FAKE)
    assert info.value.variable == "SLURM_STEP_NODELIST"
    assert str(info.value).startswith("SLURM_STEP_NODELIST: ")
    assert "^" in str(info.value)


@pytest.mark.parametrize("variable", ["SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID"])
def test_missing_task_variables(variable: str) -> None:
    env = {k: v for k, v in BASE.items() if k != variable}
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(env, FAKE, source="slurm")
    assert info.value.variable == variable


def test_missing_nodelist() -> None:
    env = {k: v for k, v in BASE.items() if "NODELIST" not in k}
    with pytest.raises(MissingVariable, match="SLURM_NODELIST is not set"):
        resolver.resolve(env, FAKE)


def one_node(rank: int, size: int) -> dict[str, str]:
    return {"OMPI_COMM_WORLD_LOCAL_RANK": str(rank), "OMPI_COMM_WORLD_LOCAL_SIZE": str(size)}


def test_mpirun_inside_an_allocation_is_not_srun() -> None:
    for marker, extra in (
        ("OMPI_COMM_WORLD_SIZE", {"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "5", **one_node(5, 8)}),
        # same size and rank as SLURM's on this rank: still mpirun's, or one job would split
        ("OMPI_COMM_WORLD_SIZE", {"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3", **one_node(3, 4)}),
        ("MPI_LOCALNRANKS", {"PMI_SIZE": "8", "PMI_RANK": "1", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "8"}),
    ):
        detection = Slurm().detect({**BASE, **extra})
        assert not detection
        assert detection.reason.startswith(f"{marker}=")
        assert "started by mpirun/mpiexec inside the allocation" in detection.reason
        assert resolver.resolve({**BASE, **extra, "MASTER_ADDR": "a", "MASTER_PORT": "1"}, FAKE).source == "mpi"
    pmi2 = {**BASE, "PMI_SIZE": "4", "PMI_RANK": "3"}  # srun --mpi=pmi2: SLURM's own launch
    assert Slurm().detect(pmi2)
    assert resolver.resolve(pmi2, FAKE).source == "slurm"


def test_validate_uses_this_nodes_tasks() -> None:
    node0 = resolver.resolve(read_capture(captures("slurm/f_2node_srun_N2_n4/rank0.env")[0]), FAKE)
    node1 = resolver.resolve(BASE, FAKE)
    resolver.validate(node0, devices=3, num_nodes=2)  # heterogeneous 3,1: Lightning raises here
    resolver.validate(node1, devices=1, num_nodes=2)
    with pytest.raises(InvalidSettings, match=r"HINT: set devices=3"):
        resolver.validate(node0, devices=4, num_nodes=2)
    with pytest.raises(InvalidSettings, match=r"HINT: set num_nodes=2"):
        resolver.validate(node0, devices=3, num_nodes=1)


def test_inherited_ntasks_per_node_does_not_mislead() -> None:
    step1 = read_capture(captures("slurm/g_2node_sbatch_substeps/step1-rank0.env")[0])
    assert step1["SLURM_NTASKS_PER_NODE"] == "2"  # inherited from the job, wrong for this step
    t = resolver.resolve(step1, FAKE)
    assert t.local_world_size == 1
    resolver.validate(t, devices=1, num_nodes=1)


@pytest.mark.parametrize(
    ("text", "groups"),
    [("4", [(4, 1)]), ("1(x2)", [(1, 2)]), ("3,1", [(3, 1), (1, 1)]), ("4(x2),2,1", [(4, 2), (2, 1), (1, 1)])],
)
def test_tasks_per_node_grammar(text: str, groups: list[tuple[int, int]]) -> None:
    assert parse_tasks_per_node("V", text) == groups


@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 50)), min_size=1, max_size=8))
def test_local_tasks_matches_the_expanded_list(groups: list[tuple[int, int]]) -> None:
    text = ",".join(f"{t}(x{r})" if r > 1 else str(t) for t, r in groups)
    expanded = [t for t, r in groups for _ in range(r)]
    parsed = parse_tasks_per_node("V", text)
    assert [local_tasks(parsed, i) for i in range(len(expanded) + 1)] == [*expanded, None]


def test_huge_nodelist_is_cheap() -> None:
    env = {
        **BASE,
        "SLURM_STEP_NODELIST": "n[0000001-1000000]",
        "SLURM_STEP_NUM_NODES": "1000000",
        "SLURM_STEP_NUM_TASKS": "1000000",
        "SLURM_STEP_TASKS_PER_NODE": "1(x1000000)",
        "SLURM_PROCID": "999999",
        "SLURM_NODEID": "999999",
        "SLURM_LOCALID": "0",
    }
    t = resolver.resolve(env, FAKE)
    assert (t.main_address, t.num_nodes, t.local_world_size) == ("n0000001", 1_000_000, 1)


def test_concurrent_steps_of_one_job_get_distinct_ports_and_step_0_keeps_lightning_s() -> None:
    base = read_capture(captures("slurm/b_sbatch_n2/step0-rank0.env")[0])
    ports = {}
    for step in range(200):
        t = resolver.resolve({**base, "SLURM_JOB_ID": "123456", "SLURM_STEP_ID": str(step)}, FAKE)
        assert t.main_port is not None and 15000 <= t.main_port <= 24999
        ports[step] = t.main_port
    assert ports[0] == 15000 + 3456  # Lightning's formula
    assert len(set(ports.values())) == 200
    t = resolver.resolve({**base, "SLURM_JOB_ID": "123456", "SLURM_STEP_ID": "1"}, FAKE)
    assert (
        str(t.provenance["main_port"])
        == "formula:15000 + (last four digits of SLURM_JOB_ID + 7919 * SLURM_STEP_ID) mod 10000"
        " (15000 + (3456 + 7919) mod 10000)"
    )


@given(st.integers(0, 10**12), st.integers(0, 9999), st.integers(0, 9999))
def test_two_steps_of_a_job_never_share_a_port(job: int, a: int, b: int) -> None:
    base = read_capture(captures("slurm/b_sbatch_n2/step0-rank0.env")[0])
    pa, pb = (
        resolver.resolve({**base, "SLURM_JOB_ID": str(job), "SLURM_STEP_ID": str(step)}, FAKE).main_port
        for step in (a, b)
    )
    assert (pa == pb) == (a == b)


ARBITRARY = {
    # srun -N2 -n4 --distribution=arbitrary with SLURM_HOSTFILE listing ci2 ci2 ci1 ci1 (SLURM 22.05, task 0)
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "0",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1",
    "SLURM_STEP_NODELIST": "ci[1-2]",
    "SLURM_NODELIST": "ci[1-2]",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_DISTRIBUTION": "arbitrary",
    "SLURM_HOSTFILE": "/tmp/hf",
    "SLURM_JOB_ID": "41",
    "SLURMD_NODENAME": "ci2",
}


@pytest.mark.parametrize("text", ["ci2\nci2\nci1\nci1\n", "\n# task 0 first\n  ci2  \nci1\n", "ci2,ci2\nci1,ci1\n"])
def test_under_arbitrary_distribution_task_0_s_host_is_the_hostfile_s_first(text: str) -> None:
    t = resolver.resolve(ARBITRARY, probes.fake(files={"/tmp/hf": text}))
    assert (t.main_address, t.node_rank) == ("ci2", 1)
    assert str(t.provenance["main_address"]) == "probe:read_text (first host of SLURM_HOSTFILE)"
    # not arbitrary: the first node of the step, as always, and the file is not read
    block = {**ARBITRARY, "SLURM_DISTRIBUTION": "block"}
    assert resolver.resolve(block, probes.fake()).main_address == "ci1"
    # MASTER_ADDR wins, and then nothing is read either
    assert resolver.resolve({**ARBITRARY, "MASTER_ADDR": "ci9"}, probes.fake()).main_address == "ci9"


def test_an_unreadable_or_empty_hostfile_is_an_error_not_the_first_node() -> None:
    with pytest.raises(resolver.ProbeFailed) as failed:
        resolver.resolve(ARBITRARY, probes.fake())
    assert "SLURM_HOSTFILE='/tmp/hf' cannot be read" in str(failed.value)
    assert "set MASTER_ADDR" in str(failed.value)
    with pytest.raises(InvalidVariable) as empty:
        resolver.resolve(ARBITRARY, probes.fake(files={"/tmp/hf": "\n# nothing\n"}))
    assert empty.value.variable == "SLURM_HOSTFILE"
    with pytest.raises(MissingVariable) as missing:
        resolver.resolve({k: v for k, v in ARBITRARY.items() if k != "SLURM_HOSTFILE"}, probes.fake())
    assert missing.value.variable == "SLURM_HOSTFILE"
    with pytest.raises(InvalidVariable) as bad:
        resolver.resolve(ARBITRARY, probes.fake(files={"/tmp/hf": "ci[2-\n"}))
    assert bad.value.variable == "SLURM_HOSTFILE"


def test_the_mpirun_markers_are_the_mpi_module_s() -> None:
    from resolver.sources import mpi

    assert tuple(found.marker for found in mpi.LAUNCHERS if found.mpirun_only) == slurm.MPIRUN_MARKERS


# a valid first host (a.b.c.d, 231 characters) whose hostlist names about 10**4315 hosts: more
# digits than str() formats, so every message must write the count another way
ASTRONOMICAL = ".".join(["a" + "[0-18446744073709551615]" * 56] * 4)


@pytest.mark.parametrize(
    ("drop", "variable"),
    [
        (("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"), "num_nodes"),
        (("SLURM_STEP_NUM_NODES", "SLURM_NNODES"), "SLURM_STEP_TASKS_PER_NODE"),
        ((), "SLURM_STEP_NUM_NODES"),
    ],
)
def test_a_host_count_too_large_to_print_is_still_a_topology_error(drop: tuple[str, ...], variable: str) -> None:
    env = {k: v for k, v in BASE.items() if k not in drop} | {"SLURM_STEP_NODELIST": ASTRONOMICAL}
    with pytest.raises(resolver.TopologyError) as info:
        resolver.resolve(env, FAKE)
    assert variable in str(info.value) and "about 10**4315" in str(info.value)
    assert len(str(info.value)) < 600


@pytest.mark.parametrize(
    ("value", "binding"),
    [
        ("gpu:per_task:1", DeviceBinding("SLURMD_TRES_BIND", 1)),  # srun --gpus-per-task=1 (captured)
        ("gpu:per_task:2", DeviceBinding("SLURMD_TRES_BIND", 2)),
        ("gpu:verbose,per_task:2", DeviceBinding("SLURMD_TRES_BIND", 2)),
        ("gpu:single:1", DeviceBinding("SLURMD_TRES_BIND", None)),  # --gpu-bind=single:1 (captured)
        ("gpu:map_gpu:0,1", DeviceBinding("SLURMD_TRES_BIND", None)),
        ("gpu:none", None),
        ("gpu:verbose,none", None),
    ],
)
def test_device_binding_reads_srun_gpu_bind(value: str, binding: DeviceBinding | None) -> None:
    assert slurm.device_binding({"SLURMD_TRES_BIND": value}) == binding
    assert slurm.device_binding({}) is None


# --gpu-bind=closest and mask_gpu (issue 27, point 12; captured in tests/captures-hpc/slurm-gpu c*, d*)
STEP4 = {"SLURM_GPUS_ON_NODE": "4", "SLURM_STEP_GPUS": "0,1,2,3"}


@pytest.mark.parametrize(
    ("extra", "sets", "note"),
    [
        (STEP4, (0,), ""),  # the task sees every GPU of the step on its node
        ({"SLURM_GPUS_ON_NODE": "2", "SLURM_STEP_GPUS": "5,7"}, (0,), ""),
        ({"SLURM_GPUS_ON_NODE": "4", "SLURM_STEP_GPUS": "2,3"}, (), "lists 2 of the 4 GPUs the step has"),
        ({"SLURM_STEP_GPUS": "0,1"}, (), "SLURM_GPUS_ON_NODE is not set"),
        ({"SLURM_GPUS_ON_NODE": "2"}, (), "SLURM_STEP_GPUS is not set"),
    ],
)
def test_closest_shares_the_list_only_when_it_is_the_whole_step(
    extra: dict[str, str], sets: tuple[int, ...], note: str
) -> None:
    found = slurm.device_binding({"SLURMD_TRES_BIND": "gpu:closest", **extra})
    assert found is not None and (found.own, found.sets) == (None, sets)
    assert note in found.note and bool(found.note) == bool(note)


@pytest.mark.parametrize(
    ("value", "sets"),
    [
        ("gpu:mask_gpu:0x3,0xc", (3, 12)),  # captured
        ("gpu:mask_gpu:0x3*2,0xc*2", (3, 3, 12, 12)),  # captured
        ("gpu:verbose,mask_gpu:0x3,0xc", (3, 12)),
        ("gpu:mask_gpu:0X3,0XC", (3, 12)),
        ("gpu:mask_gpu:1,2,4,8", (1, 2, 4, 8)),  # one digit: hexadecimal and decimal agree
        ("gpu:mask_gpu:0xf", (15,)),
    ],
)
def test_mask_gpu_gives_each_local_task_its_mask(value: str, sets: tuple[int, ...]) -> None:
    assert slurm.device_binding({"SLURMD_TRES_BIND": value, **STEP4}) == DeviceBinding(
        "SLURMD_TRES_BIND", None, sets=sets
    )


@pytest.mark.parametrize(
    ("value", "gpus_on_node", "note"),
    [
        ("gpu:mask_gpu:0x3,0x6", "4", "the masks 0x3 and 0x6 share GPUs"),  # captured
        ("gpu:mask_gpu:0x3,0xc", "2", "the masks name 4 GPUs and SLURM_GPUS_ON_NODE=2"),  # captured
        ("gpu:mask_gpu:0x3,0xc", None, "SLURM_GPUS_ON_NODE is not set"),
        ("gpu:mask_gpu:3,c", "4", "the mask c is read differently"),  # SLURM 22.05 rejected c (captured)
        ("gpu:mask_gpu:10", "4", "the mask 10 is read differently"),
        ("gpu:mask_gpu:0x0", "4", "the mask 0x0 names no GPU"),
        ("gpu:mask_gpu:0x1*4096,0x2", "4", "more than 4096 masks"),
    ],
)
def test_mask_gpu_that_cannot_say_who_shares_what_says_why(value: str, gpus_on_node: str | None, note: str) -> None:
    env = {"SLURMD_TRES_BIND": value} | ({} if gpus_on_node is None else {"SLURM_GPUS_ON_NODE": gpus_on_node})
    found = slurm.device_binding(env)
    assert found is not None and (found.own, found.sets) == (None, ())
    assert note in found.note


@pytest.mark.parametrize(
    "value",
    [
        "gpu:mask_gpu:",
        "gpu:mask_gpu:0x3,",
        "gpu:mask_gpu:0xg",
        "gpu:mask_gpu:0x3*0",
        "gpu:mask_gpu:0x3*",
        "gpu:mask_gpu:0x1ffffffffffffffff",
        "gpu:mask_gpu:-1",
    ],
)
def test_a_malformed_mask_gpu_names_the_variable(value: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        slurm.device_binding({"SLURMD_TRES_BIND": value, **STEP4})
    assert info.value.variable == "SLURMD_TRES_BIND" and info.value.value == value
    assert "mask" in str(info.value)


def test_a_malformed_gpu_count_on_the_node_names_it() -> None:
    with pytest.raises(InvalidVariable) as info:
        slurm.device_binding({"SLURMD_TRES_BIND": "gpu:closest", "SLURM_GPUS_ON_NODE": "four", "SLURM_STEP_GPUS": "0"})
    assert info.value.variable == "SLURM_GPUS_ON_NODE" and info.value.value == "four"


def test_hostnames_are_the_step_s_nodes_in_node_id_order() -> None:
    """SLURM_NODEID indexes the step's node list, also under an arbitrary distribution (captured)."""
    from resolver.testing import slurm_env

    env = slurm_env(procid=3, nodes=("ci1", "ci2"), ntasks=4)
    t = resolver.resolve(env, probes.fake())
    assert t.hostnames == ("ci1", "ci2") and t.hostnames[t.node_rank] == "ci2"
    assert t.provenance["hostnames"].variables == ("SLURM_STEP_NODELIST",)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"SLURM_GPUS_ON_NODE": "4"}, 4),
        ({"SLURM_GPUS_ON_NODE": "4", "SLURM_NTASKS_PER_NODE": "8"}, 4),  # the GPUs first
        ({"SLURM_GPUS_ON_NODE": "0", "SLURM_NTASKS_PER_NODE": "8"}, 8),
        ({"SLURM_NTASKS_PER_NODE": "1"}, None),  # srun --ntasks-per-node=1 overwrote the job's: nothing known
        ({}, None),
    ],
)
def test_a_task_alone_on_its_node_says_how_many_workers_the_allocation_gives_it(
    extra: dict[str, str], expected: int | None
) -> None:
    """`--format torchrun` under `srun --ntasks-per-node=1` gives --nproc-per-node (issue 27, point 11)."""
    from resolver._torchrun import torchrun_arguments
    from resolver.testing import slurm_env

    env = {**slurm_env(procid=1, nodes=("ci1", "ci2"), ntasks=2), **extra}
    t = resolver.resolve(env, probes.fake(devices=0))
    assert (t.local_world_size, t.nproc_per_node) == (1, expected)
    shown = [a for a in torchrun_arguments(t) if a.startswith("--nproc-per-node")]
    assert shown == ([] if expected is None else [f"--nproc-per-node={expected}"])
    several = {**slurm_env(procid=1, nodes=("ci1",), ntasks=2), **extra}
    assert resolver.resolve(several, probes.fake(devices=0)).nproc_per_node is None  # tasks are the workers
