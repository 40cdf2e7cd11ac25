"""Azure ML: every node of a command job under the PyTorch distribution with one process per node.

    azureml_env(node=1, instances=2)  -> Process: node 1's environment
    azureml_job(instances=2)          -> Job: every node's agent

The keywords are the fields of `AzureMlLaunch` (plus `node` for `azureml_env`). Variables as
https://learn.microsoft.com/azure/machine-learning/how-to-train-distributed-gpu gives them for the
per-node launch (``process_count_per_instance=1``); no capture of a real job exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "AzureMlLaunch", "AzureMlNode", "azureml_env", "azureml_job"]


@attrs.frozen(kw_only=True)
class AzureMlLaunch(kit.Launch):
    """A command job on `instances` nodes of a compute cluster; node i's IP is ``10.0.0.{4 + i}``."""

    launcher = "azureml"
    instances: int = attrs.field(default=2, validator=kit.positive)
    run_id: str = "bert_1701600000_5f3c2a1b"
    port: int = attrs.field(default=6105, validator=kit.positive)

    def process(self, node: int) -> Process:
        env = {
            "AZUREML_ARM_WORKSPACE_NAME": "workspace",
            "AZUREML_EXPERIMENT_ID": "0c5e0b6a-41ab-4f3e-9d1c-2b7a8e6f4d10",
            "AZUREML_RUN_ID": self.run_id,
            "MASTER_ADDR": "10.0.0.4",
            "MASTER_PORT": str(self.port),
            "NODE_RANK": str(kit.index_in("node", node, self.instances, "the job has nodes")),
            "WORLD_SIZE": str(self.instances),
        }
        return Process(environ=env, hostname=f"10.0.0.{4 + node}", node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.instances))


@attrs.frozen(kw_only=True)
class AzureMlNode(AzureMlLaunch, kit.ByNode):
    """Node `node` of an `AzureMlLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


azureml_job = kit.job_builder(AzureMlLaunch, doc="Every node of one Azure ML job; `AzureMlLaunch`'s keywords.")
azureml_env = kit.env_builder(AzureMlNode, doc="Node `node`'s environment; the other keywords are `AzureMlLaunch`'s.")


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(AzureMlLaunch, instances=st.integers(1, min(8, most)), port=st.integers(1024, 65535))
    return launches.map(AzureMlLaunch.job)


LAUNCHER = Launcher(name="azureml", nondeterministic={}, jobs=_jobs)
