"""The meeting at the main endpoint: every process sends one record to rank 0, rank 0 answers each.

Used by the preflight (`cluster-topology check`) and by `cluster-topology exec` (probes/tcp.py answers the
MPI source's collective with it). Rank 0 listens on `main_port`; every other process connects to
`main_address:main_port`, retrying with backoff until the deadline (rank 0 may start last).

The protocol, one JSON object per line (never pickle: what arrives is parsed as data):

    process -> rank 0, at once           {"protocol": PROTOCOL, "round": R, "job": J, "wait": s, "rank": r, ...}
    rank 0 -> process                    {"protocol": PROTOCOL, "round": R, "job": J}     the greeting
    rank 0 -> process                    {"protocol": PROTOCOL, "answer": ...} or {"rejected": why}

A process sends its record as soon as it has connected, then reads the greeting before anything
else: a process that reached something else (a squatter on the port, another program) says so, and
trusts nothing that did not greet it (a record is harmless to whoever reads it). Rank 0 greets a
member together with its answer, in one send, while processes keep arriving; it greets a member on
its own only when the gather stalls (nobody arrived for `GREET_AFTER` seconds: it waits for a
missing rank) or before the member's patience runs out (`wait`, the seconds it waits for a
greeting; it gives up GREET_AFTER after that), and a peer that sent nothing GREET_AFTER after it
connected. Greeting each process at once cost rank 0 a send and every process a wake-up: with 4,096
ranks in threads, 2.3 s of rank 0's time in `send`. `round` keeps
two exchanges on one port apart (the check, then `exec`'s collective); `job` is the job's identity,
so a stale process of another job is turned away, not counted.

Scale: rank 0 serves every connection in one selector loop (a slow or silent connection holds
nothing but its socket), reads at most `RECORD_LIMIT` bytes from one connection (a record is small;
a stray connection cannot make rank 0 hold more), and each process gets its own answer, not
everyone's records: O(N) bytes at rank 0 in and out, with no cap on N.

The port is free again when the exchange ends: rank 0 closes its listener once it has gathered, the
processes close first after reading their answer (their ephemeral ports keep the TIME_WAIT), and
rank 0 resets (SO_LINGER 0) the connections that never became members, so that training's own
rendezvous can bind the port at once.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import json
import os
import selectors
import socket
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from probes._backoff import Backoff

__all__ = [
    "ANSWER_GRACE",
    "GREETING_LIMIT",
    "GREET_AFTER",
    "NAME_RETRY_CAP",
    "PROTOCOL",
    "RECORD_LIMIT",
    "RETRY_CAP",
    "RETRY_RATE",
    "WAIT_EVERY",
    "Arrival",
    "Connected",
    "ExchangeFailed",
    "Server",
    "join",
    "resolve_name",
    "retry_cap",
]

PROTOCOL = "cluster-topology-exchange/1"
RECORD_LIMIT = 64 * 1024  # bytes one connection may send rank 0: a record is a few hundred
GREETING_LIMIT = 64 * 1024  # bytes a process reads before it must have seen rank 0's greeting
GREET_AFTER = 0.5  # seconds after which a connection that sent nothing is greeted on its own
ANSWER_GRACE = 5.0  # seconds a greeted process waits past its deadline: rank 0's may be later
RETRY_CAP = 0.1  # seconds between connection attempts at most, in a small job: rank 0 may start last
RETRY_RATE = 10_000  # connection attempts a second the whole job aims at rank 0's port at most while it is not up
_LINGER_ZERO = struct.pack("ii", 1, 0)


class ExchangeFailed(Exception):
    """The meeting failed for this process. `kind` says how:

    - ``bind``: rank 0 cannot listen on the port (another process holds it);
    - ``unresolved``: the endpoint's name did not resolve until the deadline;
    - ``unreachable``: nothing listened at the endpoint until the deadline;
    - ``foreign``: something at the endpoint did not greet as rank 0 of this exchange does;
    - ``stranger``: rank 0 there belongs to another job (or turned this process away);
    - ``unanswered``: rank 0 greeted, then gave no answer by the deadline.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@attrs.frozen
class Arrival:
    """One process's message as rank 0 received it (`message` is the parsed JSON object), its peer, and the
    `local` address of rank 0's that the process reached (the one training's connections will reach too)."""

    message: Mapping[str, Any]
    peer: str
    local: str = ""


_ENCODER = json.JSONEncoder(separators=(",", ":"))  # json.dumps with options builds an encoder per call


def _line(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode() + b"\n"


def _reset(conn: socket.socket) -> None:
    """Close without a TIME_WAIT on rank 0's side of the port."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)
    conn.close()


class _Conn:
    __slots__ = ("accepted", "events", "greet_at", "greeted", "inbox", "local", "outbox", "peer", "sock", "state")

    def __init__(self, sock: socket.socket, peer: str, local: str = "") -> None:
        self.sock, self.peer, self.local = sock, peer, local
        self.inbox = bytearray()
        self.outbox = bytearray()
        self.state = "reading"  # reading -> member | dropping
        self.accepted = time.monotonic()
        self.greet_at = self.accepted + GREET_AFTER  # a connection that sends nothing is greeted then
        self.greeted = False
        self.events = selectors.EVENT_READ  # as registered: epoll_ctl only when they change


def _patience(message: Mapping[str, Any]) -> float:
    """Seconds the process said it would wait for its greeting (`wait`), GREET_AFTER twice when it did not say."""
    wait = message.get("wait")
    if isinstance(wait, (int, float)) and not isinstance(wait, bool) and 0 <= wait < 1e9:
        return float(wait)
    return 2 * GREET_AFTER


class Server:
    """Rank 0's side: listen on `port` (all addresses), greet every connection, gather, answer.

    `hello` is this exchange's identity (`round`, `job`); the constructor raises `ExchangeFailed`
    (kind ``bind``) when the port cannot be listened on.
    """

    def __init__(self, port: int, *, round_: str, job: str | None, backlog: int = 4096) -> None:
        self.port, self.round, self.job = port, round_, job
        self._greeting = _line({"protocol": PROTOCOL, "round": round_, "job": job})
        family = socket.AF_INET6 if socket.has_dualstack_ipv6() else socket.AF_INET
        try:
            self._listener: socket.socket | None = socket.create_server(
                ("", port), family=family, backlog=backlog, dualstack_ipv6=family == socket.AF_INET6
            )
        except OSError as exc:
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ExchangeFailed("bind", f"cannot listen on port {port}: {why}") from None
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._members: list[tuple[_Conn, Arrival]] = []
        self._greetings: list[tuple[float, int, _Conn]] = []  # (when, order, connection): a heap
        self._order = itertools.count()
        self._waiting: list[_Conn] = []  # members not greeted yet
        self._last_arrival = time.monotonic()
        self.dropped = 0  # connections that sent garbage, too much, or were turned away
        self._now: bytes | None = None  # the answer every member gets at once (answer_now), encoded
        self._paused_until = 0.0  # the listener rests until then after accept ran out of descriptors
        self.out_of_files = 0  # times accept failed for want of a file descriptor (EMFILE, ENFILE)

    # -- gathering -------------------------------------------------------------------------------

    def gather(
        self,
        *,
        deadline: float,
        admit: Callable[[Mapping[str, Any]], str | None],
        done: Callable[[list[Arrival]], bool],
        progress: Callable[[list[Arrival]], None] | None = None,
        every: float = 5.0,
        starved: Callable[[], None] | None = None,
    ) -> list[Arrival]:
        """Serve connections until `done(arrivals)` or the deadline; return the members' messages.

        `admit(message)` returns None to take a well-formed message of this round, or why it is turned
        away (the process gets ``{"rejected": why}``). `progress(arrivals)` is called every `every` s;
        `starved()` once, the first time accept fails for want of a file descriptor (it may call
        `answer_now`, so that the processes waiting hear why at once).
        """
        arrivals: list[Arrival] = [a for _, a in self._members]
        next_report = time.monotonic() + every
        told = False
        while not done(arrivals):
            now = time.monotonic()
            if now >= deadline:
                break
            if self.out_of_files and not told:
                told = True
                if starved is not None:
                    starved()
            if self._paused_until and now >= self._paused_until and self._listener is not None:
                self._paused_until = 0.0
                self._selector.register(self._listener, selectors.EVENT_READ)
            if progress is not None and now >= next_report:
                progress(arrivals)
                next_report = now + every
            self._greet_the_due(now)
            wait = min(deadline, next_report if progress is not None else deadline) - now
            if self._greetings:
                wait = min(wait, self._greetings[0][0] - now)
            if self._waiting:
                wait = min(wait, self._last_arrival + GREET_AFTER - now)
            if self._paused_until:
                wait = min(wait, self._paused_until - now)
            for key, events in self._selector.select(max(0.0, wait)):
                if key.fileobj is self._listener:
                    self._accept()
                    continue
                conn: _Conn = key.data
                if events & selectors.EVENT_WRITE:
                    self._flush(conn)
                if events & selectors.EVENT_READ and conn.state != "closed":
                    arrival = self._read(conn, admit)
                    if arrival is not None:
                        arrivals.append(arrival)
        self._stop_listening()
        return arrivals

    def _accept(self) -> None:
        while self._listener is not None:
            try:
                sock, address = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # the peer went away before we took it (ECONNABORTED), or fd exhaustion
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    # the connection stays in the queue: rest the listener (epoll would report it at once
                    # again) until a descriptor may be free
                    self.out_of_files += 1
                    self._paused_until = time.monotonic() + 0.05
                    with contextlib.suppress(KeyError, ValueError):
                        self._selector.unregister(self._listener)
                return
            sock.setblocking(False)
            try:
                local = _plain(sock.getsockname()[0])
            except OSError:
                local = ""
            conn = _Conn(sock, f"{address[0]}:{address[1]}", local)
            self._selector.register(sock, selectors.EVENT_READ, conn)
            heapq.heappush(self._greetings, (conn.greet_at, next(self._order), conn))

    def _greet(self, conn: _Conn) -> None:
        if not conn.greeted:
            conn.greeted = True
            conn.outbox[:0] = self._greeting

    def _greet_the_due(self, now: float) -> None:
        """Greet on its own a connection that has waited long enough for it: one that sent nothing
        (GREET_AFTER after it was accepted), and members whose answer waits for other processes, so
        that they know rank 0 lives: all of them once no process has arrived for GREET_AFTER (the
        gather waits for someone), and each before its own patience runs out. While processes keep
        arriving, the members' greeting rides with their answer: a greeting apiece cost rank 0 a send
        and every process a wake-up (4,096 ranks in threads: a third of the check's time)."""
        while self._greetings and self._greetings[0][0] <= now:
            when, _, conn = heapq.heappop(self._greetings)
            if when == conn.greet_at and conn.state in ("reading", "member") and not conn.greeted:
                self._greet(conn)
                self._flush(conn)
        if self._waiting and now - self._last_arrival >= GREET_AFTER:
            for conn in self._waiting:
                if conn.state == "member" and not conn.greeted:
                    self._greet(conn)
                    self._flush(conn)
            self._waiting.clear()

    def _flush(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbox) if conn.outbox else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self._drop(conn)
            return
        del conn.outbox[:sent]
        self._watch(conn)

    def _watch(self, conn: _Conn) -> None:
        """Wait for the connection to be writable too while its outbox holds something (one epoll_ctl
        when that changes, none otherwise: each costs a system call)."""
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbox else 0)
        if events != conn.events:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.modify(conn.sock, events, conn)
            conn.events = events

    def _read(  # noqa: PLR0911 - each early return is one state of the connection
        self, conn: _Conn, admit: Callable[[Mapping[str, Any]], str | None]
    ) -> Arrival | None:
        try:
            chunk = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            chunk = b""
        if conn.state == "dropping":  # turned away: it reads why, then hangs up first
            if not chunk:
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(conn.sock)
                conn.state = "closed"
                conn.sock.close()
            return None
        if conn.state == "member":
            if not chunk:  # a member that hung up early: its record stays, its answer will not arrive
                conn.state = "gone"
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(conn.sock)
            return None
        if not chunk:
            self._drop(conn)
            return None
        conn.inbox += chunk
        end = conn.inbox.find(b"\n")
        if end < 0:
            if len(conn.inbox) > RECORD_LIMIT:
                self._drop(conn)  # more than any record: garbage, or a hostile peer
            return None
        if end > RECORD_LIMIT:
            self._drop(conn)
            return None
        try:
            message = json.loads(bytes(conn.inbox[:end]))
        except ValueError:
            message = None
        if not (
            isinstance(message, dict) and message.get("protocol") == PROTOCOL and message.get("round") == self.round
        ):
            self._drop(conn)
            return None
        why = admit(message)
        if why is not None:
            self._turn_away(conn, why)
            return None
        conn.state = "member"
        conn.inbox.clear()
        now = time.monotonic()
        conn.greet_at = conn.accepted + max(GREET_AFTER, _patience(message) - GREET_AFTER)
        heapq.heappush(self._greetings, (conn.greet_at, next(self._order), conn))
        self._waiting.append(conn)
        self._last_arrival = now
        arrival = Arrival(message, conn.peer, conn.local)
        self._members.append((conn, arrival))
        if self._now is not None:
            self._answer_at_once(conn)
        return arrival

    def answer_now(self, value: Any) -> None:
        """From now on answer every member at once with `value`, those waiting and those to come, and let
        go of its connection when it hangs up: for an answer that cannot change by waiting (rank 0 cannot
        hold every process's connection), so that every process hears it at once and rank 0's
        descriptors come free. The gather goes on counting arrivals."""
        self._now = _line({"protocol": PROTOCOL, "answer": value})
        for conn, _ in self._members:
            if conn.state == "member":
                self._answer_at_once(conn)

    def _answer_at_once(self, conn: _Conn) -> None:
        self._greet(conn)
        conn.outbox += self._now or b""
        conn.state = "dropping"  # it reads its answer, then hangs up first: closed then
        self._flush(conn)

    def _turn_away(self, conn: _Conn, why: str) -> None:
        self.dropped += 1
        conn.state = "dropping"
        self._greet(conn)
        conn.outbox += _line({"protocol": PROTOCOL, "rejected": why})
        self._flush(conn)

    def _drop(self, conn: _Conn) -> None:
        if conn.state == "reading":
            self.dropped += 1
        conn.state = "closed"
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn.sock)
        _reset(conn.sock)

    def _stop_listening(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(self._listener)
            self._listener.close()
            self._listener = None

    # -- answering -------------------------------------------------------------------------------

    def answer(self, reply: Callable[[Arrival], Any], *, deadline: float) -> None:
        """Send each member `{"answer": reply(arrival)}`, wait (until `deadline`) for each to hang up
        first, then close everything. Connections that never became members are reset."""
        self._stop_listening()
        waiting: dict[socket.socket, _Conn] = {}
        for key in list(self._selector.get_map().values()):
            conn = key.data
            if conn.state == "dropping" and self._now is not None:  # answered at once: let it read, hang up
                waiting[conn.sock] = conn
            elif conn.state not in ("member", "gone"):
                self._drop(conn)
        encoded: tuple[Any, bytes] | None = None  # the last answer and its line: the same verdict is encoded once
        for conn, arrival in self._members:
            if conn.state == "gone":
                conn.sock.close()
                continue
            if conn.state != "member":  # answered at once (answer_now), or dropped since
                continue
            self._greet(conn)
            value = reply(arrival)
            if encoded is None or encoded[0] is not value:
                encoded = (value, _line({"protocol": PROTOCOL, "answer": value}))
            conn.outbox += encoded[1]
            conn.state = "answering"
            waiting[conn.sock] = conn
            self._flush_answer(conn)
        while waiting and time.monotonic() < deadline:
            for key, events in self._selector.select(max(0.0, deadline - time.monotonic())):
                conn = key.data
                if events & selectors.EVENT_WRITE:
                    self._flush_answer(conn)
                if events & selectors.EVENT_READ:
                    try:
                        chunk = conn.sock.recv(4096)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:  # the process hung up first: its side keeps the TIME_WAIT
                        waiting.pop(conn.sock, None)
                        with contextlib.suppress(KeyError, ValueError):
                            self._selector.unregister(conn.sock)
                        conn.sock.close()
        for conn in waiting.values():
            _reset(conn.sock)
        self.close()

    def _flush_answer(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbox) if conn.outbox else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            sent = len(conn.outbox)
        del conn.outbox[:sent]
        self._watch(conn)

    def close(self) -> None:
        """Close the listener and every connection (reset: none of them is owed anything now)."""
        self._stop_listening()
        registered = self._selector.get_map()
        if registered is None:  # closed already
            return
        for key in list(registered.values()):
            if key.data is not None:
                _reset(key.data.sock)
        for conn, _ in self._members:
            if conn.sock.fileno() >= 0:
                _reset(conn.sock)
        self._selector.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- a process's side ----------------------------------------------------------------------------------


class _Lines:
    """Lines from a socket, one at a time: what came after a line stays for the next."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.data = bytearray()

    def next(self, deadline: float, limit: int) -> bytes | None:
        """One line (without its newline), None at end of stream; TimeoutError at the deadline."""
        while True:
            end = self.data.find(b"\n")
            if end >= 0:
                line = bytes(self.data[:end])
                del self.data[: end + 1]
                return line
            if len(self.data) > limit:
                raise ValueError(f"more than {limit} bytes without a newline")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            _time_limit(self.sock, socket.SO_RCVTIMEO, remaining)
            try:
                chunk = self.sock.recv(65536)
            except BlockingIOError:  # SO_RCVTIMEO ran out
                raise TimeoutError from None
            if not chunk:
                return None
            self.data += chunk


def _time_limit(sock: socket.socket, option: int, seconds: float) -> None:
    """Bound the socket's blocking calls of one direction by `seconds` in the kernel, which then fail with
    EAGAIN or EINPROGRESS, a BlockingIOError: `option` is SO_RCVTIMEO for recv and accept, SO_SNDTIMEO for
    send and connect (socket(7)). One option, the one the next call obeys: a setsockopt with a buffer costs
    Python two failed argument parses, each formatting a TypeError, and setting both options before every
    call cost the check 2% of its instructions (callgrind, 128 ranks in threads: 1.85 M a rank against 1.81 M).

    Not `settimeout`: Python polls before every call of a socket with a timeout, and each poll and
    each call gives up the GIL; with 4,096 processes as threads, every round trip for the GIL counts.
    """
    whole = max(seconds, 0.001)  # zero would mean no limit
    sock.setsockopt(socket.SOL_SOCKET, option, struct.pack("@ll", int(whole), int(whole % 1 * 1e6)))


def _connect(addresses: list[tuple[Any, ...]], seconds: float) -> socket.socket:
    """A blocking socket connected to the first of `addresses` (getaddrinfo's) that takes it within `seconds`."""
    last: OSError = OSError("no address")
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            _time_limit(sock, socket.SO_SNDTIMEO, seconds)  # connect obeys it, and so does join's sendall
            sock.connect(address)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        return sock
    raise last


def retry_cap(processes: int | None) -> float:
    """Seconds between one process's connection attempts at most, in a job of `processes` that all
    retry until rank 0 listens: RETRY_CAP, or longer in a job so large that its retries would reach
    rank 0's port more than RETRY_RATE times a second (4,096 processes: 0.41 s).

    Every attempt of a process that rank 0 refuses is a SYN and a reset on rank 0's host, and in the
    benchmark's one process a wake-up that competes with rank 0 for the interpreter: at 0.1 s, 4,095
    processes retrying made 40,000 attempts a second and once kept rank 0 from listening for 65 s.
    gRPC's connection backoff protocol asks the same of its clients: attempts started together must
    disperse (https://github.com/grpc/grpc/blob/master/doc/connection-backoff.md).
    """
    return max(RETRY_CAP, (processes or 1) / RETRY_RATE)


@attrs.frozen
class Connected:
    """How this process reached rank 0: what the name `resolved` to here (in order), the `local` and `peer`
    addresses of the connection, and the seconds it `waited` for the name to resolve."""

    resolved: tuple[str, ...]
    local: str
    peer: str
    waited: float


NAME_RETRY_CAP = 1.0  # seconds between lookups of a name that does not resolve yet, at most
WAIT_EVERY = 3.0  # seconds between two calls of `on_wait` while a name does not resolve


def resolve_name(
    address: str,
    port: int,
    *,
    deadline: float,
    on_wait: Callable[[str, float], None] | None = None,
) -> tuple[list[tuple[Any, ...]], float]:
    """getaddrinfo(`address`, `port`) for a TCP connection, retried with backoff until it resolves or the
    deadline: (the addresses, the seconds waited). On Kubernetes a pod's DNS record appears after the pod
    starts, so a name may resolve seconds late. `on_wait(last error, seconds waited)` is called every
    WAIT_EVERY seconds of waiting. Raises `ExchangeFailed` (kind ``unresolved``) naming the name and the
    resolver's last error."""
    started = time.monotonic()
    backoff = Backoff(deadline, NAME_RETRY_CAP)
    next_word = started + WAIT_EVERY
    while True:
        try:
            return socket.getaddrinfo(address, port, type=socket.SOCK_STREAM), time.monotonic() - started
        except (socket.gaierror, UnicodeError) as exc:
            last = exc.strerror if isinstance(exc, socket.gaierror) and exc.strerror else str(exc)
        now = time.monotonic()
        if now >= deadline:
            raise ExchangeFailed(
                "unresolved",
                f"{address!r} did not resolve here in {now - started:.1f} s of trying (the last answer: {last})",
            )
        if on_wait is not None and now >= next_word:
            on_wait(last, now - started)
            next_word = now + WAIT_EVERY
        backoff.pause()


def _plain(address: Any) -> str:
    """An address as text, without an IPv6 zone, and an IPv4 one that a dual-stack socket maps
    (::ffff:10.9.0.1) as itself (10.9.0.1)."""
    text = str(address).split("%", 1)[0]
    return text[7:] if text.startswith("::ffff:") and "." in text else text


def _numbers(addresses: list[tuple[Any, ...]]) -> tuple[str, ...]:
    out: list[str] = []
    for *_, sockaddr in addresses:
        if _plain(sockaddr[0]) not in out:
            out.append(_plain(sockaddr[0]))
    return tuple(out)


def join(  # noqa: PLR0915 - one conversation, read top to bottom: connect, greeting, record, answer
    address: str,
    port: int,
    message: Mapping[str, Any],
    *,
    round_: str,
    job: str | None,
    deadline: float,
    answer_limit: int = RECORD_LIMIT,
    strict_job: bool = True,
    processes: int | None = None,
    about: Callable[[Connected], Mapping[str, Any]] | None = None,
    on_wait: Callable[[str, float], None] | None = None,
) -> Any:
    """Connect to rank 0 at `address:port` (retrying with backoff until `deadline`, at most
    `retry_cap(processes)` apart: `processes` is how many meet there), send `message` and return rank
    0's answer. Raises `ExchangeFailed`.

    A name that does not resolve yet is looked up again until the deadline (`resolve_name`, which
    calls `on_wait`). `about(connected)`, once connected, gives fields to send beside `message` (the
    preflight's network facts: they depend on the connection's local address).
    A greeting of another round (the previous exchange on this port, still closing) is retried; one
    of another job is a ``stranger`` failure when `strict_job` and both jobs are known.
    """
    where = f"{address}:{port}"
    said = {**message, "protocol": PROTOCOL, "round": round_, "job": job}
    addresses, waited = resolve_name(address, port, deadline=deadline, on_wait=on_wait)
    resolved = _numbers(addresses)
    here = f"{address} resolved here to {', '.join(resolved)}" if resolved != (address,) else ""
    backoff = Backoff(deadline, retry_cap(processes))
    last = "nothing answered"
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            tried = f"; {here}, each tried" if here else ""
            raise ExchangeFailed("unreachable", f"nothing listened at {where} until the deadline ({last}){tried}")
        try:
            sock = _connect(addresses, min(remaining, 10.0))
        except OSError as exc:
            last = "timed out" if isinstance(exc, BlockingIOError) else exc.strerror or str(exc)
            backoff.pause()
            continue
        with sock:
            lines = _Lines(sock)
            extra: Mapping[str, Any] = {}
            if about is not None:
                local, peer = _plain(sock.getsockname()[0]), _plain(sock.getpeername()[0])
                extra = about(Connected(resolved, local, peer, waited))
            # at once, with how long this process waits for the greeting: rank 0 greets it with its
            # answer, or on its own when the gather stalls or this patience would run out
            sent = _line({**said, **extra, "wait": round(max(0.0, deadline - time.monotonic()), 3)})
            try:
                sock.sendall(sent)
                greeting = lines.next(deadline + GREET_AFTER, GREETING_LIMIT)
            except TimeoutError:
                raise ExchangeFailed(
                    "foreign",
                    f"something at {where} accepted the connection but never sent the check's greeting "
                    "(another program holds the port?)",
                ) from None
            except ValueError as exc:
                raise ExchangeFailed("foreign", f"something at {where} sent {exc}, not a greeting") from None
            except OSError as exc:
                last = f"the connection was reset before a greeting ({exc.strerror or exc})"
                backoff.pause()
                continue
            if greeting == sent[:-1]:
                # our own record: with the main port in the ephemeral range and rank 0 not listening yet,
                # the connect drew that very port as its source and reached itself (TCP's simultaneous open)
                _reset(sock)  # at once: a closing self-connection would still hold the port from rank 0
                last = f"the connection to {where} reached itself (the port is in the ephemeral range)"
                backoff.pause()
                continue
            if greeting is None:  # a listener that is closing (the last round's), or refused us: retry
                last = "the connection closed before a greeting"
                backoff.pause()
                continue
            hello = _parse(greeting)
            if hello is None or hello.get("protocol") != PROTOCOL:
                raise ExchangeFailed(
                    "foreign", f"something at {where} answered {greeting[:80]!r}, not the check's greeting"
                )
            if hello.get("round") != round_:  # rank 0 of the last round drops our record: come again
                last = f"rank 0 there was in round {hello.get('round')!r}, not {round_!r}"
                backoff.pause()
                continue
            theirs = hello.get("job")
            if strict_job and job is not None and theirs is not None and theirs != job:
                raise ExchangeFailed(
                    "stranger", f"the process listening at {where} belongs to job {theirs!r}, this one to {job!r}"
                )
            try:
                reply = lines.next(deadline + ANSWER_GRACE, answer_limit)
            except TimeoutError:
                raise ExchangeFailed("unanswered", f"rank 0 at {where} greeted but did not answer in time") from None
            except (OSError, ValueError) as exc:
                raise ExchangeFailed("unanswered", f"the exchange with rank 0 at {where} failed: {exc}") from None
        if reply is None:
            raise ExchangeFailed("unanswered", f"rank 0 at {where} closed the exchange without an answer")
        parsed = _parse(reply)
        if parsed is None:
            raise ExchangeFailed("foreign", f"rank 0 at {where} answered {reply[:80]!r}, not JSON")
        if "rejected" in parsed:
            raise ExchangeFailed("stranger", f"rank 0 at {where} turned this process away: {parsed['rejected']}")
        if "answer" not in parsed:
            raise ExchangeFailed("foreign", f"rank 0 at {where} answered {reply[:80]!r} without an answer")
        return parsed["answer"]


def _parse(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
