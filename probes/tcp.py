"""A communicator over TCP, for a process that must not initialise MPI (`cluster-topology exec`).

Open MPI 4.1 lets a rank initialise MPI once: after exec, after `MPI_Finalize`, or when a child
process ran the collective, the program's own `MPI_Init` fails ("getting local rank failed",
measured here with `mpirun`). So `exec` answers the MPI source's one collective with this object:
`size` ranks meet at `host:port` (the job's MASTER_ADDR/MASTER_PORT) through the exchange of the
preflight (`probes.exchange`): rank 0 listens, every other rank meets it (retrying until the
deadline), sends its object, and receives what the collective gives it. Objects travel as JSON
(strings, ints, None, lists, read back as tuples): nothing received is unpickled.

Scale, as the preflight meets it (probes/hostlocal.py): for `census` and `bcast` the ranks of one
host meet their host's leader over an abstract Unix socket, and the leader carries the host's
records to rank 0 in one batch and relays the answer, so rank 0 holds one connection per host, not
per rank (a soft limit of 1,024 open files is common, and tens of thousands of connects overflow a
listen queue). Rank 0 raises its limit on open files to what that needs and, when its hard limit is
too low even for one connection per host, every rank fails at once naming the numbers and the fix.

`census(answer)` is the MPI source's collective (probes/census.py): rank 0 tallies every rank's
host name once and answers each host's batch with the job-wide facts and four integers per rank of
the batch, which the leader hands out one to each; O(hosts) bytes per batch at most (the host names,
up to `HOSTNAMES_MOST` nodes), never every rank's answer. `allgather` is there for the `Comm`
protocol: every rank meets rank 0 directly and receives every object, O(N) connections at rank 0
and O(N^2) bytes, as MPI's allgather gives; the MPI source uses `census` when the comm has it.

The port is free again when the exchange ends (see `probes.exchange`): the program can then
bind MASTER_PORT for its own rendezvous.
"""

from __future__ import annotations

import itertools
import socket
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from probes.census import Answer, Place, Tally, batch_answer, is_answer, narrow, place_of
from probes.exchange import Arrival, ExchangeFailed, Server, join
from probes.hostlocal import expand, meet, meeting_here
from probes.limits import OpenFiles, raise_open_files
from resolver.errors import ProbeFailed

__all__ = ["TcpComm"]

_ROUND = "exec:comm"  # the exchange's round: the preflight's meeting on the same port is another


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


class TcpComm:
    """`Get_rank`, `Get_size`, `allgather`, `bcast(root=0)` and `census` among `size` ranks meeting at `host:port`.

    `hostname` names this process's host for its host leader's channel (the census uses the host name
    each rank sends instead); `local_size`, the ranks on this host when the launcher says, lets a
    leader go to rank 0 as soon as its host's ranks came and rank 0 size its open-file limit for
    `size / local_size` hosts; with `local_rank` too, the ranks of rank 0's host count rank 0 out
    (it listens and never meets its host's leader; local ranks follow global ones, so a rank whose
    local rank is its rank shares rank 0's host).
    """

    def __init__(
        self,
        rank: int,
        size: int,
        host: str,
        port: int,
        *,
        timeout: float = 120.0,
        hostname: str | None = None,
        local_size: int | None = None,
        local_rank: int | None = None,
    ) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not in 0..{size - 1}")
        if local_size is not None and not 1 <= local_size <= size:
            raise ValueError(f"local_size {local_size} is not in 1..{size}")
        self.rank, self.size, self.host, self.port, self.timeout = rank, size, host, port, timeout
        self.local_size = local_size
        self.local_rank = local_rank
        self.hostname = hostname
        self._rounds = itertools.count()  # each collective meets in a round of its own (ranks call them in order)
        self.connections = 0  # rank 0: the connections its last collective took (one per host batch with leaders)

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return self.rank

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return self.size

    def allgather(self, sendobj: Any) -> list[Any]:
        """Every rank's object, in rank order, on every rank; each rank meets rank 0 directly (see above)."""
        objects = self._collective("allgather", sendobj, direct=True)
        return [_tuples(x) for x in objects]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        """Rank 0's object on every rank, through the host leaders."""
        if root != 0:
            raise ProbeFailed("comm", f"the TCP exchange broadcasts from rank 0 only, not {root}")
        return _tuples(self._collective("bcast", obj, direct=False))

    def census(self, answer: Answer) -> Place:
        """This rank's `Place` among every rank's `answer` (probes/census.py), through the host leaders."""
        if not is_answer(answer) or (answer[3] is None and not answer[0]):
            raise ValueError(f"census({answer!r}): expected (host name, address, port, error) with a name or an error")
        reply = self._collective("census", list(answer), direct=False, host=answer[0] if answer[0] else None)
        place = place_of(reply, self.rank)
        if place is None:
            raise self._fail(f"rank 0 answered {str(reply)[:200]}: expected this rank's place in the census")
        return place

    # -- the exchange --------------------------------------------------------------------------

    def _fail(self, what: str) -> ProbeFailed:
        return ProbeFailed(
            "comm", f"rank {self.rank} of {self.size}: exchange at {self.host}:{self.port} (TCP, not MPI): {what}"
        )

    def _collective(self, op: str, obj: Any, *, direct: bool, host: str | None = None) -> Any:
        round_ = f"{_ROUND}/{next(self._rounds)}"
        deadline = time.monotonic() + self.timeout
        if self.rank == 0:
            return _Root(self, op, round_, direct).serve(obj, deadline)
        record = {"rank": self.rank, "size": self.size, "op": op, "obj": obj}
        talk: dict[str, Any] = {
            "round_": round_,
            "job": None,
            "deadline": deadline,
            "answer_limit": (1 << 20) + 4096 * self.size,
            "processes": self.size,
        }
        try:
            if direct:
                answer = join(self.host, self.port, record, **talk)
            else:
                answer = meet(
                    self.host,
                    self.port,
                    record,
                    host=host or self.hostname or socket.gethostname(),
                    nodes=self._nodes(),
                    local=meeting_here(self.local_size, self.rank, self.local_rank),
                    relay=_relay if op == "census" else None,
                    personal=("rank", "obj"),
                    **talk,
                )
        except ExchangeFailed as exc:
            if exc.kind == "unreachable":
                raise self._fail(f"rank 0 did not listen within {self.timeout} s ({exc})") from None
            raise self._fail(str(exc)) from None
        if not isinstance(answer, dict) or ("failed" not in answer and "objects" not in answer):
            raise self._fail(f"rank 0 answered {str(answer)[:200]}: expected the collective's objects")
        if "failed" in answer:
            raise self._fail(f"rank 0 closed the exchange without an answer: {answer['failed']}")
        objects = answer["objects"]
        if op == "allgather" and not (isinstance(objects, list) and len(objects) == self.size):
            raise self._fail(f"rank 0 answered {str(objects)[:200]}: expected {self.size} objects")
        return objects

    def _nodes(self) -> int | None:
        """How many hosts the job has, as the launcher's local size tells (None when it does not)."""
        return None if self.local_size is None else -(-self.size // self.local_size)


def _relay(answer: Any, record: Mapping[str, Any]) -> Any:
    """What a host leader hands one rank of its batch: its own seat of the census (probes.hostlocal.meet's `relay`)."""
    if isinstance(answer, dict) and "objects" in answer:
        return {"objects": narrow(answer["objects"], record.get("rank"))}
    return answer


class _Root:
    """Rank 0's side of one collective: gather every rank's record (batches of a host, or single ones),
    then answer each connection with what its ranks need."""

    def __init__(self, comm: TcpComm, op: str, round_: str, direct: bool) -> None:
        self.comm, self.op, self.round, self.direct = comm, op, round_, direct
        self.size = comm.size
        self.objects: list[Any] = [None] * self.size
        self.ids: dict[int, str | None] = {}  # rank -> the id of its record: one that comes twice counts once
        self.broken: str | None = None  # why the collective cannot complete, told to every rank at once
        self.heard = 0  # records received, kept or not: once broken, rank 0 stops when as many as ranks came

    def _fail(self, what: str) -> ProbeFailed:
        return self.comm._fail(what)  # the same words as the other ranks'

    def connections(self) -> tuple[int, bool]:
        """How many connections rank 0 needs at once, and whether that is known (one per host, with leaders)."""
        nodes = self.comm._nodes()
        if self.direct or not sys.platform.startswith("linux"):
            return max(1, self.size - 1), True
        if nodes is None:
            return max(1, self.size - 1), False  # unknown hosts: raise what we can, name a shortage when it comes
        return max(1, min(self.size - 1, nodes)), True

    def serve(self, mine: Any, deadline: float) -> Any:
        comm = self.comm
        need, known = self.connections()
        files = raise_open_files(need)
        try:
            server = Server(comm.port, round_=self.round, job=None, backlog=max(128, min(65535, files.need)))
        except ExchangeFailed as exc:
            raise self._fail(f"rank 0 {exc}") from None
        self.objects[0] = mine
        self.ids[0] = None
        if not files.enough and known:
            self.stop(server, self.limit(files, None))

        def starved() -> None:
            if self.broken is None:
                self.stop(server, self.limit(files, len(self.ids) - 1))

        with server:
            arrivals = server.gather(
                deadline=deadline,
                admit=lambda message: self.admit(message, server),
                done=lambda _: len(self.ids) >= self.size or (self.broken is not None and self.heard >= self.size - 1),
                starved=starved,
            )
            comm.connections = len(arrivals)
            if self.broken is None and len(self.ids) < self.size:
                missing = _spans(r for r in range(self.size) if r not in self.ids)
                self.broken = f"ranks {missing} did not come within {comm.timeout} s"
            if self.broken is not None:
                failed = {"failed": self.broken}
                server.answer(lambda _: failed, deadline=time.monotonic() + 1.0)
                raise self._fail(self.broken)
            reply = self.replies()
            server.answer(reply, deadline=deadline + 1.0)
        return reply(None)["objects"]

    def limit(self, files: OpenFiles, held: int | None) -> str:
        """Rank 0 cannot hold a connection per host: the numbers, and the fix (as the preflight says it)."""
        host = socket.gethostname()
        lim = f"soft {files.soft}, hard {files.hard}"
        if held is None:
            said = (
                f"rank 0 on {host} may open {files.soft} files ({lim}, {files.open} open already) and this "
                f"exchange needs about {files.need} more (a connection per host)"
            )
        else:
            said = f"rank 0 on {host} ran out of open files ({lim}) after {held} ranks arrived"
        return f"{said}; {files.fix()}"

    def stop(self, server: Server, why: str) -> None:
        """The collective cannot complete: every rank, those waiting and those to come, hears why at once."""
        self.broken = why
        server.answer_now({"failed": why})

    def admit(self, message: Mapping[str, Any], server: Server) -> str | None:
        """Take a rank's record, or a host's batch of them; the first record that cannot belong to this
        collective (another size or collective, a rank out of range or twice) breaks it for everyone."""
        for record in _records(message):
            self.heard += 1
            why = self.take(record)
            if why is not None and self.broken is None:
                self.stop(server, why)
        return None

    def take(self, record: Mapping[str, Any]) -> str | None:
        """Keep one record; or why it cannot belong to this collective."""
        why = self.refuse(record)
        if why is not None:
            return why
        rank, ident = record["rank"], record.get("id")
        if rank in self.ids:
            if ident is not None and self.ids[rank] == ident:
                return None  # the same record again: its host leader died, it came on its own
            return f"rank {rank} came twice (two processes claim it): every process needs a rank of its own"
        self.ids[rank] = ident if isinstance(ident, str) else None
        self.objects[rank] = record.get("obj")
        return None

    def refuse(self, record: Mapping[str, Any]) -> str | None:
        """Why `record` is not one of this collective's (its rank, world size, collective or object), or None."""
        rank, size, op, obj = record.get("rank"), record.get("size"), record.get("op"), record.get("obj")
        if not isinstance(rank, int) or isinstance(rank, bool) or not 0 < rank < self.size:
            return f"a process sent rank {rank!r}: expected one of 1..{self.size - 1} (the world has {self.size} ranks)"
        if size != self.size:
            return f"rank {rank} was started in a world of {size!r} ranks, rank 0 in one of {self.size}"
        if op != self.op:
            return f"rank {rank} called {op!r} while rank 0 called {self.op!r}: every rank must call the same one"
        if self.op == "census" and not (is_answer(obj) and (obj[3] is not None or obj[0])):  # type: ignore[index]
            return f"rank {rank} sent {str(obj)[:200]}: expected (host name, main address, main port, error)"
        return None

    def replies(self) -> Callable[[Arrival | None], Any]:
        """The answer to each arrival (None: rank 0's own)."""
        if self.op == "allgather":
            everyone = {"objects": self.objects}
            return lambda _: everyone
        if self.op == "bcast":
            mine = {"objects": self.objects[0]}
            return lambda _: mine
        tally = Tally([tuple(o) for o in self.objects])

        def reply(arrival: Arrival | None) -> Any:
            ranks = [0] if arrival is None else [r.get("rank") for r in _records(arrival.message)]
            return {"objects": batch_answer(tally, (r for r in ranks if isinstance(r, int)))}

        return reply


def _records(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The records of one arrival: a host leader's batch (probes.hostlocal), or one rank's own."""
    records = message.get("records")
    if not isinstance(records, list):
        return [message]
    shared = message.get("shared")
    shared = shared if isinstance(shared, dict) else {}
    return [expand(shared, r) for r in records if isinstance(r, dict)]


def _spans(ranks: Any) -> str:
    """Ranks as short ranges: 3-5,9 (a 100,000-rank job with a host missing names 8 ranks, not a list)."""
    out: list[str] = []
    start = prev = None
    for r in ranks:
        if prev is not None and r == prev + 1:
            prev = r
            continue
        if start is not None:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
        start = prev = r
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)
