from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, Origin, ProbeFailed


def test_single_machine_defaults_ask_only_the_port_probe() -> None:
    t = resolver.resolve({}, probes.fake(free_port=41000))
    assert t.source == "lightning"
    assert (t.world_size, t.global_rank, t.local_rank, t.node_rank) == (1, 0, 0, 0)
    assert (t.main_address, t.main_port) == ("127.0.0.1", 41000)
    assert not t.creates_processes_externally
    assert t.provenance["main_port"] == Origin.probe("free_port")
    assert t.warnings == ()


def test_the_port_probe_is_not_asked_when_a_port_is_given() -> None:
    for variable, value in (("MASTER_PORT", "1"), ("STANDALONE_PORT", "2")):
        assert resolver.resolve({variable: value}, probes.fake()).provenance["main_port"] == Origin.env(variable)
    assert resolver.resolve({"MASTER_PORT": "1", "STANDALONE_PORT": "2"}, probes.fake()).main_port == 1


def test_unmanaged_cluster_process() -> None:
    env = {
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "RANK": "3",
        "NODE_RANK": "1",
        "GROUP_RANK": "0",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "5555",
    }
    t = resolver.resolve(env, probes.fake())
    assert t.creates_processes_externally
    assert (t.world_size, t.global_rank, t.local_rank, t.node_rank) == (4, 3, 1, 1)
    assert t.provenance["node_rank"] == Origin.env("NODE_RANK")
    env.pop("NODE_RANK")
    assert resolver.resolve(env, probes.fake()).provenance["node_rank"] == Origin.env("GROUP_RANK")


def test_external_without_port_warns() -> None:
    t = resolver.resolve({"LOCAL_RANK": "0"}, probes.fake(free_port=3000))
    assert any("MASTER_PORT" in w for w in t.warnings)


def test_failed_and_garbage_probes_name_the_probe() -> None:
    with pytest.raises(ProbeFailed, match="free_port"):
        resolver.resolve({}, probes.fake())
    with pytest.raises(ProbeFailed, match="probe 'free_port' failed: answered 0"):
        resolver.resolve({}, probes.fake(free_port=0))


@pytest.mark.parametrize("variable", ["WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "STANDALONE_PORT"])
def test_bad_values(variable: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({variable: "x"}, probes.fake(free_port=1))
    assert info.value.variable == variable


def test_the_srun_hint_only_inside_an_allocation_and_never_for_srun_on_path() -> None:
    """Lightning warns wherever srun is on PATH (every login node); here only a process inside a SLURM
    allocation that srun did not start is told (issue 27, point 5), and --strict passes elsewhere."""
    login_node = probes.fake(free_port=29500, which={"srun": "/usr/bin/srun"})
    assert resolver.resolve({}, login_node, strict=True).warnings == ()
    salloc_shell = {"SLURM_JOB_ID": "42", "SLURM_NNODES": "2", "SLURM_NTASKS": "2"}
    (warning,) = resolver.resolve(salloc_shell, login_node).warnings
    assert "inside SLURM job 42 but not started by srun" in warning
    with pytest.raises(resolver.StrictWarnings):
        resolver.resolve(salloc_shell, login_node, strict=True)
    # srun --pty bash: one task named bash, which srun started (the SLURM source leaves it to the default)
    in_a_step = {
        "SLURM_JOB_ID": "42",
        "SLURM_NTASKS": "1",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "0",
        "SLURM_JOB_NAME": "bash",
    }
    assert not [w for w in resolver.resolve(in_a_step, login_node).warnings if "not started by srun" in w]
