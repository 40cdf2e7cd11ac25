"""Kubernetes Indexed Jobs: each pod as its node's agent, detected only with the user's NNODES and MASTER_ADDR."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable

POD = {"JOB_COMPLETION_INDEX": "2", "NNODES": "4", "MASTER_ADDR": "train-0.train"}


def test_a_pod_is_its_node_s_agent() -> None:
    t = resolver.resolve(POD, probes.fake())
    assert (t.source, t.node_rank, t.num_nodes, t.global_rank, t.world_size) == ("indexed_job", 2, 4, 2, 4)
    assert (t.local_rank, t.local_world_size, t.creates_processes_externally) == (0, 1, False)
    assert (t.main_address, t.main_port) == ("train-0.train", 29500)
    assert t.provenance["node_rank"] == resolver.Origin.env("JOB_COMPLETION_INDEX")
    assert resolver.resolve({**POD, "MASTER_PORT": "3389"}, probes.fake()).main_port == 3389


@pytest.mark.parametrize("missing", ["NNODES", "MASTER_ADDR"])
def test_the_index_alone_is_any_indexed_job_and_not_detected(missing: str) -> None:
    env = {k: v for k, v in POD.items() if k != missing}
    assert resolver.resolve(env, probes.fake(free_port=41000)).source == "lightning"
    with pytest.raises(MissingVariable, match=missing):
        resolver.resolve(env, probes.fake(), source="indexed_job")


def test_torchrun_inside_a_pod_resolves_as_itself() -> None:
    worker = {**POD, "TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "8", "RANK": "5", "LOCAL_RANK": "1",
              "GROUP_RANK": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_PORT": "29500"}  # fmt: skip
    assert resolver.resolve(worker, probes.fake()).source == "torchelastic"
    assert resolver.explain({**POD, "LOCAL_RANK": "0"}, probes.fake(free_port=1)).chosen != "indexed_job"


def test_an_index_beyond_the_node_count_names_it() -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**POD, "JOB_COMPLETION_INDEX": "4"}, probes.fake())
    assert info.value.variable == "JOB_COMPLETION_INDEX" and "NNODES=4" in str(info.value)
