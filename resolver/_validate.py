"""Compare the user's `devices`/`num_nodes` with what the launcher set up, as Lightning does."""

from __future__ import annotations

from resolver.errors import InvalidSettings
from resolver.topology import Topology

__all__ = ["validate"]


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}es" if word.endswith("s") else f"{count} {word}s"


def _positive(name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidSettings(f"{name}={value!r} is invalid: expected an int >= 1")
    return value


def validate(topology: Topology, *, devices: int, num_nodes: int) -> None:
    """Raise `InvalidSettings` with a HINT when the settings cannot match the launched processes.

    When this process spawns its workers itself they follow `devices`, but not the node count: a node
    agent's platform says how many nodes there are, and another `num_nodes` would make a world whose
    missing nodes never come (a hang).
    """
    devices = _positive("devices", devices)
    num_nodes = _positive("num_nodes", num_nodes)
    origin = topology.provenance
    external = topology.creates_processes_externally
    if external and topology.local_world_size is not None and devices != topology.local_world_size:
        started = _plural(topology.local_world_size, "process")
        raise InvalidSettings(
            f"You set devices={devices}, but {topology.source} started {started} on this node "
            f"({origin.get('local_world_size', 'launcher')}). "
            f"HINT: set devices={topology.local_world_size}."
        )
    if topology.num_nodes is not None and num_nodes != topology.num_nodes:
        raise InvalidSettings(
            f"You set num_nodes={num_nodes}, but {topology.source} runs on {_plural(topology.num_nodes, 'node')} "
            f"({origin.get('num_nodes', 'launcher')}). HINT: set num_nodes={topology.num_nodes}."
        )
    if not external:
        return
    if topology.local_world_size is None and devices * num_nodes != topology.world_size:
        # without a per-node count the layout is taken as homogeneous, as Lightning does
        raise InvalidSettings(
            f"You set devices={devices} and num_nodes={num_nodes}, but their product ({devices * num_nodes}) "
            f"does not match the world size ({topology.world_size}, "
            f"{origin.get('world_size', 'launcher')})."
        )
