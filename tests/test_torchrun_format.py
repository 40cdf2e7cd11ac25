"""`--format torchrun` (resolver/_torchrun.py): torchrun's node arguments for a process alone on its node."""

from __future__ import annotations

import shlex
import subprocess

import pytest

import probes
import resolver
from resolver import InvalidSettings, Topology
from resolver.__main__ import main
from resolver._torchrun import render_torchrun, torchrun_arguments
from tests.conftest import captures, read_capture

POD = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "job-node-0-0.job", "PET_NPROC_PER_NODE": "4"}


def test_a_node_agent() -> None:
    args = torchrun_arguments(resolver.resolve(POD, probes.fake()))
    assert args == [
        "--nnodes=2",
        "--node-rank=1",
        "--master-addr=job-node-0-0.job",
        "--master-port=29500",
        "--nproc-per-node=4",
    ]
    auto = resolver.resolve({**POD, "PET_NPROC_PER_NODE": "auto"}, probes.fake())
    assert not any(a.startswith("--nproc-per-node") for a in torchrun_arguments(auto))  # torchrun reads PET_*


@pytest.mark.parametrize("path", captures("slurm/f_2node_salloc_N2_n2/rank*.env"), ids=lambda p: p.name)
def test_slurm_with_one_task_per_node(path: object) -> None:
    environ = read_capture(path)  # type: ignore[arg-type]
    t = resolver.resolve(environ, probes.fake())
    assert torchrun_arguments(t)[:3] == ["--nnodes=2", f"--node-rank={t.node_rank}", f"--master-addr={t.main_address}"]


def test_a_world_of_one_without_a_launcher() -> None:
    t = resolver.resolve({}, probes.fake(free_port=4321, which={}))
    assert torchrun_arguments(t) == ["--nnodes=1", "--node-rank=0", "--master-addr=127.0.0.1", "--master-port=4321"]


def test_refused_where_torchrun_cannot_start_this_nodes_processes() -> None:
    worker = read_capture(captures("torchrun/2node_static/rank3.env")[0])
    with pytest.raises(InvalidSettings, match="torchrun worker already"):
        torchrun_arguments(resolver.resolve(worker, probes.fake(), allow_loopback=True))  # 2 nodes on one host
    two_per_node = read_capture(captures("slurm/f_2node_srun_N2_n4/rank1.env")[0])
    with pytest.raises(InvalidSettings, match="one of 3 processes on its node"):
        torchrun_arguments(resolver.resolve(two_per_node, probes.fake()))
    nodes_unknown = Topology(
        source="x",
        world_size=2,
        global_rank=0,
        local_rank=0,
        node_rank=0,
        local_world_size=1,
        main_address="h",
        main_port=1,
    )
    with pytest.raises(InvalidSettings, match="does not say num_nodes"):
        torchrun_arguments(nodes_unknown)


def test_an_ipv6_address_is_one_bare_word_that_the_shell_leaves_alone() -> None:
    t = resolver.resolve({**POD, "PET_MASTER_ADDR": "[fe80::1%eth0]"}, probes.fake())
    line = render_torchrun(t)
    assert "--master-addr=fe80::1%eth0" in line
    assert shlex.split(line) == line.split()  # no quoting needed: works unquoted in $(...)
    words = subprocess.run(
        ["bash", "-c", f'printf "%s\\n" $(printf %s {shlex.quote(line)})'], capture_output=True, text=True, check=True
    ).stdout.split("\n")[:-1]
    assert words == torchrun_arguments(t)


def test_the_cli_prints_only_the_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--format", "torchrun", "--explain"], environ=POD) == 0
    out, err = capsys.readouterr()
    assert out == "--nnodes=2 --node-rank=1 --master-addr=job-node-0-0.job --master-port=29500 --nproc-per-node=4\n"
    assert "chosen: kubeflow_trainer" in err
    worker = read_capture(captures("torchrun/2node_static/rank3.env")[0])
    assert main(["--format", "torchrun"], environ=worker) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: ")
