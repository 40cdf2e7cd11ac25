"""The Indexed Job builders follow Kubernetes' documentation: the index, pod names, the user's variables."""

from __future__ import annotations

from resolver.testing import assert_consistent, indexed_job_env, indexed_job_job


def test_a_pod_has_its_index_and_the_user_s_variables() -> None:
    pod = indexed_job_env(node=2, completions=4, name="train", subdomain="svc")
    assert dict(pod) == {
        "JOB_COMPLETION_INDEX": "2",
        "NNODES": "4",
        "MASTER_ADDR": "train-0.svc",
        "MASTER_PORT": "29500",
    }
    assert pod.hostname == "train-2"
    assert "MASTER_PORT" not in indexed_job_env(with_port=False)


def test_every_pod_is_one_world_of_agents() -> None:
    job = indexed_job_job(completions=3)
    assert_consistent(job.resolve(), job)
