"""Flux (flux-core) ``flux run``: every task, as flux-environment(7) describes its environment.

    flux_env(rank=3, n=4, hosts=("node1", "node2"))  -> Process: task 3's environment
    flux_job(n=4, hosts=("node1", "node2"))          -> Job: every task

The keywords are the fields of `FluxLaunch` (plus `rank` for `flux_env`). No Flux instance runs
here, so these are built from the documentation, not checked against a capture: the job shell's
variables (flux-environment(7), "JOB ENVIRONMENT"), the ``pmi`` plugin's ``PMI_*``, block and
cyclic task mapping as its example table shows, and F58 job ids (RFC 19).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "FluxLaunch", "FluxTask", "flux_env", "flux_job"]

_F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _f58_encode(job: int) -> str:
    """A job id in Flux's F58 form (RFC 19): ``ƒ`` and the integer in base 58."""
    if not 0 <= job < 1 << 64:
        raise ValueError(f"job={job}: a Flux job id is a 64-bit unsigned integer")
    digits = ""
    while True:
        job, digit = divmod(job, 58)
        digits = _F58_ALPHABET[digit] + digits
        if not job:
            return "\u0192" + digits


@attrs.frozen(kw_only=True)
class FluxLaunch(kit.Launch):
    """``flux run -N len(hosts) -n n [--taskmap=cyclic]`` in a Flux instance whose brokers run on `hosts`.

    Tasks spread as evenly as they go, the first hosts taking one more when `n` does not divide;
    ``taskmap="block"`` (Flux's default) numbers them host by host, ``"cyclic"`` deals them out
    in turns. `job_id` is the job id's integer (FLUX_JOB_ID is its F58 form).
    """

    launcher = "flux"
    n: int = attrs.field(default=1, validator=kit.positive)
    hosts: tuple[str, ...] = attrs.field(default=("node1",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    taskmap: Literal["block", "cyclic"] = "block"
    job_id: int = attrs.field(default=6731191091817518, validator=kit.not_negative)  # RFC 19's example: ƒuZZybuNNy

    def __attrs_post_init__(self) -> None:
        if self.taskmap not in ("block", "cyclic"):
            raise ValueError(f"taskmap={self.taskmap!r}: expected 'block' or 'cyclic'")
        if self.n < len(self.hosts):
            raise ValueError(f"n={self.n} tasks on {len(self.hosts)} hosts: at least one task per host")
        _f58_encode(self.job_id)

    def placement(self) -> tuple[int, ...]:
        """The host index of each task, in task-rank order."""
        nodes = len(self.hosts)
        if self.taskmap == "cyclic":
            return tuple(rank % nodes for rank in range(self.n))
        counts = [self.n // nodes + (1 if node < self.n % nodes else 0) for node in range(nodes)]
        return tuple(node for node, count in enumerate(counts) for _ in range(count))

    def process(self, rank: int) -> Process:
        placement = self.placement()
        kit.index_in("rank", rank, self.n, "the job has tasks")
        node = placement[rank]
        local = placement[:rank].count(node)
        f58 = _f58_encode(self.job_id)
        rundir = f"/tmp/flux-{kit.stable_token('flux', self.hosts, length=6)}"  # noqa: S108 - flux start's rundir
        env = {
            "FLUX_JOB_ID": f58,
            "FLUX_JOB_NNODES": str(len(self.hosts)),
            "FLUX_JOB_SIZE": str(self.n),
            "FLUX_JOB_TMPDIR": f"{rundir}/jobtmp-{node}-{f58}",
            "FLUX_KVS_NAMESPACE": f"job-{self.job_id}",
            "FLUX_PMI_LIBRARY_PATH": "/usr/lib/x86_64-linux-gnu/flux/libpmi.so",
            "FLUX_TASK_LOCAL_ID": str(local),
            "FLUX_TASK_RANK": str(rank),
            "FLUX_URI": f"local://{rundir}/local-{node}",
            "PMI_FD": str(kit.stable_number("fd", self.job_id, rank, low=5, high=40)),
            "PMI_RANK": str(rank),
            "PMI_SIZE": str(self.n),
            "PMI_SPAWNED": "0",
        }
        return Process(environ=dict(sorted(env.items())), hostname=self.hosts[node], node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.n))

    def job_options(self) -> Mapping[str, Any]:
        return {"mpi": len(self.hosts) > 1}  # across nodes the tasks exchange host names through MPI


@attrs.frozen(kw_only=True)
class FluxTask(FluxLaunch, kit.ByRank):
    """Task `rank` of a `FluxLaunch`."""

    rank: int = attrs.field(default=0, validator=kit.not_negative)


flux_job = kit.job_builder(FluxLaunch, doc="Every task of one ``flux run``; the keywords are `FluxLaunch`'s.")
flux_env = kit.env_builder(
    FluxTask, doc="Task `rank`'s environment under Flux's job shell; the other keywords are `FluxLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    def launch(draw: st.DrawFn, count: int) -> FluxLaunch:
        taskmap: Literal["block", "cyclic"] = draw(st.sampled_from(["block", "cyclic"]))
        return FluxLaunch(
            n=draw(st.integers(count, most)),
            hosts=draw(kit.host_names(count)),
            taskmap=taskmap,
            job_id=draw(st.integers(0, (1 << 64) - 1)),
        )

    return kit.jobs_on_hosts(most, launch)


LAUNCHER = Launcher(
    name="flux",
    nondeterministic={
        "FLUX_URI": r"local:///[^ ]+/local-[0-9]+",  # the broker's rundir
        "FLUX_JOB_TMPDIR": r"/[^ ]+/jobtmp-[0-9]+-\u0192[1-9A-HJ-NP-Za-km-z]+",
        "FLUX_PMI_LIBRARY_PATH": r"/[^ ]+/libpmi\.so",  # where flux-core is installed
        "PMI_FD": r"[0-9]+",
    },
    jobs=_jobs,
)
