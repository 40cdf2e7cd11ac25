"""TorchElastic / torchrun: the agent sets ranks and the rendezvous result for each worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.sources import LOCAL_ADDRESS, Builder, Detection, present
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "DEFAULT_PORT", "LIGHTNING_VARIABLES", "NAME", "TorchElastic"]

NAME = "torchelastic"
CANDIDATES = entry(NAME).candidates
# Lightning's detection set; torchrun also always sets TORCHELASTIC_RUN_ID ("none" without --rdzv-id)
LIGHTNING_VARIABLES = ("RANK", "GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
DEFAULT_PORT = 12910
_NOT_MATCHED = "neither TORCHELASTIC_RUN_ID nor all of RANK, GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE"


def _main_endpoint(b: Builder) -> None:
    """MASTER_ADDR/MASTER_PORT with Lightning's defaults, warning when one is missing."""
    if b.optional_address("MASTER_ADDR") is None:
        b.default("main_address", LOCAL_ADDRESS, LOCAL_ADDRESS)
        b.warn(f"MASTER_ADDR is not set; using {LOCAL_ADDRESS}")
    if b.optional_port("MASTER_PORT") is None:
        b.default("main_port", DEFAULT_PORT, str(DEFAULT_PORT))
        b.warn(f"MASTER_PORT is not set; using {DEFAULT_PORT}")


class TorchElastic:
    """Lightning's TorchElasticEnvironment, as a pure function of the environment."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        found = present(environ, *LIGHTNING_VARIABLES)
        if not CANDIDATES.met(environ):
            return Detection(False, _NOT_MATCHED, found)
        if "TORCHELASTIC_RUN_ID" in environ:
            return Detection(True, "TORCHELASTIC_RUN_ID is set (torchrun worker)", ("TORCHELASTIC_RUN_ID",))
        if len(found) == len(LIGHTNING_VARIABLES):
            return Detection(True, "RANK, GROUP_RANK, LOCAL_RANK and LOCAL_WORLD_SIZE are set", found)
        return Detection(False, _NOT_MATCHED, found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.integer("world_size", "WORLD_SIZE", minimum=1)
        b.integer("global_rank", "RANK")
        b.integer("local_rank", "LOCAL_RANK")
        if b.optional_integer("node_rank", "GROUP_RANK") is None:
            b.default("node_rank", 0, "0")
        b.optional_integer("local_world_size", "LOCAL_WORLD_SIZE", minimum=1)
        b.optional_integer("num_nodes", "GROUP_WORLD_SIZE", minimum=1)
        _main_endpoint(b)
        b.rule("creates_processes_externally", True, "torchelastic starts every worker")
        b.optional_text("job_id", "TORCHELASTIC_RUN_ID")
        b.optional_integer("restart_count", "TORCHELASTIC_RESTART_COUNT")
        return b.build()
