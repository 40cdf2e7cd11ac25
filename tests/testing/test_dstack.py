"""resolver.testing.dstack: a distributed task's nodes as dstack documents them (no capture)."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import testing as rt


def test_the_documented_variables() -> None:
    node = rt.dstack_env(node=1, nodes=2, gpus_per_node=4)
    assert (node["DSTACK_MASTER_NODE_IP"], node["DSTACK_NODES_IPS"], node["DSTACK_GPUS_NUM"]) == (
        "10.0.0.5",
        "10.0.0.5\n10.0.0.6",
        "8",
    )
    t = resolver.resolve(node, probes.fake())
    assert (t.node_rank, t.main_address, t.nproc_per_node, t.job_name) == (1, "10.0.0.5", 4, "train-ddp")


def test_a_job_is_one_world() -> None:
    job = rt.dstack_job(nodes=3, gpus_per_node=2)
    rt.assert_consistent(job.resolve(), job)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"nodes 0\.\.1"):
        rt.dstack_env(node=2)
