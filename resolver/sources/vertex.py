"""Google Vertex AI custom training: each replica's process, resolved as its node's agent.

A distributed CustomJob has up to four worker pools: pool 0 is the primary replica (the chief,
one replica), pool 1 the workers, pool 2 parameter servers or Reduction Server, pool 3
evaluators. Vertex AI gives every replica ``CLUSTER_SPEC``, JSON of the shape::

    {"cluster": {"workerpool0": ["cmle-training-workerpool0-1d969d3ba6-0:2222"],
                 "workerpool1": ["cmle-training-workerpool1-1d969d3ba6-0:2222", ...]},
     "environment": "cloud",
     "task": {"type": "workerpool1", "index": 0},
     "job": "..."}

and ``TF_CONFIG`` with the same cluster under TensorFlow's names (``chief``, ``worker``, ``ps``,
``evaluator``; ``"environment": "cloud"``).

The trainers are pools 0 and 1, in that order: node rank = the task's index in pool 0, or the
size of pool 0 + its index in pool 1; node count = both pools' sizes; main address = pool 0's
first replica's host (the chief). A replica of pool 2 or 3 is not a trainer: resolving it is an
error naming ``CLUSTER_SPEC`` (it would otherwise claim a place in a world that never counts it).
The port is ``MASTER_PORT``, else torchrun's 29500 (the ``:2222`` in the cluster is TensorFlow's
server port, not offered to torchrun). ``TF_CONFIG`` is read when ``CLUSTER_SPEC`` is absent and
only when it says ``"environment": "cloud"`` (a TF_CONFIG of another platform is not Vertex's).
A replica's process with no launcher around it is its node's agent (the node-agent rule that the
node-level platforms share).

Facts from https://cloud.google.com/vertex-ai/docs/training/distributed-training (worker pools,
``CLUSTER_SPEC`` and ``TF_CONFIG`` formats) and
https://cloud.google.com/vertex-ai/docs/training/create-custom-job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from resolver import environ as env
from resolver.errors import InvalidVariable, MissingVariable
from resolver.sources import Builder, Detection
from resolver.sources._node import NodeAgent, agent, host_of
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["CANDIDATES", "NAME", "POOLS", "TF_POOLS", "Vertex", "trainers"]

NAME = "vertex"
CANDIDATES = entry(NAME).candidates  # CLUSTER_SPEC, or TF_CONFIG (Vertex's only when it says "cloud")
POOLS = ("workerpool0", "workerpool1", "workerpool2", "workerpool3")  # chief, workers, servers, evaluators
# TF_CONFIG's task types and the pool each is ("master" is the chief's older name)
TF_POOLS = {
    "chief": "workerpool0",
    "master": "workerpool0",
    "worker": "workerpool1",
    "ps": "workerpool2",
    "evaluator": "workerpool3",
}
_SHAPE = 'JSON {"cluster": {"workerpool0": ["host:port"], ...}, "task": {"type": "workerpool0", "index": 0}}'


def _parsed(variable: str, raw: str) -> dict[str, Any]:
    try:
        spec = json.loads(raw)
    except ValueError:
        raise InvalidVariable(variable, raw, _SHAPE) from None
    if (
        not isinstance(spec, dict)
        or not isinstance(spec.get("cluster"), dict)
        or not isinstance(spec.get("task"), dict)
    ):
        raise InvalidVariable(variable, raw, _SHAPE)
    return spec


def _is_cloud_tf_config(raw: str) -> bool:
    try:
        spec = json.loads(raw)
    except ValueError:
        return False
    return isinstance(spec, dict) and spec.get("environment") == "cloud"


def trainers(environ: Mapping[str, str]) -> tuple[list[str], int, str]:
    """The trainers' hosts (pool 0, then pool 1), this replica's place among them, and the variable read."""
    variable = "CLUSTER_SPEC" if "CLUSTER_SPEC" in environ else "TF_CONFIG"
    raw = env.text(environ, variable, source=NAME, expected=_SHAPE)
    spec = _parsed(variable, raw)
    names = POOLS if variable == "CLUSTER_SPEC" else tuple(TF_POOLS)
    pools: dict[str, list[str]] = {}
    for name, members in spec["cluster"].items():
        if name not in names or not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise InvalidVariable(variable, raw, f"a cluster of pools {', '.join(names)}, each a list of host:port")
        pool = name if variable == "CLUSTER_SPEC" else TF_POOLS[name]
        pools[pool] = pools.get(pool, []) + [host_of(variable, raw, m, "replicas given as host:port") for m in members]
    task, index = spec["task"].get("type"), spec["task"].get("index", 0)
    pool = task if variable == "CLUSTER_SPEC" else TF_POOLS.get(task) if isinstance(task, str) else None
    if pool not in pools or not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(pools[pool]):
        raise InvalidVariable(variable, raw, "a task whose type names a pool of the cluster and whose index is in it")
    if pool not in POOLS[:2]:
        raise InvalidVariable(
            variable,
            raw,
            f"a trainer's task (pool 0, the chief, or pool 1, the workers); this replica is in {task}, which does not "
            "train",
        )
    chief, workers = pools.get("workerpool0", []), pools.get("workerpool1", [])
    if not chief:
        raise InvalidVariable(variable, raw, "a cluster with a primary replica (workerpool0, TF_CONFIG's chief)")
    place = index if pool == "workerpool0" else len(chief) + index
    return chief + workers, place, variable


class Vertex(NodeAgent):
    """A Vertex AI training replica with no launcher around it: the node's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "Vertex AI"
    what = "a Vertex AI replica"

    def detect(self, environ: Mapping[str, str]) -> Detection:
        if "CLUSTER_SPEC" not in environ and "TF_CONFIG" in environ and not _is_cloud_tf_config(environ["TF_CONFIG"]):
            return Detection(
                False,
                'not a Vertex AI replica: TF_CONFIG without "environment": "cloud" (another platform\'s)',
                ("TF_CONFIG",),
            )
        return super().detect(environ)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        if not CANDIDATES.met(environ):
            raise MissingVariable("CLUSTER_SPEC", "Vertex AI's cluster and task", source=NAME)
        hosts, place, variable = trainers(environ)
        b = Builder(NAME, environ)
        b.formula("node_rank", place, f"{variable} task's place among pool 0 then pool 1", variable)
        b.formula("num_nodes", len(hosts), f"replicas of pools 0 and 1 in {variable}", variable)
        b.formula("main_address", hosts[0], f"{variable} pool 0's first replica (the chief)", variable)
        return agent(b)
