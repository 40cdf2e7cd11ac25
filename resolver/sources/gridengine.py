"""Grid Engine (Son of Grid Engine, Sun/Oracle/Univa/Altair Grid Engine): the job, not the ranks.

Grid Engine starts one process per job (the job script, or the binary of ``qsub -b y``), per
array task (``qsub -t``), per ``qrsh`` command and per ``qrsh -inherit`` task of a parallel job.
It numbers none of them: ``NSLOTS`` and ``NHOSTS`` count the slots and hosts granted (and on a
slave host a ``qrsh -inherit`` task sees only that host's), not processes. So:

- A process Grid Engine started resolves as this source: a world of one (rank 0 of 1 on node 0
  of 1) that may start workers itself (``creates_processes_externally=False``, as with the
  default source), with the job's facts: ``JOB_ID``, ``JOB_NAME``, the array task
  ``SGE_TASK_ID`` (the literal ``undefined`` outside array jobs), and ``RESTARTED``. Why this
  source rather than the default with job facts: ``explain`` then says what started the process,
  the port follows the job (below), and the two cases where one process is not what the user
  meant carry a warning: the master task of a parallel job that spans several hosts
  (``NHOSTS`` > 1: start the ranks with ``mpirun``, which reads the hosts itself), and a
  ``qrsh -inherit`` task (``PE`` set, no ``PE_HOSTFILE``: whoever started it must say its rank).
  The main address is 127.0.0.1 (``MASTER_ADDR`` wins): a world of one has no other host.
- MPI ranks started inside a parallel environment (Open MPI's ``mpirun`` reads ``PE_HOSTFILE``
  and starts remote daemons with ``qrsh -inherit``; MPICH's Hydra picks its SGE launcher by
  itself) are MPI's: the MPI source, earlier in the detection order, resolves them, and this
  source declines. Grid Engine adds what it knows through the registry: `job_facts` (the job's
  ids, array task and restart flag, with their variables: ``SCHEDULERS``) and `main_endpoint`
  (``ENDPOINTS``): the port from the job id (`default_port`), and, when every rank is on one
  node, the first host of ``PE_HOSTFILE`` (`main_host`), the master task's host, where Open MPI
  and Hydra both put rank 0. Those ranks then need no MPI exchange at all. The file exists only
  on the master host (elsewhere the ``read_text`` probe fails and `main_host` answers None), so
  across nodes the address is left to the MPI exchange, which the node ranks need anyway: a file
  that only some ranks can read must not decide which ranks join a collective.
- A process with ``WORLD_SIZE``, ``RANK`` or ``LOCAL_RANK`` set was started by a launcher inside
  the job (DeepSpeed's, Lightning's spawned workers, your own ``qrsh -inherit`` wrapper): this
  source declines and the default source reads those variables (the job's facts laid over).

Detection: ``JOB_ID`` and ``SGE_TASK_ID`` both set (Grid Engine's execd sets both for every job;
a shell on a submit host has only ``SGE_ROOT``/``SGE_CELL``), and no MPI launcher's variables.

The main port, unless ``MASTER_PORT`` is set: ``20000 + (JOB_ID * 8191 + task) mod 10000``, with
task = ``SGE_TASK_ID`` in an array job, else 0. Every rank of a job computes it alone, so no
collective is needed; 8191 is prime to 10000, so 10000 consecutive jobs, and the tasks of one
array, each get their own port; 20000-29999 stays below Linux's ephemeral ports (32768-60999),
where the MPI launchers' own listening sockets land.

``RESTARTED`` is a flag, not a count: 0, or 1 (restarted after a crash or a migration) or 2
(restarted from an application-level checkpoint). ``restart_count`` is 0 for 0 and 1 otherwise:
"restarted at least once", which is what a resume-from-checkpoint test needs.

Facts from Son of Grid Engine 8.1.9's manuals: submit(1) "ENVIRONMENT VARIABLES" (JOB_ID, JOB_NAME,
SGE_TASK_ID set to "undefined" for non-array jobs, NSLOTS, NHOSTS, PE, PE_HOSTFILE, RESTARTED and
its values 0/1/2) and sge_pe(5) ``$pe_hostfile`` (one line per host: host name, slots, queue, and
a processor/binding column or "UNDEFINED"); the rest measured on Debian 12's gridengine 8.1.9
(tests/captures-hpc/gridengine, tests/launchers/test_gridengine.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import InvalidVariable
from resolver.origin import Origin
from resolver.sources import Builder, Detection, JobFacts, host_file
from resolver.sources._hostfile import HostFileJob, scheduler_port
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "CANDIDATES",
    "HOSTFILE",
    "JOB",
    "NAME",
    "OFFERS",
    "RESTART_FLAGS",
    "UNDEFINED",
    "GridEngine",
    "default_port",
    "in_job",
    "job_facts",
    "main_endpoint",
    "main_host",
    "pe_hosts",
    "pe_task",
]

NAME = "gridengine"
CANDIDATES = entry(NAME).candidates  # JOB_ID and SGE_TASK_ID: set for every job
UNDEFINED = "undefined"  # SGE_TASK_ID (and SGE_TASK_FIRST/LAST/STEPSIZE) outside array jobs
HOSTFILE = "PE_HOSTFILE"
RESTART_FLAGS = {"0": 0, "1": 1, "2": 1}  # RESTARTED -> restart_count (at least once)


def _job_id(environ: Mapping[str, str]) -> int:
    env.text(environ, "JOB_ID", source=NAME, expected="the job's id, set by Grid Engine for every job")
    return env.check_integer("JOB_ID", environ["JOB_ID"], 1, expected="a Grid Engine job id: a decimal integer >= 1")


def _task(environ: Mapping[str, str]) -> int | None:
    """The array task index, or None outside an array job (SGE_TASK_ID=undefined)."""
    raw = env.text(environ, "SGE_TASK_ID", source=NAME, expected=f"an array task index, or {UNDEFINED!r}")
    if raw == UNDEFINED:
        return None
    return env.check_integer(
        "SGE_TASK_ID", raw, 1, expected=f"an array task index >= 1, or {UNDEFINED!r} outside array jobs"
    )


def pe_task(environ: Mapping[str, str]) -> bool:
    """A task of a parallel job started by ``qrsh -inherit`` (``PE`` set, no ``PE_HOSTFILE``).

    It is no job of its own: Grid Engine names it ``petask`` (JOB_NAME, REQUEST) and gives it its
    host's slot and host counts; MPI ranks on slave hosts run under such tasks (Open MPI's orted,
    Hydra's proxy).
    """
    return "PE" in environ and HOSTFILE not in environ


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The job's facts with their origins: job id and name, array job and task, restart count.

    Empty outside a Grid Engine job; a malformed value is an `InvalidVariable` naming it.
    """
    if not in_job(environ):
        return {}
    job = _job_id(environ)
    facts: JobFacts = {"job_id": (str(job), Origin.env("JOB_ID"))}
    name = env.optional_text(environ, "JOB_NAME")
    if name is not None and not pe_task(environ):  # a qrsh -inherit task's JOB_NAME is "petask", not the job's
        facts["job_name"] = (name, Origin.env("JOB_NAME"))
    task = _task(environ)
    if task is not None:
        facts["array_job_id"] = (str(job), Origin.env("JOB_ID"))
        facts["array_task_id"] = (str(task), Origin.env("SGE_TASK_ID"))
    restarted = env.optional_text(environ, "RESTARTED")
    if restarted is not None:
        if restarted not in RESTART_FLAGS:
            raise InvalidVariable(
                "RESTARTED", restarted, "0, 1 (restarted after a crash or migration) or 2 (from a checkpoint)"
            )
        count = RESTART_FLAGS[restarted]
        origin = (
            Origin.env("RESTARTED")
            if count == 0
            else Origin.formula(f"RESTARTED={restarted}: restarted at least once", variables=("RESTARTED",))
        )
        facts["restart_count"] = (count, origin)
    return facts


def default_port(environ: Mapping[str, str]) -> tuple[int, Origin]:
    """The job's main port and its origin: the same on every process of one job (or array task)."""
    job, task = _job_id(environ), _task(environ)
    if task is None:
        return scheduler_port(job, "JOB_ID", variables=("JOB_ID",))
    return scheduler_port(job, "JOB_ID", offset=task, offset_term="SGE_TASK_ID", variables=("JOB_ID", "SGE_TASK_ID"))


_COLUMNS = "host slots queue processors"


def pe_hosts(text: str, path: str) -> list[tuple[str, int]]:
    """``PE_HOSTFILE``'s (host, slots) lines in order; a malformed line is an `InvalidVariable` naming the file."""
    return [(words[0], int(words[1])) for words in host_file(text, HOSTFILE, path, columns=_COLUMNS, counted=True)]


JOB = HostFileJob(NAME, "Grid Engine", CANDIDATES, HOSTFILE, default_port, columns=_COLUMNS, counted=True)
in_job = JOB.in_job
main_host = JOB.main_host
main_endpoint = JOB.main_endpoint


def _slots_here(environ: Mapping[str, str]) -> tuple[int, Origin] | None:
    """The slots of a job on one host (``NHOSTS=1``): ``NSLOTS``, the workers its process may start."""
    if env.optional_integer(environ, "NHOSTS", minimum=1) != 1:
        return None  # NSLOTS counts the slots of every host
    slots = env.optional_integer(environ, "NSLOTS", minimum=1)
    return (
        None
        if slots is None
        else (slots, Origin.formula("NSLOTS on the job's one host", variables=("NSLOTS", "NHOSTS")))
    )


class GridEngine:
    """The one process Grid Engine started (job script, array task, qrsh), with the job's facts."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        return JOB.detect(environ, started="job script, array task or qrsh")

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        JOB.refuse_rank(environ)
        facts = job_facts(environ)
        if not facts:
            _job_id(environ)  # names whichever detection variable is missing
            _task(environ)
        b = JOB.one_process(
            environ,
            facts,
            started="Grid Engine starts one process per job, array task or qrsh and numbers none",
            per_node=_slots_here(environ),
        )
        self._warn(b, environ)
        return b.build()

    @staticmethod
    def _warn(b: Builder, environ: Mapping[str, str]) -> None:
        hosts = env.optional_integer(environ, "NHOSTS", minimum=1)
        if pe_task(environ):
            b.warn(
                f"a task of parallel job {environ['JOB_ID']} (PE={environ['PE']}) without {HOSTFILE}: started by "
                "qrsh -inherit, and Grid Engine numbers no tasks, so it resolves as a world of one; have the starter "
                "set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the default source reads them), or use mpirun"
            )
        elif hosts is not None and hosts > 1:
            b.warn(
                f"the master task of parallel job {environ['JOB_ID']} spans NHOSTS={hosts} hosts, but Grid Engine "
                "started only this process: it resolves as a world of one; start the ranks with mpirun "
                "(Open MPI and MPICH read the job's hosts from PE_HOSTFILE)"
            )


OFFERS = Offers(job_facts=job_facts, main_endpoint=main_endpoint)
