"""resolver.testing.vertex: a CustomJob's trainer replicas as Vertex AI documents them (no capture)."""

from __future__ import annotations

import json

import pytest

import probes
import resolver
from resolver import testing as rt


def test_the_documented_cluster_spec() -> None:
    replica = rt.vertex_env(node=2, workers=2, reduction_servers=1)
    spec = json.loads(replica["CLUSTER_SPEC"])
    assert spec["task"] == {"type": "workerpool1", "index": 1}
    assert spec["cluster"]["workerpool0"] == ["cmle-training-workerpool0-1d969d3ba6-0:2222"]
    assert len(spec["cluster"]["workerpool2"]) == 1
    assert json.loads(replica["TF_CONFIG"])["task"] == {"type": "worker", "index": 1}
    t = resolver.resolve(replica, probes.fake())
    assert (t.source, t.node_rank, t.num_nodes) == ("vertex", 2, 3)


@pytest.mark.parametrize("workers", [0, 1, 5])
def test_a_job_is_one_world(workers: int) -> None:
    job = rt.vertex_job(workers=workers, reduction_servers=1)
    rt.assert_consistent(job.resolve(), job)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"trainers 0\.\.1"):
        rt.vertex_env(node=2)
