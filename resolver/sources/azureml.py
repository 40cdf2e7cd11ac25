"""Azure Machine Learning: a node's agent under its PyTorch distribution, and the main endpoint of its MPI jobs.

Azure ML marks every job's processes with ``AZUREML_*`` variables (``AZUREML_RUN_ID``: the run,
taken as the job id). Two kinds of distributed job concern this module:

- **PyTorch distribution.** Azure ML gives each node ``MASTER_ADDR`` (the first node's IP),
  ``MASTER_PORT``, ``NODE_RANK`` (the node's index, 0 first) and ``WORLD_SIZE``. A process it
  starts per process (``process_count_per_instance`` > 1) also gets ``RANK`` and ``LOCAL_RANK``:
  it is a worker that Azure ML launched, resolved by the default source as any torchrun-style
  process is (``LOCAL_RANK`` marks it, as on every node-level platform), with this
  module's job facts. With one process per node (the per-node launch, where the user's command
  starts the node's workers with torchrun), ``WORLD_SIZE`` counts the nodes and the process, with
  no ``LOCAL_RANK``, is the node's agent: node ``NODE_RANK`` of ``WORLD_SIZE``, main endpoint
  ``MASTER_ADDR:MASTER_PORT`` (else 29500).
- **MPI jobs.** Azure ML runs ``mpirun`` itself; its ranks carry ``OMPI_*`` and the MPI source
  resolves them (MPI comes first). Azure ML also names the main node: ``AZ_BATCH_MASTER_NODE`` =
  ``ip:port`` on several nodes, ``AZ_BATCHAI_MPI_MASTER_NODE`` = the address on one node.
  `main_endpoint` hands them to the MPI source (the registry's ``ENDPOINTS``), so its ranks need no
  MPI exchange for the main address (and port, when given).

Facts from https://learn.microsoft.com/azure/machine-learning/how-to-train-distributed-gpu
(SDK v1 and v2: the PyTorch distribution's variables, per-process and per-node launch, MPI jobs
with ``AZ_BATCH_MASTER_NODE``/``AZ_BATCHAI_MPI_MASTER_NODE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import InvalidVariable
from resolver.origin import Origin
from resolver.sources import Builder, Detection, JobFacts, read_job_facts
from resolver.sources._node import named_agent, started_inside
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "CANDIDATES",
    "MARKER",
    "NAME",
    "NODE_VARIABLES",
    "OFFERS",
    "AzureMl",
    "job_facts",
    "main_endpoint",
    "marked",
]

NAME = "azureml"
CANDIDATES = entry(NAME).candidates  # AZUREML_RUN_ID: every process of an Azure ML job
MARKER = CANDIDATES.names[0]
NODE_VARIABLES = ("NODE_RANK", "WORLD_SIZE", "MASTER_ADDR")  # the PyTorch distribution's, per node


def marked(environ: Mapping[str, str]) -> bool:
    """Whether Azure ML started this job (an ``AZUREML_*`` variable is set)."""
    return any(name.startswith("AZUREML_") for name in environ)


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The run id of any process inside an Azure ML job."""
    return read_job_facts(environ, (("job_id", MARKER),))


def _part(variable: str, part: str) -> Origin:
    """The origin of one part of `variable` (the address or the port of ``ip:port``)."""
    return Origin("env", variable, part, variables=(variable,))


def main_endpoint(environ: Mapping[str, str], probes: Probes, *, one_node: bool) -> JobFacts:
    """The main node Azure ML names for its MPI jobs: ``AZ_BATCH_MASTER_NODE`` (ip:port) or the
    one-node ``AZ_BATCHAI_MPI_MASTER_NODE`` (an address); {} outside Azure ML."""
    if not marked(environ):
        return {}
    raw = environ.get("AZ_BATCH_MASTER_NODE")
    if raw is not None:
        host, colon, port = raw.rpartition(":")
        if not colon or not host:
            raise InvalidVariable("AZ_BATCH_MASTER_NODE", raw, "the main node as ip:port")
        return {
            "main_address": (env.check_address("AZ_BATCH_MASTER_NODE", host), _part("AZ_BATCH_MASTER_NODE", "address")),
            "main_port": (env.check_port("AZ_BATCH_MASTER_NODE", port), _part("AZ_BATCH_MASTER_NODE", "port")),
        }
    if "AZ_BATCHAI_MPI_MASTER_NODE" in environ:
        variable = "AZ_BATCHAI_MPI_MASTER_NODE"
        return {"main_address": (env.address(environ, variable, source=NAME), Origin.env(variable))}
    return {}


class AzureMl:
    """An Azure ML node under the PyTorch distribution with one process per node: the node's agent."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        declined = CANDIDATES.unmet(environ, "an Azure ML job")
        if declined is not None:
            return declined
        inside = started_inside(environ, "Azure ML")
        if inside is not None:
            return inside
        found = env.present(environ, *NODE_VARIABLES)
        if len(found) < len(NODE_VARIABLES):
            return Detection(
                False,
                f"an Azure ML job without the PyTorch distribution's {', '.join(NODE_VARIABLES)}: one process, "
                "the default's (with the run's job facts)",
                (MARKER, *found),
            )
        return Detection(
            True,
            "an Azure ML node with the PyTorch distribution's variables and no LOCAL_RANK: the node's agent",
            (MARKER, *found, *env.present(environ, "MASTER_PORT")),
        )

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))
        return named_agent(b, node="NODE_RANK", nodes="WORLD_SIZE", address="MASTER_ADDR")


OFFERS = Offers(job_facts=job_facts, main_endpoint=main_endpoint)
