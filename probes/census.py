"""The census of host names: what each rank of an MPI world learns from every rank's host name.

The MPI source asks the communicator for the node rank, the local rank and rank 0's endpoint in one
collective. Every rank sends an `Answer`, (host name, main address, main port, error): rank 0's
carries its main endpoint, a rank whose probe failed sends its error instead. From all of them a
`Tally` gives each rank its `Place`: its node's index among the sorted distinct host names, the
node count, its index among the ranks of its host name, their count, the host names themselves,
rank 0's answer, and the first rank (in rank order) that sent an error.

Two ways reach the same `Place`, and the MPI source takes whichever the communicator offers:

- an `allgather` (mpi4py's, or a fake's): every rank receives every answer and counts them itself
  (resolver/sources/mpi.py, which does not import this module: the resolver imports `probes` at run
  time only after checking it is ours), O(N) bytes per rank, which MPI moves well;
- a `census` (probes/tcp.py, for `cluster-topology exec`, which must not initialise MPI): only rank 0
  tallies, and a host's batch of ranks receives `batch_answer` (the job-wide facts once, and a seat
  of four integers per rank of the batch); each rank keeps its own seat (`narrow`). At 100,000 ranks
  an allgather over TCP would move every answer to every rank: hundreds of GB from rank 0.

Both follow one definition, and tests compare them on random layouts. The host names are part of
the job-wide facts only up to `HOSTNAMES_MOST` nodes, either way (so that the two give identical
records): above it each host batch would carry every host's name, O(hosts^2) bytes from rank 0
(12,500 hosts of 16-byte names: 2.5 GB), and a record that carries them would no longer fit the
preflight's record limit (64 KiB). The node count and every rank's node rank are exact at any size;
only the list of names is left out, and the MPI source says so in its provenance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import attrs

__all__ = ["HOSTNAMES_MOST", "Answer", "Place", "Seat", "Tally", "batch_answer", "is_answer", "narrow", "place_of"]

HOSTNAMES_MOST = 1024
"""The most nodes whose host names a census carries (1,024 names of 16 bytes: 17 MB from rank 0 in all)."""

Answer = tuple[str | None, str | None, int | None, str | None]
"""What one rank sends: (host name, main address, main port, error); address and port are rank 0's only."""


def is_answer(value: object) -> bool:
    """Whether `value` has an `Answer`'s shape (a list counts: JSON has no tuples)."""
    return (
        isinstance(value, (tuple, list))
        and len(value) == 4
        and (value[0] is None or isinstance(value[0], str))
        and (value[3] is None or isinstance(value[3], str))
    )


class Seat(NamedTuple):
    """One rank's place among the hosts: node rank, node count, local rank, local count."""

    node_rank: int
    num_nodes: int
    local_rank: int
    local_world_size: int


@attrs.frozen(kw_only=True)
class Place:
    """What one rank learns: rank 0's `rank0` answer; `failed`, the first rank whose answer is an error
    (with the error), and then no `seat`; else its `seat`, and the sorted distinct host names (node-rank
    order) when there are at most HOSTNAMES_MOST of them."""

    rank0: Answer
    failed: tuple[int, str] | None = None
    seat: Seat | None = None
    hostnames: tuple[str, ...] | None = None


class Tally:
    """Every rank's `Answer`, counted once: O(N log N) time, O(N) memory, whatever the layout.

    The answers must be well formed (`is_answer`); when none is an error, each must carry a host name
    (ValueError naming the first that does not: the caller checks first, in its own words).
    """

    def __init__(self, answers: Sequence[Answer]) -> None:
        if not answers:
            raise ValueError("a census of no rank")
        self.rank0: Answer = _answer(answers[0])
        self.failed: tuple[int, str] | None = next(
            ((rank, a[3]) for rank, a in enumerate(answers) if a[3] is not None), None
        )
        self.hosts: list[str] = []
        if self.failed is None:
            for rank, answer in enumerate(answers):
                if not isinstance(answer[0], str):
                    raise ValueError(f"rank {rank} sent no host name")  # noqa: TRY004 - a value of the census
                self.hosts.append(answer[0])
        distinct = sorted(set(self.hosts))
        self.num_nodes = len(distinct)
        self.hostnames: tuple[str, ...] | None = tuple(distinct) if len(distinct) <= HOSTNAMES_MOST else None
        index = {host: i for i, host in enumerate(distinct)}
        counts: dict[str, int] = {}
        self._node: list[int] = []
        self._local: list[int] = []
        for host in self.hosts:
            self._node.append(index[host])
            self._local.append(counts.get(host, 0))
            counts[host] = self._local[-1] + 1
        self._counts = counts

    def seat(self, rank: int) -> Seat:
        """Rank `rank`'s seat (no answer was an error)."""
        return Seat(self._node[rank], self.num_nodes, self._local[rank], self._counts[self.hosts[rank]])

    def place(self, rank: int) -> Place:
        """What rank `rank` learns."""
        if self.failed is not None:
            return Place(rank0=self.rank0, failed=self.failed)
        return Place(rank0=self.rank0, seat=self.seat(rank), hostnames=self.hostnames)


def _answer(value: Sequence[Any]) -> Answer:
    host, address, port, error = value
    return (host, address, port, error)


# -- on the wire (probes/tcp.py): rank 0 answers a host's batch, each rank keeps its own seat ----------------


def batch_answer(tally: Tally, ranks: Iterable[int]) -> dict[str, Any]:
    """Rank 0's answer to a batch of `ranks` (a host's, or one rank meeting it directly), as JSON data:
    the job-wide facts once and a seat per rank, never every rank's."""
    failed = tally.failed is not None
    return {
        "rank0": list(tally.rank0),
        "failed": None if tally.failed is None else list(tally.failed),
        "hostnames": None if failed or tally.hostnames is None else list(tally.hostnames),
        "seats": {} if failed else {str(r): list(tally.seat(r)) for r in ranks},
    }


def narrow(answer: Any, rank: Any) -> Any:
    """`answer` with the seat of `rank` only (what a host leader relays to that rank); anything that is
    not a batch answer stays as it is, for `place_of` to refuse."""
    if not isinstance(answer, Mapping) or not isinstance(answer.get("seats"), Mapping):
        return answer
    seat = answer["seats"].get(str(rank))
    return {**answer, "seats": {} if seat is None else {str(rank): seat}}


def place_of(answer: Any, rank: int) -> Place | None:
    """The `Place` of `rank` in a batch answer; None when the answer is not one (the caller names it)."""
    if not isinstance(answer, Mapping) or not is_answer(answer.get("rank0")):
        return None
    failed, hostnames, seats = answer.get("failed"), answer.get("hostnames"), answer.get("seats")
    rank0 = _answer(answer["rank0"])
    if failed is not None:
        if not (isinstance(failed, list) and len(failed) == 2 and _count(failed[0]) and isinstance(failed[1], str)):
            return None
        return Place(rank0=rank0, failed=(failed[0], failed[1]))
    seat = seats.get(str(rank)) if isinstance(seats, Mapping) else None
    if not (isinstance(seat, list) and len(seat) == 4 and all(map(_count, seat))):
        return None
    if hostnames is not None and not (isinstance(hostnames, list) and all(isinstance(h, str) for h in hostnames)):
        return None
    return Place(rank0=rank0, seat=Seat(*seat), hostnames=None if hostnames is None else tuple(hostnames))


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
