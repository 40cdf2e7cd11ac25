"""Detection and resolution: walk the registry in order, first match wins; `resolve` and `explain`.

The order is data (`resolver/sources/_registry.py`): forced source > the built-in launchers >
third-party sources (entry points of the `resolver.sources` group) > the default. A built-in source
is imported and asked only when one of its candidate variables is set.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

import attrs

from resolver import _devices
from resolver import environ as env
from resolver.errors import InvalidSettings, InvalidVariable, StrictWarnings, TopologyError
from resolver.sources import Detection, Source
from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ON_REQUEST, SCHEDULERS, Entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

ENTRY_POINT_GROUP = "resolver.sources"
PROBE_TIMEOUT = 120.0  # seconds the live probes may take (an MPI collective waits for every rank)


# -- third-party sources ------------------------------------------------------------------------------


def _plugin_sources() -> tuple[Source, ...]:
    """Sources from installed distributions' `resolver.sources` entry points.

    importlib.metadata is expensive to import and scan, and almost no environment has a plugin, so
    a byte search of each folder's `*.dist-info/entry_points.txt` decides whether it is needed. An
    entry of `sys.path` that is not a folder (a zip or an egg file) cannot be searched that way:
    then importlib.metadata decides.
    """
    if _declared(sys.path):
        return tuple(_load_entry_points())
    return ()


def _declared(path: list[str]) -> bool:
    """Whether some distribution on `path` may declare an entry point of the group.

    It looks where importlib.metadata looks: `*.dist-info` and `*.egg-info` folders (as installers
    spell them, in lower case), and an `.egg` folder's `EGG-INFO`. An `entry_points.txt` without
    the group's section header cannot declare it; one with it sends the question to
    importlib.metadata. This runs for every installed distribution: `os.access` asks first, so that
    the many without the file cost no exception, and the file probe's reader reads the others
    (a FIFO or device there is skipped, not waited for).
    """
    require_probes()
    from probes.live import MAX_FILE_BYTES, file_bytes  # after require_probes: a user's probes.py may shadow ours

    marker = f"[{ENTRY_POINT_GROUP}]".encode()
    for folder in path:
        try:
            names = os.listdir(folder or ".")
        except NotADirectoryError:
            return True  # a zip or egg file on sys.path: only importlib.metadata can read it
        except OSError:
            continue
        egg = os.path.basename(folder).lower().endswith(".egg")
        for name in names:
            if not (name.endswith((".dist-info", ".egg-info")) or (egg and name == "EGG-INFO")):
                continue
            file = f"{folder or '.'}/{name}/entry_points.txt"
            if not os.access(file, os.R_OK):
                continue
            try:
                if marker in (file_bytes(file, MAX_FILE_BYTES) or b""):
                    return True
            except OSError:  # unreadable after all: as if it were missing
                continue
    return False


def _load_entry_points() -> Iterator[Source]:
    from importlib.metadata import entry_points  # only when the scan found a plugin: it costs more than a resolve

    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            loaded: Any = point.load()
        except Exception as exc:
            raise TopologyError(
                f"entry point {point.name!r} = {point.value!r} in group {ENTRY_POINT_GROUP!r} failed to load: {exc!r}"
            ) from exc
        yield _as_source(loaded() if isinstance(loaded, type) else loaded, f"entry point {point.value!r}")


def _as_source(candidate: Any, what: str) -> Source:
    if not isinstance(candidate, Source):
        raise InvalidSettings(
            f"{what} is not a source: expected an object with name, auto, detect(environ) and resolve(environ, probes)",
            variable="source",
            value=candidate,
            expected="a source",
        )
    return candidate


# -- the registry ---------------------------------------------------------------------------------------


def registered(*, auto_only: bool = False) -> tuple[Source, ...]:
    """Every known source in detection order: built-ins, plugins, the default, then on-request ones.

    `auto_only` keeps the auto-detected ones. This imports every source module; `resolve` does not.
    """
    ordered = (*(e.load() for e in DETECTION_ORDER), *_plugin_sources(), DEFAULT.load())
    if auto_only:
        return tuple(s for s in ordered if s.auto)
    return (*ordered, *(e.load() for e in ON_REQUEST))


def by_name(name: str) -> Source:
    """The source called `name` (built-in or plugin); `InvalidSettings` naming the known ones otherwise."""
    for entry in (*DETECTION_ORDER, DEFAULT, *ON_REQUEST):
        if entry.name == name:
            return entry.load()
    for candidate in _plugin_sources():  # scanned only for a name that is not built in
        if candidate.name == name:
            return candidate
    known = ", ".join(s.name for s in registered())
    raise InvalidSettings(
        f"source={name!r} is not a known source: expected one of {known}",
        variable="source",
        value=name,
        expected=f"one of {known}",
    )


def _as_detection(found: Detection | bool) -> Detection:
    """What `detect()` returned, as a Detection: a bool says only whether it matched."""
    if isinstance(found, Detection):
        return found
    return Detection(bool(found), f"detect() returned {bool(found)!r}")


def _choose(environ: Mapping[str, str], source: str | Source | None) -> tuple[Source, tuple[str, ...]]:
    """The source to use, and the warnings of the sources that declined on the way to it."""
    if source is not None:
        return (by_name(source) if isinstance(source, str) else _as_source(source, f"source={source!r}")), ()
    notes: list[str] = []
    for entry in DETECTION_ORDER:
        if not entry.is_candidate(environ):
            continue
        candidate = entry.load()
        found = _as_detection(candidate.detect(environ))
        if found.matched:
            return candidate, ()
        if found.warning:
            notes.append(found.warning)
    for candidate in _plugin_sources():
        if candidate.auto and _as_detection(candidate.detect(environ)).matched:
            return candidate, tuple(notes)
    return DEFAULT.load(), tuple(notes)


def resolve(
    environ: Mapping[str, str],
    probes: Probes | None = None,
    *,
    source: str | Source | None = None,
    strict: bool = False,
    allow_loopback: bool = False,
) -> Topology:
    """The topology of this process: pure in `environ`, asking only the probes it needs.

    `probes=None` uses the live probes of this machine; `source` forces one source by name or instance.
    A topology that spans several nodes with a loopback main address is refused (`InvalidVariable`)
    unless `allow_loopback` or `CLUSTER_TOPOLOGY_ALLOW_LOOPBACK=1` in `environ` says the nodes are
    emulated on one host. With `strict`, a topology with warnings is an error (`StrictWarnings`).
    Warnings are returned in `Topology.warnings`, never emitted through `warnings` or `logging`:
    the integrations and the CLI report them.
    """
    if not isinstance(strict, bool) or not isinstance(allow_loopback, bool):
        raise TypeError(f"strict and allow_loopback are bools, got {strict!r} and {allow_loopback!r}")
    env.check_environ(environ)
    chosen, notes = _choose(environ, source)
    if probes is None:
        probes = cast("Probes", _LiveOnFirstUse())  # answers every probe question as the live bundle does
    topology = chosen.resolve(environ, probes)
    if not isinstance(topology, Topology):
        raise TopologyError(f"source {chosen.name!r} returned {type(topology).__name__}, not a Topology")
    changes: dict[str, Any] = _scheduler_facts(environ, chosen.name, topology)
    if notes:
        changes["warnings"] = (*notes, *topology.warnings)
    if changes:
        topology = attrs.evolve(topology, **changes)
    topology = _devices.assign(environ, topology, probes)
    return enforce(topology, environ, strict=strict, allow_loopback=allow_loopback)


ALLOW_LOOPBACK = "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK"


def enforce(topology: Topology, environ: Mapping[str, str], *, strict: bool, allow_loopback: bool) -> Topology:
    """The rules on a resolved record: no loopback main address across nodes; with `strict`, no warnings."""
    if not allow_loopback:
        allow_loopback = env.optional_integer(environ, ALLOW_LOOPBACK, maximum=1) == 1
    if not allow_loopback:
        _refuse_loopback(topology)
    if strict and topology.warnings:
        raise StrictWarnings(topology.warnings, str(topology))
    return topology


def _nodes(topology: Topology) -> str | None:
    """Why the topology spans more than one node, or None when it may be a single node."""
    origin = topology.provenance
    if topology.num_nodes is not None and topology.num_nodes > 1:
        return f"num_nodes={topology.num_nodes} from {origin.get('num_nodes', 'the source')}"
    if topology.node_rank > 0:
        return f"this process is on node {topology.node_rank} ({origin.get('node_rank', 'the source')})"
    if topology.local_world_size is not None and topology.local_world_size < topology.world_size:
        return (
            f"local_world_size={topology.local_world_size} < world_size={topology.world_size}: "
            "the other processes are on other nodes"
        )
    return None


def _refuse_loopback(topology: Topology) -> None:
    address = topology.main_address
    if address is None or not env.is_loopback(address):
        return
    spans = _nodes(topology)
    if spans is None:
        return
    origin = topology.provenance.get("main_address")
    variable = (origin.variable if origin is not None else None) or "main_address"
    raise InvalidVariable(
        variable,
        address,
        f"an address of the first node that every node can reach, not a loopback address: the "
        f"{topology.source} topology spans several nodes ({spans}) and main_address {address} "
        f"(from {origin or 'the source'}) reaches only the node it is read on, so the job would hang at rendezvous. "
        "HINT: set MASTER_ADDR to the first node's host name or IP address (or unset an inherited "
        f"MASTER_ADDR=127.0.0.1); for nodes emulated on one host, set {ALLOW_LOOPBACK}=1 "
        "(resolve(..., allow_loopback=True), cluster-topology --allow-loopback)",
        related={"num_nodes": str(topology.num_nodes), "node_rank": str(topology.node_rank)},
    )


def require_probes() -> None:
    """Check that the `probes` Python imports is cluster-topology's, before anything is imported from it.

    Every run-time import of `probes` in the resolver comes after this call: a user's own `probes.py`
    in the script's folder or the working directory shadows our package (resolver/_shadow.py), and
    this names it (`ProbesShadowed`, a `TopologyError` and an `ImportError`) instead of failing with
    "'probes' is not a package".
    """
    import probes  # the import this function checks

    if getattr(probes, "__distribution__", None) != "cluster-topology":
        from resolver._shadow import ProbesShadowed  # the error's module, only on the error's path

        raise ProbesShadowed.of(probes)


class _LiveOnFirstUse:
    """The live probes, each imported when it is first asked: a source that asks none (torchrun with a
    visibility variable set) imports none, and one that asks `device_count` builds no bundle."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        require_probes()
        from probes import live  # after require_probes: a user's probes.py may shadow ours

        if name not in live.NAMES:
            raise AttributeError(f"the live probes have no probe {name!r}")
        return live.probe(name, timeout=PROBE_TIMEOUT)


def _scheduler_facts(environ: Mapping[str, str], chosen: str, topology: Topology) -> dict[str, Any]:
    """The job facts of the scheduler around the process, when a launcher other than it was chosen."""
    for entry in SCHEDULERS:
        if entry.name == chosen or entry.facts is None or not entry.facts.met(environ):
            continue
        facts = entry.job_facts()(environ)
        if facts:
            changes: dict[str, Any] = {field: value for field, (value, _) in facts.items()}
            changes["provenance"] = {**topology.provenance, **{field: origin for field, (_, origin) in facts.items()}}
            return changes
    return {}


__all__ = ["ALLOW_LOOPBACK", "Entry", "by_name", "enforce", "registered", "require_probes", "resolve"]
