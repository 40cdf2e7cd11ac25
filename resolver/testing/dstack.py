"""dstack distributed tasks: every node running the task's commands, as dstack's documentation gives them.

    dstack_env(node=1, nodes=2, gpus_per_node=4)  -> Process: node 1's environment
    dstack_job(nodes=2)                           -> Job: every node's agent

The keywords are the fields of `DstackLaunch` (plus `node` for `dstack_env`). From
https://dstack.ai/docs/concepts/tasks/#system-environment-variables; no capture exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "DstackLaunch", "DstackNode", "dstack_env", "dstack_job"]


@attrs.frozen(kw_only=True)
class DstackLaunch(kit.Launch):
    """Run `run_name` of a task on `nodes` nodes with `gpus_per_node` GPUs each; node i's IP is ``10.0.0.{5 + i}``."""

    launcher = "dstack"
    nodes: int = attrs.field(default=2, validator=kit.positive)
    gpus_per_node: int = attrs.field(default=0, validator=kit.not_negative)
    run_name: str = "train-ddp"

    def ip(self, node: int) -> str:
        return f"10.0.0.{5 + node}"

    def process(self, node: int) -> Process:
        kit.index_in("node", node, self.nodes, "the task has nodes")
        env = {
            "DSTACK_GPUS_NUM": str(self.gpus_per_node * self.nodes),
            "DSTACK_GPUS_PER_NODE": str(self.gpus_per_node),
            "DSTACK_MASTER_NODE_IP": self.ip(0),
            "DSTACK_NODES_IPS": "\n".join(self.ip(i) for i in range(self.nodes)),
            "DSTACK_NODES_NUM": str(self.nodes),
            "DSTACK_NODE_RANK": str(node),
            "DSTACK_RUN_NAME": self.run_name,
        }
        return Process(environ=env, hostname=f"{self.run_name}-{node}", node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.nodes))


@attrs.frozen(kw_only=True)
class DstackNode(DstackLaunch, kit.ByNode):
    """Node `node` of a `DstackLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


dstack_job = kit.job_builder(DstackLaunch, doc="Every node of one dstack task; the keywords are `DstackLaunch`'s.")
dstack_env = kit.env_builder(DstackNode, doc="Node `node`'s environment; the other keywords are `DstackLaunch`'s.")


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(DstackLaunch, nodes=st.integers(1, min(4, most)), gpus_per_node=st.sampled_from([0, 2, 8]))
    return launches.map(DstackLaunch.job)


LAUNCHER = Launcher(name="dstack", nondeterministic={}, jobs=_jobs)
