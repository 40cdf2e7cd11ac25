"""Stateful property: any interleaving of apply, nested apply, external writes and deletes, and
teardowns (twice, out of order) leaves every key we touched as it was, unless someone else
changed it, and nothing else changed. Run on a dict and on the real os.environ in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import MutableMapping
from pathlib import Path

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from resolver import Applied, Topology, TopologyWarning, apply

KEYS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "UNRELATED")
BASE = Topology(
    source="lightning", world_size=8, global_rank=0, local_rank=0, node_rank=0, main_address="10.0.0.1", main_port=29500
)
topologies = st.builds(
    lambda rank, port, addr: attrs.evolve(BASE, global_rank=rank, main_port=port, main_address=addr),
    st.integers(0, 7),
    st.integers(1, 65535),
    st.sampled_from(["10.0.0.1", "10.0.0.2", "node-1"]),
)


class ApplyMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.env = self.environ_factory()
        self.original = {k: self.env[k] for k in KEYS if k in self.env}
        self.applied: list[Applied] = []
        self.foreign: set[str] = set()  # keys someone else wrote or deleted
        self.warned: set[str] = set()

    def environ_factory(self) -> MutableMapping[str, str]:
        return {"MASTER_PORT": "1", "UNRELATED": "u"}

    @rule(topology=topologies, ranks=st.booleans())
    def do_apply(self, topology: Topology, ranks: bool) -> None:
        self.applied.append(apply(topology, self.env, ranks=ranks))

    @rule(key=st.sampled_from(KEYS), value=st.text(st.characters(codec="ascii", exclude_characters="\0="), max_size=4))
    def external_write(self, key: str, value: str) -> None:
        self.env[key] = value
        self.foreign.add(key)

    @rule(key=st.sampled_from(KEYS))
    def external_delete(self, key: str) -> None:
        if key in self.env:
            del self.env[key]
            self.foreign.add(key)

    @precondition(lambda self: self.applied)
    @rule(data=st.data())
    def teardown_any(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self.applied))  # live or already torn down: both are fine
        self._teardown(target)

    def _teardown(self, target: Applied) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            target.teardown()
        for w in caught:
            assert issubclass(w.category, TopologyWarning)
            self.warned.add(str(w.message).split(" ", 1)[0])

    @invariant()
    def only_foreign_keys_warn(self) -> None:
        assert self.warned <= self.foreign

    def teardown(self) -> None:
        for target in reversed(self.applied):
            self._teardown(target)
        for key in KEYS:
            if key not in self.foreign:
                assert self.env.get(key) == self.original.get(key), key
        assert self.warned <= self.foreign
        assert not any(a.active for a in self.applied)


TestApplyOnDict = ApplyMachine.TestCase
TestApplyOnDict.settings = settings(max_examples=300, stateful_step_count=30, deadline=None)


class ApplyOnOsEnviron(ApplyMachine):
    def environ_factory(self) -> MutableMapping[str, str]:
        return os.environ


SCRIPT = """
import os, sys
sys.path.insert(0, {root!r})
for k in {keys!r}: os.environ.pop(k, None)
os.environ["MASTER_PORT"] = "1"
snapshot = dict(os.environ)
from hypothesis import settings
from hypothesis.stateful import run_state_machine_as_test
from tests.test_apply_stateful import ApplyOnOsEnviron
class Fresh(ApplyOnOsEnviron):
    def environ_factory(self):
        for k in {keys!r}: os.environ.pop(k, None)
        os.environ.update({{k: v for k, v in snapshot.items() if k in {keys!r}}})
        return os.environ
run_state_machine_as_test(Fresh, settings=settings(max_examples=100, stateful_step_count=25, deadline=None))
for k in {keys!r}: os.environ.pop(k, None)
os.environ.update({{k: v for k, v in snapshot.items() if k in {keys!r}}})
assert dict(os.environ) == snapshot
print("ok")
"""


def test_apply_on_the_real_os_environ_in_a_subprocess() -> None:
    root = str(Path(__file__).resolve().parents[1])
    code = SCRIPT.format(root=root, keys=KEYS)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")
