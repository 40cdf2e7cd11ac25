"""resolver.testing.mpich against the MPICH 4.0.2 captures; Hydra deals ranks in turns."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from resolver import testing as rt
from tests.testing.captured import assert_reproduces, case_id, ranks

JOBS: list[tuple[tuple[str, ...], Callable[[], rt.Job]]] = [
    (ranks("mpich/n4/rank{}.env", 4), lambda: rt.mpich_job(n=4, hosts=("vm",))),
]


@pytest.mark.parametrize(("files", "make"), JOBS, ids=[case_id(files) for files, _ in JOBS])
def test_the_builder_reproduces_the_captures(files: tuple[str, ...], make: Callable[[], rt.Job]) -> None:
    assert_reproduces(files, "mpich", make())


def test_mpich_deals_ranks_in_turns() -> None:
    # measured with two emulated hosts: -hosts nodeA,nodeB -n 4, and -hosts nodeA:2,nodeB:2 -n 3
    assert mpich_hosts(n=4, hosts=("nodeA", "nodeB")) == ["nodeA", "nodeB", "nodeA", "nodeB"]
    assert mpich_hosts(n=3, hosts=("nodeA", "nodeB"), counts=(2, 2)) == ["nodeA", "nodeA", "nodeB"]
    env = rt.mpich_env(rank=2, n=4, hosts=("nodeA", "nodeB"))
    assert (env["MPI_LOCALRANKID"], env["MPI_LOCALNRANKS"], env["HYDI_CONTROL_FD"]) == ("1", "2", "7")
    assert "HYDI_CONTROL_FD" not in rt.mpich_env(rank=1, n=4, hosts=("nodeA", "nodeB"))  # started over ssh


def mpich_hosts(**launch: Any) -> list[str]:
    return [p.hostname for p in rt.mpich_job(**launch)]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.mpich_env(n=2, hosts=("a", "b"), counts=(1,)), "capacity"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


def test_a_visibility_list_reaches_every_rank() -> None:
    job = rt.mpich_job(n=2, visible_devices=("3",))
    assert [e["CUDA_VISIBLE_DEVICES"] for e in job.environs] == ["3", "3"]
    assert [(t.visible_devices, t.local_device) for t in job.resolve()] == [(("3",), 0)] * 2
