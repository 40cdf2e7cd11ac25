"""TorchElastic / torchrun: the agent sets ranks and the rendezvous result for each worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.sources import Builder, Detection
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["DEFAULT_ADDRESS", "DEFAULT_PORT", "LIGHTNING_VARIABLES", "NAME", "TorchElastic", "main_endpoint"]

NAME = "torchelastic"
# Lightning's detection set; torchrun also always sets TORCHELASTIC_RUN_ID ("none" without --rdzv-id)
LIGHTNING_VARIABLES = ("RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 12910
_NOT_MATCHED = "neither TORCHELASTIC_RUN_ID nor all of RANK, GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE"


def main_endpoint(b: Builder, environ: Mapping[str, str]) -> None:
    """MASTER_ADDR/MASTER_PORT with Lightning's defaults, warning when one is missing."""
    if b.optional_address("MASTER_ADDR") is None:
        b.set("main_address", DEFAULT_ADDRESS, f"default:{DEFAULT_ADDRESS}")
        b.warn(f"MASTER_ADDR is not set; using {DEFAULT_ADDRESS}")
    if b.optional_port("MASTER_PORT") is None:
        b.set("main_port", DEFAULT_PORT, f"default:{DEFAULT_PORT}")
        b.warn(f"MASTER_PORT is not set; using {DEFAULT_PORT}")


class TorchElastic:
    """Lightning's TorchElasticEnvironment, as a pure function of the environment."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        if "TORCHELASTIC_RUN_ID" in environ:
            return Detection(True, "TORCHELASTIC_RUN_ID is set (torchrun worker)", ("TORCHELASTIC_RUN_ID",))
        found = env.present(environ, *LIGHTNING_VARIABLES)
        if len(found) == len(LIGHTNING_VARIABLES):
            return Detection(True, "RANK, GROUP_RANK, LOCAL_RANK and LOCAL_WORLD_SIZE are set", found)
        return Detection(False, _NOT_MATCHED, found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        for field, var in (("world_size", "WORLD_SIZE"), ("global_rank", "RANK"), ("local_rank", "LOCAL_RANK")):
            b.env(field, env.integer(environ, var, minimum=1 if var == "WORLD_SIZE" else 0, source=NAME), var)
        if b.optional_int("node_rank", "GROUP_RANK") is None:
            b.set("node_rank", 0, "default:0")
        b.optional_int("local_world_size", "LOCAL_WORLD_SIZE", minimum=1)
        b.optional_int("num_nodes", "GROUP_WORLD_SIZE", minimum=1)
        main_endpoint(b, environ)
        b.set("creates_processes_externally", True, "source:torchelastic starts every worker")
        if "TORCHELASTIC_RUN_ID" in environ:
            b.env("job_id", env.text(environ, "TORCHELASTIC_RUN_ID"), "TORCHELASTIC_RUN_ID")
        b.optional_int("restart_count", "TORCHELASTIC_RESTART_COUNT")
        return b.build()
