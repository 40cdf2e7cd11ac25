"""Kubeflow PyTorchJob: one process per pod; never auto-detected (as in Lightning)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.sources import Builder, Detection
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
        found = env.present(environ, "WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT")
        return Detection(False, "never auto-detected: choose it with source='kubeflow'", found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        world = b.env("world_size", env.integer(environ, "WORLD_SIZE", minimum=1, source=NAME), "WORLD_SIZE")
        rank = b.env("global_rank", env.integer(environ, "RANK", source=NAME), "RANK")
        b.set("node_rank", rank, "env:RANK")
        b.set("local_rank", 0, "source:kubeflow runs one process per pod")
        b.set("local_world_size", 1, "source:kubeflow runs one process per pod")
        b.set("num_nodes", world, "env:WORLD_SIZE")
        b.env("main_address", env.address(environ, "MASTER_ADDR", source=NAME), "MASTER_ADDR")
        b.env("main_port", env.port(environ, "MASTER_PORT", source=NAME), "MASTER_PORT")
        b.set("creates_processes_externally", True, "source:kubeflow starts every pod")
        return b.build()
