"""Google Cloud Batch jobs on several VMs: every task of one task group with a hosts file, from the documentation.

    gcp_batch_env(node=1, vms=4)   -> Process: task 1's environment (``.files``: the hosts file)
    gcp_batch_job(vms=4)           -> Job: every task, one per VM

The keywords are the fields of `GcpBatchLaunch` (plus `node`, the task's index, for `gcp_batch_env`).
Batch gives each task ``BATCH_TASK_INDEX``, ``BATCH_TASK_COUNT`` and ``BATCH_TASK_RETRY_ATTEMPT``,
and, with ``requireHostsFile``, ``BATCH_HOSTS_FILE``: the path of a file listing the task group's
VMs. Built from https://cloud.google.com/batch/docs/create-run-job-mpi-library and the ``TaskGroup``
reference; Batch cannot run here and no capture exists, so the VM names (``<name>-group0-<i>``, task
i's VM listed i-th), the file's path and its one-name-per-line shape are this kit's choices, not
Batch's documented values. `master_addr` is what a user's job adds as ``MASTER_ADDR``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "GcpBatchLaunch", "GcpBatchTask", "gcp_batch_env", "gcp_batch_job"]

_HOSTS_FILE = "/etc/cloudbatch-taskgroup-hosts"  # this kit's path; a task reads whatever BATCH_HOSTS_FILE names


@attrs.frozen(kw_only=True)
class GcpBatchLaunch(kit.Launch):
    """A Batch job `name` of one task per VM on `vms` VMs, all running at once, with a hosts file, on
    retry `retry_attempt`; `master_addr`: the ``MASTER_ADDR`` the user's job sets, if any."""

    launcher = "gcp_batch"
    vms: int = attrs.field(default=2, validator=kit.positive)
    name: str = "train"
    retry_attempt: int = attrs.field(default=0, validator=kit.not_negative)
    master_addr: str | None = None

    def vm(self, index: int) -> str:
        return f"{self.name}-group0-{index}"

    def hosts_file(self) -> str:
        return "".join(f"{self.vm(index)}\n" for index in range(self.vms))

    def process(self, index: int) -> Process:
        kit.index_in("node", index, self.vms, "the task group has tasks")
        env = {
            "BATCH_HOSTS_FILE": _HOSTS_FILE,
            "BATCH_TASK_COUNT": str(self.vms),
            "BATCH_TASK_INDEX": str(index),
            "BATCH_TASK_RETRY_ATTEMPT": str(self.retry_attempt),
        }
        if self.master_addr is not None:
            env["MASTER_ADDR"] = self.master_addr
        files = {_HOSTS_FILE: self.hosts_file()}
        return Process(environ=env, hostname=self.vm(index), node=index, files=files)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.vms))


@attrs.frozen(kw_only=True)
class GcpBatchTask(GcpBatchLaunch, kit.ByNode):
    """Task `node` (its ``BATCH_TASK_INDEX``) of a `GcpBatchLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


gcp_batch_job = kit.job_builder(
    GcpBatchLaunch, doc="Every task of one Google Cloud Batch job, one per VM; the keywords are `GcpBatchLaunch`'s."
)
gcp_batch_env = kit.env_builder(
    GcpBatchTask, doc="Task `node`'s environment (its BATCH_TASK_INDEX); the other keywords are `GcpBatchLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(
        GcpBatchLaunch,
        vms=st.integers(1, min(4, most)),
        retry_attempt=st.integers(0, 3),
        master_addr=st.none() | st.just("10.128.0.2"),
    )
    return launches.map(GcpBatchLaunch.job)


LAUNCHER = Launcher(name="gcp_batch", nondeterministic={}, jobs=_jobs)
