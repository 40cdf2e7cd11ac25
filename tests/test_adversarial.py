"""Malformed values for every variable every source reads: a TopologyError naming the variable,
in the API and in the CLI's text and JSON output (exit 2); never a traceback or a wrong topology.
The table below drives it."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

import probes
import resolver
from resolver import InvalidVariable, TopologyError
from resolver.__main__ import main
from tests.conftest import CAPTURES_HPC, captures, read_capture

COUNT, INDEX, PORT, ADDRESS, JOB_ID = "count", "index", "port", "address", "job id"
DEVICES, GPU_BIND = "devices", "gpu binding"
NUMBER_GARBAGE = ["", " ", " 1", "1 ", "+1", "1.0", "0x1", "1_0", "1e3", "٣", "１", "9" * 5000, "abc", "1\n"]
BAD: dict[str, list[str]] = {
    COUNT: [*NUMBER_GARBAGE, "0", "-1"],
    INDEX: [*NUMBER_GARBAGE, "-1", "-0"],
    PORT: [*NUMBER_GARBAGE, "0", "65536", "80abc", "-80", "99999999999"],
    JOB_ID: [
        "",
        " ",
        "\u0192",
        "f",
        "\u0192O",
        "\u01920",
        "\u0192l",
        "\u0192I",
        "\u0192uZZy buNNy",
        "\u0192" + "z" * 12,
        "0x17e9",
        "-1",
        "\u0192\u0192uZ",
        "\uff11",
    ],
    ADDRESS: ["", " ", "a b", "host\n", "a\tb", "$(reboot)", "`id`", "a;b", "a'b", 'a"b', "a|b", "x" * 300, "é"],
    # device lists: an empty entry, duplicates, non-numeric and garbled entries; "" and "-1" are not
    # here: they hide every device, as CUDA documents (tests/test_devices.py)
    DEVICES: [
        *(v for v in NUMBER_GARBAGE if v not in ("", "abc", "1.0")),  # 1.0: Level Zero's device.subdevice
        "0,,1",
        ",",
        "0,",
        "0,0",
        "3,1,3",
        "abc",
        "0,1a",
        "1.2.3",
        "GPU-",
        "0;1",
        "-",
        "0,-1,x",
        "9" * 10,
    ],
    GPU_BIND: ["", "gpu", "gpu:", "none", "gpu:per_task:", "gpu:per_task:0", "gpu:per_task:-1", "gpu:per_task:x"],
}

RANKFILE = "/lsf/rankfile"
RANKS = "launch\nh1\nh1\nh2\nh2\n"
PE_HOSTFILE = "/var/spool/gridengine/execd/node1/active_jobs/4711.3/pe_hostfile"
ENDPOINT = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
ENDPOINT_KINDS = {"MASTER_ADDR": ADDRESS, "MASTER_PORT": PORT}
# key: the source name, then ":" and a variant where one source reads several launchers' variables
SOURCES: dict[str, tuple[Mapping[str, str], probes.Probes, dict[str, str]]] = {
    "torchelastic": (
        # captured with both nodes on one host (MASTER_ADDR=127.0.0.1): here node 0 has an address
        {**read_capture(captures("torchrun/2node_static/rank3.env")[0]), "MASTER_ADDR": "10.0.0.1"},
        probes.fake(),
        {
            "WORLD_SIZE": COUNT,
            "RANK": INDEX,
            "LOCAL_RANK": INDEX,
            "GROUP_RANK": INDEX,
            "LOCAL_WORLD_SIZE": COUNT,
            "GROUP_WORLD_SIZE": COUNT,
            "MASTER_ADDR": ADDRESS,
            "MASTER_PORT": PORT,
            "TORCHELASTIC_RESTART_COUNT": INDEX,
        },
    ),
    "deepspeed": (
        read_capture(CAPTURES_HPC / "deepspeed/single-node-num-gpus-2/rank1.env"),
        probes.fake(),
        {
            "WORLD_SIZE": COUNT,
            "RANK": INDEX,
            "LOCAL_RANK": INDEX,
            "LOCAL_SIZE": COUNT,
            "CROSS_RANK": INDEX,
            "CROSS_SIZE": COUNT,
            "MASTER_ADDR": ADDRESS,
            "MASTER_PORT": PORT,
        },
    ),
    "flux": (
        {
            "FLUX_JOB_ID": "\u0192uZZybuNNy",
            "FLUX_JOB_NNODES": "1",
            "FLUX_JOB_SIZE": "4",
            "FLUX_TASK_LOCAL_ID": "3",
            "FLUX_TASK_RANK": "3",
            "FLUX_JOB_CC": "2",
            "FLUX_URI": "local:///tmp/flux-abc123/local-0",
            "PMI_RANK": "3",
            "PMI_SIZE": "4",
        },
        probes.fake(),  # one node: no probe is asked
        {
            "FLUX_JOB_SIZE": COUNT,
            "FLUX_TASK_RANK": INDEX,
            "FLUX_TASK_LOCAL_ID": INDEX,
            "FLUX_JOB_NNODES": COUNT,
            "FLUX_JOB_ID": JOB_ID,
            "FLUX_JOB_CC": INDEX,
            **ENDPOINT_KINDS,
        },
    ),
    "pbs": (
        {
            "PBS_JOBID": "1234[7].pbsserver",
            "PBS_ENVIRONMENT": "PBS_BATCH",
            "PBS_JOBNAME": "train",
            "PBS_ARRAY_INDEX": "7",
            "PBS_ARRAY_ID": "1234[].pbsserver",
            "PBS_NUM_NODES": "1",
            "PBS_TASKNUM": "2",
            "PBS_NODENUM": "0",
            "PBS_VNODENUM": "0",
            "PBS_NODEFILE": "/var/spool/pbs/aux/1234[7].pbsserver",
        },
        probes.fake(hostname="node1", files={}),  # the node file: not on this host
        {
            "PBS_ARRAY_INDEX": INDEX,
            "PBS_NUM_NODES": COUNT,
            "PBS_TASKNUM": INDEX,
            "PBS_NODENUM": INDEX,
            "PBS_VNODENUM": INDEX,
            **ENDPOINT_KINDS,
        },
    ),
    "slurm": (
        read_capture(captures("slurm/h_4node_srun_N3_n9_noncontig/rank5.env")[0]),
        probes.fake(),
        {
            "SLURM_STEP_NUM_TASKS": COUNT,
            "SLURM_PROCID": INDEX,
            "SLURM_LOCALID": INDEX,
            "SLURM_NODEID": INDEX,
            "SLURM_STEP_NUM_NODES": COUNT,
            "SLURM_JOB_ID": INDEX,
            "SLURM_RESTART_COUNT": INDEX,
            "MASTER_ADDR": ADDRESS,
            "MASTER_PORT": PORT,
        },
    ),
    "slurm:gpu": (
        read_capture(CAPTURES_HPC / "slurm-gpu" / "a1_srun_N1_n2_gpus-per-task1" / "task1.env"),
        probes.fake(),
        {
            "CUDA_VISIBLE_DEVICES": DEVICES,
            "HIP_VISIBLE_DEVICES": DEVICES,
            "ROCR_VISIBLE_DEVICES": DEVICES,
            "ZE_AFFINITY_MASK": DEVICES,
            "GPU_DEVICE_ORDINAL": DEVICES,
            "SLURMD_TRES_BIND": GPU_BIND,
        },
    ),
    "kubeflow": (
        {"WORLD_SIZE": "4", "RANK": "1", "MASTER_ADDR": "m", "MASTER_PORT": "1234"},
        probes.fake(),
        {"WORLD_SIZE": COUNT, "RANK": INDEX, "MASTER_ADDR": ADDRESS, "MASTER_PORT": PORT},
    ),
    "lightning": (
        {"LOCAL_RANK": "0", "WORLD_SIZE": "2", "RANK": "1"},  # NODE_RANK and MASTER_PORT would hide others
        probes.fake(free_port=7),
        {
            "WORLD_SIZE": COUNT,
            "RANK": INDEX,
            "LOCAL_RANK": INDEX,
            "NODE_RANK": INDEX,
            "GROUP_RANK": INDEX,
            "MASTER_ADDR": ADDRESS,
            "MASTER_PORT": PORT,
            "STANDALONE_PORT": PORT,
        },
    ),
    "mpi": (
        {
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_LOCAL_RANK": "3",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
            "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500",
        },
        probes.fake(),  # one node, endpoint given: the comm is never asked
        {
            "OMPI_COMM_WORLD_SIZE": COUNT,
            "OMPI_COMM_WORLD_RANK": INDEX,
            "OMPI_COMM_WORLD_LOCAL_RANK": INDEX,
            "OMPI_COMM_WORLD_LOCAL_SIZE": COUNT,
            "MASTER_ADDR": ADDRESS,
            "MASTER_PORT": PORT,
        },
    ),
    "mpi:hydra": (
        {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4", **ENDPOINT},
        probes.fake(),
        {"PMI_RANK": INDEX, "PMI_SIZE": COUNT, "MPI_LOCALRANKID": INDEX, "MPI_LOCALNRANKS": COUNT, **ENDPOINT_KINDS},
    ),
    "mpi:mvapich2": (
        {
            "MV2_COMM_WORLD_RANK": "3",
            "MV2_COMM_WORLD_SIZE": "4",
            "MV2_COMM_WORLD_LOCAL_RANK": "3",
            "MV2_COMM_WORLD_LOCAL_SIZE": "4",
            **ENDPOINT,
        },
        probes.fake(),
        {
            "MV2_COMM_WORLD_RANK": INDEX,
            "MV2_COMM_WORLD_SIZE": COUNT,
            "MV2_COMM_WORLD_LOCAL_RANK": INDEX,
            "MV2_COMM_WORLD_LOCAL_SIZE": COUNT,
            **ENDPOINT_KINDS,
        },
    ),
    "mpi:pals": (
        {
            "PALS_RANKID": "3",
            "PMI_SIZE": "4",
            "PALS_LOCAL_RANKID": "1",
            "PMI_LOCAL_SIZE": "2",
            "PALS_NODEID": "1",
            **ENDPOINT,
        },
        probes.fake(),
        {
            "PALS_RANKID": INDEX,
            "PMI_SIZE": COUNT,
            "PALS_LOCAL_RANKID": INDEX,
            "PMI_LOCAL_SIZE": COUNT,
            "PALS_NODEID": INDEX,
            **ENDPOINT_KINDS,
        },
    ),
    "mpi:pmi": (
        {"PMI_RANK": "3", "PMI_SIZE": "4", "PMI_LOCAL_RANK": "3", "PMI_LOCAL_SIZE": "4", **ENDPOINT},
        probes.fake(),
        {"PMI_RANK": INDEX, "PMI_SIZE": COUNT, "PMI_LOCAL_RANK": INDEX, "PMI_LOCAL_SIZE": COUNT, **ENDPOINT_KINDS},
    ),
    "lsf": (
        {
            "LSB_JOBID": "1234",
            "LSB_JOBINDEX": "2",
            "LSB_DJOB_RANKFILE": RANKFILE,
            "JSM_NAMESPACE_LOCAL_RANK": "1",
            "JSM_NAMESPACE_SIZE": "4",
            "JSM_NAMESPACE_RANK": "3",
            "JSM_NAMESPACE_LOCAL_SIZE": "2",
        },
        probes.fake(hostname="h2", files={RANKFILE: RANKS}),
        {
            "LSB_JOBID": INDEX,
            "LSB_JOBINDEX": INDEX,
            "JSM_NAMESPACE_LOCAL_RANK": INDEX,
            "JSM_NAMESPACE_SIZE": COUNT,
            "JSM_NAMESPACE_RANK": INDEX,
            "JSM_NAMESPACE_LOCAL_SIZE": COUNT,
            "MASTER_PORT": PORT,
        },
    ),
    "gridengine": (
        {
            "JOB_ID": "4711",
            "JOB_NAME": "train",
            "SGE_TASK_ID": "3",
            "RESTARTED": "0",
            "NHOSTS": "1",
            "NSLOTS": "4",
            "PE": "mpi",
            "PE_HOSTFILE": "/var/spool/gridengine/execd/node1/active_jobs/4711.3/pe_hostfile",
        },
        probes.fake(),
        {"JOB_ID": COUNT, "SGE_TASK_ID": COUNT, "RESTARTED": INDEX, "NHOSTS": COUNT, **ENDPOINT_KINDS},
    ),
    "mpi:openmpi-in-gridengine": (  # one node, this one: port from JOB_ID, address from PE_HOSTFILE, no comm
        {
            "OMPI_COMM_WORLD_RANK": "3",
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "3",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
            "JOB_ID": "4711",
            "JOB_NAME": "train",
            "SGE_TASK_ID": "3",
            "RESTARTED": "0",
            "PE": "mpi",
            "PE_HOSTFILE": PE_HOSTFILE,
        },
        probes.fake(hostname="node1", files={PE_HOSTFILE: "node1 4 all.q@node1 UNDEFINED\n"}),
        {"JOB_ID": COUNT, "SGE_TASK_ID": COUNT, "RESTARTED": INDEX, **ENDPOINT_KINDS},
    ),
    "kubeflow_trainer": (
        {
            "PET_NNODES": "4",
            "PET_NODE_RANK": "3",
            "PET_MASTER_ADDR": "job-node-0-0.job",
            "PET_MASTER_PORT": "29500",
            "PET_NPROC_PER_NODE": "8",
        },
        probes.fake(),
        {
            "PET_NNODES": COUNT,
            "PET_NODE_RANK": INDEX,
            "PET_MASTER_ADDR": ADDRESS,
            "PET_MASTER_PORT": PORT,
            "PET_NPROC_PER_NODE": COUNT,
        },
    ),
    "vertex": (
        {
            "CLUSTER_SPEC": '{"cluster": {"workerpool0": ["c-0:2222"], "workerpool1": ["w-0:2222"]}, '
            '"environment": "cloud", "task": {"type": "workerpool1", "index": 0}}',
            "MASTER_PORT": "29500",
        },
        probes.fake(),
        {"CLUSTER_SPEC": ADDRESS, "MASTER_PORT": PORT},
    ),
    "vertex:tf_config": (
        {
            "TF_CONFIG": '{"cluster": {"chief": ["c-0:2222"], "worker": ["w-0:2222"]}, "environment": "cloud", '
            '"task": {"type": "worker", "index": 0}}'
        },
        probes.fake(),
        {"TF_CONFIG": ADDRESS},
    ),
    "volcano": (
        {
            "VC_TASK_INDEX": "1",
            "VC_MASTER_HOSTS": "pj-master-0.pj",
            "VC_MASTER_NUM": "1",
            "VC_WORKER_HOSTS": "pj-worker-0.pj,pj-worker-1.pj",
            "VC_WORKER_NUM": "2",
            **ENDPOINT,
            "WORLD_SIZE": "3",
            "RANK": "2",
        },
        probes.fake(),
        {"WORLD_SIZE": COUNT, "RANK": INDEX, **ENDPOINT_KINDS},
    ),
    "volcano:one_task": (
        {"VC_TASK_INDEX": "1", "VC_TRAINER_HOSTS": "j-trainer-0.j,j-trainer-1.j", "VC_TRAINER_NUM": "2"},
        probes.fake(),
        {"VC_TASK_INDEX": INDEX, "VC_TRAINER_HOSTS": ADDRESS, "VC_TRAINER_NUM": COUNT, "MASTER_PORT": PORT},
    ),
    "volcano:vk": (
        {"VK_TASK_INDEX": "1", "VC_TRAINER_HOSTS": "j-trainer-0.j,j-trainer-1.j", "VC_TRAINER_NUM": "2"},
        probes.fake(),
        {"VK_TASK_INDEX": INDEX},
    ),
    "azureml": (
        {"AZUREML_RUN_ID": "run_1", "NODE_RANK": "1", "WORLD_SIZE": "2", **ENDPOINT},
        probes.fake(),
        {"NODE_RANK": INDEX, "WORLD_SIZE": COUNT, **ENDPOINT_KINDS},
    ),
    "mpi:azureml": (
        {
            "AZUREML_RUN_ID": "run_1",
            "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "AZ_BATCH_MASTER_NODE": "10.0.0.4:6105",
        },
        probes.fake(),
        {"AZ_BATCH_MASTER_NODE": ADDRESS},
    ),
    "mpi:azureml_one_node": (
        {
            "AZUREML_RUN_ID": "run_1",
            "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "AZ_BATCHAI_MPI_MASTER_NODE": "10.0.0.4",
            "MASTER_PORT": "29500",
        },
        probes.fake(),
        {"AZ_BATCHAI_MPI_MASTER_NODE": ADDRESS},
    ),
    "tpu_vm": (
        {"TPU_WORKER_ID": "1", "TPU_WORKER_HOSTNAMES": "t-0.svc,t-1.svc", "TPU_PROCESS_ADDRESSES": "t-0:8476,t-1:8476"},
        probes.fake(),
        {"TPU_WORKER_ID": INDEX, "TPU_PROCESS_ADDRESSES": ADDRESS, "MASTER_PORT": PORT},
    ),
    "tpu_vm:multislice": (
        {
            "TPU_WORKER_ID": "1",
            "TPU_WORKER_HOSTNAMES": "s1-0.svc,s1-1.svc",
            "MEGASCALE_COORDINATOR_ADDRESS": "s0-0.svc:8080",
            "MEGASCALE_NUM_SLICES": "2",
            "MEGASCALE_SLICE_ID": "1",
        },
        probes.fake(),
        {
            "TPU_WORKER_HOSTNAMES": ADDRESS,
            "MEGASCALE_COORDINATOR_ADDRESS": ADDRESS,
            "MEGASCALE_NUM_SLICES": COUNT,
            "MEGASCALE_SLICE_ID": INDEX,
        },
    ),
    "aws_batch": (
        {
            "AWS_BATCH_JOB_ID": "7c9a3e52#1",
            "AWS_BATCH_JOB_ATTEMPT": "1",
            "AWS_BATCH_JOB_NODE_INDEX": "1",
            "AWS_BATCH_JOB_NUM_NODES": "4",
            "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
            "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.3.17",
        },
        probes.fake(),
        {
            "AWS_BATCH_JOB_ATTEMPT": COUNT,
            "AWS_BATCH_JOB_NODE_INDEX": INDEX,
            "AWS_BATCH_JOB_NUM_NODES": COUNT,
            "AWS_BATCH_JOB_MAIN_NODE_INDEX": INDEX,
            "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": ADDRESS,
            "MASTER_PORT": PORT,
        },
    ),
    "sagemaker": (
        {"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_NUM_GPUS": "0", "SM_NUM_NEURONS": "2"},
        probes.fake(),
        {
            "SM_HOSTS": ADDRESS,  # every bad address is bad JSON too
            "SM_CURRENT_HOST": ADDRESS,
            "SM_NUM_GPUS": INDEX,
            "SM_NUM_NEURONS": INDEX,
            "MASTER_PORT": PORT,
        },
    ),
    "skypilot": (
        {
            "SKYPILOT_NODE_RANK": "1",
            "SKYPILOT_NODE_IPS": "10.128.0.47\n10.128.0.48",
            "SKYPILOT_NUM_NODES": "2",
            "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        },
        probes.fake(),
        {
            "SKYPILOT_NODE_RANK": INDEX,
            "SKYPILOT_NODE_IPS": ADDRESS,
            "SKYPILOT_NUM_NODES": COUNT,
            "SKYPILOT_NUM_GPUS_PER_NODE": INDEX,
            "MASTER_PORT": PORT,
        },
    ),
    "dstack": (
        {
            "DSTACK_NODE_RANK": "1",
            "DSTACK_NODES_NUM": "2",
            "DSTACK_MASTER_NODE_IP": "10.0.0.5",
            "DSTACK_NODES_IPS": "10.0.0.5\n10.0.0.6",
            "DSTACK_GPUS_PER_NODE": "4",
        },
        probes.fake(),
        {
            "DSTACK_NODE_RANK": INDEX,
            "DSTACK_NODES_NUM": COUNT,
            "DSTACK_MASTER_NODE_IP": ADDRESS,
            "DSTACK_NODES_IPS": ADDRESS,
            "DSTACK_GPUS_PER_NODE": INDEX,
            "MASTER_PORT": PORT,
        },
    ),
    "lws": (
        {
            "LWS_LEADER_ADDRESS": "vllm-0.vllm.default",
            "LWS_GROUP_SIZE": "2",
            "LWS_WORKER_INDEX": "1",
            "LWS_NAME": "vllm",
            "LWS_GROUP_INDEX": "0",
        },
        probes.fake(),
        {
            "LWS_LEADER_ADDRESS": ADDRESS,
            "LWS_GROUP_SIZE": COUNT,
            "LWS_WORKER_INDEX": INDEX,
            "LWS_GROUP_INDEX": INDEX,
            "MASTER_PORT": PORT,
        },
    ),
    "indexed_job": (
        {"JOB_COMPLETION_INDEX": "1", "NNODES": "4", "MASTER_ADDR": "train-0.train", "MASTER_PORT": "29500"},
        probes.fake(),
        {"JOB_COMPLETION_INDEX": INDEX, "NNODES": COUNT, "MASTER_ADDR": ADDRESS, "MASTER_PORT": PORT},
    ),
    "gcp_batch": (
        {
            "BATCH_TASK_INDEX": "1",
            "BATCH_TASK_COUNT": "2",
            "BATCH_TASK_RETRY_ATTEMPT": "0",
            "BATCH_HOSTS_FILE": "/etc/hosts-of-the-job",
            "MASTER_PORT": "29500",
        },
        probes.fake(hostname="train-group0-1", files={"/etc/hosts-of-the-job": "train-group0-0\ntrain-group0-1\n"}),
        {"BATCH_TASK_INDEX": INDEX, "BATCH_TASK_COUNT": COUNT, "BATCH_TASK_RETRY_ATTEMPT": INDEX, "MASTER_PORT": PORT},
    ),
}
CASES = [
    pytest.param(source, variable, value, id=f"{source}-{variable}-{value[:12]!r}")
    for source, (_, _, variables) in SOURCES.items()
    for variable, kind in variables.items()
    for value in BAD[kind]
]


def test_every_base_environment_resolves() -> None:
    for source, (environ, fake, _) in SOURCES.items():
        name = source.partition(":")[0]
        assert resolver.resolve(environ, fake, source=name).source == name
        assert resolver.resolve(environ, fake).source == name or name == "kubeflow"  # auto-detected too


@pytest.mark.parametrize(("source", "variable", "value"), CASES)
def test_malformed_value_is_a_topology_error_naming_the_variable(source: str, variable: str, value: str) -> None:
    environ, fake, _ = SOURCES[source]
    with pytest.raises(TopologyError) as info:
        resolver.resolve({**environ, variable: value}, fake, source=source.partition(":")[0])
    message = str(info.value)
    assert variable in message
    assert len(message) < 1000


@pytest.mark.parametrize(
    ("source", "variable"), [(s, v) for s, (_, _, variables) in SOURCES.items() for v in variables]
)
def test_the_cli_says_the_same_in_text_and_json(
    source: str, variable: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    environ, fake, _ = SOURCES[source]
    monkeypatch.setattr("probes.live.probe", lambda name, **_: getattr(fake, name))  # resolve's live probes
    bad = {**environ, variable: "1;$(id)"}
    assert main(["--source", source.partition(":")[0]], environ=bad) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and variable in err and "Traceback" not in err
    assert main(["--source", source.partition(":")[0], "--format", "json"], environ=bad) == 2
    out, err = capsys.readouterr()
    error = json.loads(out)["error"]
    assert variable in error["message"]
    assert error["type"] in {"InvalidVariable", "MissingVariable", "ProbeFailed", "InvalidTopology"}


@pytest.mark.parametrize("value", BAD[INDEX])
def test_pmix_rank_is_checked_before_the_comm_is_asked(value: str) -> None:
    # PMIx gives no size (the comm does), so it has no resolvable base environment above; a bad
    # rank must fail before any probe: probes.fake() would answer a comm question with ProbeFailed
    env = {"PMIX_RANK": value, "PMIX_NAMESPACE": "ns", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1"}
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(env, probes.fake())
    assert info.value.variable == "PMIX_RANK"
