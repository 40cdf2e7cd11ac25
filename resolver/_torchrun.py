"""`--format torchrun`: the arguments that start torchrun on this node, from a resolved record.

    torchrun $(cluster-topology --format torchrun) train.py

prints ``--nnodes=N --node-rank=R --master-addr=A --master-port=P`` and ``--nproc-per-node=K``
when the record knows it (a node agent whose platform says it; otherwise torchrun's own default
or its ``PET_NPROC_PER_NODE`` applies). Static rendezvous: node rank 0 serves the store at the
main address, which is why node-level sources make the platform's main node node 0.

Each argument is one shell word whose characters need no quoting (a record's address passed
`resolver.environ.is_address`: no brackets, no shell syntax), so
the output works both unquoted in ``$(...)`` and through ``eval``.

It is for a process that is alone on its node: a world of one (no launcher), a node agent (Kubeflow Trainer, AWS Batch,
SageMaker, SkyPilot, dstack, ...), or one launcher task per node (``srun --ntasks-per-node=1``,
one MPI rank per node). A torchrun worker, or one of several processes on a node, is refused:
torchrun starts every process of its node.
"""

from __future__ import annotations

import shlex

from resolver.errors import InvalidSettings
from resolver.topology import Topology

__all__ = ["render_torchrun", "torchrun_arguments"]


def torchrun_arguments(topology: Topology) -> list[str]:
    """torchrun's node arguments for `topology`; `InvalidSettings` when it is not alone on its node."""
    where = f"the {topology.source} record ({topology})"
    if topology.source == "torchelastic":
        raise InvalidSettings(f"{where} is a torchrun worker already: torchrun started this process")
    alone = topology.local_world_size == 1 or (topology.local_world_size is None and topology.world_size == 1)
    if not alone:
        count = "an unknown number of" if topology.local_world_size is None else str(topology.local_world_size)
        origin = topology.provenance.get("local_world_size", "unknown")
        raise InvalidSettings(
            f"{where} is one of {count} processes on its node ({origin}), but torchrun starts every process of "
            "its node. HINT: run one task per node (e.g. srun --ntasks-per-node=1) and let torchrun start the rest."
        )
    nodes = topology.num_nodes if topology.num_nodes is not None or topology.world_size > 1 else 1
    missing = [name for name in ("main_address", "main_port") if getattr(topology, name) is None]
    if nodes is None:
        missing.insert(0, "num_nodes")
    if missing:
        raise InvalidSettings(f"{where} does not say {', '.join(missing)}, which torchrun needs")
    address = str(topology.main_address)
    arguments = [
        f"--nnodes={nodes}",
        f"--node-rank={topology.node_rank}",
        f"--master-addr={address}",
        f"--master-port={topology.main_port}",
    ]
    if topology.nproc_per_node is not None:
        arguments.append(f"--nproc-per-node={topology.nproc_per_node}")
    return arguments


def render_torchrun(topology: Topology) -> str:
    """`torchrun_arguments` as one shell line."""
    return shlex.join(torchrun_arguments(topology)) + "\n"
