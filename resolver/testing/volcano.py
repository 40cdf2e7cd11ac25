"""Volcano: every pod of a vcjob, with the env, svc and (optionally) pytorch plugins, from Volcano's guides.

    volcano_env(node=2, workers=2)   -> Process: the second worker pod's environment
    volcano_job(workers=2)           -> Job: the master pod and every worker pod

The keywords are the fields of `VolcanoLaunch` (plus `node` for `volcano_env`). Variables as
Volcano's plugin guides and code give them (docs/user-guide/how_to_use_{pytorch,env,svc}_plugin.md);
no capture of a real job exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "VolcanoLaunch", "VolcanoPod", "volcano_env", "volcano_job"]


@attrs.frozen(kw_only=True)
class VolcanoLaunch(kit.Launch):
    """A vcjob `name`. With `pytorch` (the pytorch plugin, port `port`): a ``master`` task of one pod
    and a ``worker`` task of `workers` pods. Without it: one task ``trainer`` of 1 + `workers` pods
    (env and svc plugins only). Pod i of task t is ``{name}-{t}-{i}``, host ``{name}-{t}-{i}.{name}``.
    """

    launcher = "volcano"
    workers: int = attrs.field(default=1, validator=kit.not_negative)
    name: str = "pytorch-job"
    pytorch: bool = True
    port: int = attrs.field(default=23456, validator=kit.positive)

    @property
    def pods(self) -> int:
        return 1 + self.workers

    def tasks(self) -> dict[str, int]:
        return {"master": 1, "worker": self.workers} if self.pytorch else {"trainer": self.pods}

    def place(self, node: int) -> tuple[str, int]:
        """The task and index of pod `node` (the master first)."""
        if not 0 <= node < self.pods:
            raise ValueError(f"node={node}: the job has pods 0..{self.pods - 1}")
        if not self.pytorch:
            return "trainer", node
        return ("master", 0) if node == 0 else ("worker", node - 1)

    def process(self, node: int) -> Process:
        task, index = self.place(node)
        env = {"VC_TASK_INDEX": str(index), "VK_TASK_INDEX": str(index)}
        for t, replicas in self.tasks().items():
            key = t.upper().replace("-", "_")
            env[f"VC_{key}_HOSTS"] = ",".join(f"{self.name}-{t}-{i}.{self.name}" for i in range(replicas))
            env[f"VC_{key}_NUM"] = str(replicas)
        if self.pytorch:
            env |= {
                "MASTER_ADDR": f"{self.name}-master-0.{self.name}",
                "MASTER_PORT": str(self.port),
                "WORLD_SIZE": str(self.pods),
                "RANK": str(0 if task == "master" else index + 1),
            }
        return Process(environ=dict(sorted(env.items())), hostname=f"{self.name}-{task}-{index}", node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.pods))


@attrs.frozen(kw_only=True)
class VolcanoPod(VolcanoLaunch, kit.ByNode):
    """Pod `node` of a `VolcanoLaunch` (0: the master, or the trainer task's pod 0)."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


volcano_job = kit.job_builder(VolcanoLaunch, doc="Every pod of one vcjob; the keywords are `VolcanoLaunch`'s.")
volcano_env = kit.env_builder(
    VolcanoPod, doc="Pod `node`'s environment (0: the master); the other keywords are `VolcanoLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    names = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
    launches = st.builds(
        VolcanoLaunch,
        workers=st.integers(0, min(7, most - 1)),
        name=names,
        pytorch=st.booleans(),
        port=st.integers(1024, 65535),
    )
    return launches.map(VolcanoLaunch.job)


LAUNCHER = Launcher(name="volcano", nondeterministic={}, jobs=_jobs)
