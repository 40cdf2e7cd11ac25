"""Fakes for tests, ours and users': probes that answer only what they were given.

`FakeComm` is shaped like mpi4py's `Comm` for one rank of a simulated world; the other ranks'
contributions to a collective are given up front, so no threads or MPI are needed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

import attrs

from probes._bundle import Comm, Probes, XlaRuntime
from probes.network import Route
from resolver.errors import ProbeFailed

__all__ = ["FakeComm", "FakeXla", "make"]


def _unanswered(probe: str) -> Callable[..., NoReturn]:
    def fail(*args: object) -> NoReturn:
        raise ProbeFailed(probe, "the fake probes were not given an answer for it")

    return fail


@attrs.define(kw_only=True)
class FakeComm:
    """One rank's view of an MPI world, with mpi4py's method names.

    Given up front (no threads): `allgather(obj)` returns `gathered` with this rank's `obj` in its
    own slot (the other slots are what the other ranks would send); `bcast(obj, root)` returns
    `bcast_values[root]` when given, else `obj` on the root itself.

    Connected: `FakeComm.connected(n)` makes the n communicators of one world. Run each rank in its
    own thread and every collective really meets: `allgather` returns what each rank sent, `bcast`
    what the root sent. Ranks that call different collectives (or roots) at once, or a rank that
    never comes within `timeout` seconds, make it raise `ProbeFailed` on every rank instead of hanging.

    `calls` records each call, so tests can count round trips.
    """

    rank: int
    size: int
    gathered: Sequence[Any] | None = None
    bcast_values: Mapping[int, Any] | None = None
    calls: list[str] = attrs.field(factory=list)
    meeting: FakeComm.Meeting | None = attrs.field(default=None, repr=False)

    class Meeting:
        """Where the ranks of one connected world meet, one collective at a time."""

        def __init__(self, size: int, timeout: float) -> None:
            self.timeout = timeout
            self.barrier = threading.Barrier(size, timeout=timeout)
            self.slots: list[tuple[str, Any]] = [("", None)] * size

        def exchange(self, rank: int, collective: str, obj: Any) -> list[Any]:
            self.slots[rank] = (collective, obj)
            self._wait(collective)
            seen = list(self.slots)
            # nobody writes the next collective's slot before all have read this one; an abort now
            # leaves this collective's result standing and fails the next one
            with contextlib.suppress(threading.BrokenBarrierError):
                self.barrier.wait()
            kinds = sorted({kind for kind, _ in seen})
            if len(kinds) > 1:
                called = ", ".join(f"rank {r}: {kind}" for r, (kind, _) in enumerate(seen))
                raise ProbeFailed("comm", f"FakeComm: the ranks called different collectives at once ({called})")
            return [sent for _, sent in seen]

        def abort(self) -> None:
            """Make every rank waiting in (or later entering) a collective fail now."""
            self.barrier.abort()

        def _wait(self, collective: str) -> None:
            try:
                self.barrier.wait()
            except threading.BrokenBarrierError:
                raise ProbeFailed(
                    "comm",
                    f"FakeComm: not every rank reached {collective} within {self.timeout} s "
                    "(a rank skipped it, failed before it, or called another collective)",
                ) from None

    @classmethod
    def world(cls, hostnames: Sequence[str], **kw: Any) -> tuple[FakeComm, ...]:
        """The communicators of every rank of a world whose rank i runs on `hostnames[i]`."""
        n = len(hostnames)
        return tuple(cls(rank=i, size=n, gathered=list(hostnames), **kw) for i in range(n))

    @classmethod
    def connected(cls, size: int, *, timeout: float = 10.0) -> tuple[FakeComm, ...]:
        """The communicators of every rank of one world whose collectives meet across threads."""
        meeting = cls.Meeting(size, timeout)
        return tuple(cls(rank=i, size=size, meeting=meeting) for i in range(size))

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        self.calls.append("Get_rank")
        return self.rank

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        self.calls.append("Get_size")
        return self.size

    def allgather(self, sendobj: Any) -> list[Any]:
        self.calls.append("allgather")
        if self.meeting is not None:
            return self.meeting.exchange(self.rank, "allgather", sendobj)
        if self.gathered is None:
            return [sendobj] * self.size
        out = list(self.gathered)
        if len(out) != self.size:
            raise ProbeFailed("comm", f"FakeComm.gathered has {len(out)} entries for a size-{self.size} world")
        out[self.rank] = sendobj
        return out

    def bcast(self, obj: Any, root: int = 0) -> Any:
        self.calls.append("bcast")
        if self.meeting is not None:
            return self.meeting.exchange(self.rank, f"bcast(root={root})", obj)[root]
        if self.bcast_values is not None and root in self.bcast_values:
            return self.bcast_values[root]
        return obj


class FakeXla:
    """Shaped like `torch_xla.runtime`: four functions answering one process's ordinals."""

    __slots__ = ("_global", "_host", "_local", "_world")

    def __init__(
        self, *, world_size: int = 1, global_ordinal: int = 0, local_ordinal: int = 0, host_index: int = 0
    ) -> None:
        self._world, self._global = world_size, global_ordinal
        self._local, self._host = local_ordinal, host_index

    def __repr__(self) -> str:
        return (
            f"FakeXla(world_size={self._world}, global_ordinal={self._global}, "
            f"local_ordinal={self._local}, host_index={self._host})"
        )

    def world_size(self) -> int:
        return self._world

    def global_ordinal(self) -> int:
        return self._global

    def local_ordinal(self) -> int:
        return self._local

    def host_index(self) -> int:
        return self._host


def _lookup(table: Mapping[str, str]) -> Callable[[str], str | None]:
    def which(name: str) -> str | None:
        return table.get(name)

    return which


def make(
    *,
    hostname: str | None,
    free_port: int | None,
    files: Mapping[str, str] | None,
    which: Mapping[str, str] | None,
    comm: Comm | None,
    xla: XlaRuntime | None,
    devices: int | None = None,
    interfaces: Mapping[str, Sequence[str]] | None = None,
    names: Mapping[str, Sequence[str]] | None = None,
    routes: Mapping[str, str] | None = None,
) -> Probes:
    """The bundle behind `probes.fake(...)`: each given answer, and `ProbeFailed` for the rest."""
    network = _network(interfaces, names, routes)

    def read_text(path: str) -> str:
        try:
            return files[path]  # type: ignore[index]
        except KeyError:
            raise ProbeFailed("read_text", f"no such file {path!r} among the fake files") from None

    return Probes(
        hostname=_unanswered("hostname") if hostname is None else (lambda: hostname),
        free_port=_unanswered("free_port") if free_port is None else (lambda: free_port),
        read_text=_unanswered("read_text") if files is None else read_text,
        which=_unanswered("which") if which is None else _lookup(which),
        comm=_unanswered("comm") if comm is None else (lambda: comm),
        xla=_unanswered("xla") if xla is None else (lambda: xla),
        device_count=_unanswered("device_count") if devices is None else (lambda: devices),
        interfaces=network.interfaces,
        lookup=network.lookup,
        route=network.route,
    )


@attrs.frozen
class _Network:
    interfaces: Callable[[], Mapping[str, tuple[str, ...]]]
    lookup: Callable[[str], tuple[str, ...]]
    route: Callable[[str], Route]


def _network(
    interfaces: Mapping[str, Sequence[str]] | None,
    names: Mapping[str, Sequence[str]] | None,
    routes: Mapping[str, str] | None,
) -> _Network:
    """The fake network: `interfaces` (interface -> addresses), `names` (name -> addresses it resolves to;
    an address stands for itself) and `routes` (destination address or name -> the interface toward it;
    an address of `interfaces` is reached on the interface holding it, as probes.network.route does)."""
    from probes.network import Route, holder, is_loopback  # ctypes and ipaddress: only for fakes given a network

    table = {name: tuple(addresses) for name, addresses in (interfaces or {}).items()}

    def lookup(name: str) -> tuple[str, ...]:
        if names is not None and name in names:
            return tuple(names[name])
        if _is_address(name):
            return (name,)
        if names is None:
            raise ProbeFailed("lookup", "the fake probes were not given an answer for it")
        raise ProbeFailed("lookup", f"{name!r} does not resolve: not among the fake names")

    def route(destination: str) -> Route:
        address = lookup(destination)[0]
        mine = holder(address, table)
        if mine is not None and not is_loopback(address):
            return Route(mine, address)
        chosen = (routes or {}).get(destination) or (routes or {}).get(address)
        if chosen is None and is_loopback(address):
            chosen = "lo"
        if chosen is None:
            raise ProbeFailed("route", f"no route to {destination} ({address}) among the fake routes")
        family = ":" if ":" in address else "."
        local = next((a for a in table.get(chosen, ()) if family in a), address if chosen == "lo" else None)
        if local is None:
            raise ProbeFailed("route", f"the fake interface {chosen!r} has no address for {address}")
        return Route(chosen, local)

    return _Network(
        interfaces=_unanswered("interfaces") if interfaces is None else (lambda: table),
        lookup=_unanswered("lookup") if names is None and interfaces is None else lookup,
        route=_unanswered("route") if interfaces is None else route,
    )


def _is_address(text: str) -> bool:
    import ipaddress  # as above

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
