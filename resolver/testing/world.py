"""The world harness: a `Process`, a `Job` (every process of one launch) and `assert_consistent`.

``job.resolve()`` resolves each process with its own fake probes (MPI ranks in threads over
``FakeComm.connected``, so their collectives meet) and `assert_consistent` checks that the answers
form one world. `Launcher` is what a launcher's builder module registers (see `resolver.testing`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

import resolver
from resolver import Topology, TopologyError
from resolver._detect import require_probes

__all__ = ["Job", "Launcher", "Process", "assert_consistent"]

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from probes import Probes


@attrs.frozen(kw_only=True)
class Launcher:
    """A launcher the kit builds: its name in `jobs(launchers=...)`, the shapes of its random values and
    its strategy of whole launches.

    `nondeterministic` maps each variable whose value the launcher picks at random or from the machine's
    state to a regular expression of its shape (the builders give plausible values of that shape; every
    other value is exactly the launcher's). `jobs(most)` draws `Job`s of at most `most` processes
    (hypothesis is imported when it is called).
    """

    name: str
    nondeterministic: Mapping[str, str]
    jobs: Callable[[int], SearchStrategy[Job]]


@attrs.frozen(kw_only=True, eq=False)
class Process(Mapping[str, str]):
    """One process of a launch: its environment, the host it runs on, its node and the files it can read.

    A `Process` is a read-only mapping of its environment (``resolver.resolve(process, ...)``,
    ``process["SLURM_PROCID"]``, ``{**process, "X": "1"}``); equal to another mapping with the same
    variables, and to another `Process` when its host, node and files are the same too.
    `node` is the launcher's index of the node (agent, pod) the process belongs to; processes with the
    same `node` must resolve to the same node rank, and processes with different ones to different ranks.
    """

    environ: dict[str, str]
    hostname: str
    node: int = 0
    files: Mapping[str, str] = attrs.field(factory=dict)

    def __getitem__(self, name: str) -> str:
        return self.environ[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.environ)

    def __len__(self) -> int:
        return len(self.environ)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Process):
            mine = (self.environ, self.hostname, self.node, dict(self.files))
            return mine == (other.environ, other.hostname, other.node, dict(other.files))
        if isinstance(other, Mapping):
            return self.environ == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mapping: unhashable, as a dict

    def probes(self, **answers: Any) -> Probes:
        """`probes.fake` that answers this process's host name and files, plus `answers` (free_port=...)."""
        require_probes()
        from probes import fake  # after require_probes: a user's probes.py may shadow ours

        return fake(hostname=self.hostname, files=dict(self.files) or None, **answers)


@attrs.frozen(kw_only=True)
class Job:
    """Every process of one launch, in global-rank order, and the source that must resolve them.

    `call` is the builder call that made it (what Hypothesis prints for a failing example).
    `forced`: the source is chosen with ``source=`` (Kubeflow is never auto-detected).
    `mpi`: the processes are MPI ranks, resolved in threads over one `FakeComm` world.
    `main`: the process whose node hosts the rendezvous; a node-level platform whose main node is not
    its first (AWS Batch) lists its nodes in its own order, and that process must resolve to rank 0.
    `aliases`: names that denote one host (the main node's host name -> the address the other nodes
    are given), where a platform does not tell the main node its own address.
    """

    launcher: str
    source: str
    processes: tuple[Process, ...] = attrs.field(repr=False)
    forced: bool = False
    mpi: bool = False
    main: int = 0
    aliases: Mapping[str, str] = attrs.field(factory=dict)
    call: str = ""

    def __len__(self) -> int:
        return len(self.processes)

    @property
    def environs(self) -> tuple[dict[str, str], ...]:
        """Each process's environment, in global-rank order."""
        return tuple(p.environ for p in self.processes)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The host each process runs on."""
        return tuple(p.hostname for p in self.processes)

    def resolve(self, *, timeout: float = 30.0, allow_loopback: bool = False) -> tuple[Topology, ...]:
        """Resolve every process with its own fake probes; the first rank's `TopologyError` is raised.

        `allow_loopback` is `resolver.resolve`'s: for a job whose nodes were emulated on one host.

        Each process gets its host name, its files and a free port of its own (40000 + its index, so a
        rank that uses its own port instead of rank 0's shows). MPI ranks get the communicators of one
        world (`FakeComm.connected`) and run in threads, so their collectives really meet.
        """
        source = self.source if self.forced else None
        if not self.mpi:
            return tuple(
                resolver.resolve(p.environ, p.probes(free_port=40000 + i), source=source, allow_loopback=allow_loopback)
                for i, p in enumerate(self)
            )
        return self._resolve_world(source, timeout, allow_loopback)

    def __iter__(self) -> Iterator[Process]:
        return iter(self.processes)

    def _resolve_world(self, source: str | None, timeout: float, allow_loopback: bool) -> tuple[Topology, ...]:
        require_probes()
        from probes.fakes import FakeComm  # after require_probes: a user's probes.py may shadow ours

        comms = FakeComm.connected(len(self), timeout=timeout)
        results: list[Topology | TopologyError | None] = [None] * len(self)

        def run(i: int) -> None:
            process = self.processes[i]
            try:
                results[i] = resolver.resolve(
                    process.environ,
                    process.probes(free_port=40000 + i, comm=comms[i]),
                    source=source,
                    allow_loopback=allow_loopback,
                )
            except TopologyError as exc:
                results[i] = exc
                meeting = comms[i].meeting
                if meeting is not None:
                    meeting.abort()  # the other ranks fail now instead of at the timeout

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(self))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 5)
        out: list[Topology] = []
        for i, result in enumerate(results):
            if result is None:
                raise AssertionError(f"rank {i} of {self.call} did not finish within {timeout + 5} s")
            if isinstance(result, TopologyError):
                raise result
            out.append(result)
        return tuple(out)


def assert_consistent(topologies: Sequence[Topology], job: Job | None = None) -> None:
    """Raise AssertionError unless `topologies` (one per process, in rank order) form one world.

    One world: the same world size on every process, ranks 0..n-1 each once, one main address and
    port, one source; node ranks 0..num_nodes-1, and on each node local ranks 0..k-1 each once with
    local world size k. With `job`: process i has global rank i (or, when the job names another
    `main`, that process has rank 0), the job's source, and processes share a node rank exactly when
    the launcher put them on the same node. Node agents (records that start their node's workers and
    say how many) are checked once more as the world of the workers `spawn()` gives them.
    """
    aliases = job.aliases if job is not None else {}
    _assert_world(topologies, job, aliases)
    if all(not t.creates_processes_externally and t.nproc_per_node is not None for t in topologies):
        workers = [w for t in sorted(topologies, key=lambda t: t.node_rank) for w in resolver.spawn(t)]
        _assert_world(workers, None, aliases)


def _assert_world(topologies: Sequence[Topology], job: Job | None, aliases: Mapping[str, str]) -> None:
    n = len(topologies)
    problems: list[str] = []
    if n == 0:
        raise AssertionError("no topologies")
    if {t.world_size for t in topologies} != {n}:
        problems.append(f"world sizes {sorted({t.world_size for t in topologies})} for {n} processes")
    if sorted(t.global_rank for t in topologies) != list(range(n)):
        problems.append(f"global ranks {sorted(t.global_rank for t in topologies)}: expected 0..{n - 1} once each")
    for what, values in (
        ("main endpoints", {(aliases.get(str(t.main_address), t.main_address), t.main_port) for t in topologies}),
        ("sources", {t.source for t in topologies}),
        ("num_nodes", {t.num_nodes for t in topologies}),
        ("creates_processes_externally", {t.creates_processes_externally for t in topologies}),
    ):
        if len(values) != 1:
            problems.append(f"{len(values)} different {what}: {sorted(values, key=repr)}")
    groups: dict[int, list[Topology]] = {}
    for t in topologies:
        groups.setdefault(t.node_rank, []).append(t)
    nodes = topologies[0].num_nodes
    if sorted(groups) != list(range(len(groups) if nodes is None else nodes)):
        problems.append(f"node ranks {sorted(groups)} for num_nodes={nodes}")
    for node, members in sorted(groups.items()):
        if sorted(t.local_rank for t in members) != list(range(len(members))):
            problems.append(f"node {node}: local ranks {sorted(t.local_rank for t in members)}")
        if {t.local_world_size for t in members} - {None, len(members)}:
            problems.append(
                f"node {node}: local world sizes {[t.local_world_size for t in members]}, {len(members)} ranks"
            )
    if job is not None:
        problems += _against_job(topologies, job)
    if problems:
        raise AssertionError(f"not one world ({job.call if job else f'{n} topologies'}): " + "; ".join(problems))


def _against_job(topologies: Sequence[Topology], job: Job) -> list[str]:
    problems = []
    if len(job) != len(topologies):
        return [f"{len(topologies)} topologies for {len(job)} processes"]
    if job.main == 0 and [t.global_rank for t in topologies] != list(range(len(job))):
        problems.append(f"process i must have global rank i: got {[t.global_rank for t in topologies]}")
    if job.main != 0 and topologies[job.main].global_rank != 0:
        problems.append(
            f"process {job.main} hosts the rendezvous but has global rank {topologies[job.main].global_rank}"
        )
    if {t.source for t in topologies} != {job.source}:
        problems.append(f"sources {sorted({t.source for t in topologies})}: expected {job.source!r}")
    launcher_nodes = _partition(p.node for p in job)
    resolved_nodes = _partition(t.node_rank for t in topologies)
    if launcher_nodes != resolved_nodes:
        problems.append(f"processes by node rank {resolved_nodes}, by the launcher's node {launcher_nodes}")
    return problems


def _partition(keys: Iterable[object]) -> list[list[int]]:
    groups: dict[object, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return sorted(groups.values())
