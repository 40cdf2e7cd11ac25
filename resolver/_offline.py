"""The probes of a captured environment (`--env-file`): only what the command line answers.

Its host name, a free port, its files, MPI and its `PATH` belong to the captured process, not to
this machine, so `--hostname`, `--free-port` and `--file PATH[=COPY]` answer them and any other
question is a `ProbeFailed` naming the option that would answer it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from resolver._detect import require_probes
from resolver._envfile import parse_env_file
from resolver.errors import InvalidSettings, ProbeFailed

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["HELP", "captured", "offline_probes"]

HELP = """\
--env-file resolves a captured environment offline: KEY=VALUE lines (`env` output), the
quoted lines of --format env, or a NUL-separated /proc/PID/environ. Nothing is asked of
this machine: --hostname, --free-port and --file answer the questions a source asks.
"""


def captured(
    env_file: str | None, hostname: str | None, free_port: int | None, files: Sequence[str]
) -> tuple[dict[str, str], Probes] | None:
    """`--env-file`'s environment (parsed once) and the probes answering for it; None without one, when
    `--hostname`, `--free-port` and `--file` have nothing to answer for and are an error."""
    if env_file:
        return parse_env_file(env_file), offline_probes(hostname, free_port, files)
    if hostname is not None or free_port is not None or files:
        raise InvalidSettings(
            "--hostname, --free-port and --file answer for a captured environment: use them with --env-file"
        )
    return None


def offline_probes(hostname: str | None, free_port: int | None, files: Sequence[str]) -> Probes:
    """The probes answering `--hostname`, `--free-port` and each `--file PATH` or `--file PATH=COPY`."""
    require_probes()
    from probes import Probes  # after require_probes: a user's probes.py may shadow ours (resolver/_shadow.py)

    offline = _Offline(hostname, free_port, files)
    return Probes(
        hostname=offline.hostname,
        comm=offline.comm,
        xla=offline.xla,
        free_port=offline.free_port,
        read_text=offline.read_text,
        which=offline.which,
    )


def _unanswered(probe: str, how: str) -> ProbeFailed:
    return ProbeFailed(probe, f"--env-file resolves offline and nothing answers it: {how}")


class _Offline:
    def __init__(self, hostname: str | None, free_port: int | None, files: Sequence[str]) -> None:
        self.hostname_answer = hostname
        self.port_answer = free_port
        self.files: dict[str, str] = {}
        for item in files:
            remote, sep, local = item.partition("=")
            self.files[remote] = local if sep else remote

    def hostname(self) -> str:
        if self.hostname_answer is None:
            raise _unanswered("hostname", "pass --hostname NAME (the captured process's host)")
        return self.hostname_answer

    def free_port(self) -> int:
        if self.port_answer is None:
            raise _unanswered("free_port", "pass --free-port PORT, or capture MASTER_PORT")
        return self.port_answer

    def read_text(self, path: str) -> str:
        if path not in self.files:
            raise _unanswered("read_text", f"pass --file {path} (or --file {path}=COPY) to read {path!r}")
        require_probes()
        from probes import live  # after require_probes: a user's probes.py may shadow ours

        return live.read_text(self.files[path])

    def which(self, name: str) -> str | None:
        raise _unanswered("which", f"whether {name!r} is on the captured process's PATH is unknown")

    def comm(self) -> Any:
        raise _unanswered(
            "comm",
            "the MPI ranks cannot be asked; capture MASTER_ADDR, MASTER_PORT and the node rank with the environment",
        )

    def xla(self) -> Any:
        raise _unanswered("xla", "the TPU runtime of the captured process cannot be asked")
