"""XLA / TPU: ranks from the runtime probe (FakeXla here; the real torch_xla in tests/launchers)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

import probes
import resolver
from probes import Probes
from probes.fakes import FakeXla
from resolver import InvalidSettings, Origin, ProbeFailed
from resolver.sources.xla import Xla

# a TPU pod's host 1 of 2, 4 chips per host: the worker for its third chip
POD_WORKER = FakeXla(world_size=8, global_ordinal=6, local_ordinal=2, host_index=1)


def test_ranks_come_from_the_runtime() -> None:
    t = resolver.resolve({}, probes.fake(xla=POD_WORKER), source="xla")
    assert t.source == "xla"
    assert (t.world_size, t.global_rank, t.local_rank, t.node_rank) == (8, 6, 2, 1)
    assert (t.num_nodes, t.local_world_size) == (None, None)
    assert (t.main_address, t.main_port) == (None, None)
    assert not t.creates_processes_externally
    assert dict(t.provenance) == {
        "world_size": Origin.probe("xla.world_size()"),
        "global_rank": Origin.probe("xla.global_ordinal()"),
        "local_rank": Origin.probe("xla.local_ordinal()"),
        "node_rank": Origin.probe("xla.host_index()"),
        "main_address": Origin.rule("xla: the PJRT runtime connects the devices itself; there is no main address"),
        "main_port": Origin.rule("xla: the PJRT runtime connects the devices itself; there is no main port"),
        "creates_processes_externally": Origin.rule(
            "xla: the program starts one worker per device (torch_xla.launch), as in Lightning"
        ),
    }
    assert t.warnings == ()
    assert str(t) == "xla rank 6/8 local 2/? node 1/? spawns"
    assert resolver.Topology.from_json(t.to_json()) == t


def test_the_environment_is_not_read() -> None:
    env = {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "WORLD_SIZE": "99", "RANK": "98"}
    t = resolver.resolve(env, probes.fake(xla=POD_WORKER), source=Xla())
    assert (t.world_size, t.global_rank, t.main_address, t.main_port) == (8, 6, None, None)


def test_apply_writes_no_endpoint() -> None:
    t = resolver.resolve({}, probes.fake(xla=POD_WORKER), source="xla")
    env = {"MASTER_ADDR": "keep"}
    with resolver.apply(t, env) as applied:
        assert applied.written == {} and env == {"MASTER_ADDR": "keep"}
    with resolver.apply(t, env, ranks=True) as applied:
        assert dict(applied.written) == {
            "WORLD_SIZE": "8",
            "RANK": "6",
            "LOCAL_RANK": "2",
            "NODE_RANK": "1",
            "GROUP_RANK": "1",
        }
    assert env == {"MASTER_ADDR": "keep"}


def test_spawn_plans_one_worker_per_device() -> None:
    # the view before torch_xla.launch on CPU: one process; CPU_NUM_DEVICES=2 then gives 2 workers
    parent = resolver.resolve({}, probes.fake(xla=FakeXla()), source="xla")
    workers = resolver.spawn(parent, devices=2, num_nodes=1)
    assert [(w.world_size, w.global_rank, w.local_rank, w.node_rank) for w in workers] == [(2, 0, 0, 0), (2, 1, 1, 0)]
    assert {(w.main_address, w.main_port) for w in workers} == {(None, None)}
    assert workers[1].provenance["main_port"] == parent.provenance["main_port"]
    resolver.validate(parent, devices=4, num_nodes=1)  # nothing to compare: the program spawns


def test_spawn_on_a_pod_host() -> None:
    host1 = resolver.resolve({}, probes.fake(xla=FakeXla(world_size=2, global_ordinal=1, host_index=1)), source="xla")
    workers = resolver.spawn(host1, devices=4, num_nodes=2)
    assert [w.global_rank for w in workers] == [4, 5, 6, 7]
    with pytest.raises(InvalidSettings, match=r"node_rank=1 \(probe:xla.host_index\(\)\) does not fit num_nodes=1"):
        resolver.spawn(host1, devices=4, num_nodes=1)


def test_never_auto_detected() -> None:
    env = {"PJRT_DEVICE": "TPU", "TPU_WORKER_ID": "0"}
    assert resolver.resolve(env, probes.fake(free_port=4242)).source == "lightning"
    candidate = next(c for c in resolver.explain(env).candidates if c.name == "xla")
    assert not candidate.auto and not candidate.detection.matched
    assert candidate.detection.variables == ("PJRT_DEVICE", "TPU_WORKER_ID")
    assert "source='xla'" in candidate.detection.reason


class CountingXla(FakeXla):
    __slots__ = ("calls",)

    def __init__(self, **kw: int) -> None:
        super().__init__(**kw)
        self.calls: list[str] = []

    def world_size(self) -> int:
        self.calls.append("world_size")
        return super().world_size()

    def global_ordinal(self) -> int:
        self.calls.append("global_ordinal")
        return super().global_ordinal()

    def local_ordinal(self) -> int:
        self.calls.append("local_ordinal")
        return super().local_ordinal()

    def host_index(self) -> int:
        self.calls.append("host_index")
        return super().host_index()


def test_the_probe_is_asked_once_and_each_function_once() -> None:
    runtime = CountingXla(world_size=4, global_ordinal=3, local_ordinal=3)
    asked: list[str] = []

    def xla() -> CountingXla:
        asked.append("xla")
        return runtime

    bundle = attrs.evolve(probes.fake(), xla=xla)  # any other probe question would raise
    resolver.resolve({}, bundle, source="xla")
    assert asked == ["xla"]
    assert sorted(runtime.calls) == ["global_ordinal", "host_index", "local_ordinal", "world_size"]


def test_without_a_runtime_the_probe_names_itself() -> None:
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve({}, probes.fake(), source="xla")
    assert info.value.probe == "xla"


class Garbage:
    """A runtime whose answers are given per function; an exception instance is raised instead."""

    def __init__(self, **answers: Any) -> None:
        self.answers = {"world_size": 4, "global_ordinal": 0, "local_ordinal": 0, "host_index": 0, **answers}

    def _answer(self, name: str) -> int:
        value = self.answers[name]
        if isinstance(value, BaseException):
            raise value
        return value  # type: ignore[no-any-return]

    def world_size(self) -> int:
        return self._answer("world_size")

    def global_ordinal(self) -> int:
        return self._answer("global_ordinal")

    def local_ordinal(self) -> int:
        return self._answer("local_ordinal")

    def host_index(self) -> int:
        return self._answer("host_index")


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        ({"world_size": "4"}, "world_size() answered '4': expected an int >= 0"),
        ({"world_size": 0}, "world_size() answered 0: expected an int >= 1"),
        ({"world_size": True}, "world_size() answered True"),
        ({"world_size": 4.0}, "world_size() answered 4.0"),
        ({"global_ordinal": -1}, "global_ordinal() answered -1: expected an int >= 0"),
        ({"global_ordinal": 4}, "global_ordinal() answered 4: expected < world_size() (4)"),
        ({"local_ordinal": 4}, "local_ordinal() answered 4: expected < world_size() (4)"),
        ({"host_index": 9}, "host_index() answered 9: expected < world_size() (4)"),
        ({"host_index": None}, "host_index() answered None"),
        (
            {"local_ordinal": RuntimeError("PJRT init failed")},
            "local_ordinal() raised RuntimeError('PJRT init failed')",
        ),
        ({"world_size": "x" * 10_000}, "...<10002 chars>"),
    ],
)
def test_garbage_from_the_runtime_is_probe_failed(answers: dict[str, Any], words: str) -> None:
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve({}, probes.fake(xla=Garbage(**answers)), source="xla")
    assert info.value.probe == "xla"
    assert str(info.value).startswith("probe 'xla' failed: torch_xla.runtime.")
    assert words in str(info.value)


def test_a_runtime_missing_a_function() -> None:
    class Partial:
        def world_size(self) -> int:
            return 1

    partial: Any = Partial()
    bundle: Probes = attrs.evolve(probes.fake(), xla=lambda: partial)
    with pytest.raises(ProbeFailed, match=r"global_ordinal\(\) raised AttributeError"):
        resolver.resolve({}, bundle, source="xla")


@given(
    st.one_of(st.integers(-3, 10), st.none(), st.text(max_size=3), st.booleans()),
    st.one_of(st.integers(-3, 10), st.none(), st.floats()),
    st.integers(-3, 10),
    st.integers(-3, 10),
)
def test_any_answers_give_a_topology_or_probe_failed(world: Any, rank: Any, local: Any, host: Any) -> None:
    runtime = Garbage(world_size=world, global_ordinal=rank, local_ordinal=local, host_index=host)
    probe: str | None = None
    try:
        t = resolver.resolve({}, probes.fake(xla=runtime), source="xla")
    except ProbeFailed as exc:
        probe = exc.probe
    else:
        assert 0 <= t.global_rank < t.world_size and t.local_rank < t.world_size and t.node_rank < t.world_size
    assert probe in (None, "xla")
