"""resolver.testing.world: a Job resolves process by process; assert_consistent names what breaks one world."""

from __future__ import annotations

import attrs
import pytest

from resolver import TopologyError
from resolver import testing as rt


def test_consistency_failures_are_named() -> None:
    job = rt.torchrun_job(nnodes=2, nproc_per_node=2)
    good = job.resolve()
    rt.assert_consistent(good, job)
    cases = [
        ((attrs.evolve(good[1], main_port=1), *good[:1], *good[2:]), "main endpoints"),
        ((*good[:3], attrs.evolve(good[3], global_rank=2)), "global ranks"),
        ((*good[:3], attrs.evolve(good[3], local_rank=0)), "local ranks"),
        ((*good[:2], attrs.evolve(good[2], node_rank=0), good[3]), "by node rank"),
        (good[:3], "world sizes"),
    ]
    for topologies, words in cases:
        with pytest.raises(AssertionError, match=words):
            rt.assert_consistent(topologies, job)
    with pytest.raises(AssertionError, match="no topologies"):
        rt.assert_consistent(())


def test_a_failing_rank_fails_the_job() -> None:
    job = rt.mpich_job(n=2, hosts=("a", "b"))
    broken = attrs.evolve(
        job, processes=(attrs.evolve(job.processes[0], environ={**job.environs[0], "PMI_SIZE": "x"}), job.processes[1])
    )
    with pytest.raises(TopologyError):
        broken.resolve(timeout=5)


def test_node_agents_are_checked_as_the_world_of_their_workers() -> None:
    job = rt.kubeflow_trainer_job(num_nodes=2, nproc_per_node="4")
    rt.assert_consistent(job.resolve(), job)  # 2 agents, and the 8 workers spawn() gives them
    uneven = attrs.evolve(
        job,
        processes=(
            job.processes[0],
            attrs.evolve(job.processes[1], environ={**job.processes[1].environ, "PET_NPROC_PER_NODE": "2"}),
        ),
    )
    with pytest.raises(AssertionError, match="world sizes"):
        rt.assert_consistent(uneven.resolve(), uneven)
