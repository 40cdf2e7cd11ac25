"""Vertex AI custom training: every trainer replica of a CustomJob, from Vertex AI's documentation.

    vertex_env(node=1, workers=2)  -> Process: replica 1's environment (pool 1's first replica)
    vertex_job(workers=2)          -> Job: the chief and every worker replica

The keywords are the fields of `VertexLaunch` (plus `node` for `vertex_env`). ``CLUSTER_SPEC`` and
``TF_CONFIG`` as https://cloud.google.com/vertex-ai/docs/training/distributed-training gives them;
no capture of a real job exists here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "VertexLaunch", "VertexReplica", "vertex_env", "vertex_job"]


@attrs.frozen(kw_only=True)
class VertexLaunch(kit.Launch):
    """A CustomJob: the primary replica (pool 0), `workers` worker replicas (pool 1) and, when
    `reduction_servers` > 0, a Reduction Server pool (pool 2, not a trainer).

    Replica i of pool p is ``cmle-training-workerpool{p}-{job_hash}-{i}:2222``.
    """

    launcher = "vertex"
    workers: int = attrs.field(default=1, validator=kit.not_negative)
    reduction_servers: int = attrs.field(default=0, validator=kit.not_negative)
    job_hash: str = "1d969d3ba6"

    @property
    def trainers(self) -> int:
        return 1 + self.workers

    def cluster(self) -> dict[str, list[str]]:
        sizes = {"workerpool0": 1, "workerpool1": self.workers, "workerpool2": self.reduction_servers}
        return {
            pool: [f"cmle-training-{pool}-{self.job_hash}-{i}:2222" for i in range(size)]
            for pool, size in sizes.items()
            if size
        }

    def process(self, node: int) -> Process:
        """Trainer `node` (0: the chief, 1..: the workers)."""
        kit.index_in("node", node, self.trainers, "the job has trainers")
        pool, index = ("workerpool0", 0) if node == 0 else ("workerpool1", node - 1)
        cluster = self.cluster()
        tf_names = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps"}
        spec = {"cluster": cluster, "environment": "cloud", "task": {"type": pool, "index": index}, "job": "{}"}
        tf_config = {
            "cluster": {tf_names[p]: members for p, members in cluster.items()},
            "environment": "cloud",
            "task": {"type": tf_names[pool], "index": index},
        }
        env = {
            "AIP_MODEL_DIR": f"gs://bucket/{self.job_hash}/model/",
            "CLUSTER_SPEC": json.dumps(spec),
            "TF_CONFIG": json.dumps(tf_config),
        }
        return Process(environ=env, hostname=f"cmle-training-node-{node}", node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.trainers))


@attrs.frozen(kw_only=True)
class VertexReplica(VertexLaunch, kit.ByNode):
    """Trainer `node` of a `VertexLaunch` (0: the chief)."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


vertex_job = kit.job_builder(VertexLaunch, doc="Every trainer replica of one CustomJob; `VertexLaunch`'s keywords.")
vertex_env = kit.env_builder(
    VertexReplica, doc="Trainer `node`'s environment (0: the chief); the other keywords are `VertexLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(VertexLaunch, workers=st.integers(0, min(7, most - 1)), reduction_servers=st.integers(0, 2))
    return launches.map(VertexLaunch.job)


LAUNCHER = Launcher(name="vertex", nondeterministic={}, jobs=_jobs)
