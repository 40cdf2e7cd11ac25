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

from resolver.errors import InvalidSettings, TopologyError
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
    """Whether some distribution on `path` may declare an entry point of the group."""
    marker = f"[{ENTRY_POINT_GROUP}]".encode()
    for folder in path:
        try:
            entries = os.scandir(folder or ".")
        except NotADirectoryError:
            return True  # a zip or egg file on sys.path: only importlib.metadata can read it
        except OSError:
            continue
        with entries:
            for entry in entries:
                if not entry.name.endswith((".dist-info", ".egg-info")):
                    continue
                try:
                    with open(os.path.join(entry.path, "entry_points.txt"), "rb") as handle:
                        if marker in handle.read():
                            return True
                except OSError:
                    continue
    return False


def _load_entry_points() -> Iterator[Source]:
    from importlib.metadata import entry_points

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
    """Every known source in detection order: built-ins, plugins, the default, then on-request ones."""
    ordered = (*(e.load() for e in DETECTION_ORDER), *_plugin_sources(), DEFAULT.load())
    if auto_only:
        return tuple(s for s in ordered if s.auto)
    return (*ordered, *(e.load() for e in ON_REQUEST))


def by_name(name: str) -> Source:
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
    environ: Mapping[str, str], probes: Probes | None = None, *, source: str | Source | None = None
) -> Topology:
    """The topology of this process: pure in `environ`, asking only the probes it needs.

    `probes=None` uses the live probes of this machine; `source` forces one source by name or instance.
    """
    if not isinstance(environ, Mapping):
        raise TypeError(f"environ must be a Mapping[str, str], got {type(environ).__name__}")
    chosen, notes = _choose(environ, source)
    if probes is None:
        probes = cast("Probes", _LiveOnFirstUse())  # answers every probe question as the live bundle does
    topology = chosen.resolve(environ, probes)
    if not isinstance(topology, Topology):
        raise TopologyError(f"source {chosen.name!r} returned {type(topology).__name__}, not a Topology")
    changes: dict[str, Any] = _scheduler_facts(environ, chosen.name, topology)
    if notes:
        changes["warnings"] = (*notes, *topology.warnings)
    return attrs.evolve(topology, **changes) if changes else topology


class _LiveOnFirstUse:
    """The live probes, made on the first question: a source that asks none (torchrun) imports none."""

    __slots__ = ("_bundle",)

    def __init__(self) -> None:
        self._bundle: Probes | None = None

    def __getattr__(self, name: str) -> Any:
        if self._bundle is None:
            from probes import system

            self._bundle = system(timeout=PROBE_TIMEOUT)
        return getattr(self._bundle, name)


def _scheduler_facts(environ: Mapping[str, str], chosen: str, topology: Topology) -> dict[str, Any]:
    """The job facts of the scheduler around the process, when a launcher other than it was chosen."""
    for entry in SCHEDULERS:
        if entry.name == chosen or not entry.is_candidate(environ):
            continue
        facts = entry.attribute()(environ)
        if facts:
            changes: dict[str, Any] = {field: value for field, (value, _) in facts.items()}
            changes["provenance"] = {**topology.provenance, **{field: origin for field, (_, origin) in facts.items()}}
            return changes
    return {}


__all__ = ["Entry", "by_name", "registered", "resolve"]
