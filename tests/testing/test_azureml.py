"""resolver.testing.azureml: an Azure ML job's nodes under the per-node PyTorch launch (no capture)."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import testing as rt


def test_the_documented_variables() -> None:
    node = rt.azureml_env(node=1, instances=3)
    assert (node["NODE_RANK"], node["WORLD_SIZE"], node["MASTER_ADDR"]) == ("1", "3", "10.0.0.4")
    t = resolver.resolve(node, probes.fake())
    assert (t.source, t.node_rank, t.job_id) == ("azureml", 1, node["AZUREML_RUN_ID"])


def test_a_job_is_one_world() -> None:
    job = rt.azureml_job(instances=4)
    rt.assert_consistent(job.resolve(), job)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"nodes 0\.\.1"):
        rt.azureml_env(node=2)
