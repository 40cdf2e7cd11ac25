"""Vertex AI custom training: replicas of a CustomJob from CLUSTER_SPEC (and TF_CONFIG), per distributed-training."""

from __future__ import annotations

import json

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable

CLUSTER = {
    "workerpool0": ["cmle-training-workerpool0-1d969d3ba6-0:2222"],
    "workerpool1": ["cmle-training-workerpool1-1d969d3ba6-0:2222", "cmle-training-workerpool1-1d969d3ba6-1:2222"],
    "workerpool2": ["cmle-training-workerpool2-1d969d3ba6-0:2222"],
}
TF_NAMES = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps"}


def replica(pool: str, index: int, **extra: str) -> dict[str, str]:
    """Replica `index` of worker pool `pool` in a job of a chief, two workers and a reduction server."""
    spec = {"cluster": CLUSTER, "environment": "cloud", "task": {"type": pool, "index": index}, "job": "{}"}
    tf = {
        "cluster": {TF_NAMES[p]: hosts for p, hosts in CLUSTER.items()},
        "environment": "cloud",
        "task": {"type": TF_NAMES[pool], "index": index},
    }
    env = {"CLUSTER_SPEC": json.dumps(spec), "TF_CONFIG": json.dumps(tf), "AIP_MODEL_DIR": "gs://b/model/"}
    return {**env, **extra}


TRAINERS = [("workerpool0", 0), ("workerpool1", 0), ("workerpool1", 1)]


@pytest.mark.parametrize("only", ["CLUSTER_SPEC", "TF_CONFIG"])
def test_pool_0_then_pool_1_make_the_nodes(only: str) -> None:
    drop = "TF_CONFIG" if only == "CLUSTER_SPEC" else "CLUSTER_SPEC"
    records = [
        resolver.resolve({k: v for k, v in replica(p, i).items() if k != drop}, probes.fake()) for p, i in TRAINERS
    ]
    assert [t.node_rank for t in records] == [0, 1, 2]
    assert {(t.source, t.num_nodes, t.main_address, t.main_port) for t in records} == {
        ("vertex", 3, "cmle-training-workerpool0-1d969d3ba6-0", 29500)
    }
    assert not any(t.creates_processes_externally for t in records)


def test_master_port_is_used() -> None:
    assert resolver.resolve(replica("workerpool1", 0, MASTER_PORT="8008"), probes.fake()).main_port == 8008


def test_a_tf_config_of_another_platform_is_not_vertex() -> None:
    environ = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["w0:2222"]}, "task": {"type": "worker", "index": 0}})}
    assert resolver.resolve(environ, probes.fake(free_port=1, which={})).source == "lightning"
    assert resolver.resolve({"TF_CONFIG": "{"}, probes.fake(free_port=1, which={})).source == "lightning"


@pytest.mark.parametrize(
    "environ",
    [
        replica("workerpool2", 0),  # a reduction server does not train
        replica("workerpool1", 2),
        replica("workerpool1", 0, CLUSTER_SPEC="{not json"),
        replica("workerpool1", 0, CLUSTER_SPEC='{"cluster": [], "task": {}}'),
        replica(
            "workerpool1", 0, CLUSTER_SPEC='{"cluster": {"workerpool1": ["w:1"]}, "task": {"type": "workerpool1"}}'
        ),
        replica("workerpool1", 0, CLUSTER_SPEC='{"cluster": {"pool9": ["w:1"]}, "task": {"type": "pool9"}}'),
        replica(
            "workerpool1", 0, CLUSTER_SPEC='{"cluster": {"workerpool0": ["a b:1"]}, "task": {"type": "workerpool0"}}'
        ),
    ],
)
def test_errors_name_cluster_spec(environ: dict[str, str]) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(environ, probes.fake())
    assert info.value.variable == "CLUSTER_SPEC"


def test_chosen_by_name_without_its_variables() -> None:
    with pytest.raises(MissingVariable, match="CLUSTER_SPEC"):
        resolver.resolve({}, probes.fake(), source="vertex")


def test_a_launcher_inside_the_replica_wins() -> None:
    t = resolver.resolve(replica("workerpool1", 0, LOCAL_RANK="1", RANK="3", WORLD_SIZE="4"), probes.fake(free_port=2))
    assert t.source == "lightning" and t.global_rank == 3
