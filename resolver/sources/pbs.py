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
from resolver.environ import is_address
from resolver.errors import InvalidSettings, InvalidVariable, shown
from resolver.sources import Builder, Detection, JobFacts, read_if_here, same_host, this_host
from resolver.sources.mpi import rank_marker
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "DETECTION_VARIABLES",
    "ENVIRONMENTS",
    "HOSTFILE",
    "LOCAL_ADDRESS",
    "NAME",
    "PORT_BASE",
    "PORT_SPAN",
    "PORT_STRIDE",
    "RANK_VARIABLES",
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
DETECTION_VARIABLES = ("PBS_JOBID", "PBS_ENVIRONMENT")
ENVIRONMENTS = ("PBS_BATCH", "PBS_INTERACTIVE")
HOSTFILE = "PBS_NODEFILE"
TASK_VARIABLES = ("PBS_TASKNUM", "PBS_NODENUM", "PBS_VNODENUM")  # pbsdsh / tm_spawn: not ranks
RANK_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")  # a launcher inside the job: the default reads them
PORT_BASE = 20000
PORT_SPAN = 10000
PORT_STRIDE = 8191  # prime to PORT_SPAN
LOCAL_ADDRESS = "127.0.0.1"
# 1234.server, 1234[].server (an array), 1234[7].server (a subjob), Torque's 1234-7.server; server optional
_JOB_ID = re.compile(r"([0-9]{1,18})(?:\[([0-9]{0,18})\]|-([0-9]{1,18}))?(?:\.[A-Za-z0-9_.-]+)?")
_JOB_ID_EXPECTED = "a PBS job id: SEQUENCE[.SERVER], SEQUENCE[INDEX].SERVER or SEQUENCE-INDEX.SERVER"
_NOT_IN_A_JOB = Detection(False, "not a PBS job: PBS_JOBID and PBS_ENVIRONMENT are not set", ())


def in_job(environ: Mapping[str, str]) -> bool:
    """Whether PBS started this process or one of its ancestors (PBS_JOBID and PBS_ENVIRONMENT set)."""
    return "PBS_JOBID" in environ and "PBS_ENVIRONMENT" in environ


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
    facts: JobFacts = {"job_id": (environ["PBS_JOBID"], "env:PBS_JOBID")}
    name = env.optional_text(environ, "PBS_JOBNAME")
    if name is not None:
        facts["job_name"] = (name, "env:PBS_JOBNAME")
    index = _array_index(environ)
    if index is not None:
        facts["array_task_id"] = (str(index[0]), f"env:{index[1]}")
        if "PBS_ARRAY_ID" in environ:
            facts["array_job_id"] = (environ["PBS_ARRAY_ID"], "env:PBS_ARRAY_ID")
    return facts


def default_port(environ: Mapping[str, str]) -> tuple[int, str]:
    """The job's main port and its origin: the same on every process of one job (or subjob)."""
    sequence, in_id = _job_id(environ)
    found = _array_index(environ)
    if found is not None:
        index, term = found[0], found[1]
    elif in_id is not None:
        index, term = in_id, "PBS_JOBID's index"
    else:
        index, term = 0, "0"
    port = PORT_BASE + (sequence * PORT_STRIDE + index) % PORT_SPAN
    formula = (
        f"{PORT_BASE} + (PBS_JOBID's sequence * {PORT_STRIDE} + {term}) mod {PORT_SPAN} "
        f"({PORT_BASE} + ({sequence} * {PORT_STRIDE} + {index}) mod {PORT_SPAN})"
    )
    return port, f"formula:{formula}"


def node_hosts(text: str, path: str) -> list[str]:
    """``PBS_NODEFILE``'s hosts, one per line (one line per slot, first the mother superior)."""
    hosts: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        host = line.strip()
        if not host:
            continue
        if not is_address(host):
            raise InvalidVariable(HOSTFILE, path, f"a file of host names, one per line; line {number} is {shown(line)}")
        hosts.append(host)
    if not hosts:
        raise InvalidVariable(HOSTFILE, path, "a file listing the job's hosts; it is empty")
    return hosts


def _read_hosts(environ: Mapping[str, str], probes: Probes) -> list[str] | None:
    """The node file's hosts; None where it cannot be read (it is written on the mother superior)."""
    path = environ.get(HOSTFILE)
    if not path:
        return None
    text = read_if_here(probes, HOSTFILE, path)
    return None if text is None else node_hosts(text, path)


def main_host(environ: Mapping[str, str], probes: Probes) -> tuple[str, str] | None:
    """The first host of ``PBS_NODEFILE`` and its origin, when it is this host; None otherwise.

    The mother superior: where PBS runs the job script and the MPI launchers put rank 0. None where
    the file cannot be read, and None where this host (the hostname probe) is another one, so that
    ranks placed elsewhere (``mpiexec -hosts``) are not sent to a host that has none of them.
    """
    if not in_job(environ):
        return None
    hosts = _read_hosts(environ, probes)
    if hosts is None:
        return None
    first = hosts[0]
    if not same_host(this_host(probes), first):
        return None
    return first, f"formula:first host of {HOSTFILE} ({environ[HOSTFILE]}), this host"


def main_endpoint(environ: Mapping[str, str], probes: Probes, *, one_node: bool) -> JobFacts:
    """What PBS gives the MPI ranks inside its job: the job's port, and on one node the mother superior.

    Across nodes the address is left to the MPI exchange, which the node ranks need anyway.
    """
    if not in_job(environ):
        return {}
    found: JobFacts = {"main_port": default_port(environ)}
    host = main_host(environ, probes) if one_node else None
    if host is not None:
        found["main_address"] = host
    return found


class Pbs:
    """The one process PBS started (job script, ``qsub -I`` shell, ``pbsdsh`` task), with the job's facts."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        if not in_job(environ):
            found = env.present(environ, *DETECTION_VARIABLES)
            if not found:
                return _NOT_IN_A_JOB
            missing = ", ".join(name for name in DETECTION_VARIABLES if name not in found)
            return Detection(False, f"not a PBS job: {missing} not set", found)
        job = shown(environ["PBS_JOBID"])
        marker = rank_marker(environ)
        if marker is not None:
            return Detection(
                False,
                f"an MPI rank inside PBS job {job} ({marker} is set): the MPI source resolves it, with the job's facts",
                (*DETECTION_VARIABLES, marker),
            )
        ranks = env.present(environ, *RANK_VARIABLES)
        if ranks:
            return Detection(
                False,
                f"{', '.join(ranks)} set by a launcher inside PBS job {job}: the default source reads them",
                (*DETECTION_VARIABLES, *ranks),
            )
        tasks = env.present(environ, *TASK_VARIABLES)
        return Detection(
            True,
            f"PBS_JOBID={job} and PBS_ENVIRONMENT={shown(environ['PBS_ENVIRONMENT'])}: one process started by PBS "
            "(job script, interactive shell or pbsdsh task), a world of one",
            (*DETECTION_VARIABLES, *tasks),
        )

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        marker = rank_marker(environ)
        if marker is not None:
            raise InvalidSettings(
                f"source='pbs' resolves the one process PBS started, but {marker}={shown(environ[marker])}: an MPI "
                "launcher started this rank; resolve without source= (the MPI source takes it, with PBS's job facts)"
            )
        b = Builder(NAME, environ)
        _environment(environ)
        b.facts(job_facts(environ))
        if "job_id" not in b.values:
            _job_id(environ)  # names the missing variable
        one = "source:pbs: PBS starts one process per job script, interactive shell or pbsdsh task and numbers none"
        for field in ("world_size", "local_world_size", "num_nodes"):
            b.set(field, 1, one)
        for field in ("global_rank", "local_rank", "node_rank"):
            b.set(field, 0, one)
        b.set(
            "creates_processes_externally",
            False,
            "source:pbs: the only process PBS started here; it may start workers itself",
        )
        if b.optional_address("MASTER_ADDR") is None:
            b.set("main_address", LOCAL_ADDRESS, f"default:{LOCAL_ADDRESS} (a world of one)")
        if b.optional_port("MASTER_PORT") is None:
            port, origin = default_port(environ)
            b.set("main_port", port, origin)
        self._warn(b, environ, probes)
        return b.build()

    @staticmethod
    def _warn(b: Builder, environ: Mapping[str, str], probes: Probes) -> None:
        job = environ["PBS_JOBID"]
        for variable in TASK_VARIABLES:
            env.optional_integer(environ, variable)  # malformed values are named even if unused
        hosts = _read_hosts(environ, probes)
        nodes = (
            len(dict.fromkeys(hosts))
            if hosts is not None
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
