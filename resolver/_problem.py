"""One finding of the preflight: what kind, which ranks and hosts, the variable to fix, in words."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Problem"]


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
