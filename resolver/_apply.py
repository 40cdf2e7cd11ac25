"""The effect layer, and the only writer: put a Topology into an environment, then restore it exactly."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, MutableMapping
from types import MappingProxyType, TracebackType

from resolver.errors import TopologyWarning
from resolver.topology import Topology

__all__ = ["RANKS", "Applied", "apply", "environment", "variables"]


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


RANKS = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK")
"""The `env://` rank variables, as torchrun writes them (GROUP_RANK is torchrun's name for the node rank)."""


def variables(topology: Topology, *, ranks: bool = False) -> dict[str, str]:
    """The variables `apply` writes: MASTER_ADDR/MASTER_PORT, and with `ranks` the `env://` ranks
    (WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE when known, NODE_RANK, GROUP_RANK)."""
    out: dict[str, str] = {}
    if topology.main_address is not None:
        out["MASTER_ADDR"] = topology.main_address
    if topology.main_port is not None:
        out["MASTER_PORT"] = str(topology.main_port)
    if ranks:
        out["WORLD_SIZE"] = str(topology.world_size)
        out["RANK"] = str(topology.global_rank)
        out["LOCAL_RANK"] = str(topology.local_rank)
        if topology.local_world_size is not None:
            out["LOCAL_WORLD_SIZE"] = str(topology.local_world_size)
        out["NODE_RANK"] = str(topology.node_rank)
        out["GROUP_RANK"] = str(topology.node_rank)
    return out


def environment(topology: Topology) -> dict[str, str]:
    """Everything `cluster-topology exec` and `--format env` write, as a pure function of the record:
    `variables(topology, ranks=True)` and CLUSTER_TOPOLOGY_{SOURCE,NUM_NODES,JOB_ID,JOB_NAME} when known."""
    out = variables(topology, ranks=True)
    facts = {
        "CLUSTER_TOPOLOGY_SOURCE": topology.source,
        "CLUSTER_TOPOLOGY_NUM_NODES": topology.num_nodes,
        "CLUSTER_TOPOLOGY_JOB_ID": topology.job_id,
        "CLUSTER_TOPOLOGY_JOB_NAME": topology.job_name,
    }
    out.update({key: str(value) for key, value in facts.items() if value is not None})
    return out


# The live applications of each mapping, oldest first, so that teardowns in any order restore
# the state before the first of them. Keyed by id(): a live Applied holds its mapping, so the
# id cannot be reused while the entry exists.
_LIVE: dict[int, list[Applied]] = {}


class Applied:
    """What one `apply` wrote and what was there before; `teardown()` puts it back.

    Teardown restores each key it set to its prior value (or deletes it if it was absent),
    leaves alone and warns about a key that someone else changed since, and is idempotent.
    Nested applications may be torn down in any order: an outer teardown under a live inner
    one hands its prior value to the inner, which restores it when it goes.
    """

    __slots__ = ("_environ", "_prior", "_written")

    def __init__(self, environ: MutableMapping[str, str], writes: Mapping[str, str]) -> None:
        self._environ = environ
        self._prior: dict[str, str | _Absent] = {}
        self._written = MappingProxyType(dict(writes))
        try:
            for key, value in writes.items():
                before = environ.get(key, ABSENT)
                environ[key] = value
                self._prior[key] = before  # only once written: a failed write changed nothing
        except BaseException:
            self.teardown()  # nothing half-done: undo the keys already written
            raise
        _LIVE.setdefault(id(environ), []).append(self)

    @classmethod
    def adopt(
        cls, environ: MutableMapping[str, str], prior: Mapping[str, str | None], answers: Mapping[str, str]
    ) -> Applied:
        """What someone else wrote from our answers, taken on as if `apply` had written it.

        For each key of `answers` that `environ` now holds with that value and that held `prior[key]`
        before (None: absent), `teardown()` restores it, by the same rule as an application of our
        own. Nothing is written. (Lightning's launcher writes MASTER_ADDR, NODE_RANK, ... from a
        cluster environment's answers: `TopologyEnvironment.teardown` puts them back this way.)
        """
        self = cls.__new__(cls)
        self._environ = environ
        taken = {k: v for k, v in answers.items() if environ.get(k) == v and prior.get(k) != v}
        self._written = MappingProxyType(taken)
        self._prior = {k: ABSENT if prior.get(k) is None else str(prior[k]) for k in taken}
        if self._prior:
            _LIVE.setdefault(id(environ), []).append(self)
        return self

    @property
    def written(self) -> Mapping[str, str]:
        return self._written

    @property
    def prior(self) -> Mapping[str, str | _Absent]:
        """What each key still to restore held before this application."""
        return MappingProxyType(self._prior)

    @property
    def active(self) -> bool:
        return bool(self._prior)

    def _later_writer(self, key: str) -> Applied | None:
        live = _LIVE.get(id(self._environ), [])
        if self not in live:
            return None
        for other in live[live.index(self) + 1 :]:
            if key in other._prior:
                return other
        return None

    def teardown(self) -> None:
        """Restore; safe to call again, also after an interruption (it resumes with what is left)."""
        environ = self._environ
        while self._prior:
            key, before = next(iter(self._prior.items()))
            later = self._later_writer(key)
            if later is not None:
                if later._prior[key] == self._written[key]:  # it found our value: it restores what we found
                    later._prior[key] = before
            else:
                now = environ.get(key, ABSENT)
                if now == self._written[key]:
                    if isinstance(before, _Absent):
                        del environ[key]
                    else:
                        environ[key] = before
                elif now != before:  # (equal: restored already, by a teardown that was interrupted)
                    warnings.warn(
                        f"{key} was changed by someone else after apply ({now!r}, we wrote "
                        f"{self._written[key]!r}); leaving it as it is",
                        TopologyWarning,
                        stacklevel=2,
                    )
            del self._prior[key]
        live = _LIVE.get(id(environ))
        if live is not None and self in live:
            live.remove(self)
            if not live:
                del _LIVE[id(environ)]

    def __enter__(self) -> Applied:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.teardown()

    def __repr__(self) -> str:
        state = "active" if self.active else "torn down"
        return f"<Applied {state} {dict(self._written)!r}>"


def apply(topology: Topology, environ: MutableMapping[str, str] | None = None, *, ranks: bool = False) -> Applied:
    """Write `variables(topology, ranks=ranks)` into `environ` (default `os.environ`): MASTER_ADDR,
    MASTER_PORT, and with `ranks` the env:// ranks. Use as a context manager or call `teardown()`."""
    if not isinstance(topology, Topology):
        raise TypeError(f"apply() needs a Topology, got {type(topology).__name__}")
    return Applied(os.environ if environ is None else environ, variables(topology, ranks=ranks))
