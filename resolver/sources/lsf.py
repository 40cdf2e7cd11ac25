"""LSF with jsrun: ranks from jsrun's JSM_NAMESPACE_* variables, nodes from the job's rankfile.

`LSB_DJOB_RANKFILE` lists one host per line, once per slot: first the launch (batch) node, which
runs no task, then the compute hosts. The node rank is this host's index among the distinct
compute hosts in order of first appearance; the main address is the first compute host.
The file is read once, through the `read_text` probe, by the shared host-file rule
(`resolver.sources.host_file`: blank lines and `#` comments skipped), in one pass.

Hostname matching (Lightning compares `socket.gethostname()` exactly): an exact match wins;
otherwise the short names (first label, case-insensitive) are compared, and a unique match is
taken, so `node1.cluster` finds `node1` and the other way round. IP addresses are compared
exactly only: their first label is not a name.

The main port is `MASTER_PORT` when set, else the job's port by the shared rule
(`resolver.sources.job_port`) with Lightning's numbers: ``10000 + LSB_JOBID mod 1000``. An element
of a job array (`LSB_JOBINDEX` > 0; the elements share `LSB_JOBID`) adds its index,
``10000 + (LSB_JOBID + LSB_JOBINDEX) mod 1000``, so that up to 1000 elements of one array sharing a
node do not all pick one port, and records `array_job_id`/`array_task_id`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import InvalidVariable, ProbeFailed, shown
from resolver.origin import Origin
from resolver.sources import (
    Builder,
    Detection,
    JobFacts,
    host_file,
    job_port,
    read_job_facts,
    same_host,
    short_host,
    this_host,
)
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "CANDIDATES",
    "DETECTION_VARIABLES",
    "INDEX",
    "NAME",
    "OFFERS",
    "PORT_BASE",
    "PORT_SPAN",
    "RANKFILE",
    "RANK_VARIABLES",
    "Lsf",
    "compute_hosts",
    "default_port",
    "job_facts",
    "match_host",
]

NAME = "lsf"
RANKFILE = "LSB_DJOB_RANKFILE"
CANDIDATES = entry(NAME).candidates  # Lightning's four: LSB_JOBID, the rank file, jsrun's local rank and size
DETECTION_VARIABLES = CANDIDATES.names
RANK_VARIABLES = (  # (field, variable, what jsrun means by it, minimum)
    ("world_size", "JSM_NAMESPACE_SIZE", "the number of tasks", 1),
    ("global_rank", "JSM_NAMESPACE_RANK", "the task's global rank", 0),
    ("local_rank", "JSM_NAMESPACE_LOCAL_RANK", "the task's rank on its node", 0),
)
PORT_BASE = 10000  # Lightning's numbers: 10000 + LSB_JOBID mod 1000, the same on every rank
PORT_SPAN = 1000
INDEX = "LSB_JOBINDEX"  # a job array element's index; 0 (or unset) for a job that is not an array
_PREVIEW = 5  # compute hosts quoted when this host is not among them


def compute_hosts(text: str, path: str) -> tuple[str, dict[str, int]]:
    """The launch node and `{compute host: node rank}` in order of first appearance, in one pass.

    A line with more than a host name, an empty file and a file with no compute host are
    `InvalidVariable`s naming the rankfile.
    """
    lines = host_file(text, RANKFILE, path)
    launch = lines[0][0]
    index: dict[str, int] = {}
    for number, words in enumerate(lines):
        if len(words) > 1:
            raise InvalidVariable(RANKFILE, path, _one_host_per_line(text, words))
        if number and words[0] not in index:  # line 0 is the launch node; it may be listed again below
            index[words[0]] = len(index)
    if not index:
        raise InvalidVariable(
            RANKFILE, path, f"a rankfile listing the compute hosts after the launch node; it lists only {launch!r}"
        )
    return launch, index


def _one_host_per_line(text: str, words: list[str]) -> str:
    """What a rankfile holds, quoting the first line of `words` (an Open MPI rankfile's `rank 0=a slot=0`)."""
    number, line = next((n, line) for n, line in enumerate(text.split("\n"), start=1) if line.split() == words)
    return f"a rankfile with one host name per line; line {number} is {shown(line)}"


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


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The job's id and name, and its array ids for an element of a job array.

    LSF sets LSB_JOBINDEX for every job: 0 outside a job array, else this element's index (array
    elements share LSB_JOBID).
    """
    facts = read_job_facts(environ, (("job_id", "LSB_JOBID"), ("job_name", "LSB_JOBNAME")))
    if env.optional_integer(environ, INDEX):
        facts["array_job_id"] = (environ["LSB_JOBID"], Origin.env("LSB_JOBID"))
        facts["array_task_id"] = (environ[INDEX], Origin.env(INDEX))
    return facts


def default_port(environ: Mapping[str, str]) -> tuple[int, Origin]:
    """The job's main port and its origin, the same on every rank (see the module docstring)."""
    job = env.integer(environ, "LSB_JOBID", source=NAME)
    index = env.optional_integer(environ, INDEX)
    if not index:
        return job_port(job, "LSB_JOBID", base=PORT_BASE, span=PORT_SPAN, variables=("LSB_JOBID",))
    # elements of one array often share a node: Lightning's formula would give them all one port
    return job_port(
        job,
        "LSB_JOBID",
        base=PORT_BASE,
        span=PORT_SPAN,
        offset=index,
        offset_term=INDEX,
        variables=("LSB_JOBID", INDEX),
    )


class Lsf:
    """Lightning's LSFEnvironment, as a pure function of the environment and the rankfile."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        declined = CANDIDATES.unmet(environ, "a jsrun task")
        if declined is not None:
            return declined
        return Detection(
            True, f"{', '.join(DETECTION_VARIABLES[:-1])} and {DETECTION_VARIABLES[-1]} are set", DETECTION_VARIABLES
        )

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        for field, variable, what, minimum in RANK_VARIABLES:
            env.text(environ, variable, source=NAME, expected=f"{what}, set by jsrun: start the program with jsrun")
            b.integer(field, variable, minimum=minimum)
        world: int = b.values["world_size"]
        b.optional_integer("local_world_size", "JSM_NAMESPACE_LOCAL_SIZE", minimum=1)
        port = default_port(environ)  # LSB_JOBID and LSB_JOBINDEX are checked even when MASTER_PORT is set
        b.facts(job_facts(environ))
        if b.optional_port("MASTER_PORT") is None:
            b.set("main_port", *port)
        b.rule("creates_processes_externally", True, "lsf: jsrun starts every task")

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
        b.formula("main_address", next(iter(index)), f"first compute host of {RANKFILE} ({path})", RANKFILE)
        if len(index) <= world:
            b.formula("num_nodes", len(index), f"distinct {where}", RANKFILE)
            b.formula("hostnames", tuple(index), f"{where}, in order of first appearance", RANKFILE)
        else:
            b.warn(
                f"{RANKFILE} lists {len(index)} compute hosts but JSM_NAMESPACE_SIZE={world}: jsrun runs on only "
                "part of the job's hosts, so num_nodes is unknown and node ranks follow the rankfile"
            )

        hostname = this_host(probes)
        listed = match_host(hostname, index, path)
        if listed is None:
            if same_host(hostname, launch):
                expected = (
                    f"a rankfile listing this host {hostname!r} as a compute host; it is the launch node "
                    f"(the first line), which runs no task: start the program with jsrun"
                )
            else:
                preview = ", ".join(repr(h) for h in list(index)[:_PREVIEW])
                more = f" and {len(index) - _PREVIEW} more" if len(index) > _PREVIEW else ""
                expected = (
                    f"a rankfile listing this host {hostname!r} ({Origin.probe('hostname')}) among its compute "
                    f"hosts; it lists {preview}{more}"
                )
            raise InvalidVariable(RANKFILE, path, expected)
        how = "" if listed == hostname else f" (matched {listed!r} by short name)"
        b.formula("node_rank", index[listed], f"index of hostname {hostname!r}{how} among {where}", RANKFILE)
        return b.build()


OFFERS = Offers(job_facts=job_facts)
