"""Real torchrun on node-level platforms: on each of two emulated nodes, with the environment its
platform gives that node, `torchrun $(cluster-topology --format torchrun) worker.py` starts two
workers; the four form one gloo world and pass an all_reduce. The workers resolve as TorchElastic
(nearest launcher) and carry the platform's job facts."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_tool
from tests.launchers.slurm_cluster import Cluster
from tests.launchers.test_torchrun import ROOT, WORKER, check_world, clean_env, free_port

pytestmark = pytest.mark.torchrun

Node = Callable[[int, int], dict[str, str]]  # (platform's node index, port) -> that node's environment


def kubeflow_trainer(node: int, port: int) -> dict[str, str]:
    return {
        "PET_NNODES": "2",
        "PET_NODE_RANK": str(node),
        "PET_MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_PORT": str(port),
        "PET_NPROC_PER_NODE": "2",
    }


def vertex(node: int, port: int) -> dict[str, str]:
    cluster = {"workerpool0": ["127.0.0.1:2222"], "workerpool1": ["127.0.0.2:2222"]}  # stand-ins for cmle-training-*
    task = {"type": "workerpool0", "index": 0} if node == 0 else {"type": "workerpool1", "index": 0}
    return {
        "CLUSTER_SPEC": json.dumps({"cluster": cluster, "environment": "cloud", "task": task, "job": "{}"}),
        "MASTER_PORT": str(port),  # Vertex AI names no port for torchrun
    }


def volcano(node: int, port: int) -> dict[str, str]:
    return {  # the pytorch plugin's master-0 and worker-0 pods of job pj
        "VC_TASK_INDEX": "0",
        "VC_MASTER_HOSTS": "127.0.0.1",  # stand-in for pj-master-0.pj
        "VC_MASTER_NUM": "1",
        "VC_WORKER_HOSTS": "127.0.0.2",
        "VC_WORKER_NUM": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "WORLD_SIZE": "2",
        "RANK": str(node),
    }


def azureml(node: int, port: int) -> dict[str, str]:
    return {  # the PyTorch distribution with process_count_per_instance=1
        "AZUREML_RUN_ID": "bert_1701600000_5f3c2a1b",
        "AZUREML_EXPERIMENT_ID": "0c5e0b6a-41ab-4f3e-9d1c-2b7a8e6f4d10",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "NODE_RANK": str(node),
        "WORLD_SIZE": "2",
    }


def tpu_vm(node: int, port: int) -> dict[str, str]:
    return {  # two one-host slices (multislice): each host is worker 0 of its slice
        "TPU_WORKER_ID": "0",
        "TPU_WORKER_HOSTNAMES": f"127.0.0.{node + 1}",
        "MEGASCALE_COORDINATOR_ADDRESS": "127.0.0.1:8080",
        "MEGASCALE_NUM_SLICES": "2",
        "MEGASCALE_SLICE_ID": str(node),
        "MEGASCALE_PORT": "8080",
        "MASTER_PORT": str(port),
    }


def aws_batch(node: int, port: int) -> dict[str, str]:
    env = {
        "AWS_BATCH_JOB_ID": "5e3f7a1c-3b2d-4c8e-9f61-0a7b2c4d6e8f#" + str(node),
        "AWS_BATCH_JOB_ATTEMPT": "2",
        "AWS_BATCH_JOB_NODE_INDEX": str(node),
        "AWS_BATCH_JOB_NUM_NODES": "2",
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": "1",  # not the first: the nodes trade places
        "MASTER_PORT": str(port),  # AWS Batch names no port
    }
    if node != 1:  # the main node is not told its own address: it uses its host name
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = "127.0.0.1"
    return env


def sagemaker(node: int, port: int) -> dict[str, str]:
    hosts = ["127.0.0.1", "127.0.0.2"]  # stand-ins for algo-1, algo-2: the first host is the main node
    return {
        "SM_HOSTS": json.dumps(hosts),
        "SM_CURRENT_HOST": hosts[node],
        "SM_NUM_GPUS": "2",
        "SM_NUM_CPUS": "2",
        "SM_NETWORK_INTERFACE_NAME": "lo",
        "TRAINING_JOB_NAME": "pytorch-training-2026-12-03-10-00-00-000",
        "MASTER_PORT": str(port),
    }


def skypilot(node: int, port: int) -> dict[str, str]:
    return {
        "SKYPILOT_NODE_RANK": str(node),
        "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.2\n",
        "SKYPILOT_NUM_NODES": "2",
        "SKYPILOT_NUM_GPUS_PER_NODE": "2",
        "SKYPILOT_TASK_ID": "sky-2026-12-03-10-00-00-000001_train_1",
        "MASTER_PORT": str(port),
    }


def dstack(node: int, port: int) -> dict[str, str]:
    return {
        "DSTACK_NODE_RANK": str(node),
        "DSTACK_NODES_NUM": "2",
        "DSTACK_MASTER_NODE_IP": "127.0.0.1",
        "DSTACK_NODES_IPS": "127.0.0.1\n127.0.0.2",
        "DSTACK_GPUS_PER_NODE": "0",  # a CPU fleet: the per-node count comes from the command line
        "DSTACK_RUN_NAME": "train-ddp",
        "MASTER_PORT": str(port),
    }


# platform -> (node environments, extra torchrun flags, the job fact the workers must carry, node rank of index 0)
PLATFORMS: dict[str, tuple[Node, list[str], tuple[str, str] | None, int]] = {
    "kubeflow_trainer": (kubeflow_trainer, [], None, 0),
    "aws_batch": (aws_batch, ["--nproc-per-node=2"], ("restart_count", "1"), 1),
    "sagemaker": (sagemaker, [], ("job_name", "pytorch-training-2026-12-03-10-00-00-000"), 0),
    "skypilot": (skypilot, [], ("job_id", "sky-2026-12-03-10-00-00-000001_train_1"), 0),
    "dstack": (dstack, ["--nproc-per-node=2"], ("job_name", "train-ddp"), 0),
    "vertex": (vertex, ["--nproc-per-node=2"], None, 0),
    "volcano": (volcano, ["--nproc-per-node=2"], None, 0),
    "azureml": (azureml, ["--nproc-per-node=2"], ("job_id", "bert_1701600000_5f3c2a1b"), 0),
    "tpu_vm": (tpu_vm, ["--nproc-per-node=2"], None, 0),
}


@pytest.fixture(autouse=True)
def _tools() -> None:
    require_tool("torchrun", "cluster-topology")


def agent(out: Path, environ: dict[str, str], extra: list[str]) -> subprocess.Popen[str]:
    """One node: torchrun started with the node's arguments, as a user's run script would."""
    script = 'exec torchrun $(cluster-topology --format torchrun) "$@"'
    command = ["bash", "-c", script, "node", *extra, str(WORKER), "--truth", "torchelastic", "--out", str(out)]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**clean_env(), **environ}
    )


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_two_nodes_form_one_world_of_four(platform: str, tmp_path: Path) -> None:
    node_env, extra, fact, first_node_rank = PLATFORMS[platform]
    port = free_port()
    outs = [tmp_path / f"node{i}" for i in (0, 1)]
    agents = []
    for index, out in enumerate(outs):
        out.mkdir()
        agents.append(agent(out, node_env(index, port), extra))
    for process in agents:
        _, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-3000:]
    rows: list[list[dict[str, Any]]] = [[json.loads(p.read_text()) for p in sorted(o.glob("*.json"))] for o in outs]
    names = {row["topology"]["main_address"] for node in rows for row in node}
    if platform == "aws_batch":  # the main node names itself (its host name), the others its IPv4 address
        assert names == {socket.gethostname(), "127.0.0.1"}
        for node in rows:
            for row in node:
                row["topology"]["main_address"] = socket.gethostbyname(row["topology"]["main_address"])
    check_world([row for node in rows for row in node], 4, 2)
    for index, node in enumerate(rows):
        expected = first_node_rank if index == 0 else 1 - first_node_rank
        assert {row["topology"]["node_rank"] for row in node} == {expected}, platform
    assert {row["topology"]["main_port"] for node in rows for row in node} == {port}
    if fact is not None:
        field, value = fact
        assert {str(row["topology"][field]) for node in rows for row in node} == {value}


@pytest.mark.slurm
def test_slurm_with_one_task_per_node(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """`srun --ntasks-per-node=1`: each task prints its node's torchrun arguments and becomes its agent."""
    script = 'exec torchrun $(cluster-topology --format torchrun) --nproc-per-node=2 "$@"'
    command = f"srun -N2 --ntasks-per-node=1 bash -c '{script}' node {WORKER} --truth torchelastic --out {tmp_path}"
    done = slurm_cluster.run(command, env={"PYTHONPATH": str(ROOT)}, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("*.json"))]
    check_world(rows, 4, 2)
    assert {row["topology"]["main_address"] for row in rows} == {"ci1"}  # the step's first node
    (job_id,) = {row["topology"]["job_id"] for row in rows}
    assert job_id.isdigit()  # SLURM's job id, laid over torchrun's run id ("none")
