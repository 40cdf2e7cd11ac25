from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidSettings, Topology

DEFAULT = resolver.resolve({"NODE_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "7000"}, probes.fake())


def test_spawn_plans_this_nodes_workers() -> None:
    workers = resolver.spawn(DEFAULT, devices=2, num_nodes=3)
    assert [(w.global_rank, w.local_rank, w.node_rank) for w in workers] == [(2, 0, 1), (3, 1, 1)]
    assert {(w.world_size, w.local_world_size, w.num_nodes, w.main_port) for w in workers} == {(6, 2, 3, 7000)}
    assert str(workers[1].provenance["global_rank"]).startswith("argument:spawn:")
    assert DEFAULT.world_size == 1  # the original record is untouched


def test_spawn_refuses_external_and_bad_settings() -> None:
    external = Topology(
        source="torchelastic", world_size=2, global_rank=0, local_rank=0, node_rank=0, creates_processes_externally=True
    )
    with pytest.raises(InvalidSettings, match="already created the processes"):
        resolver.spawn(external, devices=2, num_nodes=1)
    with pytest.raises(InvalidSettings, match=r"node_rank=1 \(env:NODE_RANK\) does not fit num_nodes=1"):
        resolver.spawn(DEFAULT, devices=2, num_nodes=1)
    with pytest.raises(InvalidSettings, match="devices=0 is invalid"):
        resolver.spawn(DEFAULT, devices=0, num_nodes=2)


def test_validate_has_nothing_to_compare_when_this_process_spawns() -> None:
    resolver.validate(DEFAULT, devices=8, num_nodes=4)
    with pytest.raises(InvalidSettings, match="num_nodes=True is invalid"):
        resolver.validate(DEFAULT, devices=1, num_nodes=True)
