"""resolver.testing.kubeflow: a PyTorchJob's pods as the training operator documents them (no capture)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

import probes
import resolver
from resolver import testing as rt


def test_kubeflow_defaults() -> None:
    pod = rt.kubeflow_env(rank=2, workers=3, name="bert")
    assert (pod["MASTER_ADDR"], pod["MASTER_PORT"], pod["WORLD_SIZE"], pod["RANK"]) == (
        "bert-master-0",
        "23456",
        "4",
        "2",
    )
    t = resolver.resolve(pod, probes.fake(), source="kubeflow")
    assert (t.world_size, t.global_rank, t.node_rank, t.main_address) == (4, 2, 2, "bert-master-0")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.kubeflow_env(rank=3), "pods 0..1"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()
