"""resolver.testing.lws: a LeaderWorkerSet group's pods as LWS documents them (no capture)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import probes
import resolver
from resolver import testing as rt
from resolver.testing.lws import LAUNCHER, lws_env, lws_job


def test_the_documented_variables() -> None:
    # the reference's example: LWS_LEADER_ADDRESS of group 0 of leaderworkerset-multi-template, LWS_GROUP_SIZE 4
    pod = lws_env(node=2, size=4, name="leaderworkerset-multi-template")
    assert pod == {
        "LWS_LEADER_ADDRESS": "leaderworkerset-multi-template-0.leaderworkerset-multi-template.default",
        "LWS_GROUP_SIZE": "4",
        "LWS_WORKER_INDEX": "2",
        "LWS_NAME": "leaderworkerset-multi-template",
        "LWS_GROUP_INDEX": "0",
    }
    unique = lws_env(node=1, group=1, subdomain_policy="UniquePerReplica", downward_api=False)
    assert unique == {"LWS_LEADER_ADDRESS": "vllm-1.vllm-1.default", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}
    t = resolver.resolve(pod, probes.fake())
    assert (t.source, t.node_rank, t.main_address, t.job_id) == (
        "lws",
        2,
        pod["LWS_LEADER_ADDRESS"],
        pod["LWS_NAME"] + "-0",
    )


def test_a_group_is_one_world_on_its_pods_hosts() -> None:
    job = lws_job(size=3, group=2)
    assert job.hosts == ("vllm-2", "vllm-2-1", "vllm-2-2")  # the leader, then the workers' pods
    rt.assert_consistent(job.resolve(), job)


@settings(max_examples=25, deadline=None)
@given(LAUNCHER.jobs(4))
def test_every_drawn_group_is_one_world(job: rt.Job) -> None:
    rt.assert_consistent(job.resolve(), job)


@pytest.mark.parametrize(
    ("keywords", "match"),
    [({"node": 2}, r"pods 0\.\.1"), ({"size": 0}, "size=0"), ({"subdomain_policy": "Unique"}, "Shared")],
)
def test_impossible_launches_are_refused(keywords: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lws_env(**keywords)  # type: ignore[arg-type]
