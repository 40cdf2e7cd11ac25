"""probes/exchange.py: rank 0 serves every connection at once, bounded, and answers each process."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from probes import exchange
from probes.exchange import PROTOCOL, RECORD_LIMIT, Connected, ExchangeFailed, Server, join
from resolver._check import check
from resolver.testing import torchrun_job


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(port: int, size: int, deadline: float, out: dict[str, Any]) -> None:
    with Server(port, round_="t", job="j") as server:
        arrivals = server.gather(deadline=deadline, admit=lambda m: None, done=lambda got: len(got) >= size - 1)
        out["arrivals"] = arrivals
        out["dropped"] = server.dropped
        server.answer(lambda a: {"you": a.message["rank"]}, deadline=deadline + 2)


def test_each_process_gets_its_own_answer_and_rank_0_may_start_last() -> None:
    port, size = free_port(), 8
    answers: list[Any] = [None] * size
    deadline = time.monotonic() + 10

    def client(rank: int) -> None:
        answers[rank] = join("127.0.0.1", port, {"rank": rank}, round_="t", job="j", deadline=deadline)

    threads = [threading.Thread(target=client, args=(r,)) for r in range(1, size)]
    for t in threads:
        t.start()
    time.sleep(0.3)  # every process is already retrying when rank 0 starts listening
    out: dict[str, Any] = {}
    serve(port, size, deadline, out)
    for t in threads:
        t.join(20)
    assert answers[1:] == [{"you": r} for r in range(1, size)]


def test_a_silent_connection_and_8_mib_of_garbage_delay_nobody() -> None:
    """The issue's bound: 64 processes plus a silent connection and 8 MiB of garbage, in under 5 s."""
    port, size = free_port(), 64
    job = torchrun_job(nproc_per_node=size, master_addr="127.0.0.1", master_port=port)
    envs = []
    for p in job:
        e = dict(p.environ)
        e.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        envs.append(e)
    reports: list[Any] = [None] * size
    started = time.monotonic()

    def run(i: int) -> None:
        reports[i] = check(envs[i], job.processes[i].probes(), timeout=20)

    zero = threading.Thread(target=run, args=(0,))
    zero.start()
    silent = _connect(port)
    garbage = _connect(port)

    def spew() -> None:
        chunk = b"\x00garbage" * 8192
        try:
            for _ in range((8 << 20) // len(chunk)):
                garbage.sendall(chunk)
        except OSError:
            pass  # rank 0 cut it off after RECORD_LIMIT bytes: as it should

    spewer = threading.Thread(target=spew)
    spewer.start()
    others = [threading.Thread(target=run, args=(i,)) for i in range(1, size)]
    for t in others:
        t.start()
    for t in [zero, *others, spewer]:
        t.join(30)
    elapsed = time.monotonic() - started
    silent.close()
    garbage.close()
    assert all(r is not None and r.ok for r in reports), [r.problems for r in reports if r is not None and not r.ok]
    assert elapsed < 5.0, elapsed


def _connect(port: int) -> socket.socket:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with contextlib.suppress(ConnectionRefusedError):
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        time.sleep(0.01)
    raise AssertionError(f"nothing listened on port {port} within 5 s")


def _send_until_refused(sock: socket.socket, most: int) -> int:
    """Bytes sent before the peer reset the connection (fails if it never did)."""
    sent = 0
    while sent < most:
        try:
            sock.sendall(b"x" * 65536)
        except OSError:
            return sent
        sent += 65536
        time.sleep(0.001)
    raise AssertionError(f"{most} bytes went through: rank 0 did not cut the connection off")


def test_a_connection_may_send_one_record_not_more() -> None:
    port = free_port()
    out: dict[str, Any] = {}
    server = threading.Thread(target=serve, args=(port, 2, time.monotonic() + 3, out))
    server.start()
    hog = _connect(port)
    greeting = hog.recv(4096)
    assert json.loads(greeting) == {"protocol": PROTOCOL, "round": "t", "job": "j"}
    sent = _send_until_refused(hog, 64 * RECORD_LIMIT)
    hog.close()
    assert sent <= 32 * RECORD_LIMIT  # the kernel's buffers, not rank 0's memory, took the rest
    server.join(10)
    assert out["arrivals"] == [] and out["dropped"] == 1


def test_what_arrives_is_json_never_pickle() -> None:
    import pickle

    port = free_port()
    out: dict[str, Any] = {}
    server = threading.Thread(target=serve, args=(port, 2, time.monotonic() + 1.5, out))
    server.start()
    evil = _connect(port)
    evil.recv(4096)
    evil.sendall(pickle.dumps({"protocol": PROTOCOL, "round": "t"}) + b"\n")
    with contextlib.suppress(ConnectionResetError):  # dropped, with a reset: no TIME_WAIT on rank 0's side
        assert evil.recv(4096) == b""
    evil.close()
    server.join(10)
    assert out["arrivals"] == [] and out["dropped"] == 1


@pytest.mark.parametrize(
    ("hello", "kind"),
    [
        (b"SSH-2.0-OpenSSH_9.2\r\n", "foreign"),
        (json.dumps({"protocol": "cluster-topology-exchange/0", "round": "t"}).encode() + b"\n", "foreign"),
        (None, "foreign"),  # accepts and never speaks
    ],
)
def test_a_process_trusts_nothing_from_a_peer_that_did_not_greet_it(hello: bytes | None, kind: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as squatter:
        port = squatter.getsockname()[1]
        got: list[bytes] = []

        def squat() -> None:
            conn, _ = squatter.accept()
            with conn:
                if hello is not None:
                    conn.sendall(hello)
                conn.settimeout(1.5)
                with contextlib.suppress(OSError):
                    got.append(conn.recv(4096))

        t = threading.Thread(target=squat)
        t.start()
        with pytest.raises(ExchangeFailed) as failed:
            join("127.0.0.1", port, {"rank": 1}, round_="t", job="j", deadline=time.monotonic() + 1.0)
        t.join(10)
    assert failed.value.kind == kind
    assert got == [] or b'"rank":1' in got[0]  # it had the record (harmless), and nothing back was trusted


def test_a_connection_that_sends_nothing_is_greeted_on_its_own() -> None:
    port = free_port()
    out: dict[str, Any] = {}
    server = threading.Thread(target=serve, args=(port, 2, time.monotonic() + 2, out))
    server.start()
    quiet = _connect(port)
    quiet.settimeout(1.5)
    started = time.monotonic()
    assert json.loads(quiet.recv(4096)) == {"protocol": PROTOCOL, "round": "t", "job": "j"}
    assert time.monotonic() - started < 1.0  # GREET_AFTER, not the deadline
    quiet.close()
    server.join(10)


def test_a_stale_process_of_another_job_is_turned_away() -> None:
    port = free_port()
    deadline = time.monotonic() + 3

    def admit(message: Mapping[str, Any]) -> str | None:
        return None if message.get("job") == "j" else f"job {message.get('job')!r} is not 'j'"

    result: dict[str, Any] = {}

    def root() -> None:
        with Server(port, round_="t", job="j") as server:
            result["arrivals"] = server.gather(deadline=deadline, admit=admit, done=lambda got: len(got) >= 1)
            server.answer(lambda a: "ok", deadline=deadline)

    t = threading.Thread(target=root)
    t.start()
    with pytest.raises(ExchangeFailed, match="turned this process away: job 'old' is not 'j'"):
        join("127.0.0.1", port, {"rank": 1}, round_="t", job="old", deadline=deadline, strict_job=False)
    assert join("127.0.0.1", port, {"rank": 1}, round_="t", job="j", deadline=deadline) == "ok"
    t.join(10)
    assert len(result["arrivals"]) == 1


def test_nothing_listening_is_a_deadline_naming_the_endpoint() -> None:
    port = free_port()
    started = time.monotonic()
    with pytest.raises(ExchangeFailed, match=rf"nothing listened at 127\.0\.0\.1:{port} until the deadline") as e:
        join("127.0.0.1", port, {}, round_="t", job=None, deadline=started + 0.5)
    assert e.value.kind == "unreachable" and time.monotonic() - started < 1.5


def test_a_large_job_retries_less_often_while_rank_0_is_not_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole job aims at most RETRY_RATE attempts a second at rank 0's port, whatever its size."""
    assert exchange.retry_cap(None) == exchange.retry_cap(64) == exchange.RETRY_CAP
    assert exchange.retry_cap(4096) == pytest.approx(4096 / exchange.RETRY_RATE)
    connect = exchange._connect
    attempts: list[float] = []

    def counted(addresses: list[tuple[Any, ...]], seconds: float) -> socket.socket:
        attempts.append(time.monotonic())
        return connect(addresses, seconds)

    monkeypatch.setattr(exchange, "_connect", counted)
    port = free_port()  # nobody listens: every attempt is refused
    made = {}
    for processes in (None, 50_000):  # 0.1 s apart at most, then 5 s
        attempts.clear()
        with pytest.raises(ExchangeFailed):
            join("127.0.0.1", port, {}, round_="t", job=None, deadline=time.monotonic() + 3, processes=processes)
        made[processes] = len(attempts)
    # 3 s: at 0.1-0.2 s apart (jittered) 18 attempts at least; doubling from 10 ms, 9 attempts fill 2.55 s at least
    assert made[None] >= 15 and made[50_000] <= 9, made


def test_a_name_that_never_resolves_is_retried_until_the_deadline_and_named() -> None:
    started = time.monotonic()
    waits: list[tuple[str, float]] = []
    with pytest.raises(ExchangeFailed, match=r"'no-such-host\.invalid' did not resolve here") as e:
        join(
            "no-such-host.invalid",
            29500,
            {},
            round_="t",
            job=None,
            deadline=started + 5.5,
            on_wait=lambda why, waited: waits.append((why, waited)),
        )
    took = time.monotonic() - started
    assert e.value.kind == "unresolved" and 5.5 <= took < 8, took
    assert "the last answer: " in e.value.message  # the resolver's own words, e.g. "Name or service not known"
    assert waits and waits[0][1] >= 3.0, waits  # the progress line, every 3 s of waiting


def test_a_name_that_resolves_late_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    real = socket.getaddrinfo
    appears = time.monotonic() + 1.5

    def late(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "late-name.test":
            if time.monotonic() < appears:
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", late)
    seen: list[Connected] = []

    def about(connected: Connected) -> dict[str, Any]:
        seen.append(connected)
        return {"net": {"waited": connected.waited}}

    def root() -> None:
        with Server(port, round_="t", job="j") as server:
            server.gather(deadline=time.monotonic() + 10, admit=lambda m: None, done=lambda got: len(got) >= 1)
            server.answer(lambda a: "ok", deadline=time.monotonic() + 5)

    t = threading.Thread(target=root)
    t.start()
    answer = join(
        "late-name.test",
        port,
        {},
        round_="t",
        job="j",
        deadline=time.monotonic() + 10,
        about=about,
    )
    t.join(10)
    assert answer == "ok"
    assert seen[0].resolved == ("127.0.0.1",) and seen[0].local == "127.0.0.1" and seen[0].waited >= 1.4, seen


def test_a_process_waiting_for_the_others_is_greeted_so_it_knows_rank_0_lives() -> None:
    port = free_port()

    def root() -> None:  # gathers for a world of 3 that never fills, then ends without answering
        with Server(port, round_="t", job="j") as server:
            server.gather(deadline=time.monotonic() + 1.5, admit=lambda m: None, done=lambda got: len(got) >= 2)

    t = threading.Thread(target=root)
    t.start()
    with pytest.raises(ExchangeFailed) as failed:
        join("127.0.0.1", port, {"rank": 1}, round_="t", job="j", deadline=time.monotonic() + 1.0)
    t.join(10)
    assert failed.value.kind == "unanswered", failed.value  # not "foreign": rank 0 greeted it while it waited


def _self_connected_socket() -> socket.socket:
    """A socket connected to itself: bound to a port and connected to that same port (TCP's simultaneous
    open), what a connect to a port nobody listens on yet gets when it draws that port as its own."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.connect(sock.getsockname())
    return sock


def test_a_connection_that_reached_itself_is_dropped_and_rank_0_can_then_listen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process whose first connect drew the main port as its own source port (possible when the main
    port is in the ephemeral range and rank 0 is not listening yet) must not take its own record for
    rank 0's greeting, nor keep the port from rank 0."""
    trap = _self_connected_socket()
    port = int(trap.getsockname()[1])
    real = exchange._connect
    calls: list[float] = []

    def connect(addresses: list[tuple[Any, ...]], seconds: float) -> socket.socket:
        calls.append(seconds)
        return trap if len(calls) == 1 else real(addresses, seconds)

    monkeypatch.setattr(exchange, "_connect", connect)
    deadline = time.monotonic() + 10
    answers: list[Any] = []
    client = threading.Thread(
        target=lambda: answers.append(join("127.0.0.1", port, {"rank": 1}, round_="t", job="j", deadline=deadline))
    )
    client.start()
    while len(calls) < 2 and time.monotonic() < deadline:  # the trap was closed before the retry
        time.sleep(0.01)
    out: dict[str, Any] = {}
    serve(port, 2, deadline, out)  # binds the port: the trap no longer holds it
    client.join(15)
    assert answers == [{"you": 1}]
    assert trap.fileno() == -1
