from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable

POD = {"WORLD_SIZE": "4", "RANK": "2", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"}


def test_pytorchjob_worker() -> None:
    t = resolver.resolve(POD, probes.fake(), source="kubeflow")
    assert (t.world_size, t.global_rank, t.node_rank, t.local_rank) == (4, 2, 2, 0)
    assert (t.num_nodes, t.local_world_size) == (4, 1)
    assert (t.main_address, t.main_port) == ("job-master-0", 23456)
    assert t.creates_processes_externally


def test_never_auto_detected() -> None:
    assert resolver.resolve(POD, probes.fake()).source == "lightning"
    explanation = resolver.explain(POD)
    kubeflow = next(c for c in explanation.candidates if c.name == "kubeflow")
    assert not kubeflow.auto and not kubeflow.detection.matched
    assert "source='kubeflow'" in kubeflow.detection.reason


@pytest.mark.parametrize("variable", ["WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT"])
def test_every_variable_is_required(variable: str) -> None:
    env = {k: v for k, v in POD.items() if k != variable}
    with pytest.raises(MissingVariable, match=f"{variable} is not set .needed by source 'kubeflow'"):
        resolver.resolve(env, probes.fake(), source="kubeflow")


def test_rank_beyond_world() -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**POD, "RANK": "4"}, probes.fake(), source="kubeflow")
    assert info.value.variable == "RANK"
