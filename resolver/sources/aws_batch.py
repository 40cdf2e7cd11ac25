"""AWS Batch multi-node parallel jobs: one container per node, its agent resolved here.

AWS Batch starts the job's container once on every node of a multi-node parallel (MNP) job and
gives it ``AWS_BATCH_JOB_NODE_INDEX`` (0..N-1), ``AWS_BATCH_JOB_NUM_NODES``,
``AWS_BATCH_JOB_MAIN_NODE_INDEX`` and, on every node but the main one,
``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS``; every Batch job also has ``AWS_BATCH_JOB_ID`` and
``AWS_BATCH_JOB_ATTEMPT`` (the first attempt is 1). The container, with no launcher around it, is
its node's agent (the node-agent rule that the node-level platforms share):

- node rank: the main node (``AWS_BATCH_JOB_MAIN_NODE_INDEX``, any index) hosts the rendezvous, so
  it is node rank 0; when it is not index 0, it and index 0 trade places, on every node alike;
- main address: ``AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS``. The main node is not told its
  own address: there it is ``MASTER_ADDR`` when set, else this host's name (the hostname probe;
  nothing here asks a metadata server). Only the main node's own workers connect through that
  name, and torchrun's store on node 0 listens on every interface;
- port: ``MASTER_PORT``, else torchrun's default 29500 (AWS Batch names none);
- job facts: ``job_id`` = ``AWS_BATCH_JOB_ID``, ``restart_count`` = ``AWS_BATCH_JOB_ATTEMPT`` - 1,
  for the agent and, through `job_facts` in the registry's ``SCHEDULERS``, for torchrun's workers
  or MPI ranks inside any Batch job.

A single-node Batch job has no node variables: it is not this source (its processes get the job
facts only).

Facts from https://docs.aws.amazon.com/batch/latest/userguide/mnp-env-vars.html (the MNP
variables) and https://docs.aws.amazon.com/batch/latest/userguide/job_env_vars.html
(``AWS_BATCH_JOB_ID``, ``AWS_BATCH_JOB_ATTEMPT``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import MissingVariable
from resolver.origin import Origin
from resolver.sources import Builder, JobFacts, read_job_facts, this_host
from resolver.sources._node import NodeAgent, agent
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "MAIN_ADDRESS", "MAIN_INDEX", "NAME", "OFFERS", "AwsBatch", "job_facts"]

NAME = "aws_batch"
CANDIDATES = entry(NAME).candidates  # both set on every node
MAIN_ADDRESS = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
MAIN_INDEX = "AWS_BATCH_JOB_MAIN_NODE_INDEX"


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The job id and the attempt (as a restart count) of any process inside an AWS Batch job."""
    facts = read_job_facts(environ, (("job_id", "AWS_BATCH_JOB_ID"),))
    attempt = env.optional_integer(environ, "AWS_BATCH_JOB_ATTEMPT", minimum=1)
    if attempt is not None:
        facts["restart_count"] = (
            attempt - 1,
            Origin.formula(f"AWS_BATCH_JOB_ATTEMPT - 1 ({attempt} - 1)", variables=("AWS_BATCH_JOB_ATTEMPT",)),
        )
    return facts


class AwsBatch(NodeAgent):
    """A node of an AWS Batch multi-node parallel job with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "AWS Batch"
    what = "a node of an AWS Batch multi-node parallel job"

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))
        node = b.integer("node_rank", "AWS_BATCH_JOB_NODE_INDEX")
        b.integer("num_nodes", "AWS_BATCH_JOB_NUM_NODES", minimum=1)
        if b.optional_address(MAIN_ADDRESS) is None:
            if node != b.read_integer(MAIN_INDEX):
                raise MissingVariable(
                    MAIN_ADDRESS,
                    "the main node's private IPv4 address (set on every node but the main one)",
                    source=NAME,
                )
            if b.optional_address("MASTER_ADDR") is None:
                b.set(
                    "main_address",
                    this_host(probes),
                    Origin.probe("hostname", note="the main node, which AWS Batch does not tell its address"),
                )
        return agent(b, main=MAIN_INDEX)


OFFERS = Offers(job_facts=job_facts)
