"""Kubeflow Trainer v2: every trainer node (pod) of a TrainJob, as its torch plugin sets them.

    kubeflow_trainer_env(node=1, num_nodes=2, nproc_per_node="4")  -> dict: pod 1's environment
    kubeflow_trainer_job(num_nodes=2)                              -> Job: every pod's agent

The keywords are the fields of `KubeflowTrainerLaunch` (plus `node` for `kubeflow_trainer_env`).
From the documentation and the plugin's source (github.com/kubeflow/trainer,
pkg/runtime/framework/plugins/torch/torch.go; port 29500 from pkg/constants); no capture of a real
TrainJob exists here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from resolver.testing._launch import builder, changed_fields, not_negative, positive
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
class KubeflowTrainerLaunch:
    """A TrainJob `name` with `num_nodes` trainer nodes of `nproc_per_node` processes each.

    Pod i runs on host ``{name}-node-0-{i}`` (JobSet's naming); ``PET_MASTER_ADDR`` is node 0's
    ``{name}-node-0-0.{name}``; ``PET_NODE_RANK`` is the pod's completion index.
    """

    num_nodes: int = attrs.field(default=2, validator=positive)
    nproc_per_node: str = attrs.field(default="auto", validator=_nproc)
    name: str = "trainjob"

    def pod(self, node: int) -> str:
        return f"{self.name}-node-0-{node}"

    def node_variables(self, node: int) -> dict[str, str]:
        if not 0 <= node < self.num_nodes:
            raise ValueError(f"node={node}: the TrainJob has nodes 0..{self.num_nodes - 1}")
        return {
            "JOB_COMPLETION_INDEX": str(node),
            "PET_MASTER_ADDR": f"{self.pod(0)}.{self.name}",
            "PET_MASTER_PORT": str(_PORT),
            "PET_NNODES": str(self.num_nodes),
            "PET_NODE_RANK": str(node),
            "PET_NPROC_PER_NODE": self.nproc_per_node,
        }

    def job(self) -> Job:
        processes = tuple(
            Process(environ=self.node_variables(i), hostname=self.pod(i), node=i) for i in range(self.num_nodes)
        )
        call = f"kubeflow_trainer_job(**{changed_fields(self)})"
        return Job(launcher="kubeflow_trainer", source="kubeflow_trainer", processes=processes, call=call)


@attrs.frozen(kw_only=True)
class KubeflowTrainerNode(KubeflowTrainerLaunch):
    """Trainer node `node` of a `KubeflowTrainerLaunch`."""

    node: int = attrs.field(default=0, validator=not_negative)

    def variables(self) -> dict[str, str]:
        return self.node_variables(self.node)


kubeflow_trainer_job = builder(
    KubeflowTrainerLaunch,
    KubeflowTrainerLaunch.job,
    name="kubeflow_trainer_job",
    doc="Every trainer node of one TrainJob; the keywords are `KubeflowTrainerLaunch`'s.",
)
kubeflow_trainer_env = builder(
    KubeflowTrainerNode,
    KubeflowTrainerNode.variables,
    name="kubeflow_trainer_env",
    doc="Trainer node `node`'s environment; the other keywords are `KubeflowTrainerLaunch`'s.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    return st.builds(
        lambda nodes, nproc, name: KubeflowTrainerLaunch(num_nodes=nodes, nproc_per_node=nproc, name=name).job(),
        st.integers(1, min(4, most)),
        st.sampled_from(["auto", "cpu", "gpu", "1", "4", "8"]),
        st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True),
    )


LAUNCHER = Launcher(name="kubeflow_trainer", nondeterministic={}, jobs=_jobs)
