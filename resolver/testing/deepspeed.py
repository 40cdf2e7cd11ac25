"""DeepSpeed 0.19's own launcher (``deepspeed``): every worker, as measured in tests/captures-hpc/deepspeed.

    deepspeed_env(rank=1, num_gpus=2)                       -> Process: one worker's environment
    deepspeed_job(hosts=("worker-0", "worker-1"), num_gpus=2) -> Job: every worker

The keywords are the fields of `DeepSpeedLaunch` (plus `rank` for `deepspeed_env`). Checked against
the capture of ``deepspeed --num_gpus 2`` on the CPU; the several-node layout follows
``deepspeed/launcher/launch.py`` (ranks numbered host by host in hostfile order, ``LOCAL_RANK`` =
``RANK % LOCAL_SIZE``) and is run for real, as two emulated nodes, in tests/launchers/test_deepspeed.py.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "DeepSpeedLaunch", "DeepSpeedWorker", "deepspeed_env", "deepspeed_job"]

_DEFAULT_PORT = 29500  # deepspeed.constants.TORCH_DISTRIBUTED_DEFAULT_PORT


@attrs.frozen(kw_only=True)
class DeepSpeedLaunch(kit.Launch):
    """``deepspeed --num_gpus N script.py`` on `hosts` (a hostfile's hosts, in its order).

    `num_gpus` is the slots per host (one number, or one per host as a hostfile's ``slots=`` give).
    One host is ``localhost`` with MASTER_ADDR 127.0.0.1, as DeepSpeed does without a hostfile;
    several hosts take `master_addr` (default: the first host, as ``--master_addr`` is usually
    given; DeepSpeed itself asks ``hostname -I`` there). Every worker sees CUDA_VISIBLE_DEVICES
    listing its node's slots, even on the CPU.
    """

    launcher = "deepspeed"
    hosts: tuple[str, ...] = attrs.field(default=("localhost",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    num_gpus: int | tuple[int, ...] = 1
    master_addr: str | None = None
    master_port: int = attrs.field(default=_DEFAULT_PORT, validator=kit.positive)

    def slots(self) -> list[int]:
        slots = kit.capacities(self.num_gpus, len(self.hosts))
        if min(slots) < 1:
            raise ValueError(f"num_gpus={self.num_gpus!r}: at least one slot per host")
        return slots

    def placement(self) -> tuple[int, ...]:
        """The node index of each rank: host by host, in order."""
        return tuple(node for node, count in enumerate(self.slots()) for _ in range(count))

    def process(self, rank: int) -> Process:
        placement, slots = self.placement(), self.slots()
        kit.index_in("rank", rank, len(placement), "the launch has ranks")
        node = placement[rank]
        address = self.master_addr or ("127.0.0.1" if len(self.hosts) == 1 else self.hosts[0])
        env = {
            "CROSS_RANK": str(node),
            "CROSS_SIZE": str(len(self.hosts)),
            "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(slots[node])),
            "LOCAL_RANK": str(rank % slots[node]),
            "LOCAL_SIZE": str(slots[node]),
            "MASTER_ADDR": address,
            "MASTER_PORT": str(self.master_port),
            "PYTORCH_NVML_BASED_CUDA_CHECK": "1",  # set by `import deepspeed` in the launcher
            "RANK": str(rank),
            "WORLD_SIZE": str(len(placement)),
        }
        return Process(environ=dict(sorted(env.items())), hostname=self.hosts[node], node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(len(self.placement())))


@attrs.frozen(kw_only=True)
class DeepSpeedWorker(DeepSpeedLaunch, kit.ByRank):
    """Worker `rank` of a `DeepSpeedLaunch`."""

    rank: int = attrs.field(default=0, validator=kit.not_negative)


deepspeed_job = kit.job_builder(
    DeepSpeedLaunch, doc="Every worker of one ``deepspeed`` launch; the keywords are `DeepSpeedLaunch`'s."
)
deepspeed_env = kit.env_builder(
    DeepSpeedWorker,
    doc="Worker `rank`'s environment under DeepSpeed's launcher; the other keywords are `DeepSpeedLaunch`'s.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    def launch(draw: st.DrawFn, count: int) -> DeepSpeedLaunch:
        hosts: Sequence[str] = ("localhost",) if count == 1 else draw(kit.host_names(count))
        slots = tuple(draw(st.lists(st.integers(1, max(1, most // count)), min_size=count, max_size=count)))
        return DeepSpeedLaunch(hosts=hosts, num_gpus=slots, master_port=draw(st.integers(1024, 65535)))

    return kit.jobs_on_hosts(most, launch)


LAUNCHER = Launcher(name="deepspeed", nondeterministic={}, jobs=_jobs)
