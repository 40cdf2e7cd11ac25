"""TPU VMs without torch_xla (GKE and GCE TPU slices, as JAX reads them): each host as its node's agent.

Every host (worker) of a Cloud TPU slice runs the program once. On GKE, the TPU webhook gives each
worker ``TPU_WORKER_ID`` (its index in the slice, 0..N-1) and ``TPU_WORKER_HOSTNAMES`` (the
slice's workers, comma-separated, worker 0 first); newer runtimes also set
``TPU_PROCESS_ADDRESSES`` (the same workers as ``host:port``, which JAX prefers when both are
set). A multislice job (JobSet, queued resources) adds ``MEGASCALE_COORDINATOR_ADDRESS`` (the host
of slice 0's worker 0, possibly with a port), ``MEGASCALE_NUM_SLICES`` and ``MEGASCALE_SLICE_ID``.

JAX numbers the hosts slice by slice: process id = ``TPU_WORKER_ID`` + ``MEGASCALE_SLICE_ID`` x
hosts per slice, process count = hosts per slice x ``MEGASCALE_NUM_SLICES``, and the coordinator is
the host of process 0 (``MEGASCALE_COORDINATOR_ADDRESS`` across slices, else the slice's first
worker). A host's process with no launcher around it is its node's agent (the node-agent rule
that the node-level platforms share) with exactly those numbers: node rank = JAX's process id,
node count = JAX's process count, main address = the coordinator's host. The port is ``MASTER_PORT``, else
torchrun's 29500: JAX's coordinator takes 8476 and megascale ``MEGASCALE_PORT``, so neither is
offered to a second service.

torch_xla's own runtime (PJRT, ``xmp.spawn``) is the ``xla`` source, chosen by name; this one is
for everything else on a TPU VM (JAX-style host programs, torchrun's gloo over the slice's hosts).
GCE TPU VMs created without GKE keep the worker list in the metadata server rather than the
environment; with ``TPU_WORKER_HOSTNAMES`` exported (as the GKE webhook does) they resolve the same.

Facts from JAX's cluster detection (jax/_src/clusters/cloud_tpu_cluster.py: ``GkeTpuCluster``,
``BaseTpuCluster``, coordinator port 8476), https://docs.jax.dev/en/latest/multi_process.html,
https://cloud.google.com/kubernetes-engine/docs/how-to/tpus and
https://cloud.google.com/tpu/docs/multislice-introduction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import InvalidVariable, MissingVariable
from resolver.origin import Origin
from resolver.sources import Builder, Detection
from resolver.sources._node import NodeAgent, agent, by_slice, host_of
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "MULTISLICE", "NAME", "WORKER_LISTS", "TpuVm", "workers"]

NAME = "tpu_vm"
CANDIDATES = entry(NAME).candidates  # TPU_WORKER_ID: this host's index in the slice
WORKER_LISTS = ("TPU_PROCESS_ADDRESSES", "TPU_WORKER_HOSTNAMES")  # JAX's order of preference
MULTISLICE = ("MEGASCALE_COORDINATOR_ADDRESS", "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID")


def workers(environ: Mapping[str, str]) -> tuple[list[str], str]:
    """The slice's workers' hosts, worker 0 first, and the variable they came from."""
    for variable in WORKER_LISTS:
        raw = environ.get(variable)
        if raw is not None:
            return [host_of(variable, raw, item) for item in raw.split(",")], variable
    raise MissingVariable(WORKER_LISTS[1], "the slice's workers, comma-separated", source=NAME)


class TpuVm(NodeAgent):
    """A Cloud TPU host running a program with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "TPU VM"
    what = "a TPU VM worker"
    also = (*WORKER_LISTS, *MULTISLICE)

    def detect(self, environ: Mapping[str, str]) -> Detection:
        if CANDIDATES.met(environ) and not env.present(environ, *WORKER_LISTS):
            return Detection(
                False,
                "not a TPU VM worker: TPU_WORKER_ID without TPU_WORKER_HOSTNAMES (or TPU_PROCESS_ADDRESSES)",
                CANDIDATES.present(environ),
            )
        return super().detect(environ)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        hosts, listed = workers(environ)
        worker = b.integer("node_rank", "TPU_WORKER_ID")
        if worker >= len(hosts):
            raise InvalidVariable(
                "TPU_WORKER_ID", environ["TPU_WORKER_ID"], f"a worker index < the {len(hosts)} workers of {listed}"
            )
        if "MEGASCALE_COORDINATOR_ADDRESS" not in environ:
            b.formula("num_nodes", len(hosts), f"count of {listed}", listed)
            b.set("hostnames", tuple(hosts), Origin.env(listed))  # one slice: worker i is node i
            b.formula("main_address", hosts[0], f"first worker of {listed} (worker 0)", listed)
        else:
            raw = environ["MEGASCALE_COORDINATOR_ADDRESS"]
            coordinator = host_of("MEGASCALE_COORDINATOR_ADDRESS", raw, raw, "a host or host:port (slice 0's worker 0)")
            b.set("main_address", coordinator, Origin.env("MEGASCALE_COORDINATOR_ADDRESS"))
            by_slice(
                b, slice_id="MEGASCALE_SLICE_ID", slices="MEGASCALE_NUM_SLICES", per_slice=len(hosts), listed=listed
            )
        return agent(b)
