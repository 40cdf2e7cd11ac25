from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resolver import Topology, TopologyWarning, apply

T = Topology(
    source="torchelastic",
    world_size=4,
    global_rank=1,
    local_rank=1,
    node_rank=0,
    main_address="10.0.0.1",
    main_port=29500,
    creates_processes_externally=True,
)


def test_writes_and_restores_exactly() -> None:
    env = {"MASTER_PORT": "1", "UNRELATED": "u"}
    with apply(T, env) as applied:
        assert env == {"MASTER_PORT": "29500", "MASTER_ADDR": "10.0.0.1", "UNRELATED": "u"}
        assert dict(applied.written) == {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert env == {"MASTER_PORT": "1", "UNRELATED": "u"}
    assert not applied.active


def test_ranks_for_env_init() -> None:
    env: dict[str, str] = {"WORLD_SIZE": "99"}
    applied = apply(T, env, ranks=True)
    assert env == {
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "4",
        "RANK": "1",
        "LOCAL_RANK": "1",
        "NODE_RANK": "0",
        "GROUP_RANK": "0",  # torchrun's name for the node rank; LOCAL_WORLD_SIZE only when known
    }
    applied.teardown()
    assert env == {"WORLD_SIZE": "99"}  # Lightning's teardown would have deleted it


def test_teardown_is_idempotent_and_leaves_foreign_changes_with_a_warning() -> None:
    env: dict[str, str] = {}
    applied = apply(T, env)
    env["MASTER_PORT"] = "777"
    with pytest.warns(TopologyWarning, match="MASTER_PORT was changed by someone else"):
        applied.teardown()
    assert env == {"MASTER_PORT": "777"}
    applied.teardown()
    assert env == {"MASTER_PORT": "777"}


def test_foreign_delete_is_left_alone() -> None:
    env: dict[str, str] = {"MASTER_ADDR": "old"}
    applied = apply(T, env)
    del env["MASTER_ADDR"]
    with pytest.warns(TopologyWarning, match="MASTER_ADDR"):
        applied.teardown()
    assert env == {}


def test_nested_in_order() -> None:
    env: dict[str, str] = {"MASTER_ADDR": "orig"}
    outer = apply(T, env)
    inner = apply(attrs.evolve(T, main_address="10.9.9.9"), env)
    assert env["MASTER_ADDR"] == "10.9.9.9"
    inner.teardown()
    assert env["MASTER_ADDR"] == "10.0.0.1"
    outer.teardown()
    assert env == {"MASTER_ADDR": "orig"}


def test_none_address_and_port_write_nothing() -> None:
    xla = Topology(source="xla", world_size=2, global_rank=0, local_rank=0, node_rank=0)
    env: dict[str, str] = {}
    with apply(xla, env):
        assert env == {}


def test_refuses_a_non_topology() -> None:
    with pytest.raises(TypeError, match="Topology"):
        apply({"MASTER_ADDR": "x"}, {})  # type: ignore[arg-type]


class Exploding(dict[str, str]):
    def __setitem__(self, key: str, value: str) -> None:
        if key == "MASTER_PORT":
            raise OSError("no room")
        super().__setitem__(key, value)


def test_a_failed_write_undoes_the_earlier_ones() -> None:
    env = Exploding({"MASTER_ADDR": "before"})
    with pytest.raises(OSError, match="no room"):
        apply(T, env)
    assert dict(env) == {"MASTER_ADDR": "before"}


keys = st.sampled_from(["MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "OTHER"])


@given(st.dictionaries(keys, st.text(max_size=5)), st.booleans())
def test_apply_then_teardown_leaves_any_mapping_as_it_was(before: dict[str, str], ranks: bool) -> None:
    env = dict(before)
    with apply(T, env, ranks=ranks):
        pass
    assert env == before


def test_real_os_environ_in_a_subprocess() -> None:
    code = (
        "import os, resolver;"
        "os.environ['MASTER_PORT']='5';"
        "before=dict(os.environ);"
        "t=resolver.resolve({}, __import__('probes').fake(free_port=1234));"
        "a=resolver.apply(t, ranks=True);"
        "assert os.environ['MASTER_PORT']=='1234' and os.environ['RANK']=='0';"
        "a.teardown();"
        "assert dict(os.environ)==before, set(os.environ.items())^set(before.items());"
        "print('ok')"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "RANK")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


class InterruptOnce(dict[str, str]):
    """A mapping on which the first write or delete of `key` is interrupted, as by Ctrl-C."""

    def __init__(self, *args: object, key: str, on: str) -> None:
        super().__init__(*args)
        self.key, self.on, self.fired = key, on, False

    def _maybe(self, key: str, op: str) -> None:
        if key == self.key and op == self.on and not self.fired:
            self.fired = True
            raise KeyboardInterrupt

    def __setitem__(self, key: str, value: str) -> None:
        self._maybe(key, "set")
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self._maybe(key, "del")
        super().__delitem__(key)


def test_interrupted_apply_leaves_nothing_behind() -> None:
    env = InterruptOnce({"RANK": "7"}, key="WORLD_SIZE", on="set")
    with pytest.raises(KeyboardInterrupt):
        apply(T, env, ranks=True)
    assert dict(env) == {"RANK": "7"}


def test_interrupted_teardown_resumes_on_the_next_call() -> None:
    env = InterruptOnce({"MASTER_PORT": "1"}, key="MASTER_ADDR", on="del")
    applied = apply(T, env)
    with pytest.raises(KeyboardInterrupt):
        applied.teardown()
    assert applied.active
    applied.teardown()
    assert dict(env) == {"MASTER_PORT": "1"}
    assert not applied.active


def test_a_real_signal_during_teardown() -> None:
    code = """
import os, signal, resolver, probes
t = resolver.resolve({"MASTER_PORT": "9"}, probes.fake())
before = dict(os.environ)
applied = resolver.apply(t, ranks=True)
class Stop(Exception): pass
def handler(signum, frame): raise Stop
signal.signal(signal.SIGUSR1, handler)
real_del = type(os.environ).__delitem__
def slow_del(self, key):
    if key == "RANK": os.kill(os.getpid(), signal.SIGUSR1)
    real_del(self, key)
type(os.environ).__delitem__ = slow_del
try:
    applied.teardown()
except Stop:
    pass
type(os.environ).__delitem__ = real_del
applied.teardown()
assert dict(os.environ) == before, set(os.environ.items()) ^ set(before.items())
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr


def test_adopt_takes_on_what_someone_else_wrote_from_our_answers() -> None:
    """Lightning's launcher writes from our answers; one restore rule puts it back (issue 14, point 5)."""
    from resolver import Applied

    env = {"NODE_RANK": "0", "LOCAL_RANK": "5", "WORLD_SIZE": "9"}
    prior = {"NODE_RANK": "0", "LOCAL_RANK": None, "WORLD_SIZE": "1", "MASTER_ADDR": None}
    env.update(MASTER_ADDR="10.0.0.1", LOCAL_RANK="1")  # written from our answers...
    answers = {"MASTER_ADDR": "10.0.0.1", "LOCAL_RANK": "1", "WORLD_SIZE": "4", "NODE_RANK": "0"}
    adopted = Applied.adopt(env, prior, answers)
    # ...WORLD_SIZE holds something else (not ours to restore), NODE_RANK never changed
    assert dict(adopted.written) == {"MASTER_ADDR": "10.0.0.1", "LOCAL_RANK": "1"}
    assert env["MASTER_ADDR"] == "10.0.0.1"  # adopting writes nothing
    adopted.teardown()
    assert env == {"NODE_RANK": "0", "WORLD_SIZE": "9"}
    adopted.teardown()
    assert env == {"NODE_RANK": "0", "WORLD_SIZE": "9"}
