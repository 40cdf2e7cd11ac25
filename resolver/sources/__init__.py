"""Sources: one module per launcher. A source is any object with `name`, `detect`, `resolve`.

`detect(environ)` returns a `Detection` (or a bool) and never asks a probe;
`resolve(environ, probes)` returns a `Topology` or raises a `TopologyError`.
`auto = False` keeps a source out of auto-detection (Kubeflow, XLA): it is chosen with `source=`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from resolver.environ import check_address, check_port, optional_integer
from resolver.errors import InvalidTopology, InvalidVariable, ProbeFailed
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["Builder", "Detection", "Source"]

Environ = Mapping[str, str]


class Detection(NamedTuple):
    """Whether a source matched, on which variables, and why, for `explain`. Truthy when matched.

    A NamedTuple rather than an attrs class: every import pays for it (0.1 ms against 0.4 ms).
    """

    matched: bool
    reason: str
    variables: tuple[str, ...] = ()
    # set by a source that declines but has something to tell: it becomes a warning of the
    # topology that the default source resolves (e.g. "this is the SLURM batch script itself")
    warning: str | None = None

    def __bool__(self) -> bool:
        return self.matched


@runtime_checkable
class Source(Protocol):
    name: str

    def detect(self, environ: Environ) -> Detection | bool: ...

    def resolve(self, environ: Environ, probes: Probes) -> Topology: ...


_FIELD_WORD = re.compile(r"[a-z_]+")


class Builder:
    """Collects a source's values with their provenance, then builds the record.

    When the record refuses a value, the error is re-raised naming the variable the value
    came from (and the variables of the fields the invariant compares it with).
    """

    __slots__ = ("environ", "provenance", "source", "values", "warnings")

    def __init__(self, source: str, environ: Environ) -> None:
        self.source = source
        self.environ = environ
        self.values: dict[str, Any] = {}
        self.provenance: dict[str, str] = {}
        self.warnings: list[str] = []

    def set(self, field: str, value: Any, origin: str) -> Any:
        self.values[field] = value
        self.provenance[field] = origin
        return value

    def env(self, field: str, value: Any, variable: str) -> Any:
        self.values[field] = value  # `set`, inlined for speed
        self.provenance[field] = f"env:{variable}"
        return value

    def optional_int(self, field: str, variable: str, *, minimum: int = 0) -> int | None:
        """Take `field` from `variable` when it is set; None (and nothing recorded) otherwise."""
        value = optional_integer(self.environ, variable, minimum=minimum)
        if value is not None:
            self.env(field, value, variable)
        return value

    def optional_address(self, variable: str = "MASTER_ADDR") -> str | None:
        if variable not in self.environ:
            return None
        address: str = self.env("main_address", check_address(variable, self.environ[variable]), variable)
        return address

    def optional_port(self, variable: str = "MASTER_PORT") -> int | None:
        if variable not in self.environ:
            return None
        port: int = self.env("main_port", check_port(variable, self.environ[variable]), variable)
        return port

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def build(self) -> Topology:
        try:
            return Topology(source=self.source, provenance=self.provenance, warnings=self.warnings, **self.values)
        except InvalidTopology as exc:
            origin = self.provenance.get(exc.field, "")
            if origin.startswith("probe:"):
                raise ProbeFailed(origin[6:], f"answered {exc.value!r}: expected {exc.expected}") from None
            if not origin.startswith("env:"):
                raise
            variable = origin[4:]
            others = [
                f"{word} from {self.provenance[word][4:]}={self.environ.get(self.provenance[word][4:])}"
                for word in _FIELD_WORD.findall(exc.expected)
                if word != exc.field and self.provenance.get(word, "").startswith("env:")
            ]
            expected = exc.expected + (f" ({'; '.join(others)})" if others else "")
            raise InvalidVariable(variable, self.environ.get(variable, exc.value), expected) from None
