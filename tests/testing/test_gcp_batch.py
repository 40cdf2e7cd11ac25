"""The Google Cloud Batch builders follow its documentation: the task variables and the hosts file."""

from __future__ import annotations

from resolver.testing import assert_consistent
from resolver.testing.gcp_batch import gcp_batch_env, gcp_batch_job


def test_a_task_has_its_index_count_retry_and_the_hosts_file() -> None:
    task = gcp_batch_env(node=2, vms=4, retry_attempt=1)
    (path,) = task.files
    assert dict(task) == {
        "BATCH_HOSTS_FILE": path,
        "BATCH_TASK_COUNT": "4",
        "BATCH_TASK_INDEX": "2",
        "BATCH_TASK_RETRY_ATTEMPT": "1",
    }
    assert task.files[path].splitlines() == [f"train-group0-{i}" for i in range(4)]
    assert task.hostname == "train-group0-2"
    assert gcp_batch_env(master_addr="10.128.0.2")["MASTER_ADDR"] == "10.128.0.2"


def test_every_task_is_one_world_of_agents() -> None:
    for job in (gcp_batch_job(vms=3), gcp_batch_job(vms=2, master_addr="10.128.0.2")):
        assert_consistent(job.resolve(), job)
