"""Kubernetes Indexed Jobs (a JobSet's too): every pod of one Job, with what the user adds.

    indexed_job_env(node=1, completions=4, name="train")  -> Process: pod 1's environment
    indexed_job_job(completions=4)                        -> Job: every pod

The keywords are the fields of `IndexedJobLaunch` (plus `node`, the pod's completion index, for
`indexed_job_env`). Kubernetes sets ``JOB_COMPLETION_INDEX`` on every pod of an Indexed Job and
names pod i ``<name>-<i>`` (its hostname; with the Job's subdomain and a headless service, the DNS
name ``<name>-<i>.<subdomain>``). ``NNODES``, ``MASTER_ADDR`` (pod 0's DNS name) and ``MASTER_PORT``
are what the user's pod template adds, as JobSet's PyTorch example does with ``MASTER_ADDR``
(`with_port=False` leaves the port out). From
https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode and
https://jobset.sigs.k8s.io/docs/concepts; no capture exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "IndexedJobLaunch", "IndexedJobPod", "indexed_job_env", "indexed_job_job"]


@attrs.frozen(kw_only=True)
class IndexedJobLaunch(kit.Launch):
    """An Indexed Job `name` of `completions` pods, with the headless service `subdomain`, whose pod
    template gives ``NNODES``, ``MASTER_ADDR`` and (`with_port`) ``MASTER_PORT`` = `port`."""

    launcher = "indexed_job"
    name: str = "train"
    completions: int = attrs.field(default=2, validator=kit.positive)
    subdomain: str = "train"
    port: int = attrs.field(default=29500, validator=kit.positive)
    with_port: bool = True

    def pod(self, index: int) -> str:
        return f"{self.name}-{index}"

    def process(self, index: int) -> Process:
        kit.index_in("node", index, self.completions, "the Job has completions")
        env = {
            "JOB_COMPLETION_INDEX": str(index),
            "NNODES": str(self.completions),
            "MASTER_ADDR": f"{self.pod(0)}.{self.subdomain}",
        }
        if self.with_port:
            env["MASTER_PORT"] = str(self.port)
        return Process(environ=env, hostname=self.pod(index), node=index)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.completions))


@attrs.frozen(kw_only=True)
class IndexedJobPod(IndexedJobLaunch, kit.ByNode):
    """Pod `node` (its completion index) of an `IndexedJobLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


indexed_job_job = kit.job_builder(
    IndexedJobLaunch, doc="Every pod of one Indexed Job; the keywords are `IndexedJobLaunch`'s."
)
indexed_job_env = kit.env_builder(
    IndexedJobPod, doc="Pod `node`'s environment (its completion index); the other keywords are `IndexedJobLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(
        IndexedJobLaunch,
        completions=st.integers(1, min(4, most)),
        port=st.integers(1024, 65535),
        with_port=st.booleans(),
    )
    return launches.map(IndexedJobLaunch.job)


LAUNCHER = Launcher(name="indexed_job", nondeterministic={}, jobs=_jobs)
