"""resolver.testing.sagemaker: instances as the training toolkit and the resource config file document them."""

from __future__ import annotations

import json

import pytest

import resolver
from resolver import testing as rt


def test_an_instance_and_its_resource_config_file() -> None:
    process = rt.sagemaker_env(node=1, instances=2, gpus=8)
    assert process.environ["SM_HOSTS"] == '["algo-1", "algo-2"]'
    assert process.environ["SM_CURRENT_HOST"] == process.hostname == "algo-2"
    config = json.loads(process.files["/opt/ml/input/config/resourceconfig.json"])
    assert (config["current_host"], config["hosts"]) == ("algo-2", ["algo-1", "algo-2"])
    t = resolver.resolve(process.environ, process.probes())
    assert (t.node_rank, t.nproc_per_node, t.main_address, t.main_port) == (1, 8, "algo-1", 7777)


@pytest.mark.parametrize("with_variables", [True, False])
def test_jobs_are_one_world_with_or_without_the_toolkits_variables(with_variables: bool) -> None:
    job = rt.sagemaker_job(instances=3, gpus=4, with_variables=with_variables)
    records = job.resolve()
    rt.assert_consistent(records, job)
    assert {t.nproc_per_node for t in records} == ({4} if with_variables else {None})
    assert {t.job_name for t in records} == {"pytorch-training-2026-12-03-10-00-00-000"}


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"instances 0\.\.1"):
        rt.sagemaker_env(node=2)
    with pytest.raises(ValueError, match="gpus"):
        rt.sagemaker_job(gpus=-1)
