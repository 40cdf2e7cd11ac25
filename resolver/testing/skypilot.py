"""SkyPilot: every node running a task's commands, as SkyPilot's documentation gives them.

    skypilot_env(node=1, num_nodes=2, gpus_per_node=8)  -> Process: node 1's environment
    skypilot_job(num_nodes=2)                           -> Job: every node's agent

The keywords are the fields of `SkyPilotLaunch` (plus `node` for `skypilot_env`). From
https://docs.skypilot.co/en/latest/running-jobs/environment-variables.html; no capture exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "SkyPilotLaunch", "SkyPilotNode", "skypilot_env", "skypilot_job"]


@attrs.frozen(kw_only=True)
class SkyPilotLaunch(kit.Launch):
    """A task on cluster `cluster` of `num_nodes` nodes with `gpus_per_node` GPUs each (0: CPU nodes).

    Node i's IP is ``10.128.0.{47 + i}`` and its host ``{cluster}-{i}``; ``SKYPILOT_NODE_IPS`` lists
    them head first, one per line.
    """

    launcher = "skypilot"
    num_nodes: int = attrs.field(default=2, validator=kit.positive)
    gpus_per_node: int = attrs.field(default=0, validator=kit.not_negative)
    cluster: str = "train"
    job_number: int = attrs.field(default=1, validator=kit.positive)

    def process(self, node: int) -> Process:
        kit.index_in("node", node, self.num_nodes, "the cluster has nodes")
        env = {
            "SKYPILOT_NODE_IPS": "\n".join(f"10.128.0.{47 + i}" for i in range(self.num_nodes)),
            "SKYPILOT_NODE_RANK": str(node),
            "SKYPILOT_NUM_GPUS_PER_NODE": str(self.gpus_per_node),
            "SKYPILOT_NUM_NODES": str(self.num_nodes),
            "SKYPILOT_TASK_ID": f"sky-2026-12-03-10-00-00-000001_{self.cluster}_{self.job_number}",
        }
        return Process(environ=env, hostname=f"{self.cluster}-{node}", node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.num_nodes))


@attrs.frozen(kw_only=True)
class SkyPilotNode(SkyPilotLaunch, kit.ByNode):
    """Node `node` of a `SkyPilotLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


skypilot_job = kit.job_builder(
    SkyPilotLaunch, doc="Every node of one SkyPilot task; the keywords are `SkyPilotLaunch`'s."
)
skypilot_env = kit.env_builder(
    SkyPilotNode, doc="Node `node`'s environment; the other keywords are `SkyPilotLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    sizes = {"num_nodes": st.integers(1, min(4, most)), "gpus_per_node": st.sampled_from([0, 1, 8])}
    return st.builds(SkyPilotLaunch, **sizes).map(SkyPilotLaunch.job)


LAUNCHER = Launcher(name="skypilot", nondeterministic={}, jobs=_jobs)
