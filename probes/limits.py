"""Open-file limits of a process that accepts connections (rank 0, a host leader).

Every connection costs a file descriptor, and many clusters give a job a soft limit of 1,024 open files
(SLURM propagates the submitting shell's limits): rank 0 of a job of 1,000 processes meeting directly runs
out, and the processes it could not accept look missing. So a process that accepts connections raises its
soft limit to what it needs, up to the hard limit (Go's runtime raises it to the hard limit at start-up,
https://github.com/golang/go/issues/46279), and one whose hard limit is still too low says so with the
numbers and the fix, instead of blaming the processes it could not hold.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

__all__ = ["RESERVE", "OpenFiles", "listen_overflows", "open_files", "raise_open_files"]

RESERVE = 16  # descriptors kept for everything but the connections: the listener, the selector, logs


@attrs.frozen(kw_only=True)
class OpenFiles:
    """The limit as it stands (`soft`, `hard`; None: no limit), how many are `open` now, and the `need`."""

    soft: int | None
    hard: int | None
    open: int
    need: int

    @property
    def enough(self) -> bool:
        """Whether the soft limit leaves room for what is needed (open now plus the need)."""
        return self.soft is None or self.soft >= self.open + self.need

    def fix(self) -> str:
        """The words that tell a user what to raise, and how."""
        want = _round_up(self.open + self.need)
        return (
            f"raise it where the job starts (`ulimit -n {want}` in the job script, or the hard limit of the "
            "scheduler, container or /etc/security/limits.conf)"
        )


def _round_up(n: int) -> int:
    """A round number of files at least `n` (1,024, 2,048, ... then 65,536 steps)."""
    size = 1024
    while size < n and size < 65536:
        size *= 2
    return size if size >= n else -(-n // 65536) * 65536


def _count_open() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # the listing's own descriptor
    except OSError:
        return 3 + RESERVE  # not Linux: stdio and a margin


def open_files(need: int) -> OpenFiles:
    """The limit on open files and how many are open, without changing anything."""
    try:
        import resource  # POSIX only: Windows has no such limit to read
    except ImportError:
        return OpenFiles(soft=None, hard=None, open=0, need=need)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    infinity = resource.RLIM_INFINITY
    return OpenFiles(
        soft=None if soft == infinity else soft,
        hard=None if hard == infinity else hard,
        open=_count_open(),
        need=need,
    )


def raise_open_files(need: int) -> OpenFiles:
    """Raise the soft limit on open files so that `need` more descriptors fit (never above the hard
    limit, never lowering it); return the limit as it then stands. Process-wide, thread-safe enough:
    a race between two raisers leaves the larger."""
    now = open_files(need)
    if now.enough or now.soft is None:
        return now
    import resource  # present: open_files read it

    # twice the need: processes that meet directly after all (a leader died, a late batch) and whatever
    # else the process opens meanwhile (a test or benchmark runs many ranks in one process)
    target = now.open + 2 * need + RESERVE
    if now.hard is not None:
        target = min(target, now.hard)
    if target > now.soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        except (ValueError, OSError):
            return now
    return open_files(need)


def listen_overflows(netstat: Path = Path("/proc/net/netstat")) -> int | None:
    """How many connection attempts the kernel turned away at a full listen queue in this network
    namespace so far (`TcpExt: ListenOverflows`, every listener's together); None where it is not kept.

    Tens of thousands of processes connecting at once overflow a queue of `net.core.somaxconn` (4,096):
    the kernel drops their SYNs and the clients retry for seconds. A rank 0 that finds processes missing
    reads the counter's growth to say they may have been turned away there rather than not started."""
    try:
        lines = netstat.read_text().splitlines()
    except OSError:
        return None
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:") and values.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], values.split()[1:], strict=False))
            value = table.get("ListenOverflows")
            return int(value) if value is not None and value.isdigit() else None
    return None
