"""Kubeflow Trainer (v2 TrainJob, and v1 PyTorchJob): a node agent from torchrun's ``PET_*`` defaults.

torchrun reads ``PET_<FLAG>`` variables as the defaults of its flags. Kubeflow Trainer's torch
plugin gives every trainer node (pod) ``PET_NNODES`` (the node count), ``PET_NPROC_PER_NODE`` (an
integer, or ``auto``, ``cpu``, ``gpu``: torchrun counts the devices itself), ``PET_NODE_RANK`` (the
pod's completion index), ``PET_MASTER_ADDR`` (``<trainjob>-node-0-0.<trainjob>``, the first node's
pod) and ``PET_MASTER_PORT`` (29500), and runs the user's command there; Kubeflow v1's training
operator sets the same ``PET_*`` beside its node-level ``WORLD_SIZE``/``RANK``. A process in such a
pod with no torchrun around it is the node's agent (the node-agent rule that the node-level platforms share): node rank
``PET_NODE_RANK`` of ``PET_NNODES``, main endpoint ``PET_MASTER_ADDR:PET_MASTER_PORT``, and
``nproc_per_node`` when ``PET_NPROC_PER_NODE`` is a number.

torchrun's workers inherit every ``PET_*`` beside torchrun's own variables
(tests/captures-hpc/torchrun/pet-env-nnodes1-nproc2): TorchElastic comes first in the detection
order and resolves them. The explicit ``kubeflow`` source (v1's one process per pod, from
``WORLD_SIZE``/``RANK``) stays as it was, on request.

On one node (``PET_NNODES=1``) ``PET_NODE_RANK`` and ``PET_MASTER_ADDR`` may be left out, as
torchrun allows: node 0 and torchrun's default address 127.0.0.1. On several nodes both are
required (every node would otherwise claim node 0, or meet nowhere). An elastic range
(``PET_NNODES=1:4``) has no fixed node ranks and is refused.

Facts from: Kubeflow Trainer's torch plugin (github.com/kubeflow/trainer,
pkg/runtime/framework/plugins/torch/torch.go; ``ContainerTrainerPort = 29500`` in pkg/constants),
https://www.kubeflow.org/docs/components/trainer/user-guides/pytorch/, and torchrun's
documentation of ``PET_*`` (https://pytorch.org/docs/stable/elastic/run.html); the inheritance by
workers measured here with torch 2.13.0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.errors import MissingVariable
from resolver.sources import Builder
from resolver.sources._node import NodeAgent, agent
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "DEVICE_KINDS", "NAME", "SINGLE_NODE_ADDRESS", "KubeflowTrainer", "nproc_per_node"]

NAME = "kubeflow_trainer"
CANDIDATES = entry(NAME).candidates  # PET_NNODES: on every trainer node
DEVICE_KINDS = ("auto", "cpu", "gpu")  # torchrun counts these itself
SINGLE_NODE_ADDRESS = "127.0.0.1"  # torchrun's --master-addr default


def nproc_per_node(b: Builder, variable: str = "PET_NPROC_PER_NODE") -> int | None:
    """The worker count per node (``nproc_per_node``) when `variable` is a number; None when unset or a
    device kind torchrun counts."""
    if b.environ.get(variable) in DEVICE_KINDS:
        return None
    return b.optional_integer(
        "nproc_per_node", variable, minimum=1, expected=f"an integer >= 1 or one of {', '.join(DEVICE_KINDS)}"
    )


class KubeflowTrainer(NodeAgent):
    """A Kubeflow Trainer node (pod) with no torchrun around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "Kubeflow Trainer"
    what = "a Kubeflow Trainer node"
    also = ("PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        nodes = b.integer(
            "num_nodes",
            "PET_NNODES",
            minimum=1,
            expected="the node count",
            malformed="a node count >= 1 (an elastic range MIN:MAX has no fixed node ranks)",
        )
        if nodes > 1:
            for variable, what in (("PET_NODE_RANK", "this node's rank"), ("PET_MASTER_ADDR", "node 0's address")):
                if variable not in environ:
                    raise MissingVariable(variable, f"{what} (PET_NNODES={nodes} nodes)", source=NAME)
        if b.optional_integer("node_rank", "PET_NODE_RANK") is None:
            b.default("node_rank", 0, "0 (one node)")
        if b.optional_address("PET_MASTER_ADDR") is None:
            b.default("main_address", SINGLE_NODE_ADDRESS, f"{SINGLE_NODE_ADDRESS} (one node; torchrun's default)")
        b.optional_port("PET_MASTER_PORT")
        nproc_per_node(b)
        return agent(b)
