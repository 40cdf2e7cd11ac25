"""The workers this process creates itself: immutable replacements for set_world_size/set_global_rank."""

from __future__ import annotations

import attrs

from resolver._validate import _positive
from resolver.errors import InvalidSettings
from resolver.origin import Origin
from resolver.topology import Topology

__all__ = ["spawn"]


def spawn(topology: Topology, *, devices: int | None = None, num_nodes: int | None = None) -> tuple[Topology, ...]:
    """One Topology per worker this process starts: `devices` workers on node `topology.node_rank`.

    Worker i has local rank i and global rank `node_rank * devices + i` in a world of
    `devices * num_nodes`, all sharing the main address and port, as Lightning's launchers do.
    Left out, `devices` is the record's `nproc_per_node` and `num_nodes` its `num_nodes` (a node
    agent's record says both when its platform does).
    Worker i uses visible device i when at least `devices` devices are visible; otherwise its
    `local_device` is None (the parent's answer was for the parent, not for its workers).
    """
    devices = _positive("devices", _default("devices", devices, topology.nproc_per_node, "nproc_per_node", topology))
    num_nodes = _positive("num_nodes", _default("num_nodes", num_nodes, topology.num_nodes, "num_nodes", topology))
    if topology.creates_processes_externally:
        raise InvalidSettings(
            f"{topology.source} already created the processes (creates_processes_externally is True): "
            "there are no workers to spawn; use the topology as it is"
        )
    if topology.node_rank >= num_nodes:
        raise InvalidSettings(
            f"node_rank={topology.node_rank} ({topology.provenance.get('node_rank', 'resolved')}) "
            f"does not fit num_nodes={num_nodes}. HINT: set num_nodes to at least {topology.node_rank + 1}."
        )
    how = f"spawn: node_rank * devices + local_rank with devices={devices}"
    provenance = {
        **topology.provenance,
        "world_size": Origin.argument(f"spawn: devices * num_nodes = {devices} * {num_nodes}"),
        "global_rank": Origin.argument(how),
        "local_rank": Origin.argument("spawn: worker index"),
        "local_world_size": Origin.argument(f"spawn: devices={devices}"),
        "num_nodes": Origin.argument(f"spawn: num_nodes={num_nodes}"),
    }
    visible = topology.visible_devices
    own_device = visible is not None and len(visible) >= devices
    if own_device:
        provenance["local_device"] = Origin.argument(
            f"spawn: worker index into the {len(visible or ())} visible devices"
        )
    else:
        provenance.pop("local_device", None)
    return tuple(
        attrs.evolve(
            topology,
            world_size=devices * num_nodes,
            global_rank=topology.node_rank * devices + i,
            local_rank=i,
            local_world_size=devices,
            num_nodes=num_nodes,
            local_device=i if own_device else None,
            provenance=provenance,
        )
        for i in range(devices)
    )


def _default(name: str, given: int | None, recorded: int | None, field: str, topology: Topology) -> int:
    if given is not None:
        return given
    if recorded is None:
        raise InvalidSettings(
            f"spawn() needs {name}: the {topology.source} record does not say it ({field} is None). "
            f"HINT: pass {name}=N."
        )
    return recorded
