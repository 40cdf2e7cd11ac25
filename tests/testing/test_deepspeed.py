"""resolver.testing.deepspeed against the DeepSpeed 0.19.8 capture (``deepspeed --num_gpus 2`` on the CPU)
and the layout of ``deepspeed/launcher/launch.py`` on several hosts."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resolver
from resolver import testing as rt
from tests.conftest import CAPTURES_HPC, CAPTURES_LOCAL, read_capture

# each capture folder (with its truth.json) -> the builder call that must reproduce it
CASES: list[tuple[Path, Callable[[], rt.Job]]] = [
    (CAPTURES_HPC / "deepspeed" / "single-node-num-gpus-2", lambda: rt.deepspeed_job(num_gpus=2)),
    (
        CAPTURES_LOCAL / "deepspeed" / "two-nodes-no-ssh",
        lambda: rt.deepspeed_job(hosts=("node0", "node1"), num_gpus=2, master_addr="127.0.0.1"),
    ),
]


@pytest.mark.parametrize(("case", "make"), CASES, ids=[case.name for case, _ in CASES])
def test_the_builder_reproduces_the_captures(case: Path, make: Callable[[], rt.Job]) -> None:
    truth = json.loads((case / "truth.json").read_text())
    job = make()
    assert (job.launcher, job.source, len(job)) == ("deepspeed", "deepspeed", len(truth))
    real = [read_capture(case / row["file"]) for row in truth]
    assert list(job.environs) == real  # DeepSpeed picks nothing at random: every value is exact
    # the captured "nodes" share one host and 127.0.0.1: say so, as a user emulating nodes does
    loopback = {"CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"} if len(set(job.hosts)) > 1 else {}
    built = attrs.evolve(job, processes=tuple(attrs.evolve(p, environ={**p.environ, **loopback}) for p in job))
    captured = attrs.evolve(
        job, processes=tuple(attrs.evolve(p, environ={**e, **loopback}) for p, e in zip(job, real, strict=True))
    )
    tops = captured.resolve()
    assert [t.to_dict() for t in built.resolve()] == [t.to_dict() for t in tops]
    for t, row in zip(tops, truth, strict=True):
        fields = ("global_rank", "world_size", "local_rank", "local_world_size", "node_rank", "num_nodes")
        assert {f: getattr(t, f) for f in fields} == {f: row[f] for f in fields}
        if "argv" in row:
            assert row["argv"][0] == f"--local_rank={t.local_rank}"


def test_several_hosts_number_ranks_host_by_host() -> None:
    job = rt.deepspeed_job(hosts=("worker-0", "worker-1"), num_gpus=(2, 3), master_addr="10.0.0.1")
    assert [p.environ["RANK"] for p in job] == ["0", "1", "2", "3", "4"]
    assert [p.environ["CROSS_RANK"] for p in job] == ["0", "0", "1", "1", "1"]
    # launch.py: LOCAL_RANK = RANK % LOCAL_SIZE, a permutation on a node of another size
    assert [p.environ["LOCAL_RANK"] for p in job] == ["0", "1", "2", "0", "1"]
    tops = job.resolve()
    rt.assert_consistent(tops, job)
    assert {(t.main_address, t.main_port) for t in tops} == {("10.0.0.1", 29500)}
    assert rt.deepspeed_env(rank=4, hosts=("worker-0", "worker-1"), num_gpus=(2, 3)) == job.environs[4] | {
        "MASTER_ADDR": "worker-0"
    }


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.deepspeed_env(rank=2, num_gpus=2), "ranks 0..1"),
        (lambda: rt.deepspeed_env(hosts=("a", "b"), num_gpus=(1,)), "capacity"),
        (lambda: rt.deepspeed_env(num_gpus=0), "at least one slot"),
        (lambda: rt.deepspeed_env(hosts=("a", "a")), "each host once"),
        (lambda: rt.deepspeed_env(hosts="ab"), "the string"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_generated_launch_is_one_world(data: st.DataObject) -> None:
    job = data.draw(rt.jobs(launchers=["deepspeed"], max_processes=12))
    tops = job.resolve()
    rt.assert_consistent(tops, job)
    assert all(t.source == "deepspeed" and t.num_nodes == len({p.node for p in job}) for t in tops)
    assert resolver.explain(job.environs[-1]).chosen == "deepspeed"
