"""Rules that several sources share, stated once: the job's port, host files.

- `job_port`: every process of a job computes the same main port alone, from the job's number:
  ``base + (job * stride + offset) mod span``. A stride prime to the span gives consecutive jobs
  (and the steps or array tasks in `offset`) different ports; each source documents its numbers.
- `host_file` / `read_host_file`: the host files schedulers write (``PE_HOSTFILE``,
  ``PBS_NODEFILE``, ``SLURM_HOSTFILE``, LSF's rank file): one line per host or slot, blank lines
  and ``#`` comments skipped, the first word a host; an error names the variable, the file and the
  line.
- `first_host_here`: the first host of such a file as the main address, only on that host.

The one process a scheduler starts (Grid Engine, PBS) is `resolver.sources._hostfile.HostFileJob`'s,
loaded by those two sources only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.environ import is_address
from resolver.errors import InvalidVariable, shown
from resolver.origin import Origin
from resolver.sources._kit import JobFacts, read_if_here, same_host, this_host

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "LOCAL_ADDRESS",
    "first_host_here",
    "host_file",
    "job_endpoint",
    "job_port",
    "read_host_file",
]

LOCAL_ADDRESS = "127.0.0.1"  # the main address of a world of one


def job_port(
    job: int,
    job_term: str,
    *,
    base: int,
    span: int,
    stride: int = 1,
    offset: int | None = None,
    offset_term: str = "",
    variables: tuple[str, ...] = (),
) -> tuple[int, Origin]:
    """``base + (job * stride + offset) mod span`` and its origin, which shows the rule and its numbers.

    `job_term`/`offset_term` name the terms in words (`JOB_ID`, `SGE_TASK_ID`); `variables` are the
    environment variables they were read from.
    """
    port = base + (job * stride + (offset or 0)) % span

    def written(j: object, o: object) -> str:
        term = f"{j} * {stride}" if stride != 1 else f"{j}"
        return f"{base} + ({term} + {o}) mod {span}" if offset is not None else f"{base} + {term} mod {span}"

    return port, Origin.formula(f"{written(job_term, offset_term)} ({written(job, offset)})", variables=variables)


def host_file(text: str, variable: str, path: str, *, columns: str = "host", counted: bool = False) -> list[list[str]]:
    """The words of each line of a host file whose first word is a host; blank and `#` lines skipped.

    `columns` says what a line holds, for the error (`host slots queue processors`): with the default,
    `host`, a line holds the host alone. `counted`: the second word is a count of slots.
    """
    lines: list[list[str]] = []
    for number, line in enumerate(text.split("\n"), start=1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        alone = columns == "host" and len(words) > 1
        slots = counted and not (len(words) > 1 and words[1].isascii() and words[1].isdigit())
        if alone or slots or not is_address(words[0]):
            raise InvalidVariable(variable, path, f"a file of '{columns}' lines; line {number} is {shown(line)}")
        lines.append(words)
    if not lines:
        raise InvalidVariable(variable, path, "a file listing the job's hosts; it is empty")
    return lines


def read_host_file(
    environ: Mapping[str, str], probes: Probes, variable: str, *, columns: str = "host", counted: bool = False
) -> list[list[str]] | None:
    """`host_file` of the file `variable` names, read through the file probe; None where it is unset or
    this host cannot read it (schedulers write some host files on one host only)."""
    path = environ.get(variable)
    if not path:
        return None
    text = read_if_here(probes, variable, path)
    return None if text is None else host_file(text, variable, path, columns=columns, counted=counted)


def first_host_here(
    environ: Mapping[str, str], probes: Probes, variable: str, hosts: list[list[str]] | None
) -> tuple[str, Origin] | None:
    """The first host of the file `variable` names, when it is this host (the hostname probe); None otherwise.

    Where the MPI launchers put rank 0 inside a scheduler's job. None where the file could not be read
    and where this host is another one: ranks placed elsewhere must not be sent to a host that runs
    none of them.
    """
    if hosts is None:
        return None
    first = hosts[0][0]
    if not same_host(this_host(probes), first):
        return None
    return first, Origin.formula(f"first host of {variable} ({environ[variable]}), this host", variables=(variable,))


def job_endpoint(port: tuple[int, Origin], host: tuple[str, Origin] | None) -> JobFacts:
    """What a scheduler gives the MPI ranks inside its job (a registry `endpoint`): the job's port, and
    the address when it knows it (`first_host_here`, on one node)."""
    found: JobFacts = {"main_port": port}
    if host is not None:
        found["main_address"] = host
    return found
