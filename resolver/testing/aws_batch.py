"""AWS Batch multi-node parallel jobs: every node's container, as the documentation gives them.

    aws_batch_env(node=2, num_nodes=4, main_node=0)   -> Process: node 2's environment
    aws_batch_job(num_nodes=4, main_node=2)           -> Job: every node's agent

The keywords are the fields of `AwsBatchLaunch` (plus `node` for `aws_batch_env`). From
https://docs.aws.amazon.com/batch/latest/userguide/mnp-env-vars.html and job_env_vars.html; no
capture of a real job exists here. The main node is not given its own address: it resolves its
host name, so the job lists that name as an alias of the main node's IPv4 address.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "AwsBatchLaunch", "AwsBatchNode", "aws_batch_env", "aws_batch_job"]


@attrs.frozen(kw_only=True)
class AwsBatchLaunch(kit.Launch):
    """An MNP job of `num_nodes` nodes whose main node is index `main_node`, on attempt `attempt`.

    Node i has the private IPv4 address ``10.0.{subnet}.{10 + i}`` and the host name
    ``ip-10-0-{subnet}-{10 + i}.ec2.internal``; its job id is ``{job_id}#{i}``.
    """

    launcher = "aws_batch"
    num_nodes: int = attrs.field(default=2, validator=kit.positive)
    main_node: int = attrs.field(default=0, validator=kit.not_negative)
    job_id: str = "4d9a1c2e-7b3f-4e8a-9c6d-1f2e3a4b5c6d"
    attempt: int = attrs.field(default=1, validator=kit.positive)
    subnet: int = attrs.field(default=3, validator=kit.not_negative)

    def __attrs_post_init__(self) -> None:
        if self.main_node >= self.num_nodes:
            raise ValueError(f"main_node={self.main_node}: the job has nodes 0..{self.num_nodes - 1}")

    def address(self, node: int) -> str:
        return f"10.0.{self.subnet}.{10 + node}"

    def host(self, node: int) -> str:
        return f"ip-10-0-{self.subnet}-{10 + node}.ec2.internal"

    def process(self, node: int) -> Process:
        kit.index_in("node", node, self.num_nodes, "the job has nodes")
        env = {
            "AWS_BATCH_CE_NAME": "training-ce",
            "AWS_BATCH_JOB_ATTEMPT": str(self.attempt),
            "AWS_BATCH_JOB_ID": f"{self.job_id}#{node}",
            "AWS_BATCH_JOB_MAIN_NODE_INDEX": str(self.main_node),
            "AWS_BATCH_JOB_NODE_INDEX": str(node),
            "AWS_BATCH_JOB_NUM_NODES": str(self.num_nodes),
            "AWS_BATCH_JQ_NAME": "training-queue",
        }
        if node != self.main_node:  # "This variable isn't present on the main node."
            env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = self.address(self.main_node)
        return Process(environ=dict(sorted(env.items())), hostname=self.host(node), node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.num_nodes))

    def job_options(self) -> Mapping[str, Any]:
        return {"main": self.main_node, "aliases": {self.host(self.main_node): self.address(self.main_node)}}


@attrs.frozen(kw_only=True)
class AwsBatchNode(AwsBatchLaunch, kit.ByNode):
    """Node `node` of an `AwsBatchLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


aws_batch_job = kit.job_builder(
    AwsBatchLaunch, doc="Every node of one AWS Batch multi-node parallel job; the keywords are `AwsBatchLaunch`'s."
)
aws_batch_env = kit.env_builder(
    AwsBatchNode, doc="Node `node`'s environment; the other keywords are `AwsBatchLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        nodes = draw(st.integers(1, min(4, most)))
        return AwsBatchLaunch(
            num_nodes=nodes,
            main_node=draw(st.integers(0, nodes - 1)),
            attempt=draw(st.integers(1, 3)),
            subnet=draw(st.integers(0, 255)),
        ).job()

    return build()


LAUNCHER = Launcher(name="aws_batch", nondeterministic={}, jobs=_jobs)
