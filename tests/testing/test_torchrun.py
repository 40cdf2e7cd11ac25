"""resolver.testing.torchrun against the torchrun captures (c10d and static rendezvous)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from resolver import testing as rt
from tests.testing.captured import assert_reproduces, case_id, ranks

JOBS: list[tuple[tuple[str, ...], Callable[[], rt.Job]]] = [
    (
        ranks("torchrun/1node_c10d/rank{}.env", 2),
        lambda: rt.torchrun_job(nproc_per_node=2, hosts=("localhost",), master_port=33987),
    ),
    (
        ranks("torchrun/2node_c10d/rank{}.env", 4),
        lambda: rt.torchrun_job(nnodes=2, nproc_per_node=2, hosts=("localhost",) * 2, master_port=36891),
    ),
    (
        ranks("torchrun/2node_static/rank{}.env", 4),
        lambda: rt.torchrun_job(nnodes=2, nproc_per_node=2, rdzv="static", master_port=29512),
    ),
]


@pytest.mark.parametrize(("files", "make"), JOBS, ids=[case_id(files) for files, _ in JOBS])
def test_the_builder_reproduces_the_captures(files: tuple[str, ...], make: Callable[[], rt.Job]) -> None:
    assert_reproduces(files, "torchrun", make())


def test_torchrun_defaults() -> None:
    static = rt.torchrun_env(rdzv="static", nnodes=2, node_rank=1)
    assert (static["MASTER_ADDR"], static["MASTER_PORT"], static["RANK"]) == ("127.0.0.1", "29500", "1")
    assert "OMP_NUM_THREADS" not in static  # one worker per agent
    c10d = rt.torchrun_env(nnodes=2, hosts=("a", "b"))
    assert c10d["MASTER_ADDR"] == "a"  # group rank 0's host


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.torchrun_env(nnodes=2, hosts=("a",)), "one per node"),
        (lambda: rt.torchrun_env(local_rank=1), "outside 1x1"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


def test_a_visibility_list_reaches_every_worker_and_each_takes_its_own_device() -> None:
    job = rt.torchrun_job(nnodes=2, nproc_per_node=4, visible_devices=range(4))
    assert {e["CUDA_VISIBLE_DEVICES"] for e in job.environs} == {"0,1,2,3"}
    assert [t.local_device for t in job.resolve()] == [0, 1, 2, 3] * 2
    few = rt.torchrun_job(nproc_per_node=4, visible_devices=["GPU-1", "GPU-2"]).resolve()
    assert {t.local_device for t in few} == {None}  # two devices for four workers: never a guess
    assert "CUDA_VISIBLE_DEVICES" not in rt.torchrun_env(nproc_per_node=2)
