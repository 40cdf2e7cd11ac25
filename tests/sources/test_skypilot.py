"""SkyPilot, from its documented variables: node rank, the head node first in SKYPILOT_NODE_IPS, GPUs per node."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, TopologyError

IPS = "10.128.0.47\n10.128.0.48\n10.128.0.49"


def node(rank: int, **extra: str) -> dict[str, str]:
    """Node `rank` of a 3-node task with 8 GPUs each (environment-variables.html, distributed-jobs.html)."""
    env = {
        "SKYPILOT_NODE_RANK": str(rank),
        "SKYPILOT_NODE_IPS": IPS,
        "SKYPILOT_NUM_NODES": "3",
        "SKYPILOT_NUM_GPUS_PER_NODE": "8",
        "SKYPILOT_TASK_ID": "sky-2026-12-03-09-15-02-123456_bert_2",
        "SKYPILOT_CLUSTER_INFO": '{"cluster_name": "bert", "cloud": "GCP", "region": "us-central1"}',
    }
    return {**env, **extra}


def test_every_node_is_an_agent_meeting_at_the_head_node() -> None:
    records = [resolver.resolve(node(r), probes.fake()) for r in range(3)]
    assert [t.node_rank for t in records] == [0, 1, 2]
    assert {(t.source, t.main_address, t.main_port, t.nproc_per_node) for t in records} == {
        ("skypilot", "10.128.0.47", 29500, 8)
    }
    assert {t.job_id for t in records} == {"sky-2026-12-03-09-15-02-123456_bert_2"}
    assert [w.global_rank for w in resolver.spawn(records[2])] == list(range(16, 24))


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"SKYPILOT_NUM_GPUS_PER_NODE": "0"}, {"nproc_per_node": None}),  # a CPU cluster
        ({"SKYPILOT_NODE_IPS": IPS + "\n"}, {"num_nodes": 3}),
        ({"MASTER_PORT": "8008"}, {"main_port": 8008}),
    ],
)
def test_variants(extra: dict[str, str], expected: dict[str, object]) -> None:
    t = resolver.resolve(node(1, **extra), probes.fake())
    assert {k: getattr(t, k) for k in expected} == expected


def test_without_skypilot_num_nodes_the_ips_count() -> None:
    environ = {k: v for k, v in node(2).items() if k != "SKYPILOT_NUM_NODES"}
    t = resolver.resolve(environ, probes.fake())
    assert (t.num_nodes, str(t.provenance["num_nodes"])) == (3, "formula:count of lines of SKYPILOT_NODE_IPS")


@pytest.mark.parametrize(
    ("extra", "variable", "error"),
    [
        ({"SKYPILOT_NUM_NODES": "2"}, "SKYPILOT_NUM_NODES", InvalidVariable),
        ({"SKYPILOT_NODE_RANK": "3"}, "SKYPILOT_NODE_RANK", InvalidVariable),
        ({"SKYPILOT_NODE_IPS": "10.0.0.1\n\n10.0.0.2"}, "SKYPILOT_NODE_IPS", InvalidVariable),
        ({"SKYPILOT_NODE_IPS": ""}, "SKYPILOT_NODE_IPS", InvalidVariable),
        ({"SKYPILOT_NUM_GPUS_PER_NODE": "eight"}, "SKYPILOT_NUM_GPUS_PER_NODE", InvalidVariable),
    ],
)
def test_errors_name_the_variable(extra: dict[str, str], variable: str, error: type[TopologyError]) -> None:
    with pytest.raises(error) as info:
        resolver.resolve(node(1, **extra), probes.fake())
    assert info.value.variable == variable


def test_a_missing_rank_is_not_skypilot() -> None:
    environ = {k: v for k, v in node(1).items() if k != "SKYPILOT_NODE_RANK"}
    assert resolver.resolve(environ, probes.fake(free_port=1, which={})).source == "lightning"
    with pytest.raises(MissingVariable, match="SKYPILOT_NODE_RANK"):
        resolver.resolve(environ, probes.fake(), source="skypilot")


def test_hostnames_are_the_node_ips_in_node_rank_order() -> None:
    from resolver.testing import skypilot_job

    for t in skypilot_job(num_nodes=3).resolve():
        assert t.hostnames is not None and len(t.hostnames) == 3
        assert t.hostnames[0] == t.main_address and str(t.provenance["hostnames"]) == "env:SKYPILOT_NODE_IPS"
