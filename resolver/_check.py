"""The preflight: every process of a job meets at the main endpoint and hears one verdict.

`check(environ)` is run by every process exactly where training would run. Each resolves its own
record; all meet at `main_address:main_port` (probes/exchange.py): rank 0 listens there, gathers
every record, judges them (`verdict`, a pure function) and answers each process with the verdict,
so every process reports the same problems. Under a launcher that owns a store on the main endpoint
(torchrun tells its workers so with TORCHELASTIC_USE_AGENT_STORE=True), rank 0 cannot listen there:
the processes meet through that store as its clients instead, as training's `init_process_group`
does, under keys no other process or run can overwrite.

What the verdict finds:

- agreement: world size, node count, main port, job id, source and package version are the same
  everywhere, and the main address leads to rank 0 everywhere (compared by what it resolves to on each
  host, resolver/_network.py; as text only when a record lacks its network facts); a process that
  differs is named with the variable its value came from;
- the network training takes next (resolver/_network.py): host names, interface variables, late
  names, proxies; some findings are warnings, reported without failing the check;
- ranks: 0..N-1 each exactly once (missing ranks, duplicates with the hosts claiming them); on each
  host local ranks 0..k-1 once each; one node rank per host and one host per node rank; no two
  processes on a host bound to the same device;
- a process that cannot resolve its own environment but could still find the endpoint joins and
  sends its error, which every process then reports.

A process's host is the node name its launcher gave it (SLURMD_NODENAME under SLURM, which differs
from the host name where one machine emulates several nodes), else the hostname probe's answer.
Thread-safe: no global state, no signal handlers; progress goes to the `resolver` logger.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from resolver import environ as env
from resolver._detect import require_probes, resolve
from resolver._problem import Problem, ranges, spans
from resolver._version import __version__
from resolver.errors import TopologyError
from resolver.origin import Origin
from resolver.topology import Topology

require_probes()  # a user's own probes.py must not hide ours: name it (resolver/_shadow.py)
from probes.exchange import ANSWER_GRACE, PROTOCOL, Arrival, Connected, ExchangeFailed, Server  # noqa: E402
from probes.hostlocal import expand, listen_queue, meet, meeting_here  # noqa: E402
from probes.limits import OpenFiles, listen_overflows, raise_open_files  # noqa: E402
from probes.network import is_loopback  # noqa: E402
from resolver._network import facts, judge, settings, with_settings  # noqa: E402 - it imports probes.network, as above

if TYPE_CHECKING:
    from probes import Probes
    from resolver.sources import Source

__all__ = ["CheckReport", "Node", "Problem", "check", "record", "verdict"]

log = logging.getLogger("resolver")

ROUND = "check"
AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"  # torchrun: the agent holds a TCPStore on MASTER_ADDR:MASTER_PORT
MOST_PROBLEMS = 64  # problems sent to every process; more are summarised in one line
PROGRESS_EVERY = 3.0  # seconds between rank 0's progress lines
AGREED = ("world_size", "num_nodes", "main_address", "main_port", "job_id", "source", "version")
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
SIZE_VARIABLES = ("WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE")
ONE_BY_ONE = ("global_rank", "local_rank", "node_rank", "local_world_size", "local_device")  # what differs cheaply


# -- provenance: the one place that reads it -----------------------------------------------------------


def origin_of(topology: Topology, field: str) -> tuple[str | None, str | None]:
    """Where `field`'s value came from, as (words, variable): the variable it was read from as it is,
    else the first it was computed from, else None (a probe's answer, a default)."""
    return _said(topology.provenance.get(field))


def _said(origin: Origin | None) -> tuple[str | None, str | None]:
    """An origin as (words, variable): the variable it names as it is, else the first it was computed from."""
    if origin is None:
        return None, None
    return str(origin), origin.variable or (origin.variables[0] if origin.variables else None)


# -- records -------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Member:
    """One process as rank 0 sees it: its claimed rank, host, record (or error) and version."""

    rank: int | None
    host: str
    topology: Topology | None
    error: Mapping[str, Any] | None = None
    version: str = ""
    net: Mapping[str, Any] | None = None  # the host's network facts (resolver/_network.py), when it sent them
    world_size: int | None = None  # the world size its launcher's variables claim, when it cannot resolve
    lost_leader: Mapping[str, Any] | None = None  # the host leader that took its record, then went away
    pid: int | None = None  # its process id, as it said

    def origin(self, field: str) -> tuple[str | None, str | None]:
        """Where this process's `field` came from, as `origin_of` says it; (None, None) without a record."""
        return (None, None) if self.topology is None else origin_of(self.topology, field)


def record(
    topology: Topology | None,
    host: str,
    *,
    error: TopologyError | None = None,
    rank: int | None = None,
    size: int | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What one process sends rank 0: JSON-safe, under 2 KB, the job's host list left out. The record's
    provenance says where each value came from; rank 0 reads it only to name the variable of a problem.
    A process that cannot resolve sends the rank and world size its launcher's variables claim, when
    they do: rank 0 then knows how many to wait for. `id` tells two records apart (threads of one
    process share a pid). `settings`: the interface and proxy variables this process sets
    (`resolver._network.settings`), judged per process though a host's leader gathers its facts."""
    out: dict[str, Any] = {"host": host, "version": __version__, "pid": os.getpid(), "id": _new_id()}
    if settings:
        out["settings"] = dict(settings)
    if topology is not None:
        out["rank"] = topology.global_rank
        out["topology"] = data = topology.to_dict()
        # the job's host list is alike in every record and no rule reads it; a SLURM job of 5,000 nodes
        # makes it 90 KB, over what rank 0 takes from one connection (RECORD_LIMIT): it stays home
        data["hostnames"] = None
        data["provenance"].pop("hostnames", None)
    else:
        out["rank"] = rank
        out["world_size"] = size
        out["error"] = error.to_dict() if error is not None else {"message": "no topology"}
    return out


def _new_id() -> str:
    """A record's id: random, to tell records apart (not a secret; no system call, unlike os.urandom,
    whose trip for the GIL counts where thousands of ranks are threads)."""
    return f"{random.getrandbits(64):016x}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)[:200]


def member(message: Mapping[str, Any]) -> Member:
    """A received record, checked: a record that is not a topology is the sender's own error."""
    error = message.get("error")
    data = message.get("topology")
    if data is not None:
        try:
            return _member(message, Topology.from_dict(data))
        except (TopologyError, TypeError, ValueError, KeyError) as exc:
            error = {"message": f"sent a record that is not a topology: {exc}"}
    return _member(
        message, None, error if isinstance(error, dict) else {"message": "sent neither a topology nor an error"}
    )


def _member(message: Mapping[str, Any], topology: Topology | None, error: Mapping[str, Any] | None = None) -> Member:
    """The process of `message` with its record read (`topology`), or with the `error` it sent instead:
    then its rank and world size are the ones its launcher's variables claim, when they are sane."""
    net, lost, pid = message.get("net"), message.get("lost_leader"), message.get("pid")
    if isinstance(net, dict):  # a batch's facts are its leader's: this process's own settings apply to them
        own = message.get("settings")
        net = with_settings(net, own if isinstance(own, dict) else None)
    rank: int | None
    size: int | None
    if topology is not None:
        rank, size = topology.global_rank, topology.world_size
    else:
        claimed, sized = message.get("rank"), message.get("world_size")
        rank = claimed if isinstance(claimed, int) and not isinstance(claimed, bool) and claimed >= 0 else None
        size = sized if isinstance(sized, int) and not isinstance(sized, bool) and sized > 0 else None
    return Member(
        rank=rank,
        host=_text(message.get("host", "?")),
        topology=topology,
        error=error,
        version=_text(message.get("version", "?")),
        world_size=size,
        lost_leader=lost if isinstance(lost, dict) else None,
        net=net if isinstance(net, dict) else None,
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
    )


def members_of(message: Mapping[str, Any], bases: Bases | None = None) -> list[tuple[str | None, Member]]:
    """The records in one message, each with its `id`: one for a process, a host's batch for a leader's
    (probes/hostlocal.py). A batch's shared topology is read once; each record that differs from it only
    in `ONE_BY_ONE` integers costs those integers and its host, not a record to rebuild. With `bases`
    (rank 0 keeps one for the whole meeting), a batch whose shared topology differs from an earlier
    batch's only in those integers is not read at all: the job's hosts alike cost one record to read."""
    records = message.get("records")
    if not isinstance(records, list):
        return [(_id(message), member(message))]
    shared = message.get("shared")
    shared = shared if isinstance(shared, dict) else {}
    # what join added beside the batch once connected (`about`: the leader's network facts) is its host's:
    # every record of the batch has it (a follower gathers none; its own interface and proxy settings are in its record)
    beside = {k: v for k, v in message.items() if k not in _BATCH}
    if beside:
        shared = {**shared, **beside}
    inner = shared.get("topology")
    inner = inner if isinstance(inner, dict) else None
    base = None if bases is None or inner is None else bases.like(inner)
    out: list[tuple[str | None, Member]] = []
    for raw in records[: 1 << 20]:
        if not isinstance(raw, dict):
            continue
        whole = expand(shared, raw)
        own = raw.get("topology")
        # a record whose own fields are `_CHEAP` integers, all of them known: the base with its integers
        cheap_only = inner is not None and isinstance(own, dict) and set(own) <= _CHEAP <= whole["topology"].keys()
        if cheap_only and base is not None:
            cheap = _evolve(base, whole["topology"])
            if cheap is not None:
                out.append((_id(whole), _member(whole, cheap)))
                continue
        m = member(whole)
        if base is None and cheap_only and inner is not None and m.topology is not None:
            base = m.topology
            if bases is not None:
                bases.learn(inner, base)
        out.append((_id(whole), m))
    return out


class Bases:
    """Rank 0's first batch topology, for the batches that share everything with it but `_CHEAP`'s fields.

    A record rebuilt from its dict costs rank 0 tens of microseconds (every field and origin checked),
    once per host without this: 16,384 times at 131,072 ranks; the same record as the first one with
    other integers costs those integers' validators (`_evolve`, 6 us)."""

    def __init__(self) -> None:
        self.key: dict[str, Any] | None = None
        self.topology: Topology | None = None

    def like(self, inner: Mapping[str, Any]) -> Topology | None:
        if self.key is None:
            return None
        return self.topology if {k: v for k, v in inner.items() if k not in _CHEAP} == self.key else None

    def learn(self, inner: Mapping[str, Any], topology: Topology) -> None:
        if self.key is None:
            self.key = {k: v for k, v in inner.items() if k not in _CHEAP}
            self.topology = topology


_CHEAP = {*ONE_BY_ONE, "is_main", "is_local_main"}
# a record's fields that are each process's own on a host whose processes agree (probes.hostlocal.split):
# its leader sends the rest once; rank 0 reads such a record as its host's base with these integers
PERSONAL = ("pid", "rank", *(f"topology.{name}" for name in sorted(_CHEAP)))
_BATCH = {"protocol", "round", "job", "wait", "host", "leader", "shared", "records"}  # a batch's own fields


def _evolve(base: Topology, own: Mapping[str, Any]) -> Topology | None:
    """`base` with `own`'s integers, when they make a valid record that says what `own` says; else None.

    Not `attrs.evolve`: it runs every converter and validator again (the provenance's among them), 10 us
    a record, a second at rank 0 for 131,072; here only the changed fields' validators and the checks
    between fields run (6 us)."""
    t = object.__new__(Topology)
    for name in _KEPT:
        _set(t, name, getattr(base, name))
    try:
        for name in ONE_BY_ONE:
            if name not in own:
                _set(t, name, getattr(base, name))
                continue
            value = own[name]
            _set(t, name, value)
            field = _TOPOLOGY_FIELDS[name]
            if field.validator is not None:
                field.validator(t, field, value)
        t.__attrs_post_init__()
    except (TopologyError, TypeError, ValueError):
        return None
    if ("is_main" in own and t.is_main is not own["is_main"]) or (
        "is_local_main" in own and t.is_local_main is not own["is_local_main"]
    ):
        return None
    return t


_TOPOLOGY_FIELDS = {a.name: a for a in attrs.fields(Topology)}
_KEPT = tuple(name for name in _TOPOLOGY_FIELDS if name not in ONE_BY_ONE)  # a cheap record's fields as its base's
_set = object.__setattr__  # the record is frozen: its own __setattr__ refuses


def _id(message: Mapping[str, Any]) -> str | None:
    value = message.get("id")
    return value if isinstance(value, str) else None


# -- the verdict ---------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Node:
    """One line of the job's map: a host, its node rank, its ranks and the device each is bound to."""

    host: str
    node_rank: int
    ranks: tuple[int, ...]
    devices: tuple[str | None, ...]
    interface: str | None = None  # the interface this host reached rank 0 through (rank 0's: the one holding it)
    address: str | None = None  # the host's address on it

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "node_rank": self.node_rank,
            "ranks": list(self.ranks),
            "devices": list(self.devices),
            "interface": self.interface,
            "address": self.address,
        }

    def __str__(self) -> str:
        devices = ",".join(d if d is not None else "-" for d in self.devices)
        shown = f"  devices {devices}" if any(d is not None for d in self.devices) else ""
        via = f"  via {self.interface} {self.address or ''}".rstrip() if self.interface else ""
        return f"{self.host}  node {self.node_rank}  ranks {spans(self.ranks)}{shown}{via}"


@attrs.frozen(kw_only=True)
class Verdict:
    """What rank 0 found: the same for every process (the map stays with rank 0)."""

    world_size: int | None
    missing: tuple[int, ...]
    problems: tuple[Problem, ...]
    summary: str
    nodes: tuple[Node, ...] = ()
    warnings: tuple[Problem, ...] = ()  # what may hang the job, or slow it: reported, not failing

    def to_wire(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "missing": ranges(self.missing),
            "problems": [p.to_dict() for p in self.problems],
            "warnings": [p.to_dict() for p in self.warnings],
            "summary": self.summary,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(
            world_size=data.get("world_size"),
            missing=tuple(r for a, b in data.get("missing", ()) for r in range(int(a), int(b) + 1)),
            problems=tuple(Problem.from_dict(p) for p in data.get("problems", ())),
            summary=str(data.get("summary", "")),
            warnings=tuple(Problem.from_dict(p) for p in data.get("warnings", ())),
        )


def _hosts(members: Sequence[Member], most: int = 4) -> str:
    names = sorted({m.host for m in members})
    shown = " and ".join(names) if len(names) <= 2 else ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _who(members: Sequence[Member]) -> str:
    ranks = [m.rank for m in members if m.rank is not None]
    unknown = len(members) - len(ranks)
    parts = []
    if ranks:
        parts.append(f"rank{'s' if len(ranks) > 1 else ''} {spans(ranks)}")
    if unknown:
        parts.append(f"{unknown} process{'es' if unknown > 1 else ''} of unknown rank")
    return f"{' and '.join(parts)} on {_hosts(members)}"


def job_key(job_id: str | None) -> str | None:
    """The job's identity, the same on every process: the job id without a node's `#index` suffix.

    AWS Batch gives each node of a multi-node parallel job its own AWS_BATCH_JOB_ID, `<job id>#<node
    index>` (https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html).
    """
    if job_id is None:
        return None
    head, sep, tail = job_id.rpartition("#")
    return head if sep and head and tail.isdigit() else job_id


def _value(m: Member, field: str) -> Any:
    if field == "version":
        return m.version
    if field == "job_id":
        return job_key(m.topology.job_id)  # type: ignore[union-attr]
    return getattr(m.topology, field)


def _origin(members: Sequence[Member], field: str) -> tuple[str, str | None]:
    """The commonest origin of `field` among `members`: (words, variable). Read once per provenance: the
    records rank 0 rebuilt from one host's base share its provenance (`_evolve`), so a job whose hosts
    agree costs one origin, not one per process (131,072 origins took rank 0 0.2 s)."""
    if field == "version":
        return "the installed cluster-topology", None
    said: dict[int, tuple[str | None, str | None]] = {}  # by the provenance's identity; 0: no record
    found: Counter[tuple[str | None, str | None]] = Counter()
    for m in members:
        key = 0 if m.topology is None else id(m.topology.provenance)
        origin = said.get(key)
        if origin is None:
            origin = said[key] = m.origin(field)
        found[origin] += 1
    (words, variable), _ = found.most_common(1)[0]
    return (words or "the source"), variable


def _show(value: Any) -> str:
    return "unset" if value is None else str(value)


def _by_address(resolved: Sequence[Member]) -> bool:
    """Whether the main address can be judged by what it resolves to (resolver/_network.py): rank 0 sent
    its addresses and every other process what the name resolved to on its host. Else it is compared as text."""
    zero = next((m for m in resolved if m.rank == 0 and m.net is not None), None)
    if zero is None or not (zero.net or {}).get("addresses"):
        return False
    return all(m.net is not None and m.net.get("resolved") for m in resolved if m is not zero)


def _agreement(resolved: Sequence[Member]) -> tuple[list[Problem], dict[str, Any]]:
    """The problems of the `AGREED` fields and the value each takes (the majority's). Where every process
    says the same (a healthy job), one pass over the members finds it; else each field is judged
    (`_disagreement`). 917,504 reads of a field took rank 0 0.36 s at 131,072 processes."""
    said: tuple[Any, ...] | None = None
    for m in resolved:
        t = m.topology
        if t is None:
            continue
        # AGREED's fields in its order, as `_value` reads them (the property test compares both paths)
        key = (t.world_size, t.num_nodes, t.main_address, t.main_port, job_key(t.job_id), t.source, m.version)
        if said is None:
            said = key
        elif key != said:
            return _disagreement(resolved)
    if said is None:
        return _disagreement(resolved)
    return [], dict(zip(AGREED, said, strict=True))


def _disagreement(resolved: Sequence[Member]) -> tuple[list[Problem], dict[str, Any]]:
    """`_agreement` field by field: the values of each, the majority's first, every other value a problem."""
    problems: list[Problem] = []
    agreed: dict[str, Any] = {}
    by_address = _by_address(resolved)
    for field in AGREED:
        groups: dict[Any, list[Member]] = {}
        for m in resolved:
            groups.setdefault(_value(m, field), []).append(m)
        ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), min(m.rank or 0 for m in kv[1])))
        reference, majority = ranked[0]
        agreed[field] = reference
        if field == "main_address" and by_address:
            continue  # n1 on one node and n1's address on another agree: the network rules judge where each leads
        for value, members in ranked[1:]:
            words, variable = _origin(members, field)
            ref_words, ref_variable = _origin(majority, field)
            problems.append(
                Problem(
                    kind="agreement",
                    ranks=tuple(sorted(m.rank for m in members if m.rank is not None)),
                    hosts=tuple(sorted({m.host for m in members})),
                    variable=variable or ref_variable,
                    message=f"{_who(members)} took {field}={_show(value)} from {words}; "
                    f"{_who(majority)} use {_show(reference)} ({ref_words})",
                )
            )
    return problems, agreed


def _device(t: Topology) -> str | None:
    if t.visible_devices is None or t.local_device is None:
        return None
    return t.visible_devices[t.local_device]


def verdict(
    members: Sequence[Member],
    *,
    strangers: Sequence[Member] = (),
    world_size: int | None = None,
    note: str = "",
) -> Verdict:
    """Judge every process's record (one `Member` each, in any order): the problems, the missing ranks,
    the map. `world_size` stands in when no process could resolve one; `note` ends the missing-rank
    message (how long rank 0 waited, where)."""
    problems = [
        Problem(
            kind="unresolvable",
            ranks=() if m.rank is None else (m.rank,),
            hosts=(m.host,),
            variable=m.error.get("variable") or m.error.get("probe"),
            message=f"{_who([m])} cannot resolve its topology: {m.error.get('message', '?')}",
        )
        for m in members
        if m.error is not None
    ]
    for m in strangers:
        job = m.topology.job_id if m.topology is not None else None
        words, variable = m.origin("job_id")
        problems.append(
            Problem(
                kind="stranger",
                ranks=() if m.rank is None else (m.rank,),
                hosts=(m.host,),
                variable=variable,
                message=f"{_who([m])} of job {_show(job)} ({words or 'its source'}) came to this job's endpoint "
                "and was turned away",
            )
        )
    resolved = [m for m in members if m.topology is not None]
    agreed: dict[str, Any] = {}
    if resolved:
        found, agreed = _agreement(resolved)
        problems += found
    n = agreed.get("world_size") or world_size or len(members)
    claims: dict[int, list[Member]] = {}
    for m in members:
        if m.rank is not None:
            claims.setdefault(m.rank, []).append(m)
    missing = tuple(r for r in range(n) if r not in claims)
    for rank, claimants in sorted(claims.items()):
        if rank < n and len(claimants) == 1:  # the common case, O(1): the origin is read for a problem only
            continue
        words, variable = _origin([c for c in claimants if c.topology is not None] or claimants, "global_rank")
        if rank >= n:
            kind, message = "ranks", f"{_who(claimants)} claims rank {rank}, outside 0..{n - 1} of a world of {n}"
        elif len(claimants) > 1:
            kind = "duplicate"
            message = (
                f"rank {rank} is claimed by {len(claimants)} processes, on "
                f"{', '.join(sorted(c.host for c in claimants))} (from {words})"
            )
        else:
            continue
        claimed_on = tuple(sorted({c.host for c in claimants}))
        problems.append(Problem(kind=kind, ranks=(rank,), hosts=claimed_on, variable=variable, message=message))
    if missing:
        problems.append(
            Problem(
                kind="missing",
                ranks=missing,
                message=f"rank{'s' if len(missing) > 1 else ''} {spans(missing)} of {n} never joined the check"
                + (
                    f"{note}: the process did not start, did not run the check, or could not reach the endpoint"
                    if note
                    else ": no process claims it"
                ),
            )
        )
    problems += _placement(resolved, complete=not missing and len(resolved) == n)
    variable = _origin(resolved, "main_address")[1] if resolved else None
    network, warnings = judge(members, variable=variable, multi_node=len({m.host for m in members}) > 1)
    problems += network
    warnings = warnings[:MOST_PROBLEMS]
    if len(problems) > MOST_PROBLEMS:
        more = len(problems) - MOST_PROBLEMS + 1
        problems = [*problems[: MOST_PROBLEMS - 1], Problem(kind="more", message=f"and {more} more problems")]
    nodes = _map(resolved)
    summary = ""
    if resolved:
        job = f" job {agreed['job_id']}" if agreed.get("job_id") is not None else ""
        hosts = len({m.host for m in resolved})
        summary = (
            f"{len(members)} process{'es' if len(members) > 1 else ''} on {hosts} node{'s' if hosts > 1 else ''} "
            f"agree: {agreed['source']}{job}, main {_endpoint(agreed['main_address'], agreed['main_port'])}"
        )
    return Verdict(
        world_size=n, missing=missing, problems=tuple(problems), summary=summary, nodes=nodes, warnings=tuple(warnings)
    )


def _endpoint(address: str | None, port: int | None) -> str:
    if address is not None and ":" in address:
        return f"[{address}]:{_show(port)}"
    return f"{_show(address)}:{_show(port)}"


def _placement(resolved: Sequence[Member], *, complete: bool) -> list[Problem]:
    """Local ranks per host, node ranks against hosts, and devices shared by accident."""
    problems: list[Problem] = []
    by_host: dict[str, list[Member]] = {}
    for m in resolved:
        by_host.setdefault(m.host, []).append(m)
    for host, here in sorted(by_host.items()):
        local: dict[int, list[Member]] = {}
        for m in here:
            local.setdefault(_top(m).local_rank, []).append(m)
        for value, claimants in sorted(local.items()):
            if len(claimants) > 1:
                who = _who(claimants).split(" on ")[0]
                problems.append(
                    _problem("local_rank", claimants, "local_rank", f"local rank {value} on {host} is claimed by {who}")
                )
        if complete and sorted(local) != list(range(len(local))) and all(len(c) == 1 for c in local.values()):
            expected = f": expected 0..{len(here) - 1}"
            problems.append(
                _problem("local_rank", here, "local_rank", f"{host} runs local ranks {spans(local)}", expected)
            )
        sizes = {s for s in (_top(m).local_world_size for m in here) if s is not None}
        if complete and sizes and sizes != {len(here)}:
            said = f"{_who(here)} say local_world_size={','.join(map(str, sorted(sizes)))}"
            there = f", but {len(here)} process{'es' if len(here) > 1 else ''} run there"
            problems.append(_problem("local_rank", here, "local_world_size", said, there))
        node_ranks = sorted({_top(m).node_rank for m in here})
        if len(node_ranks) > 1:
            said = f"{host} holds node ranks {spans(node_ranks)}"
            problems.append(_problem("node_rank", here, "node_rank", said, ": one host, one node rank"))
        devices: dict[str, list[Member]] = {}
        for m in here:
            device = _device(_top(m))
            if device is not None:
                devices.setdefault(device, []).append(m)
        # shared by accident: the host's processes could each have had a device of their own
        seen = {d for m in here for d in (_top(m).visible_devices or ())}
        for device, users in sorted(devices.items()):
            if len(users) > 1 and len(seen) >= len(here):
                said = f"{_who(users)} are all bound to device {device}"
                problems.append(_problem("device", users, "visible_devices", said))
    by_node: dict[int, set[str]] = {}
    for m in resolved:
        by_node.setdefault(_top(m).node_rank, set()).add(m.host)
    for node, hosts in sorted(by_node.items()):
        if len(hosts) > 1:
            here = [m for m in resolved if _top(m).node_rank == node]
            said = f"node rank {node} is on {len(hosts)} hosts, {_hosts(here)}"
            problems.append(_problem("node_rank", here, "node_rank", said, ": one node rank, one host"))
    nodes = {n for n in (_top(m).num_nodes for m in resolved) if n is not None}
    if complete and len(nodes) == 1 and sorted(by_node) != list(range(next(iter(nodes)))):
        words, variable = _origin(resolved, "node_rank")
        problems.append(
            Problem(
                kind="node_rank",
                hosts=tuple(sorted({m.host for m in resolved})),
                variable=variable,
                message=f"node ranks {spans(by_node)} (from {words}) for num_nodes={next(iter(nodes))}",
            )
        )
    return problems


def _problem(kind: str, members: Sequence[Member], field: str, said: str, then: str = "") -> Problem:
    """A placement problem of `members` (their ranks and hosts): what they `said` of `field`, where that
    came from (the commonest origin among them, whose variable is the one to fix), then the rest."""
    words, variable = _origin(members, field)
    return Problem(
        kind=kind,
        ranks=tuple(sorted(m.rank for m in members if m.rank is not None)),
        hosts=tuple(sorted({m.host for m in members})),
        variable=variable,
        message=f"{said} (from {words}){then}",
    )


def _top(m: Member) -> Topology:
    """A resolved member's record (the verdict's placement rules see only those)."""
    if m.topology is None:
        raise TypeError(f"{_who([m])} has no record")
    return m.topology


def _map(resolved: Sequence[Member]) -> tuple[Node, ...]:
    places: dict[tuple[int, str], list[Member]] = {}
    for m in resolved:
        places.setdefault((_top(m).node_rank, m.host), []).append(m)
    out = []
    for (node, host), here in sorted(places.items()):
        here.sort(key=lambda m: m.rank or 0)
        net = next((m.net for m in here if m.net is not None), None) or {}
        out.append(
            Node(
                host=host,
                node_rank=node,
                ranks=tuple(m.rank for m in here if m.rank is not None),
                devices=tuple(_device(_top(m)) for m in here),
                interface=_text(net["interface"]) if net.get("interface") is not None else None,
                address=_text(net["address"]) if net.get("address") is not None else None,
            )
        )
    return tuple(out)


# -- the report ----------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CheckReport:
    """What `check` found, the same on every process: `ok`, the `missing` ranks, the `problems`;
    this process's own `topology` (None when it could not resolve), and on rank 0 the job's map."""

    ok: bool
    world_size: int | None
    missing: tuple[int, ...]
    problems: tuple[Problem, ...]
    topology: Topology | None
    elapsed_s: float
    summary: str = ""
    host: str = ""
    nodes: tuple[Node, ...] | None = None
    warnings: tuple[Problem, ...] = ()  # reported on every process, without failing the check
    interface: str | None = None  # this process's interface toward rank 0 (rank 0's: the one the others reached)

    def to_dict(self) -> dict[str, Any]:
        """`{"ok", "world_size", "missing", "problems", "warnings", "elapsed_s", "nodes", "summary", "rank",
        "host"}`."""
        return {
            "ok": self.ok,
            "world_size": self.world_size,
            "missing": list(self.missing),
            "problems": [p.to_dict() for p in self.problems],
            "warnings": [p.to_dict() for p in self.warnings],
            "elapsed_s": round(self.elapsed_s, 3),
            "nodes": None if self.nodes is None else [n.to_dict() for n in self.nodes],
            "summary": self.summary,
            "rank": None if self.topology is None else self.topology.global_rank,
            "host": self.host,
            "interface": self.interface,
        }

    def lines(self) -> list[str]:
        """The text report: one line when healthy, else one per problem; one per warning; then the map (rank 0)."""
        if self.ok:
            out = [f"{self.summary}, {self.elapsed_s:.1f} s"]
        else:
            out = [f"problem: {p.message}" for p in self.problems]
        out += [f"warning: {w.message}" for w in self.warnings]
        return out + [str(node) for node in self.nodes or ()]


# -- the meeting ---------------------------------------------------------------------------------------


def _host(environ: Mapping[str, str], probes: Probes | None) -> str:
    name = environ.get("SLURMD_NODENAME")
    if name:
        return name
    try:
        if probes is not None:
            return probes.hostname()
        from probes import live  # after require_probes (above): a user's probes.py may shadow ours

        return str(live.probe("hostname")())
    except (TopologyError, OSError):
        return socket.gethostname()


def _rank_claim(environ: Mapping[str, str]) -> int | None:
    for name in RANK_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _size_claim(environ: Mapping[str, str]) -> int | None:
    """The world size the launcher's variables claim, for a process that cannot resolve: rank 0 then
    knows how many processes to wait for."""
    for name in SIZE_VARIABLES:
        value = environ.get(name, "")
        if value.isdigit() and 0 < int(value) < 1 << 31:
            return int(value)
    return None


@attrs.frozen
class _Meeting:
    address: str
    port: int
    rank: int | None
    size: int | None
    job: str | None
    provenance: Mapping[str, Origin]  # where the values came from: read only to name a problem's variable

    def origin(self, field: str) -> tuple[str | None, str | None]:
        """Where `field`'s value came from, as (words, variable), as `origin_of` says it."""
        return _said(self.provenance.get(field))


def check(
    environ: Mapping[str, str],
    probes: Probes | None = None,
    *,
    timeout: float = 60.0,
    source: str | Source | None = None,
    allow_loopback: bool = False,
    ifname: bool = False,
) -> CheckReport:
    """Resolve this process's record, meet every other process of the job at the main endpoint, and
    return the verdict rank 0 gave everyone (or what this process found on its own, when the meeting
    failed). Raises `TopologyError` only when this process can neither resolve nor find the endpoint.

    `probes` answers host facts as in `resolve`, the network's among them (`interfaces`, `lookup`,
    `route`; the Network page says what is judged); the meeting always uses real sockets. `ifname`: the program will
    start under `exec --ifname`, which sets the interface variables the user left unset.
    """
    start = time.monotonic()
    deadline = start + timeout
    topology: Topology | None = None
    error: TopologyError | None = None
    try:
        topology = resolve(environ, probes, source=source, allow_loopback=allow_loopback)
    except TopologyError as exc:
        error = exc
    host = _host(environ, probes)
    meeting = _meeting(environ, topology, error)
    mine = record(
        topology,
        host,
        error=error,
        rank=meeting.rank,
        size=meeting.size,
        settings=settings(environ, meeting.address, ifname=ifname),
    )
    asked = probes if probes is not None else _live()
    own: dict[str, Any] = {}  # this process's network facts, once gathered

    def net(connected: Connected | None = None) -> dict[str, Any]:
        if connected is None:  # the probes say the way (meeting in the launcher's store)
            found = facts(environ, meeting.address, asked, ifname=ifname)
            own.update(found)
            return found
        found = facts(
            environ,
            meeting.address,
            asked,
            resolved=connected.resolved,
            local=connected.local,
            peer=connected.peer,
            waited=connected.waited,
            ifname=ifname,
        )
        own.update(found)
        return found

    def report(found: Verdict, nodes: tuple[Node, ...] | None = None) -> CheckReport:
        return CheckReport(
            ok=not found.problems and not found.missing,
            world_size=found.world_size,
            missing=found.missing,
            problems=found.problems,
            topology=topology,
            elapsed_s=time.monotonic() - start,
            summary=found.summary,
            host=host,
            nodes=nodes,
            warnings=found.warnings,
            interface=own.get("interface"),
        )

    def reached(address: str | None) -> dict[str, Any]:  # rank 0's facts, with the address the others reached
        own.update(facts(environ, meeting.address, asked, local=address, ifname=ifname))
        return own

    if environ.get(AGENT_STORE) == "True":
        mine["net"] = net()
        found, nodes = _meet_in_store(meeting, mine, host, environ, deadline=deadline, timeout=timeout)
        return report(found, nodes)
    if meeting.rank == 0:
        files = raise_open_files(_connections(topology, meeting))
        try:
            server = Server(meeting.port, round_=ROUND, job=meeting.job, backlog=max(128, min(65535, files.need)))
        except ExchangeFailed as exc:
            held = _held(meeting, host, exc, deadline)
            if held is not None:
                return report(held)
            # the port is held by another rank 0 of this job (a duplicate): meet it as a process does
        else:
            with server:
                found, nodes = _serve(
                    server, meeting, mine, reached, deadline=deadline, timeout=timeout, files=files, host=host
                )
            return report(found, nodes)
    try:
        answer = meet(
            meeting.address,
            meeting.port,
            mine,
            round_=ROUND,
            job=meeting.job,
            host=host,
            deadline=deadline,
            strict_job=False,
            processes=meeting.size,
            about=lambda connected: {"net": net(connected)},
            tell=_interface,
            heard=own.update,
            on_wait=lambda why, waited: _waiting(meeting, why, waited, timeout),
            nodes=None if topology is None else topology.num_nodes,
            local=None
            if topology is None
            else meeting_here(topology.local_world_size, topology.global_rank, topology.local_rank),
            personal=PERSONAL,
        )
        return report(Verdict.from_wire(answer))
    except ExchangeFailed as exc:
        return report(_failed_meeting(meeting, host, exc, timeout, time.monotonic() - start))
    except (KeyError, TypeError, ValueError) as exc:
        failure = ExchangeFailed("foreign", f"rank 0 answered a verdict this process cannot read ({exc})")
        return report(_failed_meeting(meeting, host, failure, timeout, time.monotonic() - start))


def _interface(said: Mapping[str, Any]) -> dict[str, Any]:
    """What a host leader hands its followers of the network facts it found (`meet`'s `tell`): the interface
    toward rank 0, each follower's report's too (a host leader's channel is an abstract socket: its
    followers share its network namespace, so their connections would leave by the same way)."""
    net = said.get("net")
    return {"interface": net.get("interface")} if isinstance(net, dict) else {}


def _connections(topology: Topology | None, meeting: _Meeting) -> int:
    """How many connections rank 0 expects at once: one per other node where host leaders gather a
    host's processes (Linux), one per other process elsewhere, and its own host's other processes."""
    size = meeting.size or 1
    if topology is None or topology.num_nodes is None or not sys.platform.startswith("linux"):
        return max(1, size - 1)
    return max(1, min(size - 1, topology.num_nodes))


def _live() -> Probes:
    from probes import system  # after require_probes (above): a user's probes.py may shadow ours

    return system()


def _waiting(meeting: _Meeting, why: str, waited: float, timeout: float) -> None:
    """The progress line of a process whose main address does not resolve yet."""
    words, _ = meeting.origin("main_address")
    log.info(
        "check: %s (main_address from %s) does not resolve yet (%s); waited %.0f s of %.0f",
        meeting.address,
        words or "the source",
        why,
        waited,
        timeout,
    )


def _meeting(environ: Mapping[str, str], topology: Topology | None, error: TopologyError | None) -> _Meeting:
    """Where and as whom this process meets the others; re-raises `error` when it cannot even tell where."""
    if topology is not None:
        if topology.main_address is None or topology.main_port is None:
            if topology.world_size > 1:
                raise TopologyError(
                    f"the {topology.source} topology has no main address and port, so its processes have "
                    f"nowhere to meet: {topology}"
                )
            return _Meeting("127.0.0.1", 0, 0, 1, job_key(topology.job_id), topology.provenance)
        return _Meeting(
            topology.main_address,
            topology.main_port,
            topology.global_rank,
            topology.world_size,
            job_key(topology.job_id),
            topology.provenance,
        )
    if error is None:
        raise TypeError("_meeting needs a topology or the error that stood in its way")
    try:
        address = env.address(environ, "MASTER_ADDR")
        port = env.port(environ, "MASTER_PORT")
    except TopologyError:
        raise error from None
    said = {"main_address": Origin.env("MASTER_ADDR"), "main_port": Origin.env("MASTER_PORT")}
    return _Meeting(address, port, _rank_claim(environ), _size_claim(environ), None, said)


def _problem_at_endpoint(meeting: _Meeting, host: str, kind: str, field: str, message: str) -> Verdict:
    words, variable = meeting.origin(field)
    ranks = () if meeting.rank is None else (meeting.rank,)
    return Verdict(
        world_size=meeting.size,
        missing=(0,) if kind == "unreachable" else (),
        problems=(
            Problem(
                kind="endpoint",
                ranks=ranks,
                hosts=(host,),
                variable=variable,
                message=f"{message} ({field} from {words or 'the source'})",
            ),
        ),
        summary="",
    )


def _held(meeting: _Meeting, host: str, exc: ExchangeFailed, deadline: float) -> Verdict | None:
    """Rank 0 cannot listen: None when a duplicate rank 0 of this job holds the port (then meet it),
    else the problem naming the port and the host."""
    try:
        if _greets(meeting.port):
            return None
    except OSError:  # refused, or silent until the 2 s ran out: not one of ours
        pass
    return _problem_at_endpoint(
        meeting,
        host,
        "bind",
        "main_port",
        f"port {meeting.port} on {host} is held by another process, so rank 0 cannot listen there: "
        f"{exc.message}; training's rendezvous would fail the same way",
    )


def _greets(port: int) -> bool:
    """Whether the process holding `port` on this host greets as rank 0 of a check does (2 s at most)."""

    with socket.create_connection(("localhost", port), timeout=2.0) as sock:
        data = b""
        while b"\n" not in data and len(data) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    try:
        hello = json.loads(data.split(b"\n", 1)[0])
    except ValueError:
        return False
    return isinstance(hello, dict) and hello.get("protocol") == PROTOCOL and hello.get("round") == ROUND


def _failed_meeting(
    meeting: _Meeting, host: str, exc: ExchangeFailed, timeout: float, elapsed: float | None = None
) -> Verdict:
    where = _endpoint(meeting.address, meeting.port)
    if exc.kind == "unreachable":
        waited = (
            f"within {timeout:g} s"
            if elapsed is None or elapsed >= timeout * 0.9
            else f"before this process gave up, after {elapsed:.1f} s of {timeout:g} s"
        )
        return _problem_at_endpoint(
            meeting,
            host,
            "unreachable",
            "main_address",
            f"rank 0 never answered at {where} {waited}: {exc}",
        )
    if exc.kind == "unresolved":
        return _problem_at_endpoint(
            meeting,
            host,
            "unreachable",
            "main_address",
            f"rank 0 cannot be reached at {where}: {exc}; the same name will fail training's rendezvous",
        )
    if exc.kind == "foreign":
        return _problem_at_endpoint(
            meeting,
            host,
            "foreign",
            "main_port",
            f"port {meeting.port} at {meeting.address} is not rank 0's check: {exc}",
        )
    if exc.kind == "stranger":
        return _problem_at_endpoint(meeting, host, "stranger", "job_id", str(exc))
    return _problem_at_endpoint(meeting, host, exc.kind, "main_address", str(exc))


def _serve(
    server: Server,
    meeting: _Meeting,
    mine: dict[str, Any],
    net: Callable[[str | None], dict[str, Any]],
    *,
    deadline: float,
    timeout: float,
    files: OpenFiles,
    host: str,
) -> tuple[Verdict, tuple[Node, ...]]:
    """Rank 0's side of the check. `net(reached)` gives rank 0's network facts once the others came:
    `reached` is the address of rank 0's that most of them reached (other than loopback), the one
    training's connections will reach too, whatever rank 0's own lookup of the main name says (Debian
    maps a host's own name to 127.0.1.1)."""
    strangers: list[Member] = []
    bases = Bases()
    admitted: dict[str | None, Member] = {}  # by record id: a record that comes twice (its leader died) counts once
    anonymous: list[Member] = []  # records without an id
    expected = [meeting.size]
    shortage: list[Problem] = []

    def admit(message: Mapping[str, Any]) -> str | None:
        job = message.get("job")
        if meeting.job is not None and job is not None and job != meeting.job:
            strangers.extend(m for _, m in members_of(message))
            return f"this is job {meeting.job!r}, and the process is in job {job!r}"
        for key, m in members_of(message, bases):
            if key is None:
                anonymous.append(m)
            else:
                admitted[key] = m
            if expected[0] is None and m.world_size is not None:
                expected[0] = m.world_size
        return None

    def count() -> int:
        return len(admitted) + len(anonymous)

    def done(_: list[Arrival]) -> bool:
        return expected[0] is not None and count() >= expected[0] - 1

    def tell_everyone(problem: Problem) -> None:
        """An answer waiting cannot change: every process hears it at once, and rank 0's descriptors come free."""
        shortage.append(problem)
        early = Verdict(world_size=expected[0], missing=(), problems=(problem,), summary="")
        server.answer_now(early.to_wire())

    if not files.enough:
        tell_everyone(_limit_problem(meeting, host, files, None))

    def starved() -> None:
        if not shortage:
            tell_everyone(_limit_problem(meeting, host, files, count()))

    started = time.monotonic()
    overflows = listen_overflows()

    def progress(_: list[Arrival]) -> None:
        size = expected[0]
        came = {m.rank for m in [*admitted.values(), *anonymous]} | {meeting.rank}
        waiting = "" if size is None else f"; waiting for ranks {spans(r for r in range(size) if r not in came)}"
        log.info(
            "check: %d of %s processes at %s after %.0f s%s",
            count() + 1,
            size if size is not None else "?",
            _endpoint(meeting.address, meeting.port),
            time.monotonic() - started,
            waiting,
        )

    arrivals = server.gather(
        deadline=deadline, admit=admit, done=done, progress=progress, every=PROGRESS_EVERY, starved=starved
    )
    reached = Counter(a.local for a in arrivals if a.local and not is_loopback(a.local)).most_common(1)
    me = member({**mine, "net": net(reached[0][0] if reached else None)})
    members = [me, *admitted.values(), *anonymous]
    complete = done(arrivals)  # as many processes as the world has came: a missing rank is claimed by none
    note = "" if complete else f" within {timeout:g} s at {_endpoint(meeting.address, meeting.port)}"
    found = verdict(members, strangers=strangers, world_size=expected[0], note=note)
    extra = [*shortage, *_lost_leaders(members)]
    if found.missing and not shortage:
        extra += _turned_away(overflows, listen_overflows(), host)
    if extra:
        found = attrs.evolve(found, problems=(*extra, *found.problems))
    wire = found.to_wire()
    server.answer(lambda _: wire, deadline=deadline + ANSWER_GRACE)
    return found, found.nodes


def _limit_problem(meeting: _Meeting, host: str, files: OpenFiles, held: int | None) -> Problem:
    """Rank 0 cannot hold a connection per node (or process): the numbers, and the fix."""
    limit = f"soft {files.soft}, hard {files.hard}"
    if held is None:
        said = (
            f"rank 0 on {host} may open {files.soft} files ({limit}, {files.open} open already) and meeting "
            f"this job needs about {files.need} more"
        )
    else:
        said = f"rank 0 on {host} ran out of open files ({limit}) after {held} processes arrived"
    return Problem(
        kind="limit",
        ranks=(0,),
        hosts=(host,),
        message=f"{said}: it cannot hold every process's connection, so the check stops here rather than "
        f"name healthy processes missing; {files.fix()}; training's rendezvous at "
        f"{_endpoint(meeting.address, meeting.port)} would need them too",
    )


def _turned_away(before: int | None, after: int | None, host: str) -> list[Problem]:
    """Connection attempts the kernel dropped at a full listen queue on rank 0's host while it waited:
    the missing processes may have run and been turned away, which is not theirs to fix."""
    if before is None or after is None or after <= before:
        return []
    queue = listen_queue()
    return [
        Problem(
            kind="backlog",
            ranks=(0,),
            hosts=(host,),
            message=f"the kernel on {host} turned away {after - before} connection attempts at a full listen "
            f"queue while rank 0 waited (TcpExt ListenOverflows in /proc/net/netstat, every listener's; a queue "
            f"holds at most net.core.somaxconn, {queue} there): the missing processes may have run and "
            f"been dropped there; fix: raise net.core.somaxconn on rank 0's host (`sysctl -w "
            f"net.core.somaxconn={max(65535, queue)}`), or let the processes of a host meet through their host "
            "leader (Linux, abstract Unix sockets)",
        )
    ]


def _lost_leaders(members: Sequence[Member]) -> list[Problem]:
    """Host leaders that took records and went away before relaying rank 0's answer. A follower knows its
    leader by pid and host (the kernel's word); its rank is the one of the record from that pid and host,
    when one came (a leader that died after its batch reached rank 0) and only one did."""
    lost: dict[tuple[str, str], list[Member]] = {}
    for m in members:
        if m.lost_leader is not None:
            key = (_text(m.lost_leader.get("host", "?")), _text(m.lost_leader.get("pid", "?")))
            lost.setdefault(key, []).append(m)
    if not lost:
        return []
    ranks: dict[tuple[str, str], set[int]] = {}
    for m in members:
        if m.pid is not None and m.rank is not None and (m.host, str(m.pid)) in lost:
            ranks.setdefault((m.host, str(m.pid)), set()).add(m.rank)
    problems = []
    for (lead_host, pid), followers in lost.items():
        known = ranks.get((lead_host, pid), set())
        rank = next(iter(known)) if len(known) == 1 else None
        who = "a process of unknown rank" if rank is None else f"rank {rank}"
        problems.append(
            Problem(
                kind="leader",
                ranks=() if rank is None else (rank,),
                hosts=(lead_host,),
                message=f"the host leader of {lead_host}, {who} (pid {pid}), took the records of "
                f"{_who(followers)} and went away before relaying rank 0's answer (it died or was killed); "
                "they met rank 0 again",
            )
        )
    return problems


# -- through the launcher's store (torchrun's agent) ------------------------------------------------------


def _meet_in_store(
    meeting: _Meeting,
    mine: dict[str, Any],
    host: str,
    environ: Mapping[str, str],
    *,
    deadline: float,
    timeout: float,
) -> tuple[Verdict, tuple[Node, ...] | None]:
    """Meet as clients of the store the launcher holds on the main endpoint (torchrun's agent store).

    Keys live under the run id and restart count; each process takes a slot from an atomic counter
    (`add`) and writes its record under it, so a duplicate rank or a second run of the check never
    overwrites another's record. Slots are dealt in generations of `world_size`: the k-th run of
    the check in one restart reads slots k*N..k*N+N-1. Rank 0 waits for its generation to fill (or
    the deadline), judges, and publishes the verdict with `compare_set`, so a duplicate rank 0 cannot
    replace it.
    """
    # torch is an optional extra, there wherever torchrun is; the ignore: torch does not list TCPStore in __all__
    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    where = _endpoint(meeting.address, meeting.port)
    size = meeting.size or env.optional_integer(environ, "WORLD_SIZE", minimum=1) or 1
    run = environ.get("TORCHELASTIC_RUN_ID", "none")
    restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    prefix = f"cluster-topology/check/{run}/{restart}/"
    try:
        store = TCPStore(
            meeting.address,
            meeting.port,
            is_master=False,
            timeout=timedelta(seconds=max(0.1, deadline - time.monotonic())),
        )
        slot = int(store.add(f"{prefix}slots", 1)) - 1
        generation = f"{prefix}{slot // size}/"
        store.set(f"{generation}record/{slot}", json.dumps(mine))
        if meeting.rank != 0:
            store.set_timeout(timedelta(seconds=max(0.1, deadline - time.monotonic()) + ANSWER_GRACE))
            store.wait([f"{generation}verdict"])
            return Verdict.from_wire(json.loads(store.get(f"{generation}verdict"))), None
        first = slot // size * size
        started = time.monotonic()
        next_report = started + PROGRESS_EVERY
        while True:
            count = int(store.add(f"{prefix}slots", 0))
            now = time.monotonic()
            if count >= first + size or now >= deadline:
                break
            if now >= next_report:
                log.info(
                    "check: %d of %d processes in the store at %s after %.0f s",
                    min(count, first + size) - first,
                    size,
                    where,
                    now - started,
                )
                next_report = now + PROGRESS_EVERY
            time.sleep(0.02)
        keys = [f"{generation}record/{s}" for s in range(first, min(count, first + size))]
        store.set_timeout(timedelta(seconds=max(0.1, min(2.0, deadline + 1.0 - time.monotonic()))))
        records = []
        for key in keys:  # a slot taken a moment ago may not hold its record yet: wait for it, briefly
            try:
                store.wait([key])
            except RuntimeError:
                continue
            try:
                records.append(json.loads(store.get(key)))
            except ValueError:
                records.append({"host": "?", "error": {"message": f"store key {key} does not hold a record"}})
        found = verdict(
            [member(r) for r in records if isinstance(r, dict)],
            world_size=size,
            note=f" within {timeout:g} s in the launcher's store at {where}",
        )
        store.compare_set(f"{generation}verdict", "", json.dumps(found.to_wire()))
    except (RuntimeError, ValueError, OSError) as exc:  # torch's DistStoreError is a RuntimeError
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return (
            _problem_at_endpoint(
                meeting,
                host,
                "unreachable",
                "main_address",
                f"the launcher's store at {where} failed the check: {text}",
            ),
            None,
        )
    return found, found.nodes
