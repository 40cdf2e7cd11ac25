"""TorchElastic / torchrun: the agent sets ranks and the rendezvous result for each worker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.errors import InvalidVariable
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


def _rank_as_torchrun_assigns_it(b: Builder) -> None:
    """`InvalidVariable` naming RANK when it is not the rank torchrun would give this worker.

    When every node runs the same number of workers (``WORLD_SIZE == GROUP_WORLD_SIZE *
    LOCAL_WORLD_SIZE``), torchrun numbers them ``RANK = GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK``
    (torch.distributed.elastic's ``_assign_worker_ranks``: a node's workers take consecutive ranks
    after the nodes before it). Worlds whose nodes run different worker counts are left as they are.
    """
    values = b.values
    nodes, per_node, node = values.get("num_nodes"), values.get("local_world_size"), values["node_rank"]
    if nodes is None or per_node is None or "node_rank" not in b.provenance or b.provenance["node_rank"].kind != "env":
        return
    if values["world_size"] != nodes * per_node:
        return
    expected = node * per_node + values["local_rank"]
    if values["global_rank"] != expected:
        raise InvalidVariable(
            "RANK",
            b.environ["RANK"],
            f"GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK = {node} * {per_node} + {values['local_rank']} = {expected}, "
            f"as torchrun assigns ranks when every node runs LOCAL_WORLD_SIZE={per_node} workers "
            f"(WORLD_SIZE={values['world_size']} = GROUP_WORLD_SIZE={nodes} * {per_node})",
            related={name: b.environ[name] for name in ("GROUP_RANK", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "WORLD_SIZE")},
        )


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
        _rank_as_torchrun_assigns_it(b)
        _main_endpoint(b)
        b.rule("creates_processes_externally", True, "torchelastic starts every worker")
        b.optional_text("job_id", "TORCHELASTIC_RUN_ID")
        b.optional_integer("restart_count", "TORCHELASTIC_RESTART_COUNT")
        return b.build()
