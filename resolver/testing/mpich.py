"""MPICH 4.0.2 ``mpiexec`` (Hydra): every rank, as measured in tests/captures/mpich.

    mpich_env(rank=2, n=4, hosts=("nodeA", "nodeB"))  -> Process: rank 2's environment
    mpich_job(n=4, hosts=("vm",))                     -> Job: every rank

The keywords are the fields of `MpichLaunch` (plus `rank` for `mpich_env`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "MpichLaunch", "MpichRank", "mpich_env", "mpich_job"]


@attrs.frozen(kw_only=True)
class MpichLaunch(kit.Launch):
    """MPICH 4.0.2 ``mpiexec -n n -hosts h1:c1,h2:c2`` (Hydra), run on `launch_host` (default the first host).

    Hydra deals the ranks out in turns, `counts[i]` (default 1) to host i at a time, round and round:
    ``-hosts nodeA,nodeB -n 4`` puts ranks 0,2 on nodeA and 1,3 on nodeB; ``-hosts nodeA:2,nodeB:2 -n 3``
    puts 0,1 on nodeA and 2 on nodeB (both measured with two emulated hosts). Ranks on the launch host
    are children of a local proxy and also get HYDI_CONTROL_FD; ranks started over ssh do not.
    `visible_devices`: the CUDA_VISIBLE_DEVICES of the launcher's environment, which every process
    inherits unchanged (None: unset).
    """

    launcher, source, mpi = "mpich", "mpi", True
    n: int = attrs.field(validator=kit.positive)
    hosts: tuple[str, ...] = attrs.field(default=("ci1",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    counts: int | tuple[int, ...] = 1
    launch_host: str | None = None
    visible_devices: tuple[str, ...] | None = attrs.field(default=None, converter=kit.to_optional_devices)

    def placement(self) -> tuple[int, ...]:
        """The host index of each rank."""
        counts = kit.capacities(self.counts, len(self.hosts))
        if min(counts) < 1:
            raise ValueError(f"counts={self.counts!r}: each host takes at least one rank per turn")
        out: list[int] = []
        while len(out) < self.n:
            for host, count in enumerate(counts):
                out += [host] * min(count, self.n - len(out))
        return tuple(out)

    def process(self, rank: int) -> Process:
        placement = self.placement()
        kit.index_in("rank", rank, self.n, "the job has ranks")
        node = placement[rank]
        local = placement[:rank].count(node)
        host = self.hosts[node]
        env = {
            "MPIR_CVAR_CH3_INTERFACE_HOSTNAME": host,
            "MPI_LOCALNRANKS": str(placement.count(node)),
            "MPI_LOCALRANKID": str(local),
            "PMI_FD": str(6 + 2 * local + kit.stable_number("fd", rank, low=0, high=1)),
            "PMI_RANK": str(rank),
            "PMI_SIZE": str(self.n),
        }
        if host == (self.launch_host or self.hosts[0]):
            env["HYDI_CONTROL_FD"] = "7"
        env |= kit.visibility(self.visible_devices)
        return Process(environ=dict(sorted(env.items())), hostname=host, node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.n))


@attrs.frozen(kw_only=True)
class MpichRank(MpichLaunch, kit.ByRank):
    """Rank `rank` of an `MpichLaunch`."""

    rank: int = attrs.field(default=0, validator=kit.not_negative)


mpich_job = kit.job_builder(
    MpichLaunch, doc="Every rank of one MPICH (Hydra) ``mpiexec``; the keywords are `MpichLaunch`'s."
)
mpich_env = kit.env_builder(
    MpichRank, doc="Rank `rank`'s environment under MPICH's mpiexec; the other keywords are `MpichLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    def launch(draw: st.DrawFn, count: int) -> MpichLaunch:
        hosts = draw(kit.host_names(count))
        counts = tuple(draw(st.lists(st.integers(1, 3), min_size=count, max_size=count)))
        return MpichLaunch(n=draw(st.integers(2, most)), hosts=hosts, counts=counts)

    return kit.jobs_on_hosts(most // 2, launch, master=True)


LAUNCHER = Launcher(name="mpich", nondeterministic={"PMI_FD": r"[0-9]+"}, jobs=_jobs)
