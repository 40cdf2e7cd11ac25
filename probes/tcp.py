"""A communicator over TCP, for a process that must not initialise MPI (`cluster-topology exec`).

Open MPI 4.1 lets a rank initialise MPI once: after exec, after `MPI_Finalize`, or when a child
process ran the collective, the program's own `MPI_Init` fails ("getting local rank failed",
measured here with `mpirun`). So `exec` answers the MPI source's one collective with this object:
`size` ranks meet at `host:port` (the job's MASTER_ADDR/MASTER_PORT) through the exchange of the
preflight (`probes.exchange`): rank 0 listens and serves every rank at once, every other rank
connects (retrying until the deadline), sends its object, and receives what the collective gives it.
Objects travel as JSON (strings, ints, None, lists, read back as tuples): nothing received is
unpickled. An allgather gives every rank every object, as MPI's does: the MPI source's objects are a
host name and an endpoint, so this is the one O(N^2) use of the exchange, and a small one.

The port is free again when the exchange ends (see `probes.exchange`): the program can then
bind MASTER_PORT for its own rendezvous.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from probes.exchange import Arrival, ExchangeFailed, Server, join
from probes.limits import raise_open_files
from resolver.errors import ProbeFailed

__all__ = ["TcpComm"]

_ROUND = "exec:comm"  # the exchange's round: the preflight's meeting on the same port is another


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


class TcpComm:
    """`Get_rank`, `Get_size`, `allgather` and `bcast(root=0)` among `size` ranks meeting at `host:port`."""

    def __init__(self, rank: int, size: int, host: str, port: int, *, timeout: float = 120.0) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is not in 0..{size - 1}")
        self.rank, self.size, self.host, self.port, self.timeout = rank, size, host, port, timeout

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's name
        return self.rank

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's name
        return self.size

    def allgather(self, sendobj: Any) -> list[Any]:
        return [_tuples(x) for x in self._exchange(sendobj, everyone=True)]

    def bcast(self, obj: Any, root: int = 0) -> Any:
        if root != 0:
            raise ProbeFailed("comm", f"the TCP exchange broadcasts from rank 0 only, not {root}")
        return _tuples(self._exchange(obj, everyone=False))

    # -- the exchange --------------------------------------------------------------------------

    def _fail(self, what: str) -> ProbeFailed:
        return ProbeFailed(
            "comm", f"rank {self.rank} of {self.size}: exchange at {self.host}:{self.port} (TCP, not MPI): {what}"
        )

    def _exchange(self, obj: Any, *, everyone: bool) -> Any:
        deadline = time.monotonic() + self.timeout
        if self.rank == 0:
            return self._serve(obj, everyone, deadline)
        try:
            answer = join(
                self.host,
                self.port,
                {"rank": self.rank, "size": self.size, "obj": obj},
                round_=_ROUND,
                job=None,
                deadline=deadline,
                answer_limit=(1 << 20) + 4096 * self.size,
                processes=self.size,
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
        if everyone and not (isinstance(objects, list) and len(objects) == self.size):
            raise self._fail(f"rank 0 answered {str(objects)[:200]}: expected {self.size} objects")
        return objects

    def _serve(self, mine: Any, everyone: bool, deadline: float) -> Any:
        raise_open_files(self.size)  # a connection per rank: a soft limit of 1,024 is common (probes/limits.py)
        try:
            server = Server(self.port, round_=_ROUND, job=None, backlog=min(4096, self.size))
        except ExchangeFailed as exc:
            raise self._fail(f"rank 0 {exc}") from None
        seen: set[int] = set()

        def admit(message: Mapping[str, Any]) -> str | None:
            rank, size = message.get("rank"), message.get("size")
            if size != self.size:
                return f"size {size!r}: this exchange has {self.size} ranks"
            if not isinstance(rank, int) or isinstance(rank, bool) or not 0 < rank < self.size or rank in seen:
                return f"rank {rank!r}: expected one of the missing ranks 1..{self.size - 1}"
            seen.add(rank)
            return None

        with server:
            arrivals = server.gather(deadline=deadline, admit=admit, done=lambda got: len(got) >= self.size - 1)
            if len(arrivals) < self.size - 1:
                missing = sorted(set(range(1, self.size)) - seen)
                why = f"ranks {missing} did not come within {self.timeout} s"
                server.answer(lambda _: {"failed": why}, deadline=time.monotonic() + 1.0)
                raise self._fail(why)
            objects = [mine, *(a.message.get("obj") for a in sorted(arrivals, key=_rank))]
            reply: Any = {"objects": objects if everyone else mine}
            server.answer(lambda _: reply, deadline=deadline + 1.0)
        return objects if everyone else mine


def _rank(arrival: Arrival) -> int:
    rank: int = arrival.message["rank"]  # admitted: an int in 1..size-1
    return rank
