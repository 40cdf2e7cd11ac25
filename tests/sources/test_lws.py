"""Kubernetes LeaderWorkerSet, from the variables LWS's webhook sets: one agent per pod, meeting at the leader."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, TopologyError
from resolver.origin import Origin

LEADER = "vllm-1.vllm.default"  # <lws>-<group>.<subdomain>.<namespace> (pod_utils.go)


def pod(index: int, *, size: int = 4, **extra: str) -> dict[str, str]:
    """Pod `index` of group 1 of the LeaderWorkerSet `vllm`: LWS's three variables, and the set's name and
    group index passed from the pod's labels through the Downward API (labels-annotations-and-environment-variables)."""
    env = {
        "LWS_LEADER_ADDRESS": LEADER,
        "LWS_GROUP_SIZE": str(size),
        "LWS_WORKER_INDEX": str(index),
        "LWS_NAME": "vllm",
        "LWS_GROUP_INDEX": "1",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
    }
    return {**env, **extra}


def test_every_pod_is_an_agent_meeting_at_the_leader() -> None:
    records = [resolver.resolve(pod(i), probes.fake()) for i in range(4)]
    assert [t.node_rank for t in records] == [0, 1, 2, 3]
    assert {(t.source, t.world_size, t.num_nodes, t.local_rank, t.local_world_size) for t in records} == {
        ("lws", 4, 4, 0, 1)
    }
    assert {(t.main_address, t.main_port, t.nproc_per_node) for t in records} == {(LEADER, 29500, None)}
    assert not any(t.creates_processes_externally for t in records)
    assert records[2].provenance["node_rank"] == Origin.env("LWS_WORKER_INDEX")
    assert records[2].provenance["main_address"] == Origin.env("LWS_LEADER_ADDRESS")
    assert str(records[2].provenance["main_port"]) == "default:29500 (torchrun's --master-port default)"


def test_master_port_wins_on_every_pod_and_no_probe_is_asked() -> None:
    records = [resolver.resolve(pod(i, MASTER_PORT="23456"), probes.fake()) for i in range(4)]  # fake: no free_port
    assert {t.main_port for t in records} == {23456}


def test_the_group_is_the_job() -> None:
    t = resolver.resolve(pod(2), probes.fake())
    assert (t.job_name, t.job_id) == ("vllm", "vllm-1")  # the group's name: its leader pod's
    assert t.provenance["job_id"].variables == ("LWS_NAME", "LWS_GROUP_INDEX")
    other_group = resolver.resolve(pod(2, LWS_GROUP_INDEX="0", LWS_LEADER_ADDRESS="vllm-0.vllm.default"), probes.fake())
    assert other_group.job_id == "vllm-0"
    bare = {k: v for k, v in pod(2).items() if k not in ("LWS_NAME", "LWS_GROUP_INDEX")}  # no Downward API
    t = resolver.resolve(bare, probes.fake())
    assert (t.source, t.node_rank, t.job_name, t.job_id) == ("lws", 2, None, None)
    only_index = {**bare, "LWS_GROUP_INDEX": "3"}
    assert resolver.resolve(only_index, probes.fake()).job_id is None  # an index names no group without the set


def test_torchrun_inside_a_pod_wins_with_the_groups_facts() -> None:
    worker = {
        **pod(1),
        "TORCHELASTIC_RUN_ID": "none",
        "WORLD_SIZE": "16",
        "RANK": "5",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": LEADER,
        "MASTER_PORT": "29500",
    }
    w = resolver.resolve(worker, probes.fake())
    assert (w.source, w.global_rank, w.job_name, w.job_id) == ("torchelastic", 5, "vllm", "vllm-1")
    lightning = {**pod(1), "LOCAL_RANK": "1", "WORLD_SIZE": "8", "RANK": "3", "MASTER_ADDR": LEADER, "MASTER_PORT": "1"}
    t = resolver.resolve(lightning, probes.fake())
    assert (t.source, t.global_rank, t.job_id) == ("lightning", 3, "vllm-1")
    reason = next(c for c in resolver.explain(lightning).candidates if c.name == "lws").detection.reason
    assert "LOCAL_RANK is set" in reason


def test_detection_needs_all_three_variables() -> None:
    found = next(c for c in resolver.explain(pod(0)).candidates if c.name == "lws").detection
    assert found.matched
    assert found.variables == (
        "LWS_LEADER_ADDRESS",
        "LWS_GROUP_SIZE",
        "LWS_WORKER_INDEX",
        "LWS_NAME",
        "LWS_GROUP_INDEX",
    )
    partial = {k: v for k, v in pod(0).items() if k != "LWS_WORKER_INDEX"}
    assert resolver.resolve(partial, probes.fake(free_port=5000, which={})).source == "lightning"
    reason = next(c for c in resolver.explain(partial).candidates if c.name == "lws").detection.reason
    assert reason == "not a LeaderWorkerSet pod: LWS_WORKER_INDEX not set"


def test_a_tpu_pod_is_the_tpu_vm_source_earlier_in_the_order() -> None:
    """On TPU LWS also sets TPU_WORKER_ID and TPU_WORKER_HOSTNAMES (the subgroup's hosts): the TPU VM source,
    before this one, numbers the hosts as JAX does; the job facts are still the group's."""
    tpu = {
        **pod(1, size=2),
        "TPU_WORKER_ID": "1",
        "TPU_WORKER_HOSTNAMES": "vllm-1.vllm.default,vllm-1-1.vllm.default",
        "TPU_NAME": "vllm-1",
    }
    t = resolver.resolve(tpu, probes.fake())
    assert (t.source, t.node_rank, t.main_address, t.job_id) == ("tpu_vm", 1, LEADER, "vllm-1")


def test_an_index_outside_the_group_is_an_error_naming_lws_worker_index() -> None:
    with pytest.raises(TopologyError) as info:
        resolver.resolve(pod(4), probes.fake())
    assert isinstance(info.value, InvalidVariable)
    assert (info.value.variable, info.value.value) == ("LWS_WORKER_INDEX", "4")
    assert "LWS_GROUP_SIZE=4" in str(info.value)


@pytest.mark.parametrize(
    ("change", "variable", "error"),
    [
        ({"LWS_WORKER_INDEX": "-1"}, "LWS_WORKER_INDEX", InvalidVariable),
        ({"LWS_WORKER_INDEX": "one"}, "LWS_WORKER_INDEX", InvalidVariable),
        ({"LWS_GROUP_SIZE": "0"}, "LWS_GROUP_SIZE", InvalidVariable),
        ({"LWS_GROUP_SIZE": "4.0"}, "LWS_GROUP_SIZE", InvalidVariable),
        ({"LWS_LEADER_ADDRESS": "vllm-1 .vllm"}, "LWS_LEADER_ADDRESS", InvalidVariable),
        ({"LWS_LEADER_ADDRESS": ""}, "LWS_LEADER_ADDRESS", InvalidVariable),
        ({"LWS_GROUP_INDEX": "x"}, "LWS_GROUP_INDEX", InvalidVariable),
        ({"MASTER_PORT": "0"}, "MASTER_PORT", InvalidVariable),
        ({"LWS_GROUP_SIZE": None}, "LWS_GROUP_SIZE", MissingVariable),
    ],
)
def test_errors_name_the_variable(change: dict[str, str | None], variable: str, error: type[TopologyError]) -> None:
    environ = {k: v for k, v in {**pod(1), **change}.items() if v is not None}
    with pytest.raises(error) as info:
        resolver.resolve(environ, probes.fake(), source="lws")
    assert info.value.variable == variable
