"""Kubeflow PyTorchJob: one process per pod; never auto-detected (as in Lightning)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.sources import Builder, Detection, Origin, present
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["NAME", "Kubeflow"]

NAME = "kubeflow"


class Kubeflow:
    """Lightning's KubeflowEnvironment: every pod is a node running one process."""

    name = NAME
    auto = False

    def detect(self, environ: Mapping[str, str]) -> Detection:
        found = present(environ, "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT")
        return Detection(False, "never auto-detected: choose it with source='kubeflow'", found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        world = b.integer("world_size", "WORLD_SIZE", minimum=1)
        rank = b.integer("global_rank", "RANK")
        b.set("node_rank", rank, Origin.env("RANK"))
        b.rule("local_rank", 0, "kubeflow runs one process per pod")
        b.rule("local_world_size", 1, "kubeflow runs one process per pod")
        b.set("num_nodes", world, Origin.env("WORLD_SIZE"))
        b.address("MASTER_ADDR")
        b.port("MASTER_PORT")
        b.rule("creates_processes_externally", True, "kubeflow starts every pod")
        return b.build()
