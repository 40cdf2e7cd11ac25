"""IBM Spectrum LSF with jsrun: every task of a job, from LSF's and jsrun's documentation.

    lsf_env(rank=4, hosts=("a01n01", "a01n02"), tasks_per_host=3)  -> Process: .environ, .files (the rankfile)
    lsf_job(hosts=("a01n01", "a01n02"), tasks_per_host=3)          -> Job: every task

LSF's source also reads the rankfile: the `Process` has it in ``.files``, and its ``.probes()`` answer it.
The keywords are the fields of `LsfLaunch` (plus `rank` for `lsf_env`). No capture of a real LSF
job exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "LsfLaunch", "LsfTask", "lsf_env", "lsf_job"]


@attrs.frozen(kw_only=True)
class LsfLaunch(kit.Launch):
    """An LSF job (``bsub``) whose tasks jsrun starts: `tasks_per_host` on each of `hosts`, in order.

    Not checked against a capture (there is none here): the variables are those LSF documents for job
    execution (LSB_JOBID, LSB_JOBNAME, LSB_QUEUE, LSB_MCPU_HOSTS, LSB_DJOB_HOSTFILE, LSB_DJOB_RANKFILE)
    and jsrun's JSM_NAMESPACE_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}. The rankfile lists `launch_host` once,
    then each compute host once per slot (`slots_per_host`, default `tasks_per_host`). LSB_JOBINDEX is
    `job_index`: LSF sets it for every job, 0 unless the job is an element of a job array (``bsub -J
    "name[1-10]"``), whose elements share `job_id`.
    """

    launcher = "lsf"
    hosts: tuple[str, ...] = attrs.field(default=("a01n01",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    tasks_per_host: int = attrs.field(default=1, validator=kit.positive)
    slots_per_host: int | None = attrs.field(default=None, validator=kit.positive)
    launch_host: str = "batch1"
    job_id: int = attrs.field(default=1234, validator=kit.positive)
    job_index: int = attrs.field(default=0, validator=kit.not_negative)
    job_name: str = "job"
    queue: str = "batch"
    home: str = "/home/user"

    def __attrs_post_init__(self) -> None:
        if self.launch_host in self.hosts:
            raise ValueError(f"launch_host={self.launch_host!r} runs no task: it cannot be a compute host")

    @property
    def ntasks(self) -> int:
        return len(self.hosts) * self.tasks_per_host

    @property
    def rankfile(self) -> str:
        return f"{self.home}/.lsbatch/{self.job_id}.rankfile"

    @property
    def hostfile(self) -> str:
        return f"{self.home}/.lsbatch/{self.job_id}.hostfile"

    def files(self) -> dict[str, str]:
        slots = self.slots_per_host or self.tasks_per_host
        text = self.launch_host + "\n" + "".join(f"{host}\n" * slots for host in self.hosts)
        return {self.rankfile: text, self.hostfile: text}

    def process(self, rank: int) -> Process:
        kit.index_in("rank", rank, self.ntasks, "the job has tasks")
        node, local = divmod(rank, self.tasks_per_host)
        slots = self.slots_per_host or self.tasks_per_host
        env = {
            "JSM_NAMESPACE_LOCAL_RANK": str(local),
            "JSM_NAMESPACE_LOCAL_SIZE": str(self.tasks_per_host),
            "JSM_NAMESPACE_RANK": str(rank),
            "JSM_NAMESPACE_SIZE": str(self.ntasks),
            "LSB_DJOB_HOSTFILE": self.hostfile,
            "LSB_DJOB_RANKFILE": self.rankfile,
            "LSB_JOBID": str(self.job_id),
            "LSB_JOBINDEX": str(self.job_index),
            "LSB_JOBNAME": self.job_name,
            "LSB_MCPU_HOSTS": " ".join([self.launch_host, "1", *(f"{host} {slots}" for host in self.hosts)]),
            "LSB_QUEUE": self.queue,
        }
        return Process(environ=dict(sorted(env.items())), hostname=self.hosts[node], node=node, files=self.files())

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.ntasks))


@attrs.frozen(kw_only=True)
class LsfTask(LsfLaunch, kit.ByRank):
    """Task `rank` of an `LsfLaunch`."""

    rank: int = attrs.field(default=0, validator=kit.not_negative)


lsf_job = kit.job_builder(LsfLaunch, doc="Every jsrun task of one LSF job; the keywords are `LsfLaunch`'s.")
lsf_env = kit.env_builder(
    LsfTask, doc="Task `rank` of a jsrun launch, with ``.files`` (the rankfile); the other keywords are `LsfLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    def launch(draw: st.DrawFn, count: int) -> LsfLaunch:
        per_host = draw(st.integers(1, max(1, min(4, most // count))))
        return LsfLaunch(
            hosts=draw(kit.host_names(count, prefix="a01n")),
            tasks_per_host=per_host,
            slots_per_host=draw(st.integers(per_host, per_host + 2)),
            job_id=draw(st.integers(1, 10**7)),
            job_index=draw(st.sampled_from([0, 0, 1]) | st.integers(0, 10**5)),
        )

    return kit.jobs_on_hosts(most, launch)


LAUNCHER = Launcher(name="lsf", nondeterministic={}, jobs=_jobs)
