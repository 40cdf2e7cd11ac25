"""One finding of the preflight: what kind, which ranks and hosts, the variable to fix, in words."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

__all__ = ["Problem", "ranges", "spans"]


@attrs.frozen(kw_only=True)
class Problem:
    """One thing that will hang or break the job (or, among a report's warnings, that may): what kind,
    which ranks and hosts, the variable to fix."""

    kind: str
    ranks: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()
    variable: str | None = None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "ranks": list(self.ranks),
            "hosts": list(self.hosts),
            "variable": self.variable,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Problem:
        return cls(
            kind=str(data["kind"]),
            ranks=tuple(int(r) for r in data.get("ranks", ())),
            hosts=tuple(str(h) for h in data.get("hosts", ())),
            variable=None if data.get("variable") is None else str(data["variable"]),
            message=str(data["message"]),
        )


def spans(ranks: Iterable[int]) -> str:
    """`0-2,5`: ranks as ranges."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges(sorted(set(ranks))))


def ranges(ranks: Sequence[int]) -> list[list[int]]:
    """`[[0, 2], [5, 5]]`: sorted ranks as inclusive ranges (a verdict's missing ranks on the wire)."""
    out: list[list[int]] = []
    for r in sorted(ranks):
        if out and out[-1][1] + 1 == r:
            out[-1][1] = r
        elif not out or out[-1][1] != r:
            out.append([r, r])
    return out
