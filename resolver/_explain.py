"""`explain`: each candidate source in detection order, whether it matched and why, and the winner.

Its own module: only `explain` (and the CLI's `--explain`) pays for importing every source, for
these record classes and for wrapping their text to a terminal.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from resolver._detect import _as_detection, _choose, registered
from resolver.environ import check_environ
from resolver.sources import Detection, Source
from resolver.sources._registry import DEFAULT

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["Candidate", "Explanation", "explain"]


@attrs.frozen
class Candidate:
    """One source as `explain` saw it: its name, whether it is auto-detected, and its detection."""

    name: str
    auto: bool
    detection: Detection


@attrs.frozen
class Explanation:
    """Each candidate in detection order, whether it matched and on which variables; the winner and why."""

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

    def wrapped(self, prefix: str = "") -> str:
        """`str(self)` for stdout: each line after `prefix`, wrapped to the terminal's width (`COLUMNS` when
        set); into a pipe or a file, one line per candidate, for grep."""
        if "COLUMNS" not in os.environ and not sys.stdout.isatty():
            return "".join(f"{prefix}{line}\n" for line in str(self).splitlines())
        width = max(40, shutil.get_terminal_size((80, 24)).columns - 1) - len(prefix)
        return "".join(
            f"{prefix}{part}\n"
            for line in str(self).splitlines()
            for part in textwrap.wrap(line, width, subsequent_indent=" " * 16, break_on_hyphens=False) or [""]
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: the winner, why, and every candidate with its detection."""
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
    check_environ(environ)
    candidates = tuple(
        Candidate(candidate.name, candidate.auto, _as_detection(candidate.detect(environ)))
        for candidate in registered()
    )
    chosen, _ = _choose(environ, source)
    if source is not None:
        why = f"forced with source={chosen.name!r}"
    elif chosen.name == DEFAULT.name:
        why = "no launcher matched, so the default applies"
    else:
        why = "first match in detection order"
    return Explanation(candidates, chosen.name, why)
