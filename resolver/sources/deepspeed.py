"""DeepSpeed's launcher (``deepspeed script.py``): ranks and nodes from the variables it writes per worker.

``deepspeed`` does not use torchrun: its runner starts ``deepspeed.launcher.launch`` on each node
(through pdsh, or directly with ``--no_ssh --node_rank N``), and that starts one worker per slot
with ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_SIZE`` (the node's worker count),
``CROSS_RANK`` (the node's index), ``CROSS_SIZE`` (the node count), ``MASTER_ADDR`` and
``MASTER_PORT`` (``--master_addr``/``--master_port``; 127.0.0.1 and 29500 on one node), and adds
``--local_rank=N`` to the worker's argv (unless ``--no_local_rank``). Without this source those
workers resolve through the default one with node rank 0 on every node.

Detection: ``CROSS_RANK`` and ``CROSS_SIZE`` both set. Only ``deepspeed.launcher.launch`` writes
them (its other runners, ``--launcher openmpi|mpich|impi|slurm|mvapich``, start the workers with
the MPI launcher or srun and export ``RANK``/``WORLD_SIZE`` without them: the MPI or SLURM source
takes those). ``deepspeed --elastic_training`` runs torch's elastic agent, whose workers carry
``TORCHELASTIC_*``: TorchElastic, earlier in the order, resolves them. DeepSpeed comes before SLURM:
a ``deepspeed`` run inside an sbatch script carries the script's ``SLURM_*`` variables, which
describe the batch step, not these workers; SLURM's job facts are added to the record.

Every value is required and taken as it is: DeepSpeed writes all of them, so a missing one means
something else started the process. ``LOCAL_RANK`` is DeepSpeed's ``RANK % LOCAL_SIZE``: on nodes of
different sizes (``--include host1:0,1@host2:0,1,2``) that is a permutation of 0..LOCAL_SIZE-1 on
the node, not the order of the ranks, and it is what the worker is told to use, so it is kept.

Facts from DeepSpeed 0.19.8's ``deepspeed/launcher/launch.py`` and ``runner.py`` (the variables and
their meaning, the default port 29500 from ``deepspeed/constants.py``) and the launcher's
documentation (https://www.deepspeed.ai/getting-started/#resource-configuration-multi-node);
measured on the CPU in tests/captures-hpc/deepspeed and tests/launchers/test_deepspeed.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.sources import Builder, Detection
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "NAME", "VARIABLES", "DeepSpeed"]

NAME = "deepspeed"
CANDIDATES = entry(NAME).candidates  # CROSS_RANK and CROSS_SIZE
# (field, variable, what DeepSpeed means by it, minimum)
VARIABLES = (
    ("world_size", "WORLD_SIZE", "the number of workers on all nodes", 1),
    ("global_rank", "RANK", "the worker's global rank", 0),
    ("local_rank", "LOCAL_RANK", "the worker's rank on its node (RANK % LOCAL_SIZE)", 0),
    ("local_world_size", "LOCAL_SIZE", "the number of workers on this node", 1),
    ("node_rank", "CROSS_RANK", "the node's index (--node_rank)", 0),
    ("num_nodes", "CROSS_SIZE", "the number of nodes", 1),
)
_SET_BY = "set by DeepSpeed's launcher for every worker"


class DeepSpeed:
    """A worker started by DeepSpeed's own launcher (``deepspeed.launcher.launch``)."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        declined = CANDIDATES.unmet(environ, "a DeepSpeed worker")
        if declined is not None:
            return declined
        return Detection(
            True,
            "CROSS_RANK and CROSS_SIZE are set (written only by deepspeed.launcher.launch)",
            CANDIDATES.present(environ),
        )

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        for field, variable, what, minimum in VARIABLES:
            b.integer(field, variable, minimum=minimum, expected=f"{what}, {_SET_BY}")
        b.address("MASTER_ADDR", expected=f"the main endpoint's --master_addr, {_SET_BY}")
        b.port("MASTER_PORT", expected=f"the main endpoint's --master_port, {_SET_BY}")
        b.rule("creates_processes_externally", True, "deepspeed: its launcher starts every worker")
        return b.build()
