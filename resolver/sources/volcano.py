"""Volcano jobs: each pod's process, resolved as its node's agent.

A Volcano job (``batch.volcano.sh`` Job) runs tasks (``master``, ``worker``, ...) of ``replicas``
pods each. Its plugins tell the pods where they are:

- ``env``: ``VC_TASK_INDEX`` (and the older ``VK_TASK_INDEX``, the same value), the pod's index
  within its task, 0..replicas-1;
- ``svc``: for every task T (its name upper-cased, ``-`` written ``_``), ``VC_<T>_HOSTS``, the
  task's pods' host names ``<job>-<task>-<i>.<job>`` joined by commas, and ``VC_<T>_NUM``, their
  count;
- ``pytorch`` (which turns ``svc`` on): node-level ``MASTER_ADDR`` (the master task's first pod,
  ``<job>-master-0.<job>``), ``MASTER_PORT`` (its ``--port``, default 23456), ``WORLD_SIZE`` (the
  master and worker tasks' replicas together) and ``RANK`` (0 for the master, index + 1 for
  worker ``index``).

A pod's process with no launcher around it is its node's agent (the node-agent rule that the
node-level platforms share):

- with the pytorch plugin, node ``RANK`` of ``WORLD_SIZE``, main endpoint
  ``MASTER_ADDR:MASTER_PORT``;
- without it, in a job of one task, node ``VC_TASK_INDEX`` of ``VC_<T>_NUM``, main address the
  first host of ``VC_<T>_HOSTS``, port ``MASTER_PORT`` else 29500. With several tasks and no
  pytorch plugin nothing says how the tasks' pods line up into one world: an error says so
  (never a guess that would put two pods on node 0).

Detection: ``VC_TASK_INDEX``/``VK_TASK_INDEX``, or the pytorch plugin's default tasks'
``VC_MASTER_HOSTS``/``VC_WORKER_HOSTS``. The node-level ``WORLD_SIZE``/``RANK`` alone stay the
default's (or the explicit ``kubeflow`` source's), as Kubeflow v1 sets the same names.

Facts from Volcano's plugin guides
https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_pytorch_plugin.md,
https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_env_plugin.md and
https://github.com/volcano-sh/volcano/blob/master/docs/user-guide/how_to_use_svc_plugin.md, and
the plugins' code (pkg/controllers/job/plugins/{env,svc,distributed-framework/pytorch}).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver import environ as env
from resolver.errors import InvalidVariable, MissingVariable
from resolver.sources import Builder
from resolver.sources._node import NodeAgent, agent, named_agent
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "NAME", "PYTORCH_VARIABLES", "Volcano", "hosts", "tasks"]

NAME = "volcano"
CANDIDATES = entry(NAME).candidates  # the env plugin's pod index, or the pytorch plugin's default tasks' hosts
PYTORCH_VARIABLES = ("MASTER_ADDR", "WORLD_SIZE", "RANK")  # the pytorch plugin's node-level variables
_NUM = re.compile(r"VC_([A-Z0-9_]+)_NUM")


def tasks(environ: Mapping[str, str]) -> list[str]:
    """The job's task keys (``MASTER``, ``WORKER``, ...) from the svc plugin's ``VC_<T>_NUM``, sorted."""
    return sorted(m.group(1) for name in environ if (m := _NUM.fullmatch(name)) and f"VC_{m.group(1)}_HOSTS" in environ)


def hosts(environ: Mapping[str, str], variable: str) -> list[str]:
    """A required comma-separated host list (``VC_<T>_HOSTS``), each host checked."""
    raw = env.text(environ, variable, source=NAME, expected="the task's pods' host names, comma-separated")
    names = raw.split(",")
    for name in names:
        if not env.is_address(name):
            raise InvalidVariable(variable, raw, "host names separated by commas, the task's pod 0 first")
    return names


class Volcano(NodeAgent):
    """A Volcano job's pod with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "Volcano"
    what = "a Volcano job's pod"
    also = (*PYTORCH_VARIABLES, "MASTER_PORT")

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        if all(name in environ for name in PYTORCH_VARIABLES):  # MASTER_PORT, else 29500: `agent`'s rule
            return named_agent(b, node="RANK", nodes="WORLD_SIZE", address="MASTER_ADDR")
        keys = tasks(environ)
        index_variable = (
            "VC_TASK_INDEX" if "VC_TASK_INDEX" in environ or "VK_TASK_INDEX" not in environ else "VK_TASK_INDEX"
        )
        if len(keys) != 1:
            if not keys:
                raise MissingVariable(
                    "VC_<TASK>_NUM", "the svc plugin's task sizes (VC_<TASK>_NUM with VC_<TASK>_HOSTS)", source=NAME
                )
            raise InvalidVariable(
                index_variable,
                environ.get(index_variable, "unset"),
                f"a pod index in the job's only task, but the job has tasks {', '.join(keys)} and no pytorch plugin "
                f"({', '.join(PYTORCH_VARIABLES)}) says how their pods make one world. HINT: add `pytorch: []` to the "
                "job's plugins, or run one task",
            )
        task = keys[0]
        names = hosts(environ, f"VC_{task}_HOSTS")
        nodes = b.integer("num_nodes", f"VC_{task}_NUM", minimum=1)
        if nodes != len(names):
            raise InvalidVariable(
                f"VC_{task}_NUM", environ[f"VC_{task}_NUM"], f"the number of hosts in VC_{task}_HOSTS ({len(names)})"
            )
        if index_variable not in environ:
            raise MissingVariable(index_variable, "this pod's index in its task (the env plugin)", source=NAME)
        b.integer("node_rank", index_variable)
        b.formula("main_address", names[0], f"first host of VC_{task}_HOSTS (the task's pod 0)", f"VC_{task}_HOSTS")
        return agent(b)
