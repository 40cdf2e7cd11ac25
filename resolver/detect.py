"""Detection as data: an ordered tuple of sources, first match wins; `resolve` and `explain`.

Order: forced source > TorchElastic > SLURM > LSF > MPI > third-party sources > Lightning default.
Sources with `auto = False` (Kubeflow, XLA) are never auto-detected, only chosen with `source=`.
Third-party sources register under the `resolver.sources` entry-point group.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs

from resolver.errors import InvalidSettings, TopologyError
from resolver.sources import Detection, Source
from resolver.sources.kubeflow import Kubeflow
from resolver.sources.lightning import Lightning
from resolver.sources.lsf import Lsf
from resolver.sources.mpi import Mpi
from resolver.sources.slurm import Slurm
from resolver.sources.torchelastic import TorchElastic
from resolver.sources.xla import Xla
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["DEFAULT", "DETECTION_ORDER", "ENTRY_POINT_GROUP", "Explanation", "explain", "resolve", "sources"]

ENTRY_POINT_GROUP = "resolver.sources"
PROBE_TIMEOUT = 120.0  # seconds the live probes may take (an MPI collective waits for every rank)

DEFAULT: Source = Lightning()
# Auto-detected, in order, before the plugins and the default. SLURM, LSF and MPI slot in here.
DETECTION_ORDER: tuple[Source, ...] = (
    TorchElastic(),
    Slurm(),
    Lsf(),
    Mpi(),
)
# Known by name only.
ON_REQUEST: tuple[Source, ...] = (
    Kubeflow(),
    Xla(),
)


def _plugin_sources() -> tuple[Source, ...]:
    """Sources from installed distributions' `resolver.sources` entry points.

    Found once per process and `sys.path` (installing a distribution mid-run needs a new
    process, as with importlib.metadata's own caches). importlib.metadata costs ~15 ms to import
    and scan, more than the whole resolve; a byte search of each `entry_points.txt` on sys.path
    (under 1 ms) decides whether it is needed.
    """
    return _plugins_on(tuple(sys.path))


@functools.lru_cache(maxsize=4)
def _plugins_on(path: tuple[str, ...]) -> tuple[Source, ...]:
    marker = f"[{ENTRY_POINT_GROUP}]".encode()
    for folder in path:
        try:
            entries = os.scandir(folder or ".")
        except OSError:
            continue
        with entries:
            for entry in entries:
                if entry.name.endswith((".dist-info", ".egg-info")):
                    try:
                        with open(os.path.join(entry.path, "entry_points.txt"), "rb") as handle:
                            found = marker in handle.read()
                    except OSError:
                        continue
                    if found:
                        return tuple(_load_entry_points())
    return ()


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
            f"{what} is not a source: expected an object with name, detect(environ) and resolve(environ, probes)"
        )
    return candidate


def sources(*, auto_only: bool = False) -> tuple[Source, ...]:
    """Every known source in detection order (the default last); `auto_only` drops on-request ones."""
    plugins = tuple(_plugin_sources())
    ordered = (*DETECTION_ORDER, *plugins, DEFAULT)
    if auto_only:
        return tuple(s for s in ordered if getattr(s, "auto", True))
    return (*ordered, *ON_REQUEST)


def _by_name(name: str) -> Source:
    builtin = (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)
    for candidate in builtin:
        if candidate.name == name:
            return candidate
    for candidate in _plugin_sources():  # scanned only for a name that is not built in
        if candidate.name == name:
            return candidate
    known = [s.name for s in sources()]
    raise InvalidSettings(f"source={name!r} is not a known source: expected one of {', '.join(known)}")


def _detect(candidate: Source, environ: Mapping[str, str]) -> Detection:
    return _as_detection(candidate.detect(environ))


def _as_detection(found: Detection | bool) -> Detection:
    """What `detect()` returned, as a Detection: a bool (or other truthy object) says only whether it matched."""
    if isinstance(found, Detection):
        return found
    return Detection(bool(found), "detect() returned " + repr(bool(found)))


def _choose(environ: Mapping[str, str], source: str | Source | None) -> tuple[Source, tuple[str, ...]]:
    """The source to use, and the warnings of the sources that declined on the way to the default."""
    if source is not None:
        return (_by_name(source) if isinstance(source, str) else _as_source(source, f"source={source!r}")), ()
    notes: list[str] = []
    for candidate in DETECTION_ORDER:
        found = candidate.detect(environ)
        # fast path for speed: a plain Detection (what the built-in sources return) is read directly,
        # without `_detect`'s call and isinstance or the Python-level Detection.__bool__
        if type(found) is not Detection:
            found = _as_detection(found)
            if found:
                return candidate, ()
        elif found.matched:
            return candidate, ()
        if found.warning:
            notes.append(found.warning)
    for candidate in _plugin_sources():
        if getattr(candidate, "auto", True) and _detect(candidate, environ):
            return candidate, ()
    return DEFAULT, tuple(notes)


def resolve(
    environ: Mapping[str, str], probes: Probes | None = None, *, source: str | Source | None = None
) -> Topology:
    """The topology of this process: pure in `environ`, asking only the probes it needs.

    `probes=None` uses the live probes of this machine; `source` forces one source by name or instance.
    """
    if type(environ) is not dict and not isinstance(environ, Mapping):  # dict first: the ABC check is slower
        raise TypeError(f"environ must be a Mapping[str, str], got {type(environ).__name__}")
    chosen, notes = _choose(environ, source)
    if probes is None:
        from probes import system

        probes = system(timeout=PROBE_TIMEOUT)
    topology = chosen.resolve(environ, probes)
    if not isinstance(topology, Topology):
        raise TopologyError(f"source {chosen.name!r} returned {type(topology).__name__}, not a Topology")
    if notes:
        topology = attrs.evolve(topology, warnings=(*notes, *topology.warnings))
    return topology


class Candidate(NamedTuple):
    name: str
    auto: bool
    detection: Detection


class Explanation(NamedTuple):
    """Each candidate in detection order, whether it matched and on which variables; the winner."""

    candidates: tuple[Candidate, ...]
    chosen: str
    why: str

    def __str__(self) -> str:
        lines = []
        for c in self.candidates:
            mark = "*" if c.name == self.chosen else ("+" if c.detection.matched else "-")
            on = f" [{', '.join(c.detection.variables)}]" if c.detection.variables else ""
            lines.append(f"{mark} {c.name:<13} {c.detection.reason}{on}")
        lines.append(f"chosen: {self.chosen}: {self.why}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "why": self.why,
            "candidates": [
                {
                    "name": c.name,
                    "auto": c.auto,
                    "matched": c.detection.matched,
                    "reason": c.detection.reason,
                    "variables": list(c.detection.variables),
                }
                for c in self.candidates
            ],
        }


def explain(
    environ: Mapping[str, str], probes: Probes | None = None, *, source: str | Source | None = None
) -> Explanation:
    """Why `resolve(environ, probes, source=source)` picks the source it picks. Asks no probe."""
    candidates = []
    for candidate in sources():
        auto = bool(getattr(candidate, "auto", True))
        candidates.append(Candidate(candidate.name, auto, _detect(candidate, environ)))
    chosen, _ = _choose(environ, source)
    if source is not None:
        why = f"forced with source={chosen.name!r}"
    elif chosen is DEFAULT:
        why = "no launcher matched, so the default applies"
    else:
        why = "first match in detection order"
    return Explanation(tuple(candidates), chosen.name, why)
