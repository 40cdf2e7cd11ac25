"""LSF with jsrun: ranks from jsrun's JSM_NAMESPACE_* variables, nodes from the job's rankfile.

`LSB_DJOB_RANKFILE` lists one host per line, once per slot: first the launch (batch) node, which
runs no task, then the compute hosts. The node rank is this host's index among the distinct
compute hosts in order of first appearance; the main address is the first compute host.
The file is read once, through the `read_text` probe, in one pass.

Hostname matching (Lightning compares `socket.gethostname()` exactly): an exact match wins;
otherwise the short names (first label, case-insensitive) are compared, and a unique match is
taken, so `node1.cluster` finds `node1` and the other way round. IP addresses are compared
exactly only: their first label is not a name.

The main port is `MASTER_PORT` when set, else Lightning's `LSB_JOBID % 1000 + 10000`. An element
of a job array (`LSB_JOBINDEX` > 0; the elements share `LSB_JOBID`) takes
`(LSB_JOBID + LSB_JOBINDEX) % 1000 + 10000` instead, so that up to 1000 elements of one array
sharing a node do not all pick one port, and records `array_job_id`/`array_task_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.environ import is_address
from resolver.errors import InvalidVariable, ProbeFailed, shown
from resolver.sources import Builder, Detection, JobFacts, read_job_facts, same_host, short_host, this_host
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "DETECTION_VARIABLES",
    "INDEX",
    "NAME",
    "PORT_BASE",
    "RANKFILE",
    "RANK_VARIABLES",
    "Lsf",
    "compute_hosts",
    "job_facts",
    "match_host",
]

NAME = "lsf"
RANKFILE = "LSB_DJOB_RANKFILE"
# Lightning's detection set; JSM_NAMESPACE_RANK is required too, but only once LSF is chosen
DETECTION_VARIABLES = ("LSB_JOBID", RANKFILE, "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE")
RANK_VARIABLES = (  # (field, variable, what jsrun means by it, minimum)
    ("world_size", "JSM_NAMESPACE_SIZE", "the number of tasks", 1),
    ("global_rank", "JSM_NAMESPACE_RANK", "the task's global rank", 0),
    ("local_rank", "JSM_NAMESPACE_LOCAL_RANK", "the task's rank on its node", 0),
)
PORT_BASE = 10000  # Lightning's formula: LSB_JOBID % 1000 + 10000, the same on every rank
INDEX = "LSB_JOBINDEX"  # a job array element's index; 0 (or unset) for a job that is not an array
_PREVIEW = 5  # compute hosts quoted when this host is not among them


def compute_hosts(text: str, path: str) -> tuple[str, dict[str, int]]:
    """The launch node and `{compute host: node rank}` in order of first appearance, in one pass.

    Blank lines and surrounding whitespace are ignored; a line that is not a host name, an
    empty file and a file with no compute host are `InvalidVariable`s naming the rankfile.
    """
    launch: str | None = None
    index: dict[str, int] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        host = line.strip()
        if not host or host in index:
            continue
        if not is_address(host):
            raise InvalidVariable(
                RANKFILE, path, f"a rankfile with one host name per line; line {number} is {shown(line)}"
            )
        if launch is None:
            launch = host
        else:
            index[host] = len(index)
    if launch is None:
        raise InvalidVariable(RANKFILE, path, "a rankfile listing the launch node, then the compute hosts; it is empty")
    if not index:
        raise InvalidVariable(
            RANKFILE, path, f"a rankfile listing the compute hosts after the launch node; it lists only {launch!r}"
        )
    return launch, index


def match_host(hostname: str, index: Mapping[str, int], path: str) -> str | None:
    """The rankfile entry that is this host: the exact name, else the unique one with its short name."""
    if hostname in index:
        return hostname
    short = short_host(hostname)
    if short is None:
        return None
    found = [host for host in index if short_host(host) == short]
    if len(found) > 1:
        raise InvalidVariable(
            RANKFILE,
            path,
            f"one compute host named {hostname!r}; by short name {short!r} it matches {found[:_PREVIEW]!r}"
            + ("..." if len(found) > _PREVIEW else ""),
        )
    return found[0] if found else None


def _jsrun_integer(environ: Mapping[str, str], name: str, what: str, *, minimum: int) -> int:
    env.text(environ, name, source=NAME, expected=f"{what}, set by jsrun: start the program with jsrun")
    return env.integer(environ, name, minimum=minimum, source=NAME)


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The job's id and name, and its array ids for an element of a job array.

    LSF sets LSB_JOBINDEX for every job: 0 outside a job array, else this element's index (array
    elements share LSB_JOBID).
    """
    facts = read_job_facts(environ, (("job_id", "LSB_JOBID"), ("job_name", "LSB_JOBNAME")))
    if env.optional_integer(environ, INDEX):
        facts["array_job_id"] = (environ["LSB_JOBID"], "env:LSB_JOBID")
        facts["array_task_id"] = (environ[INDEX], f"env:{INDEX}")
    return facts


def _job_and_port(b: Builder, environ: Mapping[str, str]) -> None:
    """The job's facts, and the main port (`MASTER_PORT`, else the formula on the job id)."""
    job = env.integer(environ, "LSB_JOBID", source=NAME)  # an integer even when MASTER_PORT is set
    b.facts(job_facts(environ))
    index = env.optional_integer(environ, INDEX) or 0
    if "MASTER_PORT" in environ:
        b.env("main_port", env.port(environ, "MASTER_PORT"), "MASTER_PORT")
    elif index:
        # elements of one array often share a node: Lightning's formula would give them all one port
        port = (job + index) % 1000 + PORT_BASE
        b.set(
            "main_port",
            port,
            f"formula:(LSB_JOBID + {INDEX}) % 1000 + {PORT_BASE} (({job} + {index}) % 1000 + {PORT_BASE})",
        )
    else:
        port = job % 1000 + PORT_BASE
        b.set("main_port", port, f"formula:LSB_JOBID % 1000 + {PORT_BASE} ({job} % 1000 + {PORT_BASE})")


class Lsf:
    """Lightning's LSFEnvironment, as a pure function of the environment and the rankfile."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        found = env.present(environ, *DETECTION_VARIABLES)
        if len(found) == len(DETECTION_VARIABLES):
            return Detection(
                True, "LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_LOCAL_RANK and JSM_NAMESPACE_SIZE are set", found
            )
        if not found:
            return Detection(False, f"not a jsrun task: {', '.join(DETECTION_VARIABLES)} not set")
        missing = ", ".join(name for name in DETECTION_VARIABLES if name not in found)
        return Detection(False, f"not a jsrun task: {missing} not set", found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        for field, variable, what, minimum in RANK_VARIABLES:
            b.env(field, _jsrun_integer(environ, variable, what, minimum=minimum), variable)
        world: int = b.values["world_size"]
        local_size = env.optional_integer(environ, "JSM_NAMESPACE_LOCAL_SIZE", minimum=1)
        if local_size is not None:
            b.env("local_world_size", local_size, "JSM_NAMESPACE_LOCAL_SIZE")
        _job_and_port(b, environ)
        b.set("creates_processes_externally", True, "source:lsf: jsrun starts every task")

        path = env.text(environ, RANKFILE, source=NAME, expected="the path of the job's rankfile, set by LSF")
        if not path:
            raise InvalidVariable(RANKFILE, path, "the path of the job's rankfile, not an empty string")
        try:
            text = probes.read_text(path)
        except ProbeFailed as exc:
            raise ProbeFailed(exc.probe, f"{RANKFILE}={path!r}: {exc.reason}") from exc
        if not isinstance(text, str):
            raise ProbeFailed("read_text", f"answered {shown(text)} for {RANKFILE}={path!r}: expected a str")
        launch, index = compute_hosts(text, path)
        where = f"compute hosts of {RANKFILE} ({path})"
        b.set("main_address", next(iter(index)), f"formula:first compute host of {RANKFILE} ({path})")
        if len(index) <= world:
            b.set("num_nodes", len(index), f"formula:distinct {where}")
        else:
            b.warn(
                f"{RANKFILE} lists {len(index)} compute hosts but JSM_NAMESPACE_SIZE={world}: jsrun runs on only "
                "part of the job's hosts, so num_nodes is unknown and node ranks follow the rankfile"
            )

        hostname = this_host(probes)
        entry = match_host(hostname, index, path)
        if entry is None:
            if same_host(hostname, launch):
                expected = (
                    f"a rankfile listing this host {hostname!r} as a compute host; it is the launch node "
                    f"(the first line), which runs no task: start the program with jsrun"
                )
            else:
                preview = ", ".join(repr(h) for h in list(index)[:_PREVIEW])
                more = f" and {len(index) - _PREVIEW} more" if len(index) > _PREVIEW else ""
                expected = (
                    f"a rankfile listing this host {hostname!r} (probe:hostname) among its compute hosts; "
                    f"it lists {preview}{more}"
                )
            raise InvalidVariable(RANKFILE, path, expected)
        how = "" if entry == hostname else f" (matched {entry!r} by short name)"
        b.set("node_rank", index[entry], f"formula:index of hostname {hostname!r}{how} among {where}")
        return b.build()
