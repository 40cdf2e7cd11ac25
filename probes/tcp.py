"""A communicator over TCP, for a process that must not initialise MPI (`cluster-topology exec`).

Open MPI 4.1 lets a rank initialise MPI once: after exec, after `MPI_Finalize`, or when a child
process ran the collective, the program's own `MPI_Init` fails ("getting local rank failed",
measured here with `mpirun`). So `exec` answers the MPI source's one collective with this object:
`size` ranks meet at `host:port` (the job's MASTER_ADDR/MASTER_PORT), rank 0 listens, every other
rank connects (retrying until the deadline), sends its object, and receives everyone's. Objects
travel as JSON (strings, ints, None, lists, read back as tuples): nothing received is unpickled.

The port is free again when the exchange ends: every other rank closes its connection first (so
the TIME_WAIT state stays on their ephemeral ports), and rank 0 closes its listener after reading
their end of stream; the program can then bind MASTER_PORT for its own rendezvous.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from typing import Any

from resolver.errors import ProbeFailed

__all__ = ["TcpComm"]

_LINE_LIMIT = 1 << 20  # one rank's line: a host name and an endpoint; far more is garbage


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
        return self._exchange(sendobj)

    def bcast(self, obj: Any, root: int = 0) -> Any:
        if root != 0:
            raise ProbeFailed("comm", f"the TCP exchange broadcasts from rank 0 only, not {root}")
        return self._exchange(obj)[0]

    # -- the exchange --------------------------------------------------------------------------

    def _fail(self, what: str) -> ProbeFailed:
        return ProbeFailed(
            "comm", f"rank {self.rank} of {self.size}: exchange at {self.host}:{self.port} (TCP, not MPI): {what}"
        )

    def _exchange(self, obj: Any) -> list[Any]:
        deadline = time.monotonic() + self.timeout
        line = json.dumps({"rank": self.rank, "size": self.size, "obj": obj}).encode() + b"\n"
        if self.rank == 0:
            return self._serve(json.loads(line)["obj"], deadline)
        return self._join(line, deadline)

    def _serve(self, mine: Any, deadline: float) -> list[Any]:
        family = socket.AF_INET6 if socket.has_dualstack_ipv6() else socket.AF_INET
        try:
            server = socket.create_server(
                ("", self.port), family=family, reuse_port=False, dualstack_ipv6=family == socket.AF_INET6
            )
        except OSError as exc:
            raise self._fail(f"rank 0 cannot listen on port {self.port}: {exc}") from exc
        peers: dict[int, tuple[socket.socket, Any]] = {}
        try:
            with server:
                while len(peers) < self.size - 1:
                    server.settimeout(max(0.01, deadline - time.monotonic()))
                    try:
                        conn, _ = server.accept()
                    except TimeoutError:
                        missing = sorted(set(range(1, self.size)) - set(peers))
                        raise self._fail(f"ranks {missing} did not come within {self.timeout} s") from None
                    message = self._read(conn, deadline)
                    if message is None or message.get("size") != self.size or message.get("rank") in peers:
                        conn.close()
                        continue  # not one of ours (a port scan, another job): keep waiting for ours
                    rank = message["rank"]
                    if not isinstance(rank, int) or not 0 < rank < self.size:
                        conn.close()
                        continue
                    peers[rank] = (conn, message.get("obj"))
                everyone = [mine, *(peers[r][1] for r in range(1, self.size))]
                reply = json.dumps(everyone).encode() + b"\n"
                for conn, _ in peers.values():
                    conn.sendall(reply)
                for conn, _ in peers.values():  # wait for their end of stream: they close first
                    conn.settimeout(max(0.01, deadline - time.monotonic()))
                    with contextlib.suppress(OSError):
                        conn.recv(1)
        finally:
            for conn, _ in peers.values():
                conn.close()
        return [_tuples(x) for x in everyone]

    def _join(self, line: bytes, deadline: float) -> list[Any]:
        delay = 0.02
        while True:
            try:
                conn = socket.create_connection((self.host, self.port), timeout=max(0.01, deadline - time.monotonic()))
                break
            except OSError as exc:
                if time.monotonic() + delay > deadline:
                    raise self._fail(f"rank 0 did not listen within {self.timeout} s ({exc})") from None
                time.sleep(delay)
                delay = min(0.5, delay * 2)
        with conn:
            try:
                conn.sendall(line)
            except OSError as exc:
                raise self._fail(f"sending to rank 0 failed: {exc}") from exc
            reply = self._read_raw(conn, deadline)
        if reply is None:
            raise self._fail("rank 0 closed the exchange without an answer")
        everyone = json.loads(reply)
        if not isinstance(everyone, list) or len(everyone) != self.size:
            raise self._fail(f"rank 0 answered {reply[:200]!r}: expected {self.size} objects")
        return [_tuples(x) for x in everyone]

    def _read(self, conn: socket.socket, deadline: float) -> dict[str, Any] | None:
        raw = self._read_raw(conn, deadline)
        try:
            message = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        return message if isinstance(message, dict) else None

    @staticmethod
    def _read_raw(conn: socket.socket, deadline: float) -> str | None:
        data = b""
        while not data.endswith(b"\n"):
            conn.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = conn.recv(65536)
            except OSError:
                return None
            if not chunk or len(data) > _LINE_LIMIT:
                return None
            data += chunk
        try:
            return data.decode()
        except UnicodeDecodeError:
            return None
