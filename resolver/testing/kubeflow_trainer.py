"""Kubeflow Trainer v2: every trainer node (pod) of a TrainJob, as its torch plugin sets them.

    kubeflow_trainer_env(node=1, num_nodes=2, nproc_per_node="4")  -> Process: pod 1's environment
    kubeflow_trainer_job(num_nodes=2)                              -> Job: every pod's agent

The keywords are the fields of `KubeflowTrainerLaunch` (plus `node` for `kubeflow_trainer_env`).
From the documentation and the plugin's source (github.com/kubeflow/trainer,
pkg/runtime/framework/plugins/torch/torch.go; port 29500 from pkg/constants); no capture of a real
TrainJob exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "LAUNCHER",
    "KubeflowTrainerLaunch",
    "KubeflowTrainerNode",
    "kubeflow_trainer_env",
    "kubeflow_trainer_job",
]

_PORT = 29500  # ContainerTrainerPort


def _nproc(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in ("auto", "cpu", "gpu") and not (value.isascii() and value.isdigit() and int(value) >= 1):
        raise ValueError(f"{attribute.name}={value!r}: expected an integer >= 1, 'auto', 'cpu' or 'gpu'")


@attrs.frozen(kw_only=True)
class KubeflowTrainerLaunch(kit.Launch):
    """A TrainJob `name` with `num_nodes` trainer nodes of `nproc_per_node` processes each.

    Pod i runs on host ``{name}-node-0-{i}`` (JobSet's naming); ``PET_MASTER_ADDR`` is node 0's
    ``{name}-node-0-0.{name}``; ``PET_NODE_RANK`` is the pod's completion index.
    """

    launcher = "kubeflow_trainer"
    num_nodes: int = attrs.field(default=2, validator=kit.positive)
    nproc_per_node: str = attrs.field(default="auto", validator=_nproc)
    name: str = "trainjob"

    def pod(self, node: int) -> str:
        return f"{self.name}-node-0-{node}"

    def process(self, node: int) -> Process:
        kit.index_in("node", node, self.num_nodes, "the TrainJob has nodes")
        env = {
            "JOB_COMPLETION_INDEX": str(node),
            "PET_MASTER_ADDR": f"{self.pod(0)}.{self.name}",
            "PET_MASTER_PORT": str(_PORT),
            "PET_NNODES": str(self.num_nodes),
            "PET_NODE_RANK": str(node),
            "PET_NPROC_PER_NODE": self.nproc_per_node,
        }
        return Process(environ=env, hostname=self.pod(node), node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.num_nodes))


@attrs.frozen(kw_only=True)
class KubeflowTrainerNode(KubeflowTrainerLaunch, kit.ByNode):
    """Trainer node `node` of a `KubeflowTrainerLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


kubeflow_trainer_job = kit.job_builder(
    KubeflowTrainerLaunch, doc="Every trainer node of one TrainJob; the keywords are `KubeflowTrainerLaunch`'s."
)
kubeflow_trainer_env = kit.env_builder(
    KubeflowTrainerNode, doc="Trainer node `node`'s environment; the other keywords are `KubeflowTrainerLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(
        KubeflowTrainerLaunch,
        num_nodes=st.integers(1, min(4, most)),
        nproc_per_node=st.sampled_from(["auto", "cpu", "gpu", "1", "4", "8"]),
        name=st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True),
    )
    return launches.map(KubeflowTrainerLaunch.job)


LAUNCHER = Launcher(name="kubeflow_trainer", nondeterministic={}, jobs=_jobs)
