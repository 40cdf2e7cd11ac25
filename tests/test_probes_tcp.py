"""probes/tcp.py: the host-name exchange `cluster-topology exec` uses instead of MPI."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
import resolver
from probes import hostlocal
from probes.census import Seat
from probes.fakes import FakeComm
from probes.limits import OpenFiles
from probes.tcp import TcpComm
from resolver import ProbeFailed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_world(size: int, work: Any, *, timeout: float = 10.0) -> list[Any]:
    port = free_port()
    results: list[Any] = [None] * size

    def run(rank: int) -> None:
        try:
            results[rank] = work(TcpComm(rank, size, "127.0.0.1", port, timeout=timeout))
        except Exception as exc:  # the test reads it
            results[rank] = exc

    threads = [threading.Thread(target=run, args=(r,)) for r in reversed(range(size))]  # rank 0 last
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout * 3)
    return results


def test_allgather_and_bcast_meet() -> None:
    got = run_world(4, lambda c: c.allgather(("host", None, c.Get_rank(), None)))
    assert got == [[("host", None, r, None) for r in range(4)]] * 4
    assert run_world(3, lambda c: c.bcast(f"from {c.Get_rank()}")) == ["from 0"] * 3


def test_the_port_is_free_again_for_the_program() -> None:
    port = free_port()
    comms = [TcpComm(r, 2, "127.0.0.1", port, timeout=10) for r in range(2)]
    threads = [threading.Thread(target=c.allgather, args=("h",)) for c in comms]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    with socket.socket() as program:  # no SO_REUSEADDR: the exchange left no TIME_WAIT on the port
        program.bind(("", port))
        program.listen()


def test_a_stranger_on_the_port_is_ignored() -> None:
    port = free_port()
    results: list[Any] = [None, None]

    def root() -> None:
        results[0] = TcpComm(0, 2, "127.0.0.1", port, timeout=10).allgather("a")

    server = threading.Thread(target=root)
    server.start()
    stranger = None
    for _ in range(200):
        try:
            stranger = socket.create_connection(("127.0.0.1", port), timeout=1)
            break
        except OSError:
            threading.Event().wait(0.02)
    assert stranger is not None
    stranger.sendall(b'{"rank": 1, "size": 99, "obj": "evil"}\n')
    results[1] = TcpComm(1, 2, "127.0.0.1", port, timeout=10).allgather("b")
    server.join(30)
    stranger.close()
    assert results == [["a", "b"], ["a", "b"]]


def test_a_missing_rank_is_a_deadline_not_a_hang() -> None:
    port = free_port()
    seen: list[Exception] = []

    def rank1() -> None:
        try:
            TcpComm(1, 3, "127.0.0.1", port, timeout=5).allgather("x")
        except ProbeFailed as exc:
            seen.append(exc)

    joiner = threading.Thread(target=rank1)
    joiner.start()  # rank 1 comes, rank 2 of the world of 3 never does
    root = TcpComm(0, 3, "127.0.0.1", port, timeout=0.5)
    with pytest.raises(ProbeFailed, match=r"ranks 2 did not come within 0\.5 s"):
        root.allgather("x")
    joiner.join(30)
    assert "rank 0 closed the exchange without an answer" in str(seen[0])  # rank 1 fails too, at once
    late = TcpComm(1, 2, "127.0.0.1", free_port(), timeout=0.3)
    with pytest.raises(ProbeFailed, match=r"rank 0 did not listen within 0\.3 s"):
        late.allgather("x")


def test_the_mpi_source_resolves_two_hosts_over_it() -> None:
    """What exec does: the MPI source's one collective answered by the TCP exchange."""
    port = free_port()
    hosts = ["nodeA", "nodeA", "nodeB", "nodeB"]

    def rank_env(rank: int) -> dict[str, str]:
        return {
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_LOCAL_RANK": str(rank % 2),
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }

    def work(comm: TcpComm) -> resolver.Topology:
        rank = comm.Get_rank()
        fake = probes.fake(hostname=hosts[rank], comm=comm)
        return resolver.resolve(rank_env(rank), fake, allow_loopback=True)

    port_world = run_world(4, work)
    assert [(t.node_rank, t.num_nodes, t.local_world_size) for t in port_world] == [(0, 2, 2)] * 2 + [(1, 2, 2)] * 2


# -- the census: exec's collective through host leaders (issue 34) ---------------------------------------


def run_comms(comms: list[Any], work: Any, *, timeout: float = 30.0) -> list[Any]:
    """Run `work(comm)` for each comm in its own thread (rank 0 last); an exception is that rank's result."""
    results: list[Any] = [None] * len(comms)

    def run(i: int) -> None:
        try:
            results[i] = work(comms[i])
        except Exception as exc:  # the test reads it
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in reversed(range(len(comms)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a rank hung"
    return results


def comparable(t: resolver.Topology) -> dict[str, Any]:
    """A record with the collective's name taken out of its provenance: the two ways name theirs."""
    data = t.to_dict()
    for origin in data["provenance"].values():
        if origin["name"] in ("comm.census", "comm.allgather"):
            origin["name"] = "comm.<collective>"
    return data


def resolve_world(hosts: list[str], comms: list[Any], *, master: bool, port: int = 0) -> list[Any]:
    def work(comm: Any) -> resolver.Topology:
        rank = comm.Get_rank()
        env = {"PMIX_RANK": str(rank)}  # the launcher says nothing else: everything comes from the comm
        if master:
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        fake = probes.fake(hostname=hosts[rank], free_port=20000 + rank, comm=comm)
        return resolver.resolve(env, fake, allow_loopback=True)

    return run_comms(comms, work)


@settings(max_examples=8, deadline=None)
@given(
    hosts=st.lists(st.sampled_from(["nodeA", "nodeB", "n10", "gpu-7", "10.1.0.3"]), min_size=2, max_size=10),
    master=st.booleans(),
)
def test_the_census_gives_every_rank_the_record_the_allgather_gives(hosts: list[str], master: bool) -> None:
    """The same hosts through exec's census (TcpComm over loopback, host leaders) and through allgather
    (FakeComm): identical records on every rank, but for the collective's name in the provenance."""
    n, port = len(hosts), free_port()
    by_allgather = resolve_world(hosts, list(FakeComm.connected(n, timeout=20)), master=master, port=port)
    by_census = resolve_world(
        hosts, [TcpComm(r, n, "127.0.0.1", port, timeout=20) for r in range(n)], master=master, port=port
    )
    assert all(isinstance(t, resolver.Topology) for t in by_allgather + by_census), (by_allgather, by_census)
    assert [comparable(t) for t in by_census] == [comparable(t) for t in by_allgather]
    assert by_census[1].provenance["node_rank"].name == "comm.census"


def census_world(hosts: list[str], *, local_size: int | None = None, timeout: float = 20.0) -> tuple[list[Any], Any]:
    n, port = len(hosts), free_port()
    comms = [TcpComm(r, n, "127.0.0.1", port, timeout=timeout, local_size=local_size) for r in range(n)]
    answers = [(h, "127.0.0.1" if r == 0 else None, port if r == 0 else None, None) for r, h in enumerate(hosts)]
    return run_comms(comms, lambda c: c.census(answers[c.Get_rank()])), comms[0]


def test_rank_0_holds_a_connection_per_host_and_each_rank_gets_its_place() -> None:
    hosts = [f"node{r // 4}" for r in range(16)]  # 4 hosts of 4
    places, root = census_world(hosts, local_size=4)
    assert [p.seat for p in places] == [Seat(r // 4, 4, r % 4, 4) for r in range(16)]
    assert {p.hostnames for p in places} == {("node0", "node1", "node2", "node3")}
    assert {p.rank0 for p in places} == {places[0].rank0}
    assert 4 <= root.connections <= 8  # a batch per host (a second where a rank came late), not 15 connections


def test_rank_0_s_host_meets_without_waiting_for_rank_0(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rank 0 listens and never meets its host's leader: with local ranks its host-mates count it out,
    so their leader goes once they came, not after the quiet it would wait for the eighth (20 s here)."""
    monkeypatch.setattr(hostlocal, "LEAD_QUIET", 20.0)
    monkeypatch.setattr(hostlocal, "LEAD_MOST", 20.0)
    n, port = 8, free_port()
    comms = [TcpComm(r, n, "127.0.0.1", port, timeout=40, local_size=n, local_rank=r) for r in range(n)]
    answers = [("h1", "127.0.0.1" if r == 0 else None, port if r == 0 else None, None) for r in range(n)]
    start = time.monotonic()
    places = run_comms(comms, lambda c: c.census(answers[c.Get_rank()]), timeout=45)
    assert [p.seat for p in places] == [Seat(0, 1, r, 8) for r in range(n)]
    assert time.monotonic() - start < 10
    assert hostlocal.meeting_here(8, 3, 3) == 7 and hostlocal.meeting_here(4, 3, 1) == 4


def test_a_rank_whose_probe_failed_fails_every_rank_alike() -> None:
    hosts = ["a", "a", "b"]
    n, port = 3, free_port()

    def work(comm: Any) -> resolver.Topology:
        rank = comm.Get_rank()
        fake = probes.fake(hostname=None if rank == 2 else hosts[rank], comm=comm)  # rank 2 cannot tell its name
        env = {"PMIX_RANK": str(rank), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        return resolver.resolve(env, fake, allow_loopback=True)

    results = run_comms([TcpComm(r, n, "127.0.0.1", port, timeout=20) for r in range(n)], work)
    assert [getattr(r, "probe", None) for r in results] == ["comm", "comm", "hostname"]
    assert all("rank 2 could not answer" in str(r) for r in results[:2])


def test_a_missing_rank_is_named_on_every_rank_that_came() -> None:
    port = free_port()
    comms = [TcpComm(r, 3, "127.0.0.1", port, timeout=1.0) for r in range(2)]  # rank 2 of 3 never comes
    answers = [("a", "127.0.0.1", port, None), ("a", None, None, None)]
    results = run_comms(comms, lambda c: c.census(answers[c.Get_rank()]))
    assert "ranks 2 did not come within 1.0 s" in str(results[0])
    assert "closed the exchange without an answer: ranks 2 did not come" in str(results[1])


def test_sizes_that_disagree_fail_every_rank_at_once_naming_them() -> None:
    port = free_port()
    comms = [TcpComm(0, 2, "127.0.0.1", port, timeout=20), TcpComm(1, 3, "127.0.0.1", port, timeout=20)]
    answers = [("a", "127.0.0.1", port, None), ("a", None, None, None)]
    start = time.monotonic()
    results = run_comms(comms, lambda c: c.census(answers[c.Get_rank()]))
    assert time.monotonic() - start < 10  # at once, not at the deadline
    said = "rank 1 was started in a world of 3 ranks, rank 0 in one of 2"
    assert all(isinstance(r, ProbeFailed) and said in str(r) for r in results), results


def test_two_processes_claiming_one_rank_fail_every_rank() -> None:
    port = free_port()
    comms = [TcpComm(r, 3, "127.0.0.1", port, timeout=20, hostname=f"h{i}") for i, r in enumerate((0, 1, 1))]
    answers = [("a", "127.0.0.1", port, None), ("b", None, None, None), ("c", None, None, None)]
    results = run_comms(comms, lambda c: c.census(answers[comms.index(c)]))
    assert all("rank 1 came twice" in str(r) for r in results), results


def test_a_hard_limit_too_low_for_a_connection_per_host_fails_every_rank_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_few(need: int) -> OpenFiles:
        return OpenFiles(soft=64, hard=64, open=62, need=need)

    monkeypatch.setattr("probes.tcp.raise_open_files", too_few)
    start = time.monotonic()
    results, _ = census_world([f"n{r // 2}" for r in range(8)], local_size=2, timeout=20)
    assert time.monotonic() - start < 10
    for r in results:
        assert isinstance(r, ProbeFailed), results
        assert "may open 64 files (soft 64, hard 64, 62 open already)" in str(r)
        assert "needs about 4 more (a connection per host)" in str(r) and "ulimit -n 1024" in str(r)


def test_tcp_comm_is_a_host_census_and_a_comm() -> None:
    """The MPI source asks a comm with `census` for it (probes.HostCensus); TcpComm is one, mpi4py-shaped too."""
    comm = TcpComm(1, 4, "127.0.0.1", 1, local_size=2)
    assert isinstance(comm, probes.HostCensus) and isinstance(comm, probes.Comm)
    with pytest.raises(ValueError, match="with a name or an error"):
        comm.census((None, None, None, None))
    with pytest.raises(ValueError, match=r"local_size 5 is not in 1\.\.4"):
        TcpComm(1, 4, "127.0.0.1", 1, local_size=5)
