"""Host leaders: the processes of one host meet rank 0 through one connection, not one each.

Rank 0 of a 100,000-process job cannot hold a TCP connection per process on the limits clusters ship
with (1,024 open files is common), and tens of thousands of simultaneous connects overflow its listen
queue. So the processes of a host first meet each other over an abstract Unix socket (Linux) named by
the exchange's round, the job, the endpoint and the host; whoever binds the name first leads. A claimed
local rank decides nothing: the check exists to catch wrong ones. The leader takes its followers'
records for a moment, stops listening (a later process binds the name again and leads a second batch),
joins rank 0 through `probes.exchange.join` with the batch, and relays rank 0's answer, or its own
failure to meet rank 0, to every follower. The wire (one JSON object per line, as over TCP):

    process -> leader   the record it would send rank 0, with a random "id", in two lines (`split`):
                        {"protocol", its own fields (meet's `personal`), "here"?}, then the rest
    leader -> process   once, at the end: {"protocol", "leader": {...}, "answer": ..., "about"?: {...}}
                        or {"protocol", "leader": {...}, "failed": {"kind", "message"}, "about"?: {...}}
                        ("about": meet's `tell` of what join's `about` said once the leader connected)
    leader -> rank 0    {"protocol", "round", "job", "wait", "host", "leader": {...},
                         "shared": {fields alike in every record, one level down in "topology" too},
                         "records": [{what differs}, ...]}

A leader whose followers' rests are its own, byte for byte, sends that rest once as the batch's
"shared" and their own fields as its "records" without reading the rests; a host whose processes
differ beyond their own fields is compacted field by field (`compact`).

The leader sends a follower nothing before the answer: every line a waiting process receives wakes
it, and where thousands of processes are threads of one (the benchmarks) each wake-up is a trip for
the interpreter's lock. What a follower needs to know meanwhile, the kernel tells it: whether its
record was read (`SIOCOUTQ` on its end: the bytes its peer has not read), who holds the name
(`SO_PEERCRED`: the leader's pid), and how the holder went away: a reset when it closed with the
record unread (it never took it: elect again), an end of stream when it had read it (it died after
taking it: meet rank 0 again, saying which leader it lost, `lost_leader`; rank 0 keys records by
`id`, so a record it already had through that leader counts once).

A process meets rank 0 directly, as before, when it cannot make the channel (no abstract sockets, or
a name held by something that has not read its record `TAKE_WAIT` seconds, or a quarter of the time
left, after it was sent: a process that holds the name and does not lead).
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import random
import select
import socket
import struct
import sys
import termios
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from probes.exchange import (
    ANSWER_GRACE,
    PROTOCOL,
    RECORD_LIMIT,
    RETRY_RATE,
    ExchangeFailed,
    _line,
    _Lines,
    _parse,
    _time_limit,
    join,
)
from probes.limits import raise_open_files

__all__ = [
    "LEAD_MOST",
    "LEAD_QUIET",
    "TAKE_WAIT",
    "channel_name",
    "compact",
    "expand",
    "listen_queue",
    "meet",
    "meeting_here",
    "pace",
    "split",
    "spread",
]

LEAD_QUIET = 0.25  # seconds without a new follower after which the leader goes to rank 0 with its batch
LEAD_MOST = 2.0  # seconds a leader takes followers at most
TAKE_WAIT = 5.0  # seconds at least before a process looks whether the holder of its host's channel read its record
_ELECTIONS = 20  # times a process tries to lead or follow on its host before meeting rank 0 directly
_ENVELOPE = ("protocol", "round", "job", "wait")  # what join adds to every message: not part of a record
_BIND_PAUSES = (0.001, 0.002, 0.004, 0.008, 0.016)  # seconds between asks of a name bound and not listening yet
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


def split(record: Mapping[str, Any], personal: Collection[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what is the process's own, the rest): `personal` names the fields of its own (`"topology.x"`: `x`
    one level down in `topology`). `expand(rest, own)` is `record` again. The processes of one host
    that agree send the same rest, byte for byte: a leader compares it and keeps one."""
    inner = {name.removeprefix("topology.") for name in personal if name.startswith("topology.")}
    own = {k: v for k, v in record.items() if k in personal}
    rest = {k: v for k, v in record.items() if k not in personal}
    top = rest.get("topology")
    if inner and isinstance(top, dict) and not inner.isdisjoint(top):
        own["topology"] = {k: v for k, v in top.items() if k in inner}
        rest["topology"] = {k: v for k, v in top.items() if k not in inner}
    return own, rest


def expand(shared: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """One record of a batch, whole again."""
    out = {**shared, **record}
    inner = shared.get("topology")
    if isinstance(inner, dict) and isinstance(record.get("topology"), dict):
        out["topology"] = {**inner, **record["topology"]}
    return out


# -- a process's side ----------------------------------------------------------------------------------------


_LINE_LIMIT = RECORD_LIMIT + (1 << 20)  # bytes a line on the host-local channel may reach without its newline


def _read_line(lines: _Lines, deadline: float) -> dict[str, Any] | None:
    """The next JSON object on the host-local channel; None at end of stream, on garbage or past
    `_LINE_LIMIT`; TimeoutError; OSError as recv raised it (ConnectionResetError: the peer closed with
    what we sent unread)."""
    try:
        raw = lines.next(deadline, _LINE_LIMIT)
    except ValueError:
        return None
    return None if raw is None else _parse(raw)


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
    personal: Collection[str] = (),
    tell: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    heard: Callable[[Mapping[str, Any]], None] | None = None,
) -> Any:
    """Meet rank 0 at `address:port` through this host's leader, as the leader, or directly when no
    host-local channel can be made; return rank 0's answer or raise `ExchangeFailed`, as `join` does.

    `message` is this process's record (it gains an `id` when it has none); `host` names the channel.
    `processes` is how many processes the job has, `nodes` how many hosts (a leader's retries are paced
    for that many connections); `joiner` meets rank 0 (`join`; tests pass a wrapper). `about` and
    `on_wait` go to `join`, so only a process that connects to rank 0 asks `about(connected)`: a leader,
    whose answer describes its host (sent beside the batch, rank 0 gives it to every record of the
    batch), or a process meeting rank 0 directly. A follower asks nothing: its leader relays
    `tell(what its about said)` with the answer (nothing without `tell`), and the follower hands that to
    `heard`: what the leader's connection said is its host's, and the processes of a host share one
    leader, however their environments differ.

    `relay(answer, record)`, when given, is what a process whose `record` rank 0's `answer` covered
    gets: a leader relays each follower its own part (rank 0 may answer a batch with something for
    each of its processes, and a follower needs only its own), keeps its own, and a process meeting
    rank 0 directly gets its part too. Without it every process gets rank 0's answer as it is (the
    check's verdict). `local` is how many processes of the host meet here, when the caller knows it
    (rank 0 listens instead, so its host has one fewer): a leader stops taking followers once the most
    any of them says came; without it a record's `topology.local_world_size` says it. A hint of when
    to stop waiting, nothing more: too high costs `LEAD_QUIET`, too low a second batch.

    `personal` names the record's fields that are each process's own (`split`; `id` and `lost_leader`
    always are): a follower sends them apart from the rest, and a leader whose followers' rests are its
    own byte for byte sends that rest once and their own fields each, without reading the rest; a host
    whose processes differ beyond them is compacted field by field (`compact`), as correct and slower.
    """
    mine = dict(message)
    if "id" not in mine:
        mine["id"] = f"{random.getrandbits(64):016x}"  # tells records apart, guards nothing
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
    personal = frozenset({*personal, "id", "lost_leader"})
    rank0 = _Rank0(address, port, talk, joiner, nodes, personal, relay, tell, heard)
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
    `relay`, `personal`, `tell` and `heard` as `meet` has them."""

    address: str
    port: int
    talk: dict[str, Any]
    joiner: _Joiner
    nodes: int | None
    personal: frozenset[str]
    relay: Callable[[Any, Mapping[str, Any]], Any] | None = None
    tell: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
    heard: Callable[[Mapping[str, Any]], None] | None = None

    def join(
        self,
        message: Mapping[str, Any],
        *,
        leader: bool,
        own: Mapping[str, Any] | None = None,
        said: dict[str, Any] | None = None,
    ) -> Any:
        """Rank 0's answer to `message`; for a process meeting it directly (`own`, its record), its part.
        `said` gets `tell` of what `about` said on the connection that carried it (a leader relays that)."""
        talk = {**self.talk, "processes": self.nodes or self.talk["processes"]} if leader else self.talk
        about, tell = talk["about"], self.tell
        if said is not None and about is not None and tell is not None:

            def keep(connected: Any) -> Mapping[str, Any]:  # join asks again on every new connection
                fields: Mapping[str, Any] = about(connected)
                said.clear()
                said.update(tell(fields))
                return fields

            talk = {**talk, "about": keep}
        pace(talk["processes"], talk["deadline"])
        answer = self.joiner(self.address, self.port, message, **talk)
        return answer if own is None else self.part(answer, own)

    def part(self, answer: Any, record: Mapping[str, Any]) -> Any:
        """What the process of `record` gets of rank 0's `answer` (all of it, without `relay`)."""
        return answer if self.relay is None else self.relay(answer, record)


@functools.cache
def listen_queue() -> int:
    """The most connections a listener's queue holds here (net.core.somaxconn; 4,096 by default since Linux 5.4),
    read once: every leader of a large job asks before it connects (a file read costs a leader of the
    benchmark's 16,384 a fifth of its meeting)."""
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
    seconds = spread(connections)
    if seconds > 0:
        time.sleep(max(0.0, min(random.uniform(0, seconds), deadline - time.monotonic() - 1.0)))  # noqa: S311


def spread(connections: int | None) -> float:
    """The seconds over which `pace` spreads `connections` first attempts: `connections / RETRY_RATE`
    beyond what the listen queue holds, none below."""
    if connections is None or connections <= listen_queue():
        return 0.0
    return connections / RETRY_RATE


def _elect(name: bytes, mine: dict[str, Any], rank0: _Rank0) -> Any:
    """Follow the host's leader if one listens at `name`, else bind it and lead: one socket either way
    (most processes follow, and every socket call is a trip for the GIL where ranks are threads). A name
    bound and not listening yet (its binder is between bind and listen) is asked again on the same
    socket a moment later, not through a new election."""
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError:
        raise _Direct from None
    with sock:
        _time_limit(sock, socket.SO_SNDTIMEO, TAKE_WAIT)  # connect and a follower's sendall obey it
        for pause in _BIND_PAUSES:
            try:
                sock.connect(name)
            except (ConnectionRefusedError, FileNotFoundError):  # nobody listens there: lead
                pass
            except OSError:  # a leader whose queue stays full (EAGAIN after TAKE_WAIT), or no such sockets
                raise _Direct from None
            else:
                return _follow(sock, mine, rank0)
            try:
                sock.bind(name)
                sock.listen(128)
            except OSError as exc:
                if exc.errno not in (errno.EADDRINUSE, errno.EINVAL):
                    raise _Direct from None
                time.sleep(pause)  # someone bound it meanwhile: it listens in a moment (this yields it the GIL)
                continue
            return _Leader(sock, mine, rank0.personal).lead(rank0)
    raise _Again


def _follow(sock: socket.socket, mine: dict[str, Any], rank0: _Rank0) -> Any:
    """Hand the leader at the other end of `sock` this process's record, its own fields first and the
    rest on a line of its own (`split`), and wait for its one reply."""
    deadline = rank0.talk["deadline"]
    own, rest = split(_strip(mine), rank0.personal)
    if _HERE in mine:
        own[_HERE] = mine[_HERE]
    try:
        sock.sendall(_line({**own, "protocol": PROTOCOL}) + _line(rest))
    except OSError:  # it went away as we came
        raise _Again from None
    lines = _Lines(sock)
    last = deadline + 2 * ANSWER_GRACE
    # one look at whether the holder took the record: late enough that a follower of a leader waiting on
    # rank 0 seldom wakes for it, early enough that three quarters of the time are left to meet rank 0
    look = time.monotonic() + max(TAKE_WAIT, (deadline - time.monotonic()) / 4)
    try:
        try:
            reply = _read_line(lines, min(last, look))
        except TimeoutError:
            if _unread(sock):  # the record still waits in the holder's queue: it does not lead
                raise _Direct from None
            reply = _read_line(lines, last)
    except TimeoutError:
        raise ExchangeFailed(
            "unanswered",
            f"this host's leader ({_whom(_holder(sock, mine))}) took this process's record and never answered",
        ) from None
    except OSError:  # a reset: it closed with the record unread, so it never took it; the name is free again
        raise _Again from None
    if reply is None:  # it went away after it read our record: it died, or was killed
        if time.monotonic() >= deadline:
            raise ExchangeFailed(
                "unanswered",
                f"this host's leader ({_whom(_holder(sock, mine))}) went away before relaying rank 0's answer",
            )
        raise _Again(lost=_holder(sock, mine))
    told = reply.get("about")
    if rank0.heard is not None and isinstance(told, dict):  # what the leader's connection said of this host
        rank0.heard(told)
    if "answer" in reply:
        return reply["answer"]
    failed = reply.get("failed")
    if isinstance(failed, dict):
        kind = str(failed.get("kind", "unanswered"))
        said = reply.get("leader")
        leader = {**_holder(sock, mine), **said} if isinstance(said, dict) else _holder(sock, mine)
        raise ExchangeFailed(kind, f"{failed.get('message', '?')} (this host's leader, {_whom(leader)}, met rank 0)")
    raise _Direct


def _holder(sock: socket.socket, mine: Mapping[str, Any]) -> dict[str, Any]:
    """Who holds the channel at the other end of `sock`, as the kernel says: its pid (SO_PEERCRED, set when
    we connected: it holds after the peer went away), on this process's host."""
    try:
        pid, _, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except OSError:
        return {"host": mine.get("host")}
    return {"pid": pid, "host": mine.get("host")}


def _unread(sock: socket.socket) -> bool:
    """Whether what this end sent still waits, unread, in the peer's queue (SIOCOUTQ, unix(7))."""
    queued = array.array("i", [0])
    try:  # SIOCOUTQ has TIOCOUTQ's number (linux/sockios.h); Python's socket module names neither
        fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, queued, True)
    except OSError:
        return False
    return queued[0] > 0


def _whom(leader: Mapping[str, Any]) -> str:
    rank = leader.get("rank")
    who = "a process of unknown rank" if rank is None else f"rank {rank}"
    return f"{who}, pid {leader.get('pid', '?')} on {leader.get('host', '?')}"


class _Leader:
    """The host's leader: takes followers' records, joins rank 0 with them, relays the answer."""

    def __init__(self, listener: socket.socket, mine: dict[str, Any], personal: frozenset[str]) -> None:
        self.listener = listener
        self.mine = mine
        self.me = {"id": mine["id"], "rank": mine.get("rank"), "pid": os.getpid(), "host": mine.get("host")}
        self.own, self.rest = split(_strip(mine), personal)
        self.alike = _line(self.rest)[:-1]  # the rest as a follower that agrees with this one sends it
        # each follower: its connection, its own fields (and the hint, and the envelope), its rest as sent
        self.followers: list[tuple[socket.socket, dict[str, Any], bytes]] = []

    def lead(self, rank0: _Rank0) -> Any:
        try:
            self._take(min(rank0.talk["deadline"], time.monotonic() + LEAD_MOST))
        finally:
            self.listener.close()  # the name is free: a later process leads a second batch
        # a follower that found its record unread (a leader slow under load) hung up and meets rank 0
        # itself: its record must not come twice, or rank 0 may finish with this copy before it arrives
        gone = _hung_up([sock for sock, _, _ in self.followers])
        for sock, _, _ in self.followers:
            if sock.fileno() in gone:
                sock.close()
        self.followers = [f for f in self.followers if f[0].fileno() >= 0]
        said: dict[str, Any] = {}  # what `about` said of this host once connected, as `tell` relays it
        try:
            answer = rank0.join(
                {"host": self.mine.get("host"), "leader": self.me, **self._batch()}, leader=True, said=said
            )
        except ExchangeFailed as exc:
            failed = {"kind": exc.kind, "message": exc.message}
            self._relay({"protocol": PROTOCOL, "leader": self.me, "failed": failed, **_told(said)})
            raise
        except BaseException:  # a follower sees the end before an answer: it meets rank 0 again
            for sock, _, _ in self.followers:
                sock.close()
            raise
        if rank0.relay is None:
            self._relay({"protocol": PROTOCOL, "leader": self.me, "answer": answer, **_told(said)})
        else:  # each follower its own part of the batch's answer, from its whole record
            self._relay_each(
                lambda own, rest: {
                    "protocol": PROTOCOL,
                    "leader": self.me,
                    "answer": rank0.part(answer, expand(_parse(rest) or {}, _strip(own))),
                    **_told(said),
                }
            )
        return rank0.part(answer, self.mine)

    def _batch(self) -> dict[str, Any]:
        """`{"shared", "records"}`: where every follower's rest is this leader's, byte for byte (a host
        whose processes agree), that rest once and each process's own fields, none of the rests read;
        else every record whole again, compacted field by field."""
        if all(rest == self.alike for _, _, rest in self.followers):
            return {"shared": self.rest, "records": [self.own, *(_strip(m) for _, m, _ in self.followers)]}
        whole = [expand(self.rest, self.own)]
        whole += [expand(_parse(rest) or {}, _strip(m)) for _, m, rest in self.followers]
        return compact(whole)

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
            _time_limit(self.listener, socket.SO_RCVTIMEO, wait)  # accept obeys it
            try:
                sock, _ = self.listener.accept()
            except OSError:  # the wait ran out (EAGAIN)
                break
            last = time.monotonic()
            got = self._read(sock, min(until, last + TAKE_WAIT))
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
        """A follower's record (its own fields, then its rest), kept (it hears nothing until the answer);
        None, the connection closed, for one gone, garbled or too slow (with its record unread it sees a
        reset and elects again), and for a record of another protocol, told to meet rank 0 itself."""
        lines = _Lines(sock)
        try:
            first = lines.next(deadline, _LINE_LIMIT)
            rest = None if first is None else lines.next(deadline, _LINE_LIMIT)
        except (TimeoutError, OSError, ValueError):
            first = rest = None
        message = None if first is None else _parse(first)
        ours = isinstance(message, dict) and message.get("protocol") == PROTOCOL and isinstance(message.get("id"), str)
        if ours and rest is not None and message is not None:
            self.followers.append((sock, message, rest))
            return message
        if isinstance(message, dict):  # one of ours that this leader cannot carry: a reply without an answer
            with contextlib.suppress(OSError):
                _time_limit(sock, socket.SO_SNDTIMEO, 5.0)
                sock.sendall(_line({"protocol": PROTOCOL, "leader": self.me}))
        sock.close()
        return None

    def _relay(self, reply: Mapping[str, Any]) -> None:
        line = _line(reply)
        self._relay_each(lambda _, __: line)

    def _relay_each(self, reply: Callable[[Mapping[str, Any], bytes], Mapping[str, Any] | bytes]) -> None:
        """Send each follower `reply(its own fields, its rest as sent)` (a line already encoded, or an object
        to encode), then close."""
        for sock, message, rest in self.followers:
            said = reply(message, rest)
            with contextlib.suppress(OSError):
                _time_limit(sock, socket.SO_SNDTIMEO, 5.0)
                sock.sendall(said if isinstance(said, bytes) else _line(said))
            sock.close()


def _hung_up(socks: Sequence[socket.socket]) -> set[int]:
    """The file descriptors among `socks` whose followers hung up: one poll for all of them (a follower
    sends nothing after its record, so anything readable is its end)."""
    if not socks:
        return set()
    poller = select.poll()
    for sock in socks:
        poller.register(sock, select.POLLIN | select.POLLRDHUP)
    return {fd for fd, _ in poller.poll(0)}


def _told(said: Mapping[str, Any]) -> dict[str, Any]:
    """A leader's reply's `about`: what `tell` gives of what its connection said of the host, if anything."""
    return {"about": dict(said)} if said else {}


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
