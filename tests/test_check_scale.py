"""The check at scale (issue 34): host leaders in check(), the open-files limit, the world size known early."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Mapping
from pathlib import Path

import attrs
import pytest

import resolver
from probes import hostlocal
from probes.exchange import RECORD_LIMIT, ExchangeFailed
from probes.hostlocal import compact
from probes.limits import OpenFiles, listen_overflows, open_files, raise_open_files
from resolver import _check, _network
from resolver._check import Bases, _failed_meeting, _Meeting, members_of, record
from resolver.testing import slurm_env
from tests.test_check import meet, world


def test_a_job_on_hosts_of_four_meets_through_host_leaders() -> None:
    job, envs = world(12, hosts=("h1", "h2", "h3"))
    reports = meet(job, envs)
    assert all(r.ok for r in reports), [r.problems for r in reports]
    assert reports[0].summary.startswith("12 processes on 3 nodes agree")
    assert sorted(r for node in reports[0].nodes or () for r in node.ranks) == list(range(12))


def test_only_host_leaders_gather_network_facts_and_their_followers_report_the_interface(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One lookup per host; a host whose processes set a variable the facts read differently still meets
    through one leader (one connection to rank 0 per host, as the limits rank 0 raises count on)."""
    job, envs = world(12, hosts=("h1", "h2", "h3"))
    for local, env in enumerate(envs[4:8]):
        env["no_proxy"] = f"n{local}"
    gathered: list[str] = []  # the host of each process that gathered facts (rank 0: "rank 0")
    led: list[str] = []
    gather, lead = _network.facts, hostlocal._Leader.lead

    def counted(environ: Mapping[str, str], *args: object, **kwargs: object) -> dict[str, object]:
        gathered.append("rank 0" if environ["RANK"] == "0" else f"h{int(environ['GROUP_RANK']) + 1}")
        return gather(environ, *args, **kwargs)  # type: ignore[arg-type]

    def leading(self: hostlocal._Leader, rank0: object) -> object:
        led.append(str(self.mine["host"]))
        return lead(self, rank0)  # type: ignore[arg-type]

    monkeypatch.setattr(_check, "facts", counted)
    monkeypatch.setattr(hostlocal._Leader, "lead", leading)
    reports = meet(job, envs)
    assert all(r.ok for r in reports), [r.problems for r in reports]
    assert sorted(gathered) == sorted(["rank 0", *led])  # a follower gathers nothing: 4 processes, 1 lookup
    assert {"h2", "h3"} <= set(led) and len(led) < 11 and led.count("h2") < 4
    # every process's report names the interface its host reached rank 0 through (loopback here), a
    # follower's as its leader found it (rank 0's is the one holding the address the others reached: none)
    assert [r.interface for r in reports[1:]] == ["lo"] * 11


def test_a_batch_reads_back_as_its_records() -> None:
    job, envs = world(8, hosts=("h1", "h2"))
    topologies = [resolver.resolve(e, p.probes()) for e, p in zip(envs, job, strict=True)]
    mine = [record(t, "h2") for t in topologies[4:]]
    batch = json.loads(json.dumps({"host": "h2", **compact(mine)}))
    got = members_of(batch)
    assert [k for k, _ in got] == [m["id"] for m in mine]
    assert [m.topology for _, m in got] == list(topologies[4:])
    assert all(m.host == "h2" for _, m in got)


def test_batches_of_hosts_alike_read_as_their_records_through_one_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 reads the first batch's topology once; the next host's batch (another node rank, other
    local ranks) reads back exactly as its records, and a batch that differs in more is read whole."""
    job, envs = world(12, hosts=("h1", "h2", "h3"))
    topologies = [resolver.resolve(e, p.probes()) for e, p in zip(envs, job, strict=True)]
    read_whole: list[object] = []
    whole = _check.member

    def counted(message: dict[str, object]) -> _check.Member:
        read_whole.append(message)
        return whole(message)

    monkeypatch.setattr(_check, "member", counted)
    bases = Bases()
    for host, part in (("h1", topologies[0:4]), ("h2", topologies[4:8]), ("h3", topologies[8:12])):
        batch = json.loads(json.dumps({"host": host, **compact([record(t, host) for t in part])}))
        got = members_of(batch, bases)
        assert [m.topology for _, m in got] == list(part), host
        assert [m.rank for _, m in got] == [t.global_rank for t in part]
    assert bases.topology == topologies[0]
    assert len(read_whole) == 1  # three hosts alike: one record read whole
    # another job id: not the base's record with other integers, so it is read whole, and says so
    other = [attrs.evolve(t, job_id="other") for t in topologies[4:8]]
    batch = json.loads(json.dumps({"host": "h2", **compact([record(t, "h2") for t in other])}))
    assert [m.topology.job_id for _, m in members_of(batch, bases)] == ["other"] * 4  # type: ignore[union-attr]
    assert len(read_whole) == 2


def test_a_record_of_a_job_on_5000_nodes_stays_small() -> None:
    """SLURM's host list of 5,000 nodes is 90 KB in a topology, more than rank 0 takes from one connection:
    the record leaves it out (no rule reads it), and rank 0 reads the rest back."""
    nodes = [f"gpu-node-{i:05d}" for i in range(5000)]
    process = slurm_env(nodes=nodes, ntasks=20000, tasks_per_node=4, procid=9)
    topology = resolver.resolve(process.environ, process.probes())
    assert topology.hostnames is not None and len(topology.hostnames) == 5000
    sent = record(topology, "gpu-node-00002")
    assert len(json.dumps(sent)) < 4096 < RECORD_LIMIT
    got = members_of(json.loads(json.dumps(sent)))[0][1].topology
    assert got == attrs.evolve(topology, hostnames=None, provenance=without(topology.provenance, "hostnames"))


def without(mapping: Mapping[str, object], key: str) -> dict[str, object]:
    return {k: v for k, v in mapping.items() if k != key}


def test_rank_0_s_host_meets_without_waiting_for_rank_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 listens and never meets its host's leader: the others there say one fewer, so the leader
    goes once they came, not after the quiet it would wait for an eighth (made 20 s here)."""
    monkeypatch.setattr(hostlocal, "LEAD_QUIET", 20.0)
    monkeypatch.setattr(hostlocal, "LEAD_MOST", 20.0)
    job, envs = world(8, hosts=("h1",))
    start = time.monotonic()
    reports = meet(job, envs, timeout=40.0)
    assert all(r.ok for r in reports), [r.problems for r in reports]
    assert time.monotonic() - start < 10


def test_the_hint_to_the_leader_counts_rank_0_out_where_it_is_known_to_be_here() -> None:
    job, envs = world(8, hosts=("h1", "h2"))
    tops = [resolver.resolve(e, p.probes()) for e, p in zip(envs, job, strict=True)]
    here = [hostlocal.meeting_here(t.local_world_size, t.global_rank, t.local_rank) for t in tops]
    assert here == [3, 3, 3, 3, 4, 4, 4, 4]  # h1 holds ranks 0-3 (rank 0 listens), h2 ranks 4-7
    assert hostlocal.meeting_here(None, 3, 3) is None


def test_the_hint_goes_to_the_leader_only() -> None:
    assert "here" not in hostlocal._strip({"id": "a", "here": 7, "protocol": 1})


def test_rank_0_short_of_open_files_tells_every_process_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    short = OpenFiles(soft=64, hard=64, open=60, need=30)
    monkeypatch.setattr(_check, "raise_open_files", lambda need: short)
    job, envs = world(4)
    start = time.monotonic()
    reports = meet(job, envs, timeout=30.0)
    assert time.monotonic() - start < 10
    for r in reports:
        assert not r.ok
        limit = [p for p in r.problems if p.kind == "limit"]
        assert limit, r.problems
        assert "soft 64, hard 64" in limit[0].message and "ulimit -n 1024" in limit[0].message
        assert not [p for p in r.problems if p.kind == "missing"]


def test_connections_the_kernel_dropped_at_rank_0_are_named_beside_the_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rank missing while rank 0's host turned connection attempts away at a full listen queue: the
    report says so (the process may have run), with the count and the fix, beside the missing rank."""
    counts = iter([1000, 1250])
    monkeypatch.setattr(_check, "listen_overflows", lambda: next(counts))
    job, envs = world(4)
    reports = meet(job, envs, timeout=2.0, skip=(3,))
    zero = reports[0]
    assert [p.kind for p in zero.problems if p.kind in ("backlog", "missing")] == ["backlog", "missing"]
    backlog = next(p for p in zero.problems if p.kind == "backlog")
    assert "turned away 250 connection attempts" in backlog.message
    assert "net.core.somaxconn" in backlog.message and "sysctl -w" in backlog.message


def test_a_healthy_meeting_says_nothing_of_drops_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = iter([1000, 1250])  # another listener's drops while every process came: not this job's problem
    monkeypatch.setattr(_check, "listen_overflows", lambda: next(counts))
    job, envs = world(4)
    assert all(r.ok for r in meet(job, envs))


@pytest.mark.skipif(listen_overflows() is None, reason="the kernel keeps no TcpExt ListenOverflows here")
def test_the_overflow_counter_counts_a_full_listen_queue() -> None:
    """Loopback only: a listener that never accepts, a queue of one, a few connects."""
    before = listen_overflows()
    assert before is not None
    with socket.create_server(("127.0.0.1", 0), backlog=0) as server:
        port = server.getsockname()[1]
        clients = []
        for _ in range(6):
            c = socket.socket()
            c.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                c.connect(("127.0.0.1", port))
            clients.append(c)
        time.sleep(0.3)
        after = listen_overflows()
        for c in clients:
            c.close()
    assert after is not None and after > before


def test_the_overflow_counter_reads_netstat_s_table(tmp_path: Path) -> None:
    netstat = tmp_path / "netstat"
    netstat.write_text(
        "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 17 19\nIpExt: InOctets\nIpExt: 5\n"
    )
    assert listen_overflows(netstat) == 17
    netstat.write_text("IpExt: InOctets\nIpExt: 5\n")
    assert listen_overflows(netstat) is None
    assert listen_overflows(tmp_path / "absent") is None


def test_raising_the_soft_limit_stays_under_the_hard_limit() -> None:
    before = open_files(0)
    now = raise_open_files(10)
    assert now.soft is None or before.soft is None or now.soft >= before.soft
    if now.hard is not None and now.soft is not None:
        assert now.soft <= now.hard
    assert OpenFiles(soft=100, hard=100, open=90, need=50).enough is False
    assert "ulimit -n 1024" in OpenFiles(soft=100, hard=100, open=90, need=50).fix()


def test_unreadable_processes_claiming_rank_and_world_size_end_the_wait_early() -> None:
    job, envs = world(4)
    for e in envs:
        e["LOCAL_RANK"] = "many"
    start = time.monotonic()
    reports = meet(job, envs, timeout=30.0)
    assert time.monotonic() - start < 10  # not the 30 s timeout: rank 0 knew to wait for 4
    for r in reports:
        assert sorted(p.ranks for p in r.problems if p.kind == "unresolvable") == [(0,), (1,), (2,), (3,)]
        assert not [p for p in r.problems if p.kind == "missing"]


def test_a_process_that_gave_up_at_once_says_so() -> None:
    meeting = _Meeting("ci1", 29500, 3, 4, None, {})
    failure = ExchangeFailed("unreachable", "'ci1' does not resolve")
    (quick,) = _failed_meeting(meeting, "h", failure, 15.0, 0.2).problems
    assert "gave up, after 0.2 s of 15 s" in quick.message and "within 15 s" not in quick.message
    (late,) = _failed_meeting(meeting, "h", failure, 15.0, 15.1).problems
    assert "within 15 s" in late.message


def test_the_facts_a_leader_found_connecting_are_every_record_of_its_batch() -> None:
    """Followers gather no network facts: the leader's, sent beside the batch, are their host's."""
    job, envs = world(8, hosts=("h1", "h2"))
    topologies = [resolver.resolve(e, p.probes()) for e, p in zip(envs, job, strict=True)]
    mine = [record(t, "h2") for t in topologies[4:]]
    batch = {"host": "h2", "leader": {"id": mine[0]["id"]}, **compact(mine), "net": {"local": "10.0.0.2"}}
    got = members_of(json.loads(json.dumps(batch)))
    assert [m.net for _, m in got] == [{"local": "10.0.0.2"}] * 4
    assert [m.rank for _, m in got] == [4, 5, 6, 7]


def test_a_batch_record_whose_integers_break_the_record_is_its_senders_error() -> None:
    job, envs = world(8, hosts=("h1", "h2"))
    topologies = [resolver.resolve(e, p.probes()) for e, p in zip(envs, job, strict=True)]
    mine = [record(t, "h2") for t in topologies[4:]]
    batch = json.loads(json.dumps({"host": "h2", **compact(mine)}))
    batch["records"][2]["topology"]["global_rank"] = 99  # beyond the world of 8
    got = [m for _, m in members_of(batch)]
    assert [m.topology is None for m in got] == [False, False, True, False]
    assert got[2].error is not None and "global_rank" in got[2].error["message"]


def test_a_leader_that_went_away_is_named_with_the_ranks_it_had_taken() -> None:
    """A follower knows its lost leader by the kernel's word, pid and host; rank 0 names its rank when the
    leader's own record came (it died after its batch reached rank 0) from that pid alone."""
    from resolver._check import _lost_leaders

    job, envs = world(8, hosts=("h1", "h2"))
    topologies = [resolver.resolve(e, p.probes()) for e, p in zip(envs, job, strict=True)]
    dead = {"pid": 12345, "host": "h2"}
    again = [members_of({**record(t, "h2"), "lost_leader": dead})[0][1] for t in topologies[5:]]
    (unknown,) = _lost_leaders(again)  # its record never came
    assert unknown.kind == "leader" and unknown.ranks == () and unknown.hosts == ("h2",)
    assert "a process of unknown rank (pid 12345)" in unknown.message and "ranks 5-7 on h2" in unknown.message
    its_own = members_of({**record(topologies[4], "h2"), "pid": 12345})[0][1]
    (problem,) = _lost_leaders([its_own, *again])
    assert problem.ranks == (4,) and "rank 4 (pid 12345)" in problem.message
    twin = members_of({**record(topologies[0], "h2"), "pid": 12345})[0][1]  # two ranks of one pid: threads
    (ambiguous,) = _lost_leaders([its_own, twin, *again])
    assert ambiguous.ranks == ()
