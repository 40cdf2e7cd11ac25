"""resolver.testing.skypilot: a task's nodes as SkyPilot documents them (no capture)."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import testing as rt


def test_the_documented_variables() -> None:
    node = rt.skypilot_env(node=1, num_nodes=2, gpus_per_node=8, cluster="bert")
    assert node["SKYPILOT_NODE_IPS"] == "10.128.0.47\n10.128.0.48"
    assert (node["SKYPILOT_NODE_RANK"], node["SKYPILOT_NUM_NODES"], node["SKYPILOT_NUM_GPUS_PER_NODE"]) == (
        "1",
        "2",
        "8",
    )
    t = resolver.resolve(node, probes.fake())
    assert (t.node_rank, t.main_address, t.nproc_per_node, t.job_id) == (1, "10.128.0.47", 8, node["SKYPILOT_TASK_ID"])


def test_a_job_is_one_world() -> None:
    job = rt.skypilot_job(num_nodes=4, gpus_per_node=2)
    rt.assert_consistent(job.resolve(), job)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"nodes 0\.\.1"):
        rt.skypilot_env(node=2)
