"""Node agents: the shared rule of the node-level platforms (Kubeflow Trainer, AWS Batch, SageMaker, ...).

A node-level platform describes nodes, not processes: it starts one process per node (a pod, a
container, a VM's run script) and tells it the node's index, the node count and the head node's
address. That process, with no torchrun or MPI launcher around it, is the node's *agent*: it starts
the node's workers itself (torchrun, `spawn()`, Lightning). Its record:

- one agent per node: ``world_size = num_nodes``, ``global_rank = node_rank``, ``local_rank = 0``,
  ``local_world_size = 1`` (the world of agents; used as it is, one process per node works);
- ``nproc_per_node``: the workers each node runs, when the platform says it (``spawn()`` takes it
  as its default ``devices``; ``--format torchrun`` prints it as ``--nproc-per-node``);
- ``main_address``/``main_port``: the head node's endpoint. The port is the platform's when it
  names one, else ``MASTER_PORT``, else the platform's documented default, else torchrun's default
  29500 (`DEFAULT_PORT`);
- ``creates_processes_externally=False``.

The node hosting the rendezvous is node 0: torchrun's static rendezvous serves its store from node
rank 0 at the main address. When the platform's main node is not its node 0 (AWS Batch's
``AWS_BATCH_JOB_MAIN_NODE_INDEX``), the main node and node 0 trade places: the main node is node
rank 0, the platform's node 0 takes the main node's index, every other node keeps its own. Every
node computes the same mapping from the same two numbers, so node ranks stay 0..N-1 once each.

A process that a launcher inside the node started (``LOCAL_RANK`` set: torchrun, Lightning,
DeepSpeed, ``resolver.apply(ranks=True)``) is not the agent: `started_inside` makes the platform
decline, and that launcher's source (or the default, which reads ``LOCAL_RANK``) resolves it. Its
job facts still come from the platform, through the module's ``job_facts`` in the registry's
``SCHEDULERS``.

How a platform module uses this (see ``aws_batch.py`` or ``kubeflow_trainer.py``)::

    CANDIDATES = entry(NAME).candidates       # the registry's variables, declared there once

    def detect(self, environ):
        return detect_agent(environ, CANDIDATES, "AWS Batch", "a node of an AWS Batch ... job")

    def resolve(self, environ, probes):
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))           # job id, attempt: the module's own JobFacts
        return agent(
            b,
            node=read(environ, "AWS_BATCH_JOB_NODE_INDEX"),            # (value, Origin)
            nodes=read(environ, "AWS_BATCH_JOB_NUM_NODES", minimum=1),
            address=read_address(environ, MAIN_ADDRESS, source=NAME),
            main=read(environ, "AWS_BATCH_JOB_MAIN_NODE_INDEX"),       # only when it may be != 0
            per_node=None,                    # or per_node(environ, "SKYPILOT_NUM_GPUS_PER_NODE")
            port=None,                        # or the platform's: optional_port(environ, "PET_MASTER_PORT")
        )

Each fact is a ``(value, Origin)`` pair; the variable of an env origin (or the first variable a
formula was computed from) is what an error names. The module reads and checks its own variables
(lists, JSON, files); `agent` checks that the node index and the main index fit the node count and
builds the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from resolver import environ as env
from resolver.errors import InvalidVariable
from resolver.origin import Origin
from resolver.sources import Builder, Candidates, Detection
from resolver.topology import Topology

__all__ = [
    "DEFAULT_PORT",
    "TORCHRUN_PORT",
    "Fact",
    "address_list",
    "agent",
    "detect_agent",
    "named_agent",
    "node_count",
    "optional_port",
    "per_node",
    "read",
    "read_address",
    "started_inside",
]

DEFAULT_PORT = 29500  # torchrun's --master-port default
TORCHRUN_PORT = (DEFAULT_PORT, Origin.default(f"{DEFAULT_PORT} (torchrun's --master-port default)"))
T = TypeVar("T")
Fact = tuple[T, Origin]  # a value and where it came from
LAUNCHER_MARK = "LOCAL_RANK"  # every process launcher sets it; no node-level platform does


def read(environ: Mapping[str, str], variable: str, *, minimum: int = 0) -> Fact[int]:
    """A required integer variable as a fact (an error names it when missing or malformed)."""
    return env.integer(environ, variable, minimum=minimum), Origin.env(variable)


def read_address(environ: Mapping[str, str], variable: str, *, source: str) -> Fact[str]:
    """A required host name or IP address as a fact."""
    return env.address(environ, variable, source=source), Origin.env(variable)


def optional_port(environ: Mapping[str, str], variable: str) -> Fact[int] | None:
    """A TCP port as a fact when `variable` is set; None otherwise."""
    if variable not in environ:
        return None
    return env.check_port(variable, environ[variable]), Origin.env(variable)


def address_list(environ: Mapping[str, str], variable: str) -> list[str]:
    """A required list of addresses, one per line (SkyPilot's and dstack's node IPs), each checked."""
    raw = env.text(environ, variable, expected="the nodes' addresses, one per line")
    lines = raw.strip("\n").split("\n")
    for line in lines:
        if not env.is_address(line):
            raise InvalidVariable(variable, raw, "one host name or IP address per line, the head node first")
    return lines


def per_node(environ: Mapping[str, str], variable: str) -> Fact[int] | None:
    """A GPUs-per-node count as the workers per node; None when unset or 0 (a CPU node)."""
    count = env.optional_integer(environ, variable)
    return None if not count else (count, Origin.env(variable))


def node_count(environ: Mapping[str, str], variable: str, ips: list[str], ips_variable: str) -> Fact[int]:
    """The node count from `variable`, which must match the number of IPs; their count without it."""
    if variable not in environ:
        return len(ips), Origin.formula(f"count of lines of {ips_variable}", variables=(ips_variable,))
    nodes = read(environ, variable, minimum=1)
    if nodes[0] != len(ips):
        raise InvalidVariable(variable, environ[variable], f"the number of addresses in {ips_variable} ({len(ips)})")
    return nodes


def started_inside(environ: Mapping[str, str], platform: str) -> Detection | None:
    """A declining Detection when a launcher inside the node started this process; None for the agent."""
    if LAUNCHER_MARK not in environ:
        return None
    return Detection(
        False,
        f"{LAUNCHER_MARK} is set: a launcher inside the {platform} node started this process (its source, or "
        "the default, resolves it, with the platform's job facts)",
        (LAUNCHER_MARK,),
    )


def detect_agent(
    environ: Mapping[str, str], candidates: Candidates, platform: str, what: str, *, also: tuple[str, ...] = ()
) -> Detection:
    """A node-level platform's detection: not `what` unless its `candidates` are met, not the agent
    when a launcher inside the node started this process (`started_inside`), else `what`'s agent.

    `also`: other variables of the platform that the detection lists when they are set.
    """
    declined = candidates.unmet(environ, what)
    if declined is not None:
        return declined
    inside = started_inside(environ, platform)
    if inside is not None:
        return inside
    return Detection(True, f"{what}, no launcher around it", env.present(environ, *candidates.names, *also))


def _variable(origin: Origin) -> str:
    """What an error about a fact names: its variable (or the first it was computed from), else the origin."""
    return origin.variables[0] if origin.variables else str(origin)


def _said(fact: Fact[int]) -> str:
    value, origin = fact
    if origin.variable is not None:
        return f"{origin.variable}={value}"
    return f"{value}: {origin.name}" + (f" ({origin.note})" if origin.note else "")


def _within(environ: Mapping[str, str], fact: Fact[int], count: Fact[int], what: str) -> None:
    value, origin = fact
    if value >= count[0]:
        name = _variable(origin)
        raise InvalidVariable(name, environ.get(name, str(value)), f"{what} < the node count ({_said(count)})")


def agent(
    b: Builder,
    *,
    node: Fact[int],
    nodes: Fact[int],
    address: Fact[str],
    port: Fact[int] | None = None,
    per_node: Fact[int] | None = None,
    main: Fact[int] | None = None,
    default_port: Fact[int] = TORCHRUN_PORT,
    hosts: Fact[tuple[str, ...]] | None = None,
) -> Topology:
    """The node agent's record (see the module docstring); `b` already holds the platform's job facts.

    The port: `port` (the platform's own), else ``MASTER_PORT``, else `default_port`. `hosts`: the
    nodes' addresses in node-index order (`hostnames`), where the platform lists them; with a main
    node other than node 0 the two trade places there too.
    """
    _within(b.environ, node, nodes, "a node index")
    index, origin = node
    rank, rank_origin = index, origin
    if main is not None:
        _within(b.environ, main, nodes, "the main node's index")
        head = main[0]
        if head != 0 and index in (0, head):
            rank = head if index == 0 else 0
            rank_origin = Origin.formula(
                f"{_variable(origin)}={index} with main node {_variable(main[1])}={head}: the main node is node "
                f"rank 0 and node 0 takes index {head}",
                variables=(*origin.variables, *main[1].variables),
            )
    b.set("node_rank", rank, rank_origin)
    b.set("global_rank", rank, rank_origin)
    b.set("num_nodes", *nodes)
    b.set("world_size", *nodes)
    b.rule("local_rank", 0, "one agent per node")
    b.rule("local_world_size", 1, "one agent per node")
    if per_node is not None:
        b.set("nproc_per_node", *per_node)
    if hosts is not None:
        listed, listed_origin = hosts
        if main is not None and main[0] != 0 and main[0] < len(listed):
            swapped = list(listed)
            swapped[0], swapped[main[0]] = listed[main[0]], listed[0]
            listed = tuple(swapped)
        b.set("hostnames", listed, listed_origin)
    value, origin = address
    if origin.kind != "probe":  # a probe's bad answer is a ProbeFailed, from the record's check
        value = env.check_address(_variable(origin), value)
    b.set("main_address", value, origin)
    if port is not None:
        b.set("main_port", *port)
    elif b.optional_port("MASTER_PORT") is None:
        b.set("main_port", *default_port)
    b.rule("creates_processes_externally", False, "a node agent starts its node's workers itself")
    return b.build()


def named_agent(b: Builder, *, node: str, nodes: str, address: str) -> Topology:
    """The agent of a platform that names the node index, the node count and node 0's address in three
    variables (Azure ML's PyTorch distribution, LeaderWorkerSet, Volcano's pytorch plugin); `b` already
    holds the platform's job facts, and the port follows `agent`'s rule."""
    return agent(
        b,
        node=read(b.environ, node),
        nodes=read(b.environ, nodes, minimum=1),
        address=read_address(b.environ, address, source=b.source),
    )
