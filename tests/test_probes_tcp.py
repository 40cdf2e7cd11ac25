"""probes/tcp.py: the host-name exchange `cluster-topology exec` uses instead of MPI."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

import probes
import resolver
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
