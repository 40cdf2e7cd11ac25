"""dstack distributed tasks: the task's commands on each node, resolved as that node's agent.

dstack runs a task's commands once on every node of a distributed task (``nodes: N``) and gives
them ``DSTACK_NODE_RANK`` (0..N-1), ``DSTACK_NODES_NUM``, ``DSTACK_MASTER_NODE_IP`` (node 0's
internal IP), ``DSTACK_NODES_IPS`` (every node's internal IP, one per line), ``DSTACK_GPUS_PER_NODE``
and ``DSTACK_RUN_NAME``. Such a process, with no launcher around it, is its node's agent (the node-agent rule
that the node-level platforms share): node rank ``DSTACK_NODE_RANK`` of ``DSTACK_NODES_NUM`` (which must equal
the number of IPs when ``DSTACK_NODES_IPS`` is set), main address ``DSTACK_MASTER_NODE_IP`` (else
the first of ``DSTACK_NODES_IPS``), ``nproc_per_node`` = ``DSTACK_GPUS_PER_NODE`` when above 0, port
``MASTER_PORT`` else 29500 (dstack names none), ``job_name`` = ``DSTACK_RUN_NAME`` (also for
torchrun's workers and MPI ranks inside a run, through `job_facts`).

Facts from https://dstack.ai/docs/concepts/tasks/#system-environment-variables and the 0.18.25
release notes (``DSTACK_NODES_IPS``).
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

__all__ = ["CANDIDATES", "NAME", "OFFERS", "Dstack", "job_facts"]

NAME = "dstack"
CANDIDATES = entry(NAME).candidates  # both set on every node


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The run name of any process inside a dstack run."""
    return read_job_facts(environ, (("job_name", "DSTACK_RUN_NAME"),))


class Dstack(NodeAgent):
    """A node of a dstack task, with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "dstack"
    what = "a node of a dstack task"

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))
        if "DSTACK_NODES_IPS" in environ:
            ips = address_list(b, "DSTACK_NODES_IPS")  # sorted by node rank (dstack's docs)
            node_count(b, "DSTACK_NODES_NUM", ips, "DSTACK_NODES_IPS")
            if "DSTACK_MASTER_NODE_IP" not in environ:
                b.formula("main_address", ips[0], "first line of DSTACK_NODES_IPS", "DSTACK_NODES_IPS")
        else:
            b.integer("num_nodes", "DSTACK_NODES_NUM", minimum=1)
        if "main_address" not in b.values:
            b.address("DSTACK_MASTER_NODE_IP")
        b.integer("node_rank", "DSTACK_NODE_RANK")
        per_node(b, "DSTACK_GPUS_PER_NODE")
        return agent(b)


OFFERS = Offers(job_facts=job_facts)
