"""Host leaders: the processes of one host meet rank 0 through one connection, not one each.

Rank 0 of a 100,000-process job cannot hold a TCP connection per process on the limits clusters ship
with (1,024 open files is common), and tens of thousands of simultaneous connects overflow its listen
queue. So the processes of a host first meet each other over an abstract Unix socket (Linux) named by
the exchange's round, the job, the endpoint and the host; whoever binds the name first leads. A claimed
local rank decides nothing: the check exists to catch wrong ones. The leader takes its followers'
records for a moment, stops listening (a later process binds the name again and leads a second batch),
joins rank 0 through `probes.exchange.join` with the batch, and relays rank 0's answer, or its own
failure to meet rank 0, to every follower. The wire (one JSON object per line, as over TCP):

    process -> leader   the record it would send rank 0, with a random "id"
    leader -> process   at once {"protocol", "leader": {...}}; then {"protocol", "answer": ...}
                        or {"protocol", "failed": {"kind", "message"}}
    leader -> rank 0    {"protocol", "round", "job", "wait", "host", "leader": {...},
                         "shared": {fields alike in every record, one level down in "topology" too},
                         "records": [{what differs}, ...]}

A process meets rank 0 directly, as before, when it cannot make the channel (no abstract sockets, or
a name held by something that does not acknowledge it as a leader would within `ACK_WAIT`). A process
whose leader hangs up after taking its record (the leader died) meets rank 0 again, directly or
through a new leader, saying which leader it lost (`lost_leader`); rank 0 keys records by `id`, so a
record it already had through that leader counts once.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import random
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from probes.exchange import ANSWER_GRACE, PROTOCOL, RECORD_LIMIT, RETRY_RATE, ExchangeFailed, _time_limits, join
from probes.limits import raise_open_files

__all__ = [
    "ACK_WAIT",
    "LEAD_MOST",
    "LEAD_QUIET",
    "channel_name",
    "compact",
    "expand",
    "listen_queue",
    "meet",
    "meeting_here",
    "pace",
]

LEAD_QUIET = 0.25  # seconds without a new follower after which the leader goes to rank 0 with its batch
LEAD_MOST = 2.0  # seconds a leader takes followers at most
ACK_WAIT = 5.0  # seconds a process waits for a leader to acknowledge its record before meeting rank 0 directly
_ELECTIONS = 20  # times a process tries to lead or follow on its host before meeting rank 0 directly
_ENVELOPE = ("protocol", "round", "job", "wait")  # what join adds to every message: not part of a record
_HERE = "here"  # a process's hint to its leader: how many of the host's processes meet it (meet's `local`)

_Joiner = Callable[..., Any]  # probes.exchange.join's signature


def channel_name(round_: str, job: str | None, address: str, port: int, host: str) -> bytes:
    """The abstract Unix socket name of a host's leader for one exchange: the same for every process of
    the job on that host, another for another round, job, endpoint or host."""
    key = json.dumps([job, address, port, host]).encode()
    return f"\0cluster-topology/{round_}/{hashlib.sha256(key).hexdigest()[:24]}".encode()


# -- compact batches ---------------------------------------------------------------------------------------


def compact(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`{"shared": ..., "records": [...]}`: the fields every record has alike once (one level down in
    `topology` too), and what differs in each. `expand` gives the records back exactly."""
    if not records:
        return {"shared": {}, "records": []}
    first = records[0]
    shared = {k: v for k, v in first.items() if k != "topology" and all(k in r and r[k] == v for r in records[1:])}
    tops = [r.get("topology") for r in records]
    inner: dict[str, Any] = {}
    if all(isinstance(t, dict) for t in tops):
        head: dict[str, Any] = tops[0]  # type: ignore[assignment]
        inner = {k: v for k, v in head.items() if all(k in t and t[k] == v for t in tops[1:])}  # type: ignore[operator,index]
    out = []
    for r in records:
        own = {k: v for k, v in r.items() if k not in shared and k != "topology"}
        top = r.get("topology")
        if isinstance(top, dict) and inner:
            own["topology"] = {k: v for k, v in top.items() if k not in inner}
        elif "topology" in r:
            own["topology"] = top
        out.append(own)
    if inner:
        shared["topology"] = inner
    return {"shared": shared, "records": out}


def expand(shared: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """One record of a batch, whole again."""
    out = {**shared, **record}
    inner = shared.get("topology")
    if isinstance(inner, dict) and isinstance(record.get("topology"), dict):
        out["topology"] = {**inner, **record["topology"]}
    return out


# -- a process's side ----------------------------------------------------------------------------------------


_ENCODER = json.JSONEncoder(separators=(",", ":"))  # json.dumps with options builds an encoder per call


def _line(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode() + b"\n"


def _read_line(sock: socket.socket, buffer: bytearray, deadline: float) -> dict[str, Any] | None:
    """The next JSON object from a blocking Unix socket; None at end of stream or on garbage; TimeoutError."""
    while b"\n" not in buffer:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        _time_limits(sock, remaining)  # in the kernel: a Python timeout polls first, one more trip for the GIL
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:  # SO_RCVTIMEO ran out
            raise TimeoutError from None
        except OSError:
            return None
        if not chunk:
            return None
        buffer += chunk
        if len(buffer) > RECORD_LIMIT + (1 << 20):
            return None
    end = buffer.index(b"\n")
    raw = bytes(buffer[:end])
    del buffer[: end + 1]
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class _Again(Exception):
    """The name was free again, or the leader went away: run the election again."""

    def __init__(self, lost: Mapping[str, Any] | None = None) -> None:
        super().__init__("again")
        self.lost = lost


class _Direct(Exception):
    """No host-local channel: meet rank 0 directly."""


def meet(
    address: str,
    port: int,
    message: Mapping[str, Any],
    *,
    round_: str,
    job: str | None,
    host: str,
    deadline: float,
    processes: int | None = None,
    nodes: int | None = None,
    strict_job: bool = True,
    answer_limit: int = RECORD_LIMIT,
    joiner: _Joiner = join,
    about: Callable[[Any], Mapping[str, Any]] | None = None,
    on_wait: Callable[[str, float], None] | None = None,
    relay: Callable[[Any, Mapping[str, Any]], Any] | None = None,
    local: int | None = None,
) -> Any:
    """Meet rank 0 at `address:port` through this host's leader, as the leader, or directly when no
    host-local channel can be made; return rank 0's answer or raise `ExchangeFailed`, as `join` does.

    `message` is this process's record (it gains an `id` when it has none); `host` names the channel.
    `processes` is how many processes the job has, `nodes` how many hosts (a leader's retries are paced
    for that many connections); `joiner` meets rank 0 (`join`; tests pass a wrapper). `about` and
    `on_wait` go to `join`; `about(None)` also gives the fields this process sends its leader beside its
    record (a follower has no connection of its own to rank 0), and a leader's `about(connected)` is
    its own record's, sent beside the batch. `about` returns a new mapping at every call (this one is
    kept and sent as it is).

    `relay(answer, record)`, when given, is what a process whose `record` rank 0's `answer` covered
    gets: a leader relays each follower its own part (rank 0 may answer a batch with something for
    each of its processes, and a follower needs only its own), keeps its own, and a process meeting
    rank 0 directly gets its part too. Without it every process gets rank 0's answer as it is (the
    check's verdict). `local` is how many processes of the host meet here, when the caller knows it
    (rank 0 listens instead, so its host has one fewer): a leader stops taking followers once the most
    any of them says came; without it a record's `topology.local_world_size` says it. A hint of when
    to stop waiting, nothing more: too high costs `LEAD_QUIET`, too low a second batch.
    """
    mine = dict(message)
    if "id" not in mine:
        mine["id"] = f"{random.getrandbits(64):016x}"  # tells records apart, guards nothing
    if about is not None:  # kept as it is: `about` gives a new mapping at every call
        mine.update(about(None))
    if local is not None:  # the leader's hint, sent to it beside the record (not on to rank 0)
        mine[_HERE] = local
    talk = {
        "round_": round_,
        "job": job,
        "deadline": deadline,
        "processes": processes,
        "strict_job": strict_job,
        "answer_limit": answer_limit,
        "about": about,
        "on_wait": on_wait,
    }
    rank0 = _Rank0(address, port, talk, joiner, nodes, relay)
    if not sys.platform.startswith("linux"):  # abstract names are Linux's
        return rank0.join(_strip(mine), leader=False, own=mine)
    try:
        return _meet(channel_name(round_, job, address, port, host), mine, rank0)
    except ExchangeFailed as exc:
        lost = mine.get("lost_leader")
        if lost is None:
            raise
        # rank 0 may have judged with the records the leader brought and stopped listening: say why
        raise ExchangeFailed(
            exc.kind,
            f"{exc.message} (this host's leader, {_whom(lost)}, took this process's "
            "record to rank 0 and went away before relaying its answer)",
        ) from None


def _meet(name: bytes, mine: dict[str, Any], rank0: _Rank0) -> Any:
    for _ in range(_ELECTIONS):
        if time.monotonic() >= rank0.talk["deadline"]:
            break
        try:
            return _elect(name, mine, rank0)
        except _Again as again:
            if again.lost is not None:
                mine["lost_leader"] = again.lost
            continue
        except _Direct:
            break
    return rank0.join(_strip(mine), leader=False, own=mine)


@attrs.frozen
class _Rank0:
    """How to meet rank 0: where, with `join`'s keywords, through `joiner`; `nodes` paces a leader's retries;
    `relay` as `meet` has it."""

    address: str
    port: int
    talk: dict[str, Any]
    joiner: _Joiner
    nodes: int | None
    relay: Callable[[Any, Mapping[str, Any]], Any] | None = None

    def join(self, message: Mapping[str, Any], *, leader: bool, own: Mapping[str, Any] | None = None) -> Any:
        """Rank 0's answer to `message`; for a process meeting it directly (`own`, its record), its part."""
        talk = {**self.talk, "processes": self.nodes or self.talk["processes"]} if leader else self.talk
        pace(talk["processes"], talk["deadline"])
        answer = self.joiner(self.address, self.port, message, **talk)
        return answer if own is None else self.part(answer, own)

    def part(self, answer: Any, record: Mapping[str, Any]) -> Any:
        """What the process of `record` gets of rank 0's `answer` (all of it, without `relay`)."""
        return answer if self.relay is None else self.relay(answer, record)


def listen_queue() -> int:
    """The most connections a listener's queue holds here (net.core.somaxconn; 4,096 by default since Linux 5.4)."""
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return 4096


def pace(connections: int | None, deadline: float) -> None:
    """Spread the first connection attempts of a job whose `connections` to rank 0 outnumber what its
    listen queue holds, over `connections / RETRY_RATE` seconds (16,384 host leaders: 1.6 s at most).

    Connections beyond a full queue are not refused: the kernel drops their SYN, and the connecting
    side sends it again after 1 s, then 3 s, 7 s...; tens of thousands connecting at once wait seconds
    that way, and a process that gives up meanwhile would look missing. A uniform spread at the rate
    rank 0 can take them avoids the drops; below the queue's size nothing waits."""
    if connections is None or connections <= listen_queue():
        return
    spread = connections / RETRY_RATE
    time.sleep(max(0.0, min(random.uniform(0, spread), deadline - time.monotonic() - 1.0)))  # noqa: S311


def _elect(name: bytes, mine: dict[str, Any], rank0: _Rank0) -> Any:
    """Follow the host's leader if one listens at `name`, else bind it and lead: one socket either way
    (most processes follow, and every socket call is a trip for the GIL where ranks are threads)."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        raise _Direct from None
    with sock:
        _time_limits(sock, ACK_WAIT)
        try:
            sock.connect(name)
        except (ConnectionRefusedError, FileNotFoundError):  # nobody listens there: lead
            pass
        except OSError:  # a leader whose queue stays full (EAGAIN after ACK_WAIT), or no such sockets
            raise _Direct from None
        else:
            return _follow(sock, mine, rank0.talk["deadline"])
        try:
            sock.bind(name)
            sock.listen(128)
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EINVAL):  # someone bound it meanwhile: follow them
                raise _Again from None
            raise _Direct from None
        return _Leader(sock, mine).lead(rank0)


def _follow(sock: socket.socket, mine: dict[str, Any], deadline: float) -> Any:
    buffer = bytearray()
    try:
        sock.sendall(_line({**mine, "protocol": PROTOCOL}))
        ack = _read_line(sock, buffer, time.monotonic() + ACK_WAIT)
    except TimeoutError:  # something holds the name but does not lead: go around it
        raise _Direct from None
    except OSError:
        raise _Again from None
    if ack is None:  # it closed before it took us: it was leaving, the name is free again
        raise _Again
    leader = ack.get("leader")
    if ack.get("protocol") != PROTOCOL or not isinstance(leader, dict):
        raise _Direct
    try:
        reply = _read_line(sock, buffer, deadline + 2 * ANSWER_GRACE)
    except TimeoutError:
        raise ExchangeFailed(
            "unanswered", f"this host's leader ({_whom(leader)}) took this process's record and never answered"
        ) from None
    if reply is None:  # it died, or was killed, after taking our record
        if time.monotonic() >= deadline:
            raise ExchangeFailed(
                "unanswered", f"this host's leader ({_whom(leader)}) went away before relaying rank 0's answer"
            )
        raise _Again(lost=leader)
    if "answer" in reply:
        return reply["answer"]
    failed = reply.get("failed")
    if isinstance(failed, dict):
        kind = str(failed.get("kind", "unanswered"))
        raise ExchangeFailed(kind, f"{failed.get('message', '?')} (this host's leader, {_whom(leader)}, met rank 0)")
    raise _Direct


def _whom(leader: Mapping[str, Any]) -> str:
    rank = leader.get("rank")
    who = "a process of unknown rank" if rank is None else f"rank {rank}"
    return f"{who}, pid {leader.get('pid', '?')} on {leader.get('host', '?')}"


class _Leader:
    """The host's leader: takes followers' records, joins rank 0 with them, relays the answer."""

    def __init__(self, listener: socket.socket, mine: dict[str, Any]) -> None:
        self.listener = listener
        self.mine = mine
        self.me = {"id": mine["id"], "rank": mine.get("rank"), "pid": os.getpid(), "host": mine.get("host")}
        self.ack = _line({"protocol": PROTOCOL, "leader": self.me})
        self.followers: list[tuple[socket.socket, dict[str, Any]]] = []

    def lead(self, rank0: _Rank0) -> Any:
        try:
            self._take(min(rank0.talk["deadline"], time.monotonic() + LEAD_MOST))
        finally:
            self.listener.close()  # the name is free: a later process leads a second batch
        # a follower that gave up on its acknowledgement (a leader slow under load) meets rank 0 itself:
        # its record must not come twice, or rank 0 may finish with the leader's copy before it arrives
        kept = []
        for sock, message in self.followers:
            if _alive(sock):
                kept.append((sock, message))
            else:
                sock.close()
        self.followers = kept
        records = [_strip(self.mine), *(_strip(m) for _, m in self.followers)]
        batch = {"host": self.mine.get("host"), "leader": self.me, **compact(records)}
        try:
            answer = rank0.join(batch, leader=True)
        except ExchangeFailed as exc:
            self._relay({"protocol": PROTOCOL, "failed": {"kind": exc.kind, "message": exc.message}})
            raise
        except BaseException:  # a follower sees the end before an answer: it meets rank 0 again
            for sock, _ in self.followers:
                sock.close()
            raise
        if rank0.relay is None:
            self._relay({"protocol": PROTOCOL, "answer": answer})
        else:  # each follower its own part of the batch's answer
            self._relay_each(lambda record: {"protocol": PROTOCOL, "answer": rank0.part(answer, record)})
        return rank0.part(answer, self.mine)

    def _take(self, until: float) -> None:
        """Take followers until as many records as the largest count among them claims (meet's `local`,
        else `local_world_size`: a hint of when to stop waiting, nothing more), LEAD_QUIET without a
        newcomer, or `until`. Blocking calls bounded in the kernel, one follower at a time: a follower
        sends its record as it connects, and no selector means fewer system calls, each a trip for the
        GIL where ranks are threads."""
        expected = _expected(self.mine)  # meet's `local`, carried in the record's hint
        if expected is not None and expected > 64:  # a host of many processes: room for a connection each
            raise_open_files(expected)
        last = time.monotonic()
        while expected is None or 1 + len(self.followers) < expected:
            wait = min(until, last + LEAD_QUIET) - time.monotonic()
            if wait <= 0:
                break
            _time_limits(self.listener, wait)  # accept obeys SO_RCVTIMEO
            try:
                sock, _ = self.listener.accept()
            except OSError:  # the wait ran out (EAGAIN)
                break
            last = time.monotonic()
            got = self._read(sock, min(until, last + ACK_WAIT))
            size = None if got is None else _expected(got)
            if size is not None:
                expected = max(expected or 0, size)
        self.listener.setblocking(False)  # the last ones in the queue: take whoever already spoke
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            sock.setblocking(True)
            self._read(sock, time.monotonic() + 0.05)

    def _read(self, sock: socket.socket, deadline: float) -> dict[str, Any] | None:
        """A follower's record, acknowledged and kept; None (and the connection closed: the follower
        elects again) for one gone, garbled or too slow."""
        buffer = bytearray()
        try:
            message = _read_line(sock, buffer, deadline)
        except TimeoutError:
            message = None
        if not (
            isinstance(message, dict) and message.get("protocol") == PROTOCOL and isinstance(message.get("id"), str)
        ):
            sock.close()
            return None
        try:
            sock.sendall(self.ack)  # bounded by _read_line's time limits
        except OSError:
            sock.close()
            return None
        self.followers.append((sock, message))
        return message

    def _relay(self, reply: Mapping[str, Any]) -> None:
        line = _line(reply)
        self._relay_each(lambda _: line)

    def _relay_each(self, reply: Callable[[Mapping[str, Any]], Mapping[str, Any] | bytes]) -> None:
        """Send each follower `reply(its record)` (a line already encoded, or an object to encode), then close."""
        for sock, message in self.followers:
            said = reply(message)
            with contextlib.suppress(OSError):
                _time_limits(sock, 5.0)
                sock.sendall(said if isinstance(said, bytes) else _line(said))
            sock.close()


def _alive(sock: socket.socket) -> bool:
    """Whether the follower still holds its end (it hangs up when it gives up on its acknowledgement)."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:  # nothing to read, and open
        return True
    except OSError:
        return False


def _strip(message: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in _ENVELOPE and k != _HERE}


def meeting_here(local_size: int | None, rank: int, local_rank: int | None) -> int | None:
    """How many processes of a host meet its leader, for `meet`'s `local`: the host's `local_size`, less
    rank 0 where it is there (it listens instead and never meets its host's leader). Local ranks follow
    global ones on every launcher, so a process whose `local_rank` is its `rank` shares rank 0's host;
    elsewhere the count stays `local_size` (a leader that counts on one process too many waits
    `LEAD_QUIET` for it)."""
    if local_size is None:
        return None
    return local_size - 1 if local_rank == rank and local_size > 1 else local_size


def _expected(message: Mapping[str, Any]) -> int | None:
    """How many of the host's processes the sender of `message` says meet its leader: meet's `local`,
    sent beside its record, else its record's `topology.local_world_size`."""
    top = message.get("topology")
    size = top.get("local_world_size") if isinstance(top, dict) else None
    return _count(message.get(_HERE)) or _count(size)


def _count(value: Any) -> int | None:
    """`value` when it is a sane count of processes, else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1_000_000 else None
