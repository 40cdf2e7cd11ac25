"""resolver.testing.aws_batch: an MNP job's nodes as AWS Batch documents them (no capture)."""

from __future__ import annotations

import attrs
import pytest

import probes
import resolver
from resolver import testing as rt

MAIN_IP = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"


def test_only_the_child_nodes_are_told_the_main_address() -> None:
    main = rt.aws_batch_env(node=2, num_nodes=3, main_node=2)
    child = rt.aws_batch_env(node=0, num_nodes=3, main_node=2)
    assert MAIN_IP not in main and child[MAIN_IP] == "10.0.3.12"
    assert (child["AWS_BATCH_JOB_NODE_INDEX"], child["AWS_BATCH_JOB_MAIN_NODE_INDEX"]) == ("0", "2")
    assert child["AWS_BATCH_JOB_ID"].endswith("#0")


@pytest.mark.parametrize("main_node", [0, 1, 3])
def test_the_main_node_is_rank_0_and_every_node_agrees(main_node: int) -> None:
    job = rt.aws_batch_job(num_nodes=4, main_node=main_node, attempt=2)
    records = job.resolve()
    rt.assert_consistent(records, job)
    assert records[main_node].main_address == f"ip-10-0-3-{10 + main_node}.ec2.internal"
    assert {t.restart_count for t in records} == {1}


def test_assert_consistent_catches_a_node_that_disagrees_on_the_main_node() -> None:
    job = rt.aws_batch_job(num_nodes=3, main_node=2)
    wrong = list(job.processes)
    wrong[0] = attrs.evolve(wrong[0], environ={**wrong[0].environ, "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0"})
    broken = attrs.evolve(job, processes=tuple(wrong))
    with pytest.raises(AssertionError, match="global ranks"):
        rt.assert_consistent(broken.resolve(), broken)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match="main_node=2"):
        rt.aws_batch_job(num_nodes=2, main_node=2)
    with pytest.raises(ValueError, match="attempt"):
        rt.aws_batch_job(attempt=0)
    assert resolver.resolve(rt.aws_batch_env(node=1), probes.fake()).source == "aws_batch"
