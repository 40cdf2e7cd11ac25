"""SkyPilot: the run command on each node of a cluster, resolved as that node's agent.

SkyPilot runs a task's ``run`` commands once on every node and gives them ``SKYPILOT_NODE_RANK``
(0..N-1), ``SKYPILOT_NODE_IPS`` (the nodes' IP addresses, one per line, the head node first),
``SKYPILOT_NUM_NODES``, ``SKYPILOT_NUM_GPUS_PER_NODE`` and ``SKYPILOT_TASK_ID``. Such a process,
with no launcher around it, is its node's agent (the node-agent rule that the node-level platforms share): node rank
``SKYPILOT_NODE_RANK`` of ``SKYPILOT_NUM_NODES`` (which must equal the number of IPs; without it,
their count), main address the first IP, ``nproc_per_node`` = ``SKYPILOT_NUM_GPUS_PER_NODE`` when
it is above 0 (a CPU node says 0: torchrun's default applies), port ``MASTER_PORT`` else 29500
(SkyPilot names none; its examples pick one), ``job_id`` = ``SKYPILOT_TASK_ID`` (also for
torchrun's workers and MPI ranks inside a task, through `job_facts`).

Facts from https://docs.skypilot.co/en/latest/running-jobs/environment-variables.html and
https://docs.skypilot.co/en/latest/running-jobs/distributed-jobs.html.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.sources import Builder, JobFacts, read_job_facts
from resolver.sources._node import NodeAgent, address_list, agent, node_count, per_node
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "NAME", "OFFERS", "SkyPilot", "job_facts"]

NAME = "skypilot"
CANDIDATES = entry(NAME).candidates  # both set on every node


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The task id of any process inside a SkyPilot task."""
    return read_job_facts(environ, (("job_id", "SKYPILOT_TASK_ID"),))


class SkyPilot(NodeAgent):
    """A SkyPilot node running a task's commands, with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "SkyPilot"
    what = "a SkyPilot node running a task's commands"

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))
        ips = address_list(b, "SKYPILOT_NODE_IPS")  # one line per node, in node-rank order
        b.formula("main_address", ips[0], "first line of SKYPILOT_NODE_IPS (the head node)", "SKYPILOT_NODE_IPS")
        b.integer("node_rank", "SKYPILOT_NODE_RANK")
        node_count(b, "SKYPILOT_NUM_NODES", ips, "SKYPILOT_NODE_IPS")
        per_node(b, "SKYPILOT_NUM_GPUS_PER_NODE")
        return agent(b)


OFFERS = Offers(job_facts=job_facts)
