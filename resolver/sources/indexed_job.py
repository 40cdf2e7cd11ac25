"""Kubernetes Indexed Jobs (and JobSet, which makes them): each pod as its node's agent.

A Job with ``completionMode: Indexed`` gives each pod a completion index, 0 to
``.spec.completions - 1``: the annotation ``batch.kubernetes.io/job-completion-index``, which the
control plane also exposes as the variable ``JOB_COMPLETION_INDEX`` (Kubernetes 1.24, stable); a
pod that fails is replaced by one with the same index, and the pod's hostname is
``<job-name>-<index>`` (with the Job's ``subdomain`` and a headless service, a DNS name the other
pods can reach). That index is the only variable Kubernetes sets. JobSet creates its Jobs with
``completionMode: Indexed`` by default and sets no variable of its own: its pods carry labels and
annotations (``jobset.sigs.k8s.io/jobset-name``, ``.../replicatedjob-name``, ``.../job-index``),
which reach the environment only where the user maps them through the Downward API (then under
any name the user picks, such as ``JOBSET_NAME``); none is read here. JobSet's own PyTorch example
gives the main address by hand, ``MASTER_ADDR: pytorch-workers-0-0.pytorch`` (pod 0 of job 0), and
the node count on torchrun's command line.

So the user gives what Kubernetes does not, as JobSet's examples do: ``MASTER_ADDR`` (pod 0's DNS
name) and ``NNODES`` (the Job's ``completions``, the node count); ``MASTER_PORT`` is optional. A pod
with all three and no launcher around it is its node's agent (the node-agent rule the node-level
platforms share): node rank ``JOB_COMPLETION_INDEX`` of ``NNODES``, main endpoint
``MASTER_ADDR:MASTER_PORT`` (else 29500). ``JOB_COMPLETION_INDEX`` alone is every Indexed Job
(a work queue of independent pods as much as a training world), so it is not enough to detect
one: without ``NNODES`` and ``MASTER_ADDR`` the pod is left to the default source.

Facts from https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode,
https://kubernetes.io/docs/tasks/job/indexed-parallel-processing-static (``JOB_COMPLETION_INDEX``,
the annotation, the Downward API) and https://jobset.sigs.k8s.io/docs/concepts (JobSet's defaults,
labels and its PyTorch example with ``MASTER_ADDR``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.sources import Builder
from resolver.sources._node import NodeAgent, agent
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "NAME", "IndexedJob"]

NAME = "indexed_job"
CANDIDATES = entry(NAME).candidates  # JOB_COMPLETION_INDEX from Kubernetes; NNODES and MASTER_ADDR from the user


class IndexedJob(NodeAgent):
    """A pod of a Kubernetes Indexed Job (or a JobSet's), with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "Indexed Job"
    what = "a pod of an Indexed Job given NNODES and MASTER_ADDR"

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.integer("node_rank", "JOB_COMPLETION_INDEX", expected="the pod's completion index (an Indexed Job's)")
        b.integer("num_nodes", "NNODES", minimum=1, expected="the node count: the Job's completions, given by the user")
        b.address("MASTER_ADDR", expected="pod 0's address, given by the user (JobSet's examples set it)")
        return agent(b)
