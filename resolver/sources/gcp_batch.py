"""Google Cloud Batch jobs on several VMs: each task as its VM's agent, with the job's hosts file.

Batch runs a job's task group as ``taskCount`` tasks and gives each task ``BATCH_TASK_INDEX`` (0 to
``BATCH_TASK_COUNT - 1``) and ``BATCH_TASK_COUNT``; a task that is retried keeps its index, and
``BATCH_TASK_RETRY_ATTEMPT`` counts its retries (0 on the first run). A task group created with
``requireHostsFile: true`` also gets ``BATCH_HOSTS_FILE``: the path of a file that lists every VM
of the task group (Batch's own MPI examples pass it to ``mpirun`` as the host file, with
``permissiveSsh`` for SSH between the VMs). Nothing names a main node, a port or a job id.

A distributed training job on Batch is one task per VM, all running at once: ``taskCountPerNode: 1``
and ``parallelism`` equal to ``taskCount``. Then each task, with no launcher around it, is its VM's
agent (the node-agent rule the node-level platforms share):

- node rank ``BATCH_TASK_INDEX`` of ``BATCH_TASK_COUNT`` nodes; where the hosts file can be read,
  the count must be the number of VMs it lists (an error names ``BATCH_TASK_COUNT``: tasks that
  share a VM or wait for one are no world of node agents);
- main address: ``MASTER_ADDR`` when the user gives it; else the first VM of the hosts file.
  Batch's documentation does not say in which order the file lists the VMs, so task 0 checks that
  the first one is its own VM (by host name, where the file names hosts) and refuses, naming
  ``BATCH_HOSTS_FILE``, when it is another: the job stops at once rather than wait at a VM that
  serves no rendezvous. The other tasks cannot check it; task 0's refusal ends the job for them;
- port: ``MASTER_PORT``, else torchrun's default 29500;
- ``restart_count``: ``BATCH_TASK_RETRY_ATTEMPT``.

Detected by all three of ``BATCH_TASK_INDEX``, ``BATCH_TASK_COUNT`` and ``BATCH_HOSTS_FILE``. The
index and count alone are every Batch task, most often one of many independent tasks on shared VMs
(and other batch services use ``BATCH_*`` names of their own); the hosts file is what a job asks for
when its VMs talk to each other.

Facts from https://cloud.google.com/batch/docs/create-run-job-mpi-library (tightly coupled tasks,
``requireHostsFile``, ``permissiveSsh``, ``BATCH_HOSTS_FILE`` as the MPI host file) and the
``TaskGroup`` reference, https://cloud.google.com/batch/docs/reference/rest/v1/projects.locations.jobs
(``BATCH_TASK_INDEX``/``BATCH_TASK_COUNT`` for every task, ``requireHostsFile`` setting
``BATCH_HOSTS_FILE``, ``taskCountPerNode``, ``parallelism``); ``BATCH_TASK_RETRY_ATTEMPT`` is among
the predefined variables of https://cloud.google.com/batch/docs/create-run-job-environment-variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.errors import InvalidVariable, MissingVariable
from resolver.sources import Builder
from resolver.sources._kit import same_host, short_host, this_host
from resolver.sources._node import NodeAgent, agent
from resolver.sources._registry import entry
from resolver.sources._rules import read_host_file
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "HOSTS_FILE", "NAME", "GcpBatch"]

NAME = "gcp_batch"
CANDIDATES = entry(NAME).candidates  # the hosts file: a task group whose VMs talk to each other
HOSTS_FILE = "BATCH_HOSTS_FILE"


class GcpBatch(NodeAgent):
    """A task of a Google Cloud Batch job with a hosts file, with no launcher around it: its VM's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "Google Cloud Batch"
    what = "a task of a Google Cloud Batch job with a hosts file"

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.optional_integer("restart_count", "BATCH_TASK_RETRY_ATTEMPT")
        index = b.integer("node_rank", "BATCH_TASK_INDEX", expected="the task's index in its task group")
        count = b.integer("num_nodes", "BATCH_TASK_COUNT", minimum=1, expected="the task group's task count")
        hosts = read_host_file(environ, probes, HOSTS_FILE)
        if hosts is not None and len(hosts) != count:
            raise InvalidVariable(
                "BATCH_TASK_COUNT",
                environ["BATCH_TASK_COUNT"],
                f"the number of VMs in {HOSTS_FILE} ({len(hosts)}): one task per VM, all running at once "
                "(taskCountPerNode 1, parallelism = taskCount)",
            )
        if b.optional_address("MASTER_ADDR") is None:
            if hosts is None:
                raise MissingVariable("MASTER_ADDR", f"task 0's VM, as this task cannot read {HOSTS_FILE}", source=NAME)
            first = hosts[0][0]
            named = short_host(first) is not None  # an IP address cannot be told from this host's name
            if index == 0 and named and not same_host(this_host(probes), first):
                raise InvalidVariable(
                    HOSTS_FILE,
                    environ[HOSTS_FILE],
                    f"a file that lists task 0's VM first (it lists {first}; task 0 runs on {this_host(probes)}): "
                    "set MASTER_ADDR to task 0's VM",
                )
            b.formula("main_address", first, f"first VM of {HOSTS_FILE} ({environ[HOSTS_FILE]})", HOSTS_FILE)
        return agent(b)
