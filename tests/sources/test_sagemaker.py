"""SageMaker training, from the toolkit's documented variables and the resource config file."""

from __future__ import annotations

import json

import pytest

import probes
import resolver
from resolver import InvalidVariable, ProbeFailed, TopologyError

HOSTS = ["algo-1", "algo-2", "algo-3"]
CONFIG = "/opt/ml/input/config/resourceconfig.json"


def container(host: str, **extra: str) -> dict[str, str]:
    """The training toolkit's variables on `host` of a 3-instance ml.p4d job (ENVIRONMENT_VARIABLES.md)."""
    env = {
        "SM_HOSTS": json.dumps(HOSTS),
        "SM_CURRENT_HOST": host,
        "SM_NUM_GPUS": "8",
        "SM_NUM_CPUS": "96",
        "SM_NETWORK_INTERFACE_NAME": "eth0",
        "SM_TRAINING_ENV": json.dumps({"job_name": "bert-2026-12-03", "current_host": host, "hosts": HOSTS}),
        "TRAINING_JOB_NAME": "bert-2026-12-03",
        "TRAINING_JOB_ARN": "arn:aws:sagemaker:us-east-1:123456789012:training-job/bert-2026-12-03",
    }
    return {**env, **extra}


def resource_config(host: str) -> str:
    return json.dumps({"current_host": host, "hosts": HOSTS, "network_interface_name": "eth0"})


def test_every_instance_is_an_agent_meeting_at_the_first_host() -> None:
    records = [resolver.resolve(container(h), probes.fake()) for h in HOSTS]
    assert [t.node_rank for t in records] == [0, 1, 2]
    assert {(t.source, t.main_address, t.main_port, t.nproc_per_node, t.num_nodes) for t in records} == {
        ("sagemaker", "algo-1", 7777, 8, 3)
    }
    assert records[1].job_name == "bert-2026-12-03" and records[1].job_id is not None


def test_the_resource_config_file_fills_in_what_the_variables_lack() -> None:
    environ = {k: v for k, v in container("algo-3").items() if k != "SM_HOSTS"}
    t = resolver.resolve(environ, probes.fake(files={CONFIG: resource_config("algo-3")}))
    assert (t.node_rank, t.num_nodes) == (2, 3)
    assert CONFIG in str(t.provenance["num_nodes"])
    only_host = {"SM_CURRENT_HOST": "algo-2"}
    t = resolver.resolve(
        {**only_host, "SM_INPUT_CONFIG_DIR": "/cfg"},
        probes.fake(files={"/cfg/resourceconfig.json": resource_config("algo-2")}),
    )
    assert (t.node_rank, t.main_address, t.nproc_per_node) == (1, "algo-1", None)
    with pytest.raises(ProbeFailed):
        resolver.resolve(only_host, probes.fake())


def test_job_name_from_the_training_env_when_training_job_name_is_missing() -> None:
    environ = {k: v for k, v in container("algo-1").items() if k not in ("TRAINING_JOB_NAME", "TRAINING_JOB_ARN")}
    assert resolver.resolve(environ, probes.fake()).job_name == "bert-2026-12-03"


def test_neuron_cores_when_there_are_no_gpus() -> None:
    t = resolver.resolve(container("algo-1", SM_NUM_GPUS="0", SM_NUM_NEURONS="32"), probes.fake())
    assert t.nproc_per_node == 32


@pytest.mark.parametrize(
    ("extra", "variable"),
    [
        ({"SM_HOSTS": "algo-1,algo-2"}, "SM_HOSTS"),
        ({"SM_HOSTS": "[]"}, "SM_HOSTS"),
        ({"SM_HOSTS": '["algo-1", "algo-1"]'}, "SM_HOSTS"),
        ({"SM_HOSTS": '["algo 1"]'}, "SM_HOSTS"),
        ({"SM_CURRENT_HOST": "algo-9"}, "SM_CURRENT_HOST"),
        ({"SM_NUM_GPUS": "x"}, "SM_NUM_GPUS"),
        ({"SM_TRAINING_ENV": "{", "TRAINING_JOB_NAME": ""}, "SM_TRAINING_ENV"),
    ],
)
def test_errors_name_the_variable(extra: dict[str, str], variable: str) -> None:
    environ = container("algo-2", **extra)
    if "SM_TRAINING_ENV" in extra:
        del environ["TRAINING_JOB_NAME"]
    with pytest.raises(TopologyError) as info:
        resolver.resolve(environ, probes.fake())
    assert isinstance(info.value, InvalidVariable) and info.value.variable == variable


def test_a_bad_resource_config_file_is_named() -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({"SM_CURRENT_HOST": "algo-1"}, probes.fake(files={CONFIG: "not json"}))
    assert info.value.variable == CONFIG


def test_hostnames_are_the_training_hosts_in_node_rank_order() -> None:
    from resolver.testing import sagemaker_job

    for t in sagemaker_job().resolve():
        assert t.hostnames is not None and t.num_nodes == len(t.hostnames)
        assert t.hostnames[0] == t.main_address
