"""resolver.testing.lsf: jsrun tasks and their rankfile as LSF documents them (no capture)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import resolver
from resolver import testing as rt


def test_lsf_env_carries_the_rankfile() -> None:
    task = rt.lsf_env(rank=4, hosts=("a01n01", "a01n02"), tasks_per_host=3, job_id=123456)
    assert task.hostname == "a01n02" and task.node == 1
    assert task.files[task.environ["LSB_DJOB_RANKFILE"]] == "batch1\n" + "a01n01\n" * 3 + "a01n02\n" * 3
    t = resolver.resolve(task.environ, task.probes())
    assert (t.source, t.global_rank, t.local_rank, t.node_rank, t.num_nodes) == ("lsf", 4, 1, 1, 2)
    assert (t.main_address, t.main_port) == ("a01n01", 10456)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.lsf_env(hosts=("batch1",)), "runs no task"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()
