"""dstack distributed tasks, from the documented system variables."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, TopologyError


def node(rank: int, **extra: str) -> dict[str, str]:
    """Node `rank` of a 2-node task with 4 GPUs each (dstack docs, tasks: system environment variables)."""
    env = {
        "DSTACK_RUN_NAME": "train-ddp",
        "DSTACK_REPO_ID": "my-repo",
        "DSTACK_GPUS_NUM": "8",
        "DSTACK_GPUS_PER_NODE": "4",
        "DSTACK_NODES_NUM": "2",
        "DSTACK_NODE_RANK": str(rank),
        "DSTACK_MASTER_NODE_IP": "10.0.0.5",
        "DSTACK_NODES_IPS": "10.0.0.5\n10.0.0.6",
    }
    return {**env, **extra}


def test_both_nodes() -> None:
    records = [resolver.resolve(node(r), probes.fake()) for r in (0, 1)]
    assert [t.node_rank for t in records] == [0, 1]
    assert {(t.source, t.main_address, t.main_port, t.nproc_per_node, t.job_name) for t in records} == {
        ("dstack", "10.0.0.5", 29500, 4, "train-ddp")
    }


def test_older_dstack_without_the_ip_list() -> None:
    environ = {k: v for k, v in node(1).items() if k != "DSTACK_NODES_IPS"}
    t = resolver.resolve(environ, probes.fake())
    assert (t.num_nodes, t.main_address) == (2, "10.0.0.5")


def test_without_the_master_ip_the_first_of_the_list() -> None:
    environ = {k: v for k, v in node(1).items() if k != "DSTACK_MASTER_NODE_IP"}
    assert resolver.resolve(environ, probes.fake()).main_address == "10.0.0.5"


@pytest.mark.parametrize(
    ("extra", "variable", "error"),
    [
        ({"DSTACK_NODES_NUM": "3"}, "DSTACK_NODES_NUM", InvalidVariable),  # the list has 2
        ({"DSTACK_NODE_RANK": "2"}, "DSTACK_NODE_RANK", InvalidVariable),
        ({"DSTACK_MASTER_NODE_IP": "10.0.0.5 "}, "DSTACK_MASTER_NODE_IP", InvalidVariable),
        ({"DSTACK_GPUS_PER_NODE": "-1"}, "DSTACK_GPUS_PER_NODE", InvalidVariable),
    ],
)
def test_errors_name_the_variable(extra: dict[str, str], variable: str, error: type[TopologyError]) -> None:
    with pytest.raises(error) as info:
        resolver.resolve(node(1, **extra), probes.fake())
    assert info.value.variable == variable


def test_no_address_at_all() -> None:
    environ = {k: v for k, v in node(1).items() if k not in ("DSTACK_MASTER_NODE_IP", "DSTACK_NODES_IPS")}
    with pytest.raises(MissingVariable, match="DSTACK_MASTER_NODE_IP"):
        resolver.resolve(environ, probes.fake())


def test_hostnames_are_the_node_ips_in_node_rank_order() -> None:
    from resolver.testing import dstack_job

    for t in dstack_job(nodes=3).resolve():
        assert t.hostnames is not None and len(t.hostnames) == 3
        assert t.hostnames[0] == t.main_address and str(t.provenance["hostnames"]) == "env:DSTACK_NODES_IPS"
