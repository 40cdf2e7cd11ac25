"""The schedulers that write their job's hosts in a file and start one process (Grid Engine, PBS):
`HostFileJob`, declared once per scheduler, detects and records that one process, declines the
processes a launcher inside the job started, and gives the MPI ranks inside the job its endpoint.

A module of its own, imported by those two sources only: the kit (`_rules`) loads on every resolve,
and building an attrs class there cost 1.7% of a default resolve (callgrind, 285.5 M against 280.7 M
instructions, with `import attrs` at 228.8 M).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

import attrs

from resolver.errors import InvalidSettings, shown
from resolver.origin import Origin
from resolver.sources._kit import Builder, Candidates, Detection, JobFacts, present
from resolver.sources._rules import LOCAL_ADDRESS, first_host_here, job_endpoint, job_port, read_host_file
from resolver.sources.mpi import rank_marker

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["PORT_BASE", "PORT_SPAN", "PORT_STRIDE", "RANK_VARIABLES", "HostFileJob", "scheduler_port"]

RANK_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")  # a process launcher inside a job: the default reads them
PORT_BASE = 20000
PORT_SPAN = 10000
PORT_STRIDE = 8191  # prime to PORT_SPAN: consecutive job ids get distinct ports


def scheduler_port(
    job: int, job_term: str, *, offset: int | None = None, offset_term: str = "", variables: tuple[str, ...]
) -> tuple[int, Origin]:
    """Both schedulers' job port, ``20000 + (job * 8191 + offset) mod 10000`` (`job_port`): the job's
    number, and the array task or subjob index in `offset`."""
    return job_port(
        job,
        job_term,
        base=PORT_BASE,
        span=PORT_SPAN,
        stride=PORT_STRIDE,
        offset=offset,
        offset_term=offset_term,
        variables=variables,
    )


@attrs.frozen
class HostFileJob:
    """A scheduler that writes its job's hosts in a file and starts one process (Grid Engine's
    ``PE_HOSTFILE``, PBS's ``PBS_NODEFILE``): its source (`name`), the scheduler in words (`title`).

    `candidates`: the variables every process of a job has, the job id first; `port(environ)`: the
    job's port (`job_port`); `columns`/`counted`: the host file's shape (`host_file`).
    """

    name: str
    title: str
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

    def detect(self, environ: Mapping[str, str], *, started: str, also: tuple[str, ...] = ()) -> Detection:
        """The source's detection: declined outside a job, and for a process a launcher inside the job
        started (an MPI rank goes to the MPI source, a process with `RANK_VARIABLES` set by torchrun,
        Lightning or ``apply(ranks=True)`` to the default source; either gets the job's facts from this
        source); else the one process the scheduler started (`started`: what it starts), a world of
        one. `also`: variables that matched besides the candidates."""
        declined = self.candidates.unmet(environ, f"a {self.title} job")
        if declined is not None:
            return declined
        found = self.candidates.names
        job = shown(environ[found[0]])
        marker = rank_marker(environ)
        if marker is not None:
            return Detection(
                False,
                f"an MPI rank inside {self.title} job {job} ({marker} is set): the MPI source resolves it, "
                "with the job's facts",
                (*found, marker),
            )
        ranks = present(environ, *RANK_VARIABLES)
        if ranks:
            return Detection(
                False,
                f"{', '.join(ranks)} set by a launcher inside {self.title} job {job}: the default source reads them",
                (*found, *ranks),
            )
        said = " and ".join(f"{name}={shown(environ[name])}" for name in found)
        return Detection(
            True, f"{said}: one process started by {self.title} ({started}), a world of one", (*found, *also)
        )

    def refuse_rank(self, environ: Mapping[str, str]) -> None:
        """`InvalidSettings` when the source is forced (``source=``) on a rank an MPI launcher started."""
        marker = rank_marker(environ)
        if marker is not None:
            raise InvalidSettings(
                f"source={self.name!r} resolves the one process {self.title} started, but "
                f"{marker}={shown(environ[marker])}: an MPI launcher started this rank; resolve without source= "
                f"(the MPI source takes it, with {self.title}'s job facts)"
            )

    def one_process(
        self,
        environ: Mapping[str, str],
        facts: JobFacts,
        *,
        started: str,
        per_node: tuple[int, Origin] | None = None,
    ) -> Builder:
        """The record of the one process the scheduler started, a world of one with the job's `facts`
        and port; the source adds its warnings, then builds.

        `started` says what the scheduler starts and how it numbers it; ``MASTER_ADDR`` and
        ``MASTER_PORT`` win over the local address and the job's port. `per_node`: the slots the
        scheduler gave this host, as the workers the process may start (`nproc_per_node`, which
        ``--format torchrun`` prints).
        """
        b = Builder(self.name, environ)
        b.facts(facts)
        one = f"{self.name}: {started}"
        for field in ("world_size", "local_world_size", "num_nodes"):
            b.rule(field, 1, one)
        for field in ("global_rank", "local_rank", "node_rank"):
            b.rule(field, 0, one)
        b.rule(
            "creates_processes_externally",
            False,
            f"{self.name}: the only process {self.title} started here; it may start workers itself",
        )
        if b.optional_address("MASTER_ADDR") is None:
            b.default("main_address", LOCAL_ADDRESS, f"{LOCAL_ADDRESS} (a world of one)")
        if b.optional_port("MASTER_PORT") is None:
            b.set("main_port", *self.port(environ))
        if per_node is not None:
            b.set("nproc_per_node", *per_node)
        return b
