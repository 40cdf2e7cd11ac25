"""Flux (flux-core): the tasks of ``flux run``/``flux submit``, from what the job shell sets in each.

Flux's job shell starts every task of a job with (flux-environment(7), "JOB ENVIRONMENT"):

    FLUX_TASK_RANK      the task's global rank (block mapping by default; ``--taskmap`` may change it)
    FLUX_TASK_LOCAL_ID  the task's rank on its node
    FLUX_JOB_SIZE       the number of tasks in the job
    FLUX_JOB_NNODES     the number of nodes (job shells) hosting the job's tasks
    FLUX_JOB_ID         the job id in F58 form (``ƒ2bzjbMyZMD``, RFC 19), a 64-bit integer underneath
    FLUX_URI            the local broker's URI
    PMI_RANK, PMI_SIZE, PMI_FD, PMI_SPAWNED   from the shell's ``pmi`` plugin, for MPI bootstrap

Because of the ``PMI_*`` variables Flux is detected before the MPI source (whose PMI rule would
otherwise take the task, with no local rank). Detection: ``FLUX_TASK_RANK`` and ``FLUX_JOB_SIZE``
set. A process started by ``mpirun``/``mpiexec`` inside a Flux task (``OMPI_COMM_WORLD_SIZE``,
``MV2_COMM_WORLD_SIZE`` or ``MPI_LOCALNRANKS`` for a world larger than one) inherits the task's
``FLUX_*`` variables but is an MPI rank: this source declines and the MPI source resolves it, with
Flux's job id (`job_facts`, in the registry's ``SCHEDULERS``). Flux's initial program (the
``flux batch`` script, the ``flux alloc`` shell) has ``FLUX_URI`` but none of the task variables
(Flux unsets them): the default source resolves it as one process, with a warning.

What the environment does not say, the node rank, the node's task count and task 0's host:

- one node (``FLUX_JOB_NNODES=1``): node rank 0, every task local; main address 127.0.0.1;
- one task per node (``FLUX_JOB_NNODES`` = ``FLUX_JOB_SIZE``): the task rank numbers the nodes
  (any numbering where tasks share a node rank exactly when they share a node will do);
- otherwise the task map is not in the environment (``flux job taskmap`` asks the broker), so the
  tasks exchange their host names through MPI (Flux's PMI bootstraps it), exactly as MPI ranks do
  (`resolver.sources.mpi.exchange`): node ranks are host indices in sorted order, and the main
  address is task 0's host. Across nodes task 0's host always comes from that exchange (or
  ``MASTER_ADDR``). Every task decides from ``FLUX_JOB_NNODES`` and ``FLUX_JOB_SIZE``, which all
  tasks share, so either all of them join the collective or none does.

The main port, unless ``MASTER_PORT`` is set, follows the job (the shared rule,
`resolver.sources.job_port`): ``20000 + ID mod 10000``, with ID
the F58 job id decoded to its integer (base 58, alphabet ``123456789ABCDEFGHJKLMNPQRSTUVWXYZab
cdefghijkmnopqrstuvwxyz``, prefix ``ƒ`` or ASCII ``f``; RFC 19's example: ``ƒuZZybuNNy`` =
6731191091817518). The job id's low bits are a sequence number and a generator id (RFC 19: 40 bits
of milliseconds, 14 of generator, 10 of sequence), so jobs submitted together get different ports;
20000-29999 stays below Linux's ephemeral ports. Every task computes it alone.

``FLUX_JOB_CC`` (``flux submit --cc=1-4``: this job's index in the set) is recorded as the array
task id; the copies are separate jobs with their own ids, so there is no array job id.

Facts from flux-core's flux-environment(7) (https://flux-framework.readthedocs.io/projects/flux-core/
en/latest/man7/flux-environment.html) and RFC 19 "Flux Locally Unique ID" (https://flux-framework.
readthedocs.io/projects/flux-rfc/en/latest/spec_19.html). No Flux instance runs here: the tests use
builders made from those documents (resolver/testing/flux.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from resolver import environ as env
from resolver.errors import InvalidVariable, shown
from resolver.origin import Origin
from resolver.sources import LOCAL_ADDRESS, Builder, Detection, JobFacts, all_of, job_port
from resolver.sources._offers import Offers
from resolver.sources.mpi import Launcher, exchange, started_by_mpirun
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "DETECTION_VARIABLES",
    "F58_ALPHABET",
    "F58_PREFIXES",
    "FLUX",
    "NAME",
    "OFFERS",
    "PORT_BASE",
    "PORT_SPAN",
    "TASK",
    "Flux",
    "default_port",
    "f58_decode",
    "job_facts",
]

NAME = "flux"
# what the job shell sets in every task; the registry's candidates add FLUX_URI (the initial program)
TASK = all_of("FLUX_TASK_RANK", "FLUX_JOB_SIZE")
DETECTION_VARIABLES = TASK.names
# the variables in the shape the MPI exchange checks the comm against
FLUX = Launcher(
    name="Flux job shell",
    marker="FLUX_TASK_RANK",
    rank="FLUX_TASK_RANK",
    size="FLUX_JOB_SIZE",
    local_rank="FLUX_TASK_LOCAL_ID",
    job_id="FLUX_JOB_ID",
)
F58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
F58_PREFIXES = ("\u0192", "f")  # ƒ, or ASCII f (FLUX_F58_FORCE_ASCII)
_F58_VALUES = {c: i for i, c in enumerate(F58_ALPHABET)}
_F58_EXPECTED = "a Flux job id: F58 (ƒ or f, then base-58 digits, RFC 19) or decimal, below 2**64"
PORT_BASE = 20000
PORT_SPAN = 10000
_SET_BY = "set by Flux's job shell for every task"
_ONE_NODE = "(FLUX_JOB_NNODES=1: one node)"


def f58_decode(variable: str, raw: str) -> int:
    """A Flux job id (F58 as Flux writes it, or decimal) as its integer; else `InvalidVariable` naming `variable`.

    Stricter than RFC 19's decoder, which ignores surrounding whitespace: Flux never writes any.
    """
    text = raw
    if text.startswith(F58_PREFIXES) and len(text) > 1:
        value = 0
        for char in text[1:]:
            digit = _F58_VALUES.get(char)
            if digit is None or value >= 1 << 64:
                raise InvalidVariable(variable, raw, _F58_EXPECTED)
            value = value * 58 + digit
    elif text.isascii() and text.isdigit() and len(text) <= 20:
        value = int(text)
    else:
        raise InvalidVariable(variable, raw, _F58_EXPECTED)
    if value >= 1 << 64:
        raise InvalidVariable(variable, raw, _F58_EXPECTED)
    return value


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The Flux job around the process: its id as Flux writes it (F58), and ``FLUX_JOB_CC``'s index.

    Empty outside a Flux job; a malformed id or index is an `InvalidVariable` naming it.
    """
    if "FLUX_JOB_ID" not in environ:
        return {}
    f58_decode("FLUX_JOB_ID", environ["FLUX_JOB_ID"])
    facts: JobFacts = {"job_id": (environ["FLUX_JOB_ID"], Origin.env("FLUX_JOB_ID"))}
    cc = env.optional_integer(environ, "FLUX_JOB_CC")
    if cc is not None:
        facts["array_task_id"] = (str(cc), Origin.env("FLUX_JOB_CC"))
    return facts


def default_port(environ: Mapping[str, str]) -> tuple[int, Origin]:
    """The job's main port and its origin, the same on every task: ``20000 + job id mod 10000``."""
    raw = env.text(environ, "FLUX_JOB_ID", source=NAME, expected=f"the job id, {_SET_BY}")
    job = f58_decode("FLUX_JOB_ID", raw)
    return job_port(job, "FLUX_JOB_ID", base=PORT_BASE, span=PORT_SPAN, variables=("FLUX_JOB_ID",))


class Flux:
    """A task started by Flux's job shell (``flux run``, ``flux submit``, ``flux bulksubmit``)."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        declined = TASK.unmet(environ, "a Flux task")
        if declined is not None:
            if not declined.variables and "FLUX_URI" in environ:
                return Detection(
                    False,
                    "FLUX_URI without FLUX_TASK_RANK: Flux's initial program (flux batch script, flux alloc shell), "
                    "not a task",
                    ("FLUX_URI",),
                    warning=(
                        "this is Flux's initial program (a flux batch script or flux alloc shell; FLUX_URI is set, "
                        "FLUX_TASK_RANK is not): it resolves as one process; start the tasks with flux run"
                    ),
                )
            return declined
        marker = started_by_mpirun(environ)
        if marker is not None:
            return Detection(
                False,
                f"an mpirun/mpiexec rank inside Flux job {shown(environ.get('FLUX_JOB_ID', '?'))} ({marker} is set): "
                "the MPI source resolves it, with the Flux job's id",
                (*TASK.names, marker),
            )
        return Detection(True, "FLUX_TASK_RANK and FLUX_JOB_SIZE are set (a task of Flux's job shell)", TASK.names)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        rank = b.integer("global_rank", "FLUX_TASK_RANK", expected=f"the task's global rank, {_SET_BY}")
        size = b.integer("world_size", "FLUX_JOB_SIZE", minimum=1, expected=f"the job's task count, {_SET_BY}")
        b.integer("local_rank", "FLUX_TASK_LOCAL_ID", expected=f"the task's rank on its node, {_SET_BY}")
        nodes = b.integer("num_nodes", "FLUX_JOB_NNODES", minimum=1, expected=f"the job's node count, {_SET_BY}")
        b.rule("creates_processes_externally", True, "flux: the job shell starts every task")
        b.facts(job_facts(environ))
        if nodes == 1:
            b.formula("node_rank", 0, f"0 {_ONE_NODE}", "FLUX_JOB_NNODES")
            b.formula("local_world_size", size, f"FLUX_JOB_SIZE {_ONE_NODE}", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES")
        elif nodes == size:
            one = f"(FLUX_JOB_NNODES = FLUX_JOB_SIZE = {size}: one task per node)"
            b.formula("node_rank", rank, f"FLUX_TASK_RANK {one}", "FLUX_TASK_RANK", "FLUX_JOB_NNODES", "FLUX_JOB_SIZE")
            b.formula("local_world_size", 1, f"1 {one}", "FLUX_JOB_NNODES", "FLUX_JOB_SIZE")
        if b.optional_address("MASTER_ADDR") is None and nodes == 1:
            b.formula("main_address", LOCAL_ADDRESS, f"{LOCAL_ADDRESS} {_ONE_NODE}", "FLUX_JOB_NNODES")
        if b.optional_port("MASTER_PORT") is None:
            b.set("main_port", *default_port(environ))
        if "node_rank" in b.values and "main_address" in b.values:
            return b.build()
        topology = exchange(b, environ, probes, FLUX)  # node ranks and task 0's host from the tasks' hostnames
        if topology.num_nodes != nodes:
            warning = (
                f"FLUX_JOB_NNODES={nodes} but the tasks' host names show {topology.num_nodes} nodes: node_rank "
                "follows the host names"
            )
            topology = attrs.evolve(topology, warnings=(*topology.warnings, warning))
        return topology


OFFERS = Offers(job_facts=job_facts)
