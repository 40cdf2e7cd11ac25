"""The schedulers that write their job's hosts in a file and start one process (Grid Engine, PBS), as
the MPI ranks inside their jobs see them: `HostFileJob`, declared once per scheduler.

A module of its own, imported by those two sources only: the kit (`_rules`) loads on every resolve,
and building an attrs class there cost 1.7% of a default resolve (callgrind, 285.5 M against 280.7 M
instructions, with `import attrs` at 228.8 M).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from resolver.origin import Origin
from resolver.sources._kit import Candidates, JobFacts
from resolver.sources._rules import first_host_here, job_endpoint, read_host_file

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["HostFileJob"]


@attrs.frozen
class HostFileJob:
    """A scheduler that writes its job's hosts in a file and starts one process (Grid Engine's
    ``PE_HOSTFILE``, PBS's ``PBS_NODEFILE``), as the MPI ranks inside its job see it.

    `candidates`: the variables every process of a job has; `port(environ)`: the job's port (`job_port`);
    `columns`/`counted`: the host file's shape (`host_file`).
    """

    candidates: Candidates
    hostfile: str
    port: Callable[[Mapping[str, str]], tuple[int, Origin]]
    columns: str = "host"
    counted: bool = False

    def in_job(self, environ: Mapping[str, str]) -> bool:
        """Whether the scheduler started this process or one of its ancestors."""
        return self.candidates.met(environ)

    def hosts(self, environ: Mapping[str, str], probes: Probes) -> list[list[str]] | None:
        """The host file's lines (`read_host_file`); None where it is unset or this host cannot read it."""
        return read_host_file(environ, probes, self.hostfile, columns=self.columns, counted=self.counted)

    def main_host(self, environ: Mapping[str, str], probes: Probes) -> tuple[str, Origin] | None:
        """The host file's first host, where the MPI launchers put rank 0, when it is this host
        (`first_host_here`); None outside the job, where the file cannot be read (it is written on
        the first host only) and on another host. A malformed file is an error."""
        if not self.in_job(environ):
            return None
        return first_host_here(environ, probes, self.hostfile, self.hosts(environ, probes))

    def main_endpoint(self, environ: Mapping[str, str], probes: Probes, *, one_node: bool) -> JobFacts:
        """The registry's `endpoint` for the MPI ranks inside the job: the job's port, and on one node
        `main_host`. Across nodes the address is left to the MPI exchange, which the node ranks need
        anyway: a file that only the first host has must not decide whether a rank joins a collective."""
        if not self.in_job(environ):
            return {}
        return job_endpoint(self.port(environ), self.main_host(environ, probes) if one_node else None)
