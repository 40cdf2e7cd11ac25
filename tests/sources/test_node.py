"""The node-agent rule every node-level platform uses: one agent per node, the main node is node 0."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from resolver import InvalidVariable, Topology
from resolver.origin import Origin
from resolver.sources import Builder, all_of
from resolver.sources._node import DEFAULT_PORT, agent, detect_agent, started_inside


def build(environ: dict[str, str], *, main: bool = False, per_node: int | None = None) -> Topology:
    b = Builder("test", environ)
    b.integer("node_rank", "NODE")
    b.integer("num_nodes", "NODES", minimum=1)
    b.set("main_address", "10.0.0.1", Origin.env("HEAD"))
    if per_node is not None:
        b.set("nproc_per_node", per_node, Origin.env("PER_NODE"))
    return agent(b, main="MAIN" if main else None)


def test_the_agent_record() -> None:
    t = build({"NODE": "2", "NODES": "4", "HEAD": "10.0.0.1"}, per_node=8)
    assert (t.world_size, t.global_rank, t.local_rank, t.local_world_size) == (4, 2, 0, 1)
    assert (t.node_rank, t.num_nodes, t.nproc_per_node) == (2, 4, 8)
    assert (t.main_address, t.main_port, t.creates_processes_externally) == ("10.0.0.1", DEFAULT_PORT, False)
    assert t.provenance["main_port"] == Origin.default("29500 (torchrun's --master-port default)")
    assert build({"NODE": "0", "NODES": "1", "MASTER_PORT": "4000"}).main_port == 4000


@given(nodes=st.integers(1, 50), data=st.data())
def test_the_main_node_becomes_node_0_and_every_node_agrees(nodes: int, data: st.DataObject) -> None:
    main = data.draw(st.integers(0, nodes - 1))
    ranks = [build({"NODE": str(i), "NODES": str(nodes), "MAIN": str(main)}, main=True).node_rank for i in range(nodes)]
    assert sorted(ranks) == list(range(nodes))
    assert ranks[main] == 0
    assert all(ranks[i] == i for i in range(nodes) if i not in (0, main))  # only two nodes trade places


def test_renumbering_is_in_the_provenance() -> None:
    t = build({"NODE": "0", "NODES": "4", "MAIN": "3"}, main=True)
    assert t.node_rank == 3
    origin = t.provenance["node_rank"]
    assert "MAIN=3" in str(origin) and "NODE=0" in str(origin)
    assert (origin.kind, origin.variables) == ("formula", ("NODE", "MAIN"))


@pytest.mark.parametrize(
    ("environ", "variable"),
    [({"NODE": "4", "NODES": "4", "MAIN": "0"}, "NODE"), ({"NODE": "1", "NODES": "4", "MAIN": "4"}, "MAIN")],
)
def test_an_index_beyond_the_node_count_names_its_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        build(environ, main=True)
    assert (info.value.variable, info.value.value) == (variable, environ[variable])
    assert "NODES=4" in str(info.value)


def test_a_process_a_launcher_started_is_not_the_agent() -> None:
    assert started_inside({}, "X") is None
    found = started_inside({"LOCAL_RANK": "0"}, "X")
    assert found is not None and not found.matched and found.variables == ("LOCAL_RANK",)


def test_a_platform_detects_its_agent_from_its_candidates() -> None:
    candidates = all_of("NODE", "NODES")
    declined = detect_agent({"NODE": "0"}, candidates, "X", "an X node")
    assert not declined and declined.reason == "not an X node: NODES not set" and declined.variables == ("NODE",)
    inside = detect_agent({"NODE": "0", "NODES": "2", "LOCAL_RANK": "0"}, candidates, "X", "an X node")
    assert not inside and "inside the X node" in inside.reason
    found = detect_agent({"NODE": "0", "NODES": "2", "HEAD": "h"}, candidates, "X", "an X node", also=("HEAD", "PORT"))
    assert found and found.reason == "an X node, no launcher around it" and found.variables == ("NODE", "NODES", "HEAD")


def test_spawn_defaults_to_the_agents_counts() -> None:
    t = build({"NODE": "1", "NODES": "2"}, per_node=3)
    assert resolver.spawn(t) == resolver.spawn(t, devices=3, num_nodes=2)
    assert [w.global_rank for w in resolver.spawn(t)] == [3, 4, 5]
    with pytest.raises(resolver.InvalidSettings, match="nproc_per_node is None"):
        resolver.spawn(build({"NODE": "1", "NODES": "2"}))
    with pytest.raises(resolver.InvalidSettings, match="num_nodes is None"):
        resolver.spawn(resolver.resolve({}, probes.fake(free_port=5, which={})), devices=2)


def test_validate_refuses_another_node_count_for_an_agent() -> None:
    t = build({"NODE": "1", "NODES": "2"}, per_node=4)
    resolver.validate(t, devices=2, num_nodes=2)  # fewer workers than the platform's count: the user's choice
    with pytest.raises(resolver.InvalidSettings, match=r"num_nodes=3, but test runs on 2 nodes \(env:NODES\)"):
        resolver.validate(t, devices=4, num_nodes=3)  # a world whose third node never comes


def test_a_misspelt_field_is_an_error_naming_it() -> None:
    b = Builder("test", {"NODE": "1"})
    with pytest.raises(resolver.InvalidSettings, match="'nod_rank', which is no field of the Topology"):
        b.set("nod_rank", 1, Origin.env("NODE"))
    with pytest.raises(resolver.InvalidSettings, match="'nod_rank'"):
        b.integer("nod_rank", "NODE")


def test_an_agent_needs_its_node_count_and_address_recorded_first() -> None:
    b = Builder("test", {"NODE": "1"})
    b.integer("node_rank", "NODE")
    with pytest.raises(resolver.InvalidSettings, match="agent\\(\\) needs num_nodes"):
        agent(b)
