"""Vertex AI custom training: every trainer replica of a CustomJob, from Vertex AI's documentation.

    vertex_env(node=1, workers=2)  -> dict: replica 1's environment (pool 1's first replica)
    vertex_job(workers=2)          -> Job: the chief and every worker replica

The keywords are the fields of `VertexLaunch` (plus `node` for `vertex_env`). ``CLUSTER_SPEC`` and
``TF_CONFIG`` as https://cloud.google.com/vertex-ai/docs/training/distributed-training gives them;
no capture of a real job exists here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import attrs

from resolver.testing._launch import builder, changed_fields, not_negative
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "VertexLaunch", "VertexReplica", "vertex_env", "vertex_job"]


@attrs.frozen(kw_only=True)
class VertexLaunch:
    """A CustomJob: the primary replica (pool 0), `workers` worker replicas (pool 1) and, when
    `reduction_servers` > 0, a Reduction Server pool (pool 2, not a trainer).

    Replica i of pool p is ``cmle-training-workerpool{p}-{job_hash}-{i}:2222``.
    """

    workers: int = attrs.field(default=1, validator=not_negative)
    reduction_servers: int = attrs.field(default=0, validator=not_negative)
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

    def replica_variables(self, node: int) -> dict[str, str]:
        """Trainer `node` (0: the chief, 1..: the workers)'s environment."""
        if not 0 <= node < self.trainers:
            raise ValueError(f"node={node}: the job has trainers 0..{self.trainers - 1}")
        pool, index = ("workerpool0", 0) if node == 0 else ("workerpool1", node - 1)
        cluster = self.cluster()
        tf_names = {"workerpool0": "chief", "workerpool1": "worker", "workerpool2": "ps"}
        spec = {"cluster": cluster, "environment": "cloud", "task": {"type": pool, "index": index}, "job": "{}"}
        tf_config = {
            "cluster": {tf_names[p]: members for p, members in cluster.items()},
            "environment": "cloud",
            "task": {"type": tf_names[pool], "index": index},
        }
        return {
            "AIP_MODEL_DIR": f"gs://bucket/{self.job_hash}/model/",
            "CLUSTER_SPEC": json.dumps(spec),
            "TF_CONFIG": json.dumps(tf_config),
        }

    def job(self) -> Job:
        processes = tuple(
            Process(environ=self.replica_variables(n), hostname=f"cmle-training-node-{n}", node=n)
            for n in range(self.trainers)
        )
        return Job(
            launcher="vertex", source="vertex", processes=processes, call=f"vertex_job(**{changed_fields(self)})"
        )


@attrs.frozen(kw_only=True)
class VertexReplica(VertexLaunch):
    """Trainer `node` of a `VertexLaunch` (0: the chief)."""

    node: int = attrs.field(default=0, validator=not_negative)

    def variables(self) -> dict[str, str]:
        return self.replica_variables(self.node)


vertex_job = builder(
    VertexLaunch,
    VertexLaunch.job,
    name="vertex_job",
    doc="Every trainer replica of one CustomJob; `VertexLaunch`'s keywords.",
)
vertex_env = builder(
    VertexReplica,
    VertexReplica.variables,
    name="vertex_env",
    doc="Trainer `node`'s environment (0: the chief); the other keywords are `VertexLaunch`'s.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    return st.builds(
        lambda workers, servers: VertexLaunch(workers=workers, reduction_servers=servers).job(),
        st.integers(0, min(7, most - 1)),
        st.integers(0, 2),
    )


LAUNCHER = Launcher(name="vertex", nondeterministic={}, jobs=_jobs)
