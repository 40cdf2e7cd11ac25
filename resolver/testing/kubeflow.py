"""Kubeflow training operator (v1.7+): every pod of a PyTorchJob, from the operator's documentation.

    kubeflow_env(rank=2, workers=3, name="bert")  -> Process: pod 2's environment
    kubeflow_job(workers=3)                       -> Job: every pod (resolve with ``source="kubeflow"``)

The keywords are the fields of `KubeflowLaunch` (plus `rank` for `kubeflow_env`). No capture of a
real PyTorchJob exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "KubeflowLaunch", "KubeflowPod", "kubeflow_env", "kubeflow_job"]


@attrs.frozen(kw_only=True)
class KubeflowLaunch(kit.Launch):
    """A Kubeflow training-operator (v1.7+) PyTorchJob without elasticPolicy: one Master and `workers` Workers.

    Pod i is ``{name}-master-0`` (rank 0) or ``{name}-worker-{i-1}``; MASTER_ADDR is the master's
    service name, MASTER_PORT the container port named ``pytorchjob-port`` (default 23456).
    WORLD_SIZE is replicas x nprocPerNode (``"auto"`` or a number counts 1 here: the Kubeflow source
    describes one process per pod; with more, the pods run torchrun).
    """

    launcher, forced = "kubeflow", True  # never auto-detected: resolve with source="kubeflow"
    workers: int = attrs.field(default=1, validator=kit.not_negative)
    name: str = "pytorch-job"
    port: int = attrs.field(default=23456, validator=kit.positive)
    nproc_per_node: str = "auto"

    @property
    def replicas(self) -> int:
        return 1 + self.workers

    def pod(self, rank: int) -> str:
        return f"{self.name}-master-0" if rank == 0 else f"{self.name}-worker-{rank - 1}"

    def process(self, rank: int) -> Process:
        kit.index_in("rank", rank, self.replicas, "the job has pods")
        per_pod = int(self.nproc_per_node) if self.nproc_per_node.isdigit() else 1
        env = {
            "MASTER_ADDR": self.pod(0),
            "MASTER_PORT": str(self.port),
            "PET_MASTER_ADDR": self.pod(0),
            "PET_MASTER_PORT": str(self.port),
            "PET_NNODES": str(self.replicas),
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": self.nproc_per_node,
            "PYTHONUNBUFFERED": "0",
            "RANK": str(rank),
            "WORLD_SIZE": str(self.replicas * per_pod),
        }
        return Process(environ=dict(sorted(env.items())), hostname=self.pod(rank), node=rank)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.replicas))


@attrs.frozen(kw_only=True)
class KubeflowPod(KubeflowLaunch, kit.ByRank):
    """Pod `rank` of a `KubeflowLaunch` (0 is the master)."""

    rank: int = attrs.field(default=0, validator=kit.not_negative)


kubeflow_job = kit.job_builder(
    KubeflowLaunch,
    doc='Every pod of one PyTorchJob (resolve with ``source="kubeflow"``); keywords of `KubeflowLaunch`.',
)
kubeflow_env = kit.env_builder(
    KubeflowPod,
    doc="Pod `rank`'s environment as the training operator sets it; the other keywords are `KubeflowLaunch`'s.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    names = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
    launches = st.builds(KubeflowLaunch, workers=st.integers(0, most - 1), name=names, port=st.integers(1024, 65535))
    return launches.map(KubeflowLaunch.job)


LAUNCHER = Launcher(name="kubeflow", nondeterministic={}, jobs=_jobs)
