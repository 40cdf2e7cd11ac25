"""Kubernetes LeaderWorkerSet (LWS): each pod of a leader-worker group, resolved as its node's agent.

A LeaderWorkerSet (the kubernetes-sigs API under vLLM's and SGLang's multi-node serving and
multi-node fine-tuning) creates ``replicas`` groups of ``size`` pods: a leader and ``size - 1``
workers, scheduled, started and restarted together. LWS's pod webhook gives every container of
every pod ``LWS_LEADER_ADDRESS`` (the leader pod's DNS name through the headless service,
``<lws>-<group>.<subdomain>.<namespace>``; its IP where the group has no ordinal name),
``LWS_GROUP_SIZE`` (the pods in the group) and
``LWS_WORKER_INDEX`` (the pod's index in its group: 0 for the leader, 1..size-1 for the
workers). A group is one distributed world; the groups of a set are independent replicas.

A pod's process with no launcher around it is its node's agent (the node-agent rule that the
node-level platforms share):
node rank ``LWS_WORKER_INDEX`` of ``LWS_GROUP_SIZE`` (an index outside 0..size-1 is an error naming
``LWS_WORKER_INDEX``), main address ``LWS_LEADER_ADDRESS`` (the leader is node 0), port
``MASTER_PORT`` else torchrun's 29500 (LWS names none; every pod computes the same, so no probe
picks one). torchrun, or another launcher, inside the pod sets ``LOCAL_RANK`` and wins, with this
module's job facts.

LWS puts the set's name and the group's index in pod labels (``leaderworkerset.sigs.k8s.io/name``,
``leaderworkerset.sigs.k8s.io/group-index``), not in the environment; its documentation says to
pass labels through the Downward API. Under the names ``LWS_NAME`` and ``LWS_GROUP_INDEX`` (as
recipes that consume LWS name them) they are job facts: ``job_name`` = ``LWS_NAME``, and ``job_id`` =
``<LWS_NAME>-<LWS_GROUP_INDEX>``, the group's own name in LWS's API (the leader pod's name, "the name
of the group too"): one id per world, the same on every pod of a group and different between groups.

Facts from the LWS reference, "Labels, Annotations and Environment Variables"
(https://lws.sigs.k8s.io/docs/reference/labels-annotations-and-environment-variables), the API's
``LeaderWorkerSetSpec`` comments (api/leaderworkerset/v1/leaderworkerset_types.go: ``LwsLeaderAddress``,
``LwsGroupSize``, ``LwsWorkerIndex``; group and pod naming) and the webhook that sets them
(pkg/utils/pod/pod_utils.go, ``AddLWSVariables``), all in github.com/kubernetes-sigs/lws.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.origin import Origin
from resolver.sources import Builder, JobFacts, read_job_facts
from resolver.sources._node import NodeAgent, named_agent
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "NAME", "OFFERS", "Lws", "job_facts"]

NAME = "lws"
CANDIDATES = entry(NAME).candidates  # LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX: on every pod


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The set's name and the group's name (`<LWS_NAME>-<LWS_GROUP_INDEX>`) of any process in an LWS pod."""
    facts = read_job_facts(environ, (("job_name", "LWS_NAME"),))
    group = env.optional_integer(environ, "LWS_GROUP_INDEX")
    if group is not None and "LWS_NAME" in environ:
        facts["job_id"] = (
            f"{environ['LWS_NAME']}-{group}",
            Origin.formula("LWS_NAME-LWS_GROUP_INDEX (the group's name)", variables=("LWS_NAME", "LWS_GROUP_INDEX")),
        )
    return facts


class Lws(NodeAgent):
    """A pod of a LeaderWorkerSet group with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "LeaderWorkerSet"
    what = "a LeaderWorkerSet pod"
    also = ("LWS_NAME", "LWS_GROUP_INDEX")

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))
        return named_agent(b, node="LWS_WORKER_INDEX", nodes="LWS_GROUP_SIZE", address="LWS_LEADER_ADDRESS")


OFFERS = Offers(job_facts=job_facts)
