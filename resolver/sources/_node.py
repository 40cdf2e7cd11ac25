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

How a platform module uses this (see ``aws_batch.py`` or ``skypilot.py``): its `Builder` reads
each variable into the field it fills, as every source does, and `agent` completes the record::

    class AwsBatch(NodeAgent):                # detect(): detect_agent over these
        name = NAME
        candidates = entry(NAME).candidates   # the registry's variables, declared there once
        platform = "AWS Batch"
        what = "a node of an AWS Batch multi-node parallel job"

        def resolve(self, environ, probes):
            b = Builder(NAME, environ)
            b.facts(job_facts(environ))       # job id, attempt: the module's own JobFacts
            b.integer("node_rank", "AWS_BATCH_JOB_NODE_INDEX")
            b.integer("num_nodes", "AWS_BATCH_JOB_NUM_NODES", minimum=1)
            b.address(MAIN_ADDRESS)           # or a formula: b.formula("main_address", ips[0], ...)
            per_node(b, "SKYPILOT_NUM_GPUS_PER_NODE")  # when the platform says it
            return agent(b, main="AWS_BATCH_JOB_MAIN_NODE_INDEX")  # main: only when it may be != 0

A platform whose port is its own records ``main_port`` before `agent` (``b.port("PET_MASTER_PORT")``);
`agent` checks that the node index and the main index fit the node count (an error names the
variables), sets what one agent per node means, and builds the record.
"""

from __future__ import annotations

from collections.abc import Mapping

from resolver import environ as env
from resolver.errors import InvalidSettings, InvalidVariable
from resolver.origin import Origin
from resolver.sources import Builder, Candidates, Detection
from resolver.topology import Topology

__all__ = [
    "DEFAULT_PORT",
    "NodeAgent",
    "address_list",
    "agent",
    "by_slice",
    "detect_agent",
    "host_of",
    "named_agent",
    "node_count",
    "per_node",
    "started_inside",
]

DEFAULT_PORT = 29500  # torchrun's --master-port default
LAUNCHER_MARK = "LOCAL_RANK"  # every process launcher sets it; no node-level platform does


def host_of(
    variable: str, raw: str, item: str, expected: str = "host names or host:port entries separated by commas"
) -> str:
    """The host of ``host``, ``host:port`` or ``[v6]:port`` (without brackets), checked; an error names `variable`."""
    host = item
    if item.startswith("[") and "]" in item:
        host = item[1 : item.index("]")]
    elif item.count(":") == 1:
        host = item.partition(":")[0]
    if not env.is_address(host):
        raise InvalidVariable(variable, raw, expected)
    return host


def address_list(b: Builder, variable: str) -> list[str]:
    """A required list of addresses, one per line and each checked (SkyPilot's and dstack's node IPs),
    recorded as the nodes' ``hostnames`` in node-rank order."""
    raw = b.text("hostnames", variable, expected="the nodes' addresses, one per line")
    lines = raw.strip("\n").split("\n")
    for line in lines:
        if not env.is_address(line):
            raise InvalidVariable(variable, raw, "one host name or IP address per line, the head node first")
    b.set("hostnames", tuple(lines), Origin.env(variable))
    return lines


def per_node(b: Builder, variable: str) -> int | None:
    """A GPUs-per-node count as the workers per node (``nproc_per_node``); None when unset or 0 (a CPU node)."""
    count = env.optional_integer(b.environ, variable)
    return b.set("nproc_per_node", count, Origin.env(variable)) if count else None


def node_count(b: Builder, variable: str, ips: list[str], ips_variable: str) -> int:
    """The node count (``num_nodes``) from `variable`, which must match the number of IPs; their count without it."""
    if variable not in b.environ:
        return b.formula("num_nodes", len(ips), f"count of lines of {ips_variable}", ips_variable)
    nodes = b.integer("num_nodes", variable, minimum=1)
    if nodes != len(ips):
        raise InvalidVariable(variable, b.environ[variable], f"the number of addresses in {ips_variable} ({len(ips)})")
    return nodes


def by_slice(b: Builder, *, slice_id: str, slices: str, per_slice: int, listed: str) -> None:
    """Nodes numbered slice by slice: ``node_rank`` (read as the index within its slice) becomes
    ``index + slice * per_slice`` and ``num_nodes`` is ``per_slice * slices``; the slice index must be
    below the slice count (an error names it). `listed` names what `per_slice` was counted from."""
    count = b.read_integer(slices, minimum=1)
    index = b.read_integer(slice_id, expected=f"a slice index < {slices}")
    if index >= count:
        raise InvalidVariable(slice_id, b.environ[slice_id], f"a slice index < {slices}={count}")
    within = b.values["node_rank"]
    within_origin = b.provenance["node_rank"]
    b.formula(
        "node_rank",
        within + index * per_slice,
        f"{_variable(within_origin)}={within} + {slice_id}={index} x {per_slice} hosts per slice ({listed})",
        *within_origin.variables,
        slice_id,
        listed,
    )
    b.formula(
        "num_nodes", per_slice * count, f"{per_slice} hosts per slice ({listed}) x {slices}={count}", listed, slices
    )


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


class NodeAgent:
    """The base of a node-level platform's source: `detect` is `detect_agent` over the class's `candidates`
    (its registry entry's), `platform` and `what` (listing the variables in `also` that are set); a
    platform sets those and `name`, and writes `resolve` (its `Builder`, then `agent`)."""

    auto = True
    name: str
    candidates: Candidates
    platform: str
    what: str
    also: tuple[str, ...] = ()

    def detect(self, environ: Mapping[str, str]) -> Detection:
        return detect_agent(environ, self.candidates, self.platform, self.what, also=self.also)


def _variable(origin: Origin) -> str:
    """What an error about a value names: its variable (or the first it was computed from), else the origin."""
    return origin.variables[0] if origin.variables else str(origin)


def _said(value: int, origin: Origin) -> str:
    if origin.variable is not None:
        return f"{origin.variable}={value}"
    return f"{value}: {origin.name}" + (f" ({origin.note})" if origin.note else "")


def _within(b: Builder, value: int, origin: Origin, what: str) -> None:
    count, counted = b.values["num_nodes"], b.provenance["num_nodes"]
    if value >= count:
        name = _variable(origin)
        raise InvalidVariable(
            name, b.environ.get(name, str(value)), f"{what} < the node count ({_said(count, counted)})"
        )


def agent(b: Builder, *, main: str | None = None) -> Topology:
    """The node agent's record (see the module docstring), from what `b` holds: the platform's job facts,
    ``node_rank`` (the node's index), ``num_nodes``, ``main_address``, and where the platform says them
    ``main_port``, ``nproc_per_node`` and ``hostnames`` (in node-index order).

    `main`: the variable naming the main node's index, where it may be another node than 0; the main
    node and node 0 then trade places (in ``hostnames`` too). The port: the one `b` holds, else
    ``MASTER_PORT``, else torchrun's default 29500.
    """
    for needed in ("node_rank", "num_nodes", "main_address"):
        if needed not in b.values:
            raise InvalidSettings(f"source {b.source!r}: agent() needs {needed} recorded first")
    index, origin = b.values["node_rank"], b.provenance["node_rank"]
    _within(b, index, origin, "a node index")
    if main is not None:
        head = b.read_integer(main)
        _within(b, head, Origin.env(main), "the main node's index")
        if head != 0 and index in (0, head):
            b.formula(
                "node_rank",
                head if index == 0 else 0,
                f"{_variable(origin)}={index} with main node {main}={head}: the main node is node rank 0 and node 0 "
                f"takes index {head}",
                *origin.variables,
                main,
            )
        listed = b.values.get("hostnames")
        if head != 0 and listed is not None and head < len(listed):
            swapped = list(listed)
            swapped[0], swapped[head] = listed[head], listed[0]
            b.set("hostnames", tuple(swapped), b.provenance["hostnames"])
    b.set("global_rank", b.values["node_rank"], b.provenance["node_rank"])
    b.set("world_size", b.values["num_nodes"], b.provenance["num_nodes"])
    b.rule("local_rank", 0, "one agent per node")
    b.rule("local_world_size", 1, "one agent per node")
    address, where = b.values["main_address"], b.provenance["main_address"]
    if where.kind != "probe":  # a probe's bad answer is a ProbeFailed, from the record's check
        b.set("main_address", env.check_address(_variable(where), address), where)
    if "main_port" not in b.values and b.optional_port("MASTER_PORT") is None:
        b.default("main_port", DEFAULT_PORT, f"{DEFAULT_PORT} (torchrun's --master-port default)")
    b.rule("creates_processes_externally", False, "a node agent starts its node's workers itself")
    return b.build()


def named_agent(b: Builder, *, node: str, nodes: str, address: str) -> Topology:
    """The agent of a platform that names the node index, the node count and node 0's address in three
    variables (Azure ML's PyTorch distribution, LeaderWorkerSet, Volcano's pytorch plugin); `b` already
    holds the platform's job facts, and the port follows `agent`'s rule."""
    b.integer("node_rank", node)
    b.integer("num_nodes", nodes, minimum=1)
    b.address(address)
    return agent(b)
