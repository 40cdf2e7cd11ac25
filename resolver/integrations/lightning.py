"""A Lightning `ClusterEnvironment` backed by a Topology, for Fabric and the Trainer.

    from lightning.fabric import Fabric
    from resolver.integrations.lightning import TopologyEnvironment

    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp", plugins=[TopologyEnvironment()])

Differences from Lightning's own environments, on purpose:
- The answers come from one record, resolved when the object is made (or handed in); reading
  a property or a rank reads that record only: nothing reads or writes `os.environ` then.
- `set_world_size`/`set_global_rank` replace the record with an `attrs.evolve`d copy (validated);
  the record handed in is never changed. Lightning calls them rank first, then world size
  (`lightning/fabric/strategies/ddp.py:236-237`): a rank that fits only the coming world size
  waits for it.
- When this process starts the workers itself (`creates_processes_externally` False), the first
  launch turns the record into worker `local_rank` of `resolver.spawn(devices, num_nodes)`;
  from the second launch on (say `trainer.test()` after `trainer.fit()`) the workers exist, so
  `creates_processes_externally` is True, as Lightning's default environment answers once its
  launcher has written LOCAL_RANK.
- `teardown()` puts back the variables that Lightning's launcher and strategy wrote from our
  answers (MASTER_ADDR, MASTER_PORT, NODE_RANK, LOCAL_RANK, WORLD_SIZE) as they were when this
  object was made; a variable holding anything else is left alone. It does so through
  `Applied.adopt`: the answers are `apply`'s `variables`, the restore rule is `Applied`'s.
- The topology's warnings are logged once (logger `resolver.integrations.lightning`), each with the
  record of the worker this process is: when the object is made if a launcher started the process
  and gave its rank, else at the first launch (`validate_settings`), after Lightning has set the
  ranks and, in the process that starts the workers, after it became worker 0. A worker that
  Lightning's script launcher started learns its global rank from Lightning, not from its
  environment, so the record it resolved says rank 0 until then. A loopback main address across
  nodes is refused, as by `resolver.resolve`.

Supported launches: processes started by a launcher (torchrun, srun, mpirun, ...) and Lightning's
script launcher (`strategy="ddp"`: each worker is a new run of the script and makes its own
TopologyEnvironment). Not `ddp_spawn`/`ddp_fork`: there a worker runs a copy of the parent's
object and learns its rank only from `os.environ["LOCAL_RANK"]`, written after the copy was
made; a copy used in another process raises InvalidSettings rather than give every worker rank 0.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import attrs

from resolver._apply import Applied, variables
from resolver._detect import enforce, resolve
from resolver._spawn import spawn
from resolver._validate import validate
from resolver.errors import InvalidSettings, InvalidTopology
from resolver.integrations import missing
from resolver.origin import Origin
from resolver.sources import Source
from resolver.topology import Topology

try:
    from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment
except ImportError as exc:
    raise missing(__name__, "lightning", "lightning", exc) from exc

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["LIGHTNING_WRITES", "TopologyEnvironment"]

_LOG = logging.getLogger(__name__)

# what Lightning's script launcher and _init_dist_connection write into os.environ from our answers
# (lightning/fabric/strategies/launchers/subprocess_script.py:115-121, utilities/distributed.py:280-281)
LIGHTNING_WRITES = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK", "WORLD_SIZE")


class TopologyEnvironment(ClusterEnvironment):
    """Lightning's cluster environment answered by a Topology.

    `topology=None` resolves `environ` (default `os.environ`) now, with `probes` and `source` as
    in `resolver.resolve`. `environ` is also where `teardown()` restores Lightning's writes.
    """

    def __init__(
        self,
        topology: Topology | None = None,
        *,
        environ: MutableMapping[str, str] | None = None,
        probes: Probes | None = None,
        source: str | Source | None = None,
    ) -> None:
        super().__init__()
        target: MutableMapping[str, str] = os.environ if environ is None else environ
        if topology is None:
            topology = resolve(target, probes, source=source)
        elif not isinstance(topology, Topology):
            raise TypeError(f"TopologyEnvironment needs a Topology or None, got {type(topology).__name__}")
        elif probes is not None or source is not None:
            raise TypeError("probes and source are for resolving: pass them only without a topology")
        else:
            enforce(topology, target, strict=False, allow_loopback=False)
        self._topology = topology
        self._pending: dict[str, int] = {}  # a rank waiting for the world size it fits in
        self._launches = 0
        self._warned = False
        rank = topology.provenance.get("global_rank")
        if topology.creates_processes_externally and (rank is None or rank.kind != "default"):
            self._warn()  # the launcher gave this process its rank: the record is this worker's already
        self._environ = target
        self._prior: dict[str, str | None] = {key: target.get(key) for key in LIGHTNING_WRITES}
        self._pid = os.getpid()

    @property
    def topology(self) -> Topology:
        """The current record: the one resolved or handed in, or its latest evolved copy."""
        return self._topology

    # -- ClusterEnvironment: the answers -----------------------------------------------------

    @property
    def creates_processes_externally(self) -> bool:
        return self._topology.creates_processes_externally or self._launches > 1

    @property
    def main_address(self) -> str:
        if self._topology.main_address is None:
            raise InvalidSettings(f"the {self._topology.source} topology has no main address: {self._topology}")
        return self._topology.main_address

    @property
    def main_port(self) -> int:
        if self._topology.main_port is None:
            raise InvalidSettings(f"the {self._topology.source} topology has no main port: {self._topology}")
        return self._topology.main_port

    @staticmethod
    def detect() -> bool:
        """Always True: every environment resolves (the Lightning default source matches anything)."""
        return True

    def world_size(self) -> int:
        return self._topology.world_size

    def global_rank(self) -> int:
        return self._pending.get("global_rank", self._topology.global_rank)

    def local_rank(self) -> int:
        return self._topology.local_rank

    def node_rank(self) -> int:
        return self._topology.node_rank

    # -- ClusterEnvironment: what Lightning tells us -----------------------------------------

    def set_world_size(self, size: int) -> None:
        self._evolve("world_size", size)

    def set_global_rank(self, rank: int) -> None:
        self._evolve("global_rank", rank)

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        """`resolver.validate`; Lightning's script launchers call it first in every `launch()`.

        The first call also logs the topology's warnings, with the record of this worker, if they were
        not logged when the object was made (and, if the launch fails, with the record as it stands).
        """
        try:
            self._launch(num_devices, num_nodes)
        finally:
            self._warn()

    def teardown(self) -> None:
        """Restore what Lightning wrote from our answers to its value when this object was made."""
        answers = {k: v for k, v in variables(self._topology, ranks=True).items() if k in LIGHTNING_WRITES}
        Applied.adopt(self._environ, self._prior, answers).teardown()

    # -- internals -----------------------------------------------------------------------------

    def _launch(self, num_devices: int, num_nodes: int) -> None:
        self._same_process()
        if self._pending:
            raise InvalidSettings(
                f"Lightning set global rank {self._pending['global_rank']}, but no world size it fits in "
                f"(world size {self._topology.world_size})"
            )
        validate(self._topology, devices=num_devices, num_nodes=num_nodes)
        if self._topology.creates_processes_externally:
            return
        self._launches += 1
        if self._launches == 1:  # this launch starts the workers: this process becomes one of them
            workers = spawn(self._topology, devices=num_devices, num_nodes=num_nodes)
            if self._topology.local_rank >= len(workers):
                raise InvalidSettings(
                    f"local_rank={self._topology.local_rank} does not fit devices={num_devices}: "
                    "a process that starts the workers is local rank 0"
                )
            self._topology = workers[self._topology.local_rank]

    def _warn(self) -> None:
        """Log the topology's warnings, once, with the current record."""
        if self._warned:
            return
        self._warned = True
        for warning in self._topology.warnings:
            _LOG.warning("%s: %s", self._topology, warning)

    def _evolve(self, field: str, value: int) -> None:
        """Replace the record with a copy whose `field` is `value`, validated as every Topology is."""
        self._same_process()
        wanted = {**self._pending, field: value}
        current = self._topology
        if all(getattr(current, name) == v for name, v in wanted.items()):
            self._pending = {}
            return  # nothing changes: the record (and where its values came from) stays
        origin = {name: Origin.argument(f"lightning:set_{name}({v})") for name, v in wanted.items()}
        changes: dict[str, Any] = {**wanted, "provenance": {**current.provenance, **origin}}
        try:
            self._topology = attrs.evolve(current, **changes)
        except InvalidTopology as exc:
            if field == "global_rank" and "world_size" not in wanted and value >= current.world_size:
                self._pending = wanted  # the world size comes next
                return
            calls = ", ".join(f"set_{name}({v})" for name, v in wanted.items())
            raise InvalidSettings(
                f"Lightning called {calls}, which does not fit the {current.source} topology ({current}): {exc}. "
                "HINT: make devices and num_nodes match what the launcher started."
            ) from exc
        self._pending = {}

    def _same_process(self) -> None:
        if os.getpid() != self._pid:
            raise InvalidSettings(
                f"this TopologyEnvironment was made in process {self._pid} and is used in process {os.getpid()}: "
                "Lightning's ddp_spawn/ddp_fork launchers tell a worker its rank only through "
                "os.environ['LOCAL_RANK'], which a TopologyEnvironment does not read once made. "
                "HINT: use strategy='ddp' (each worker runs the script again and makes its own), "
                "or start the processes with torchrun, srun or mpirun."
            )

    # -- pickling: the record goes as its dict (its provenance is a read-only mapping) ----------

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_topology"] = self._topology.to_dict()
        state["_environ"] = None if self._environ is os.environ else dict(self._environ)
        return state

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        restored = dict(state)
        restored["_topology"] = Topology.from_dict(restored["_topology"])
        if restored["_environ"] is None:
            restored["_environ"] = os.environ
        self.__dict__.update(restored)

    def __repr__(self) -> str:
        return f"<TopologyEnvironment {self._topology}>"
