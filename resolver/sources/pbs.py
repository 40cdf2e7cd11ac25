"""PBS Professional, OpenPBS and Torque: the job around the process, not the ranks.

PBS is an allocation layer, like Grid Engine. It starts the job script (or the executable of
``qsub -- prog``, or the ``qsub -I`` shell) on the first host of the job, the *mother superior*,
and numbers nothing: the ranks come from the MPI launcher the script runs (Cray PALS on HPE
systems, Hydra, Open MPI), which reads the job's hosts from ``PBS_NODEFILE`` or the TM interface.
So:

- The job script resolves as this source: a world of one (rank 0 of 1 on node 0 of 1) that may
  start workers itself (``creates_processes_externally=False``), with the job's facts: ``PBS_JOBID``,
  ``PBS_JOBNAME``, and the array index (``PBS_ARRAY_INDEX`` and ``PBS_ARRAY_ID`` in PBS Pro/OpenPBS
  ``qsub -J``; ``PBS_ARRAYID`` in Torque ``qsub -t``). Main address 127.0.0.1, main port from the
  job id (below); ``MASTER_ADDR``/``MASTER_PORT`` win. When the job has several hosts (``PBS_NODEFILE``
  lists more than one, or Torque's ``PBS_NUM_NODES`` > 1) it warns: start the ranks with an MPI launcher.
- A ``pbsdsh`` task resolves the same way, as one process with the job's facts, and says so in a
  warning. ``pbsdsh`` starts a program through TM "for each line in $PBS_NODEFILE" by default, but
  ``-c copies``, ``-n index`` and ``-s`` change how many run and when, and nothing in a task's
  environment says which was used. Its variables are not ranks: ``PBS_TASKNUM`` is the TM task id
  (an id the MOM hands out, not a dense 0..n-1 numbering), ``PBS_NODENUM`` the index of the host in
  the job's host list, ``PBS_VNODENUM`` the index of the vnode (the line of ``PBS_NODEFILE``) it runs
  on (pbsdsh(1B): "the TM task id, the node identifier, and the cpu (virtual node) identifier").
  Taking ``PBS_VNODENUM`` as a rank of ``wc -l $PBS_NODEFILE`` would make ``pbsdsh -n 3 prog`` wait
  forever for peers that never start, so no world is inferred: a program that wants one is started
  by an MPI launcher, or its starter sets ``RANK``/``WORLD_SIZE``/``MASTER_ADDR`` (the default source
  reads them; this source then declines, as it does for every launcher inside the job).
- MPI ranks inside the job are the MPI source's (earlier in the detection order; this source
  declines when an MPI launcher's variables say the world is larger than one). PBS adds what it
  knows through the registry: `job_facts` (``SCHEDULERS``: the job id, name and array index reach
  the ranks) and `main_endpoint` (``ENDPOINTS``): the job's port on every rank, and, when every
  rank is on one node, the first host of ``PBS_NODEFILE``, the mother superior, where the MPI
  launchers put rank 0. The file is read through the ``read_text`` probe and is given as the
  address only when this host is that host (same name, or same short name): on one node every
  rank reads the same file and has the same host name, so all of them skip the exchange or none
  does. Across nodes the address is left to the MPI exchange (the file is written on the mother
  superior; a file some ranks cannot read must not decide who joins a collective).

Detection: ``PBS_JOBID`` and ``PBS_ENVIRONMENT`` (``PBS_BATCH`` or ``PBS_INTERACTIVE``) both set:
PBS exports both to every job; a login shell on a submit host has only ``PBS_O_*``-free
variables such as ``PBS_DEFAULT``.

The main port, unless ``MASTER_PORT`` is set: ``20000 + (SEQ * 8191 + INDEX) mod 10000``, where SEQ
is the sequence number that starts ``PBS_JOBID`` (``1234.server``, ``1234[7].server``, Torque's
``1234-7.server``) and INDEX the array index (0 outside arrays). As for Grid Engine: every rank
computes it alone, 8191 is prime to 10000 so consecutive jobs and the subjobs of one array get
different ports, and 20000-29999 stays below Linux's ephemeral ports.

Facts from OpenPBS's qsub(1B) "ENVIRONMENT VARIABLES" (PBS_ENVIRONMENT, PBS_JOBID, PBS_JOBNAME,
PBS_NODEFILE, PBS_JOBDIR, PBS_QUEUE, PBS_O_*; job ids ``sequence_number.servername`` and
``sequence_number[].servername``), pbsdsh(1B) of OpenPBS and Torque (one task per ``PBS_NODEFILE``
line; ``PBS_TASKNUM``, ``PBS_NODENUM``, ``PBS_VNODENUM``), the PBS Professional User's Guide
(``qsub -J``, ``PBS_ARRAY_INDEX``, ``PBS_ARRAY_ID``) and Torque's qsub (``-t``, ``PBS_ARRAYID``,
``PBS_NP``, ``PBS_NUM_NODES``, ``PBS_NUM_PPN``): https://github.com/openpbs/openpbs/tree/master/doc/man1
and http://docs.adaptivecomputing.com/torque/. No PBS server can run here: the tests use builders
made from those documents (resolver/testing/pbs.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import InvalidVariable
from resolver.origin import Origin
from resolver.sources import Builder, Detection, JobFacts, first_host_here, host_file
from resolver.sources._hostfile import HostFileJob, scheduler_port
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "CANDIDATES",
    "ENVIRONMENTS",
    "HOSTFILE",
    "JOB",
    "NAME",
    "OFFERS",
    "TASK_VARIABLES",
    "Pbs",
    "default_port",
    "in_job",
    "job_facts",
    "main_endpoint",
    "main_host",
    "node_hosts",
]

NAME = "pbs"
CANDIDATES = entry(NAME).candidates  # PBS_JOBID and PBS_ENVIRONMENT: PBS exports both to every job
ENVIRONMENTS = ("PBS_BATCH", "PBS_INTERACTIVE")
HOSTFILE = "PBS_NODEFILE"
TASK_VARIABLES = ("PBS_TASKNUM", "PBS_NODENUM", "PBS_VNODENUM")  # pbsdsh / tm_spawn: not ranks
# 1234.server, 1234[].server (an array), 1234[7].server (a subjob), Torque's 1234-7.server; server optional
_JOB_ID = re.compile(r"([0-9]{1,18})(?:\[([0-9]{0,18})\]|-([0-9]{1,18}))?(?:\.[A-Za-z0-9_.-]+)?")
_JOB_ID_EXPECTED = "a PBS job id: SEQUENCE[.SERVER], SEQUENCE[INDEX].SERVER or SEQUENCE-INDEX.SERVER"


def _job_id(environ: Mapping[str, str]) -> tuple[int, int | None]:
    """The sequence number of ``PBS_JOBID`` and the array index it carries, if any."""
    raw = env.text(environ, "PBS_JOBID", source=NAME, expected="the job's id, set by PBS for every job")
    found = _JOB_ID.fullmatch(raw)
    if found is None:
        raise InvalidVariable("PBS_JOBID", raw, _JOB_ID_EXPECTED)
    index = found.group(2) or found.group(3)
    return int(found.group(1)), int(index) if index else None


def _array_index(environ: Mapping[str, str]) -> tuple[int, str] | None:
    """This subjob's index and the variable it came from; None outside job arrays."""
    for variable in ("PBS_ARRAY_INDEX", "PBS_ARRAYID"):  # PBS Pro / OpenPBS, Torque
        index = env.optional_integer(environ, variable)
        if index is not None:
            return index, variable
    return None


def _environment(environ: Mapping[str, str]) -> str:
    value = env.text(environ, "PBS_ENVIRONMENT", source=NAME, expected=f"one of {', '.join(ENVIRONMENTS)}")
    if value not in ENVIRONMENTS:
        raise InvalidVariable("PBS_ENVIRONMENT", value, f"one of {', '.join(ENVIRONMENTS)}")
    return value


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The job's facts with their origins: job id and name, array job and index.

    Empty outside a PBS job; a malformed value is an `InvalidVariable` naming it.
    """
    if not in_job(environ):
        return {}
    _job_id(environ)
    facts: JobFacts = {"job_id": (environ["PBS_JOBID"], Origin.env("PBS_JOBID"))}
    name = env.optional_text(environ, "PBS_JOBNAME")
    if name is not None:
        facts["job_name"] = (name, Origin.env("PBS_JOBNAME"))
    index = _array_index(environ)
    if index is not None:
        facts["array_task_id"] = (str(index[0]), Origin.env(index[1]))
        if "PBS_ARRAY_ID" in environ:
            facts["array_job_id"] = (environ["PBS_ARRAY_ID"], Origin.env("PBS_ARRAY_ID"))
    return facts


def default_port(environ: Mapping[str, str]) -> tuple[int, Origin]:
    """The job's main port and its origin: the same on every process of one job (or subjob)."""
    sequence, in_id = _job_id(environ)
    found = _array_index(environ)
    variables: tuple[str, ...] = ("PBS_JOBID",)
    if found is not None:
        index, term, variables = found[0], found[1], ("PBS_JOBID", found[1])
    elif in_id is not None:
        index, term = in_id, "PBS_JOBID's index"
    else:
        index, term = 0, "0"
    return scheduler_port(sequence, "PBS_JOBID's sequence", offset=index, offset_term=term, variables=variables)


def node_hosts(text: str, path: str) -> list[str]:
    """``PBS_NODEFILE``'s hosts, one per line (one line per slot, first the mother superior)."""
    return [words[0] for words in host_file(text, HOSTFILE, path, columns="host")]


JOB = HostFileJob(NAME, "PBS", CANDIDATES, HOSTFILE, default_port)
in_job = JOB.in_job
main_host = JOB.main_host
main_endpoint = JOB.main_endpoint


def _slots_here(environ: Mapping[str, str], probes: Probes, lines: list[list[str]] | None) -> tuple[int, Origin] | None:
    """The slots PBS gave this host, the workers its process may start: Torque's ``PBS_NUM_PPN``, else
    the `lines` of ``PBS_NODEFILE`` (one per slot) naming this host, when this host is the first."""
    ppn = env.optional_integer(environ, "PBS_NUM_PPN", minimum=1)
    if ppn is not None:
        return ppn, Origin.env("PBS_NUM_PPN")
    if first_host_here(environ, probes, HOSTFILE, lines) is None or lines is None:
        return None
    slots = sum(1 for words in lines if words[0] == lines[0][0])
    return slots, Origin.formula(f"lines of {HOSTFILE} naming this host, the first", variables=(HOSTFILE,))


class Pbs:
    """The one process PBS started (job script, ``qsub -I`` shell, ``pbsdsh`` task), with the job's facts."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        started = "job script, interactive shell or pbsdsh task"
        return JOB.detect(environ, started=started, also=env.present(environ, *TASK_VARIABLES))

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        JOB.refuse_rank(environ)
        _environment(environ)
        facts = job_facts(environ)
        if not facts:
            _job_id(environ)  # names the missing variable
        lines = JOB.hosts(environ, probes)  # PBS_NODEFILE, read once
        b = JOB.one_process(
            environ,
            facts,
            started="PBS starts one process per job script, interactive shell or pbsdsh task and numbers none",
            per_node=_slots_here(environ, probes, lines),
        )
        self._warn(b, environ, lines)
        return b.build()

    @staticmethod
    def _warn(b: Builder, environ: Mapping[str, str], lines: list[list[str]] | None) -> None:
        job = environ["PBS_JOBID"]
        for variable in TASK_VARIABLES:
            env.optional_integer(environ, variable)  # malformed values are named even if unused
        nodes = (
            len(dict.fromkeys(words[0] for words in lines))
            if lines is not None
            else env.optional_integer(environ, "PBS_NUM_NODES", minimum=1)
        )
        if "PBS_VNODENUM" in environ and environ.get("PBS_VNODENUM") != "0":
            b.warn(
                f"a pbsdsh (TM) task of PBS job {job} on vnode {environ['PBS_VNODENUM']}: PBS_TASKNUM, PBS_NODENUM "
                "and PBS_VNODENUM are a task id and host and vnode indices, not ranks, and pbsdsh -c/-n decide how "
                "many tasks run, so it resolves as a world of one; start the program with an MPI launcher, or have "
                "the starter set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (the default source reads them)"
            )
        elif nodes is not None and nodes > 1:
            b.warn(
                f"PBS job {job} has {nodes} hosts but PBS started only this process: it resolves as a world of one; "
                "start the ranks with an MPI launcher (mpiexec, mpirun or Cray PALS read the job's hosts)"
            )


OFFERS = Offers(job_facts=job_facts, main_endpoint=main_endpoint)
