"""Cloud TPU slices on GKE: every host of one slice or of several (multislice), as JAX reads them.

    tpu_vm_env(node=5, hosts_per_slice=4, slices=2)  -> Process: slice 1's worker 1
    tpu_vm_job(hosts_per_slice=4, slices=2)          -> Job: every host's agent

The keywords are the fields of `TpuVmLaunch` (plus `node` for `tpu_vm_env`). Variables as GKE's
TPU webhook and JobSet multislice set them and JAX's cluster detection reads them
(https://cloud.google.com/kubernetes-engine/docs/how-to/tpus,
https://cloud.google.com/tpu/docs/multislice-introduction); no capture exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "TpuVmHost", "TpuVmLaunch", "tpu_vm_env", "tpu_vm_job"]


@attrs.frozen(kw_only=True)
class TpuVmLaunch(kit.Launch):
    """A JobSet `name` of `slices` slices of `hosts_per_slice` hosts; host w of slice s is
    ``{name}-slice-job-{s}-{w}.{name}``. With one slice, no ``MEGASCALE_*`` variables."""

    launcher = "tpu_vm"
    hosts_per_slice: int = attrs.field(default=2, validator=kit.positive)
    slices: int = attrs.field(default=1, validator=kit.positive)
    name: str = "train"

    @property
    def hosts(self) -> int:
        return self.hosts_per_slice * self.slices

    def host(self, slice_id: int, worker: int) -> str:
        return f"{self.name}-slice-job-{slice_id}-{worker}.{self.name}"

    def process(self, node: int) -> Process:
        """Host `node`, numbered slice by slice (worker + slice x hosts per slice)."""
        kit.index_in("node", node, self.hosts, "the job has hosts")
        slice_id, worker = divmod(node, self.hosts_per_slice)
        env = {
            "TPU_WORKER_ID": str(worker),
            "TPU_WORKER_HOSTNAMES": ",".join(self.host(slice_id, w) for w in range(self.hosts_per_slice)),
            "TPU_ACCELERATOR_TYPE": f"v5litepod-{4 * self.hosts_per_slice}",
        }
        if self.slices > 1:
            env |= {
                "MEGASCALE_COORDINATOR_ADDRESS": self.host(0, 0),
                "MEGASCALE_NUM_SLICES": str(self.slices),
                "MEGASCALE_SLICE_ID": str(slice_id),
                "MEGASCALE_PORT": "8080",
            }
        return Process(environ=env, hostname=self.host(slice_id, worker), node=node)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.hosts))


@attrs.frozen(kw_only=True)
class TpuVmHost(TpuVmLaunch, kit.ByNode):
    """Host `node` of a `TpuVmLaunch`, numbered slice by slice."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


tpu_vm_job = kit.job_builder(TpuVmLaunch, doc="Every host of one TPU job; the keywords are `TpuVmLaunch`'s.")
tpu_vm_env = kit.env_builder(
    TpuVmHost, doc="Host `node`'s environment (slice by slice); the other keywords are `TpuVmLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    sizes = st.tuples(st.integers(1, min(4, most)), st.integers(1, 2)).filter(lambda t: t[0] * t[1] <= most)
    return sizes.map(lambda t: TpuVmLaunch(hosts_per_slice=t[0], slices=t[1]).job())


LAUNCHER = Launcher(name="tpu_vm", nondeterministic={}, jobs=_jobs)
