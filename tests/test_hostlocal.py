"""Host leaders (probes/hostlocal.py): election by bind, a leader that dies, the fallback to rank 0 directly."""

from __future__ import annotations

import json
import os
import select
import socket
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from probes import hostlocal
from probes.exchange import PROTOCOL, ExchangeFailed
from probes.hostlocal import channel_name, compact, expand, meet, split

ROUND = "test"


@pytest.fixture(autouse=True)
def _own_round(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Each test meets on channels of its own: a leader a failed test left behind holds its name (abstract
    names live as long as their socket) and would take the next test's processes as its followers; so would
    a run of this file in another process at the same time."""
    monkeypatch.setattr(f"{__name__}.ROUND", f"t{os.getpid()}-{zlib.crc32(request.node.name.encode()):08x}")


class Rank0:
    """A stand-in for `probes.exchange.join`: keeps every message it is handed, answers "ok"."""

    def __init__(self, fail: ExchangeFailed | None = None) -> None:
        self.messages: list[Mapping[str, Any]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, address: str, port: int, message: Mapping[str, Any], **talk: Any) -> Any:
        about = talk.get("about")
        if about is not None:  # as join does once connected: what about says goes beside the message
            message = {**message, **about("the connection")}
        with self.lock:
            self.messages.append(json.loads(json.dumps(message)))
        if self.fail is not None:
            raise self.fail
        return "ok"

    def records(self) -> list[Mapping[str, Any]]:
        out: list[Mapping[str, Any]] = []
        for m in self.messages:
            out += [expand(m["shared"], r) for r in m["records"]] if "records" in m else [m]
        return out


def record(rank: int, local_rank: int, host: str = "h1") -> dict[str, Any]:
    return {
        "id": f"id{rank}",
        "host": host,
        "rank": rank,
        "version": "1",
        "net": {"to_rank0": "10.0.0.1"},
        "topology": {"world_size": 8, "global_rank": rank, "local_rank": local_rank, "local_world_size": 3},
    }


def meeting(port: int, rec: dict[str, Any], rank0: Rank0, out: list[Any], host: str = "h1") -> threading.Thread:
    def run() -> None:
        try:
            out.append(
                meet(
                    "127.0.0.1",
                    port,
                    rec,
                    round_=ROUND,
                    job="j",
                    host=host,
                    deadline=time.monotonic() + 10,
                    joiner=rank0,
                )
            )
        except ExchangeFailed as exc:
            out.append(exc)

    return threading.Thread(target=run)


def wait_bound(name: bytes) -> None:
    for _ in range(200):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(name)
            except OSError:
                return
        time.sleep(0.005)
    raise AssertionError("nobody bound the host's channel")


def connect_listening(sock: socket.socket, name: bytes) -> None:
    """Connect once the leader listens: it binds the name a moment before it listens (refused meanwhile)."""
    for _ in range(400):
        if sock.connect_ex(name) == 0:
            return
        time.sleep(0.005)  # ECONNREFUSED: bound, not listening yet
    raise AssertionError("nobody listened on the host's channel")


def as_follower(rec: dict[str, Any]) -> bytes:
    """What a follower sends its leader: its own fields (here its id), then the rest on a line of its own."""
    own, rest = split(rec, ("id",))
    return json.dumps({**own, "protocol": PROTOCOL}).encode() + b"\n" + json.dumps(rest).encode() + b"\n"


def read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def follow_a_stand_in(stand_in: Callable[[socket.socket], object], rank0: Rank0, seconds: float = 10) -> Any:
    """What one process's meet returned (or raised) when the channel of its host is held by `stand_in`:
    it gets the process's connection; then it stops listening (its name goes) and the connection ends."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(channel_name(ROUND, "j", "127.0.0.1", 1, "h1"))
    listener.listen()

    def hold() -> None:
        conn, _ = listener.accept()
        stand_in(conn)
        listener.close()
        conn.close()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        got: Any = meet(
            "127.0.0.1",
            1,
            record(3, 0),
            round_=ROUND,
            job="j",
            host="h1",
            deadline=time.monotonic() + seconds,
            joiner=rank0,
        )
    except ExchangeFailed as exc:
        got = exc
    holder.join(10)
    assert not holder.is_alive()
    return got


def test_the_first_to_bind_leads_whatever_local_rank_it_claims() -> None:
    rank0, out = Rank0(), list[Any]()
    first = meeting(1, record(5, local_rank=2), rank0, out)
    first.start()
    wait_bound(channel_name(ROUND, "j", "127.0.0.1", 1, "h1"))
    others = [meeting(1, record(r, local_rank=r - 3), rank0, out) for r in (3, 4)]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join(20)
    assert out == ["ok", "ok", "ok"]
    batch = rank0.messages[0]  # one connection to rank 0 for the host (a second if a follower came late)
    assert batch["leader"]["id"] == "id5" and batch["leader"]["rank"] == 5  # local rank 2 led: it bound first
    assert sorted(r["rank"] for r in rank0.records()) == [3, 4, 5]
    assert batch["shared"]["net"] == {"to_rank0": "10.0.0.1"}  # opaque per-host data, sent once, kept
    assert all("net" not in r for r in batch["records"])
    assert all(r["net"] == {"to_rank0": "10.0.0.1"} for r in rank0.records())


def test_hosts_meet_apart() -> None:
    rank0, out = Rank0(), list[Any]()
    threads = [meeting(1, record(r, r % 3, host=f"h{r // 3}"), rank0, out, host=f"h{r // 3}") for r in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert out == ["ok"] * 6
    assert 2 <= len(rank0.messages) < 6  # one batch per host, or two where a process came late
    assert {m["host"] for m in rank0.messages} == {"h0", "h1"}
    assert sorted(r["rank"] for r in rank0.records()) == list(range(6))


def test_a_leader_that_dies_after_taking_a_record_is_named_and_its_follower_meets_rank_0_again() -> None:
    rank0 = Rank0()
    assert follow_a_stand_in(read_line, rank0) == "ok"  # it took the record, said nothing yet, and died
    (again,) = rank0.records()  # it led itself the second time
    assert again["lost_leader"] == {"pid": os.getpid(), "host": "h1"}  # the kernel's word: who held the name


def test_a_leader_that_leaves_before_reading_a_record_is_no_lost_leader() -> None:
    """A leader closes with a record unread when it stops taking followers as one comes (its queue's
    last): the follower sees a reset, not an end of stream, and elects again without blaming anyone."""

    def leaving(conn: socket.socket) -> None:
        readable, _, _ = select.select([conn], [], [], 10)  # the record arrived; nobody reads it
        assert readable

    rank0 = Rank0()
    assert follow_a_stand_in(leaving, rank0) == "ok"
    (again,) = rank0.records()  # it led itself the second time
    assert "lost_leader" not in again


def test_a_follower_hears_its_leader_once_with_the_answer_and_who_led() -> None:
    """Nothing before the answer: every line a waiting process receives wakes it."""
    rank0, out = Rank0(), list[Any]()
    name = channel_name(ROUND, "j", "127.0.0.1", 1, "h1")
    lead = threading.Thread(
        target=lambda: out.append(
            meet(
                "127.0.0.1",
                1,
                record(5, 0),
                round_=ROUND,
                job="j",
                host="h1",
                deadline=time.monotonic() + 10,
                joiner=rank0,
                local=2,
            )
        )
    )
    lead.start()
    wait_bound(name)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as follower:
        connect_listening(follower, name)
        follower.sendall(as_follower(record(6, 1)))
        heard = b""
        while chunk := follower.recv(65536):
            heard += chunk
    lead.join(20)
    assert out == ["ok"]
    (line,) = heard.splitlines()
    reply = json.loads(line)
    assert reply["answer"] == "ok" and reply["leader"]["rank"] == 5 and reply["leader"]["pid"] == os.getpid()


def test_a_slow_leader_that_took_the_record_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower looks once whether its record was read; a leader that read it and answers late keeps it."""
    monkeypatch.setattr(hostlocal, "TAKE_WAIT", 0.1)

    def slow(conn: socket.socket) -> None:
        read_line(conn)
        time.sleep(1.0)  # past the follower's look (a quarter of its 2 s)
        conn.sendall(json.dumps({"protocol": PROTOCOL, "leader": {"rank": 9}, "answer": "late"}).encode() + b"\n")

    rank0 = Rank0()
    assert follow_a_stand_in(slow, rank0, seconds=2) == "late"
    assert rank0.messages == []  # it never went to rank 0 itself


def test_a_leader_that_cannot_reach_rank_0_gives_its_host_a_report_naming_it() -> None:
    rank0, out = Rank0(fail=ExchangeFailed("unreachable", "nothing listened at 127.0.0.1:1")), list[Any]()
    threads = [meeting(1, record(r, r), rank0, out) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(out) == 3 and all(isinstance(e, ExchangeFailed) and e.kind == "unreachable" for e in out)
    relayed = [e for e in out if "this host's leader" in str(e)]
    assert len(relayed) == 2, out  # the two followers; the leader reports its own failure
    assert all("nothing listened" in str(e) and "pid" in str(e) for e in relayed)


def test_a_name_held_by_something_that_does_not_lead_sends_the_process_to_rank_0_directly() -> None:
    name = channel_name(ROUND, "j", "127.0.0.1", 1, "h1")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as squatter:
        squatter.bind(name)
        squatter.listen()
        rank0, out = Rank0(), list[Any]()
        start = time.monotonic()
        t = meeting(1, record(3, 0), rank0, out)
        t.start()
        t.join(20)
    assert out == ["ok"]
    assert time.monotonic() - start < hostlocal.TAKE_WAIT + 2
    (direct,) = rank0.messages
    assert "records" not in direct and direct["rank"] == 3  # its own record, as before host leaders


def test_without_abstract_sockets_a_process_meets_rank_0_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "darwin")
    rank0, out = Rank0(), list[Any]()
    t = meeting(1, record(3, 0), rank0, out)
    t.start()
    t.join(20)
    assert out == ["ok"]
    assert "records" not in rank0.messages[0]


def test_channel_names_differ_by_round_job_endpoint_and_host() -> None:
    names = {
        channel_name("check", "j", "a", 1, "h"),
        channel_name("exec", "j", "a", 1, "h"),
        channel_name("check", "k", "a", 1, "h"),
        channel_name("check", "j", "b", 1, "h"),
        channel_name("check", "j", "a", 2, "h"),
        channel_name("check", "j", "a", 1, "g"),
        channel_name("check", None, "a", 1, "h"),
    }
    assert len(names) == 7
    assert all(n.startswith(b"\0") for n in names)


values = st.one_of(st.none(), st.integers(0, 3), st.text(max_size=3))
records = st.lists(
    st.fixed_dictionaries(
        {"id": st.text(max_size=4), "rank": values},
        optional={"net": values, "topology": st.dictionaries(st.sampled_from("abcd"), values, max_size=4)},
    ),
    max_size=5,
)


@given(records)
def test_a_compact_batch_expands_to_its_records(batch: list[dict[str, Any]]) -> None:
    packed = json.loads(json.dumps(compact(batch)))
    assert [expand(packed["shared"], r) for r in packed["records"]] == batch


@given(records, st.sets(st.sampled_from(["id", "rank", "net", "topology.a", "topology.b", "topology.z"])))
def test_a_split_record_expands_to_itself(batch: list[dict[str, Any]], personal: set[str]) -> None:
    for rec in batch:
        own, rest = split(rec, personal)
        assert expand(rest, own) == rec
        assert set(own) <= {"id", "rank", "net", "topology"}


def meet_all(recs: list[dict[str, Any]], rank0: Rank0, personal: tuple[str, ...]) -> list[Any]:
    out: list[Any] = []
    kw: dict[str, Any] = {"round_": ROUND, "job": "j", "host": "h1", "joiner": rank0, "personal": personal}
    threads = [
        threading.Thread(target=lambda r=r: out.append(meet("127.0.0.1", 1, r, deadline=time.monotonic() + 10, **kw)))
        for r in recs
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    return out


def test_a_host_whose_processes_agree_sends_their_rest_once_and_each_ones_own_fields() -> None:
    rank0 = Rank0()
    recs = [record(r, r) for r in range(3)]
    assert meet_all(recs, rank0, ("rank", "topology.global_rank", "topology.local_rank")) == ["ok"] * 3
    (batch,) = rank0.messages
    assert all(set(r) == {"id", "rank", "topology"} for r in batch["records"])
    assert all(set(r["topology"]) == {"global_rank", "local_rank"} for r in batch["records"])
    assert batch["shared"]["topology"] == {"world_size": 8, "local_world_size": 3}
    assert sorted(rank0.records(), key=lambda r: r["rank"]) == recs


def test_a_process_that_differs_beyond_its_own_fields_is_sent_whole_and_nothing_is_lost() -> None:
    rank0 = Rank0()
    recs = [record(r, r) for r in range(3)]
    recs[1]["version"] = "2"  # one process of another release: its rest differs from the leader's
    recs[2]["topology"]["world_size"] = 9
    assert meet_all(recs, rank0, ("rank", "topology.global_rank", "topology.local_rank")) == ["ok"] * 3
    (batch,) = rank0.messages
    assert "version" not in batch["shared"] and "world_size" not in batch["shared"]["topology"]  # compacted
    assert sorted(rank0.records(), key=lambda r: r["rank"]) == recs


def test_only_a_hosts_leader_asks_about_it_and_every_follower_hears_what_it_said() -> None:
    rank0, out = Rank0(), list[Any]()
    asked: list[Any] = []
    heard: list[Mapping[str, Any]] = []

    def about(connected: Any) -> Mapping[str, Any]:
        asked.append(connected)
        return {"net": {"interface": "eth0"}}

    def run(r: int) -> None:
        rec = record(r, r)
        del rec["net"]
        out.append(
            meet(
                "127.0.0.1",
                1,
                rec,
                round_=ROUND,
                job="j",
                host="h1",
                deadline=time.monotonic() + 10,
                joiner=rank0,
                about=about,
                tell=lambda said: {"interface": said["net"]["interface"]},
                heard=heard.append,
                local=3,
            )
        )

    threads = [threading.Thread(target=run, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert out == ["ok"] * 3
    assert asked == ["the connection"]  # the leader's connection, once: no follower gathers facts
    assert heard == [{"interface": "eth0"}] * 2  # each follower, what `tell` gives, from its leader's reply
    (batch,) = rank0.messages
    assert batch["net"] == {"interface": "eth0"}  # beside the batch, once
    assert all("net" not in r for r in batch["records"]) and "net" not in batch["shared"]


def test_a_follower_whose_leader_died_and_who_then_cannot_reach_rank_0_names_the_leader() -> None:
    failure = follow_a_stand_in(read_line, Rank0(fail=ExchangeFailed("unreachable", "nothing listened at 127.0.0.1:1")))
    assert isinstance(failure, ExchangeFailed) and failure.kind == "unreachable"
    assert "nothing listened" in failure.message and f"pid {os.getpid()} on h1" in failure.message


def test_a_follower_that_hung_up_before_the_batch_left_is_left_out_of_it() -> None:
    name = channel_name(ROUND, "j", "127.0.0.1", 1, "h1")
    rank0, out = Rank0(), list[Any]()
    lead = meeting(1, record(5, 0), rank0, out)
    lead.start()
    wait_bound(name)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as quitter:  # gave up on a slow leader: meets rank 0
        connect_listening(quitter, name)
        quitter.sendall(as_follower(record(6, 1)))
        while hostlocal._unread(quitter):  # the leader took it; it hangs up before the batch leaves
            time.sleep(0.005)
    lead.join(20)
    assert out == ["ok"]
    assert [r["rank"] for r in rank0.records()] == [5]


def test_first_connects_are_spread_only_beyond_the_listen_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr("probes.hostlocal.time.sleep", slept.append)
    monkeypatch.setattr(hostlocal, "listen_queue", lambda: 4096)
    hostlocal.pace(4096, time.monotonic() + 60)
    hostlocal.pace(None, time.monotonic() + 60)
    assert slept == []  # the queue holds them all: nobody waits
    for _ in range(50):
        hostlocal.pace(16384, time.monotonic() + 60)
    assert len(slept) == 50 and all(0 <= s <= 16384 / 10_000 for s in slept) and max(slept) > 0.5
    slept.clear()
    hostlocal.pace(16384, time.monotonic() + 0.5)  # never past the deadline's last second
    assert slept == [0.0]


def test_relay_gives_each_process_its_own_part_of_rank_0s_answer_and_local_ends_the_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`relay`: rank 0 answers a batch with a part per process (exec's census, probes/tcp.py); the leader
    hands each follower its own, keeps its own, and a process meeting rank 0 directly gets its own too.
    `local`: the leader goes to rank 0 as soon as the host's processes came, not LEAD_QUIET later."""

    class PerRank(Rank0):
        def __call__(self, address: str, port: int, message: Mapping[str, Any], **kw: Any) -> Any:
            super().__call__(address, port, message, **kw)
            records = [expand(message["shared"], r) for r in message["records"]] if "records" in message else [message]
            return {str(r["rank"]): f"seat of {r['rank']}" for r in records}

    def part(answer: Any, rec: Mapping[str, Any]) -> Any:
        return {"mine": answer[str(rec["rank"])], "parts": len(answer)}

    monkeypatch.setattr(hostlocal, "LEAD_QUIET", 5.0)  # without `local`, the leader would wait this long
    rank0, out = PerRank(), list[Any]()

    def run(r: int) -> None:
        rec = {"id": f"id{r}", "rank": r, "host": "h1"}
        deadline = time.monotonic() + 20
        kw: dict[str, Any] = {"round_": ROUND, "job": "j", "host": "h1", "deadline": deadline, "joiner": rank0}
        out.append(meet("127.0.0.1", 1, rec, relay=part, local=3, **kw))

    start = time.monotonic()
    threads = [threading.Thread(target=run, args=(r,)) for r in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert time.monotonic() - start < 4.0  # the third process ended the wait
    assert len(rank0.messages) == 1  # one batch
    assert sorted(o["mine"] for o in out) == ["seat of 1", "seat of 2", "seat of 3"]
    assert {o["parts"] for o in out} == {3}  # rank 0's answer held all three; each got its own

    monkeypatch.setattr("sys.platform", "darwin")  # no host-local channel: it meets rank 0 alone, gets its part
    alone = meet(
        "127.0.0.1",
        1,
        {"id": "x", "rank": 7},
        round_=ROUND,
        job="j",
        host="h1",
        deadline=time.monotonic() + 5,
        joiner=rank0,
        relay=part,
    )
    assert alone == {"mine": "seat of 7", "parts": 1}
