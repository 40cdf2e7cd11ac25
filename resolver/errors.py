"""One tree of errors. Every message names the variable (or probe), the value and what was expected.

Errors are data: the facts are attributes (`variable`, `value`, `expected`, `related`; `probe` and
`field` where they apply), the message is built from them, and `to_dict()` gives them to a program
(the CLI's JSON error), so nothing has to parse the English.

TopologyError
├── MissingVariable       (also KeyError)
├── InvalidVariable       (also ValueError)
│   └── HostlistSyntaxError   points at the column
├── InvalidTopology       (also ValueError)  a record field breaks an invariant
├── InvalidSettings       (also ValueError)  devices/num_nodes disagree with the launcher
├── ProbeFailed           a probe could not answer
└── StrictWarnings        strict=True and the topology has warnings
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

__all__ = [
    "HostlistSyntaxError",
    "InvalidSettings",
    "InvalidTopology",
    "InvalidVariable",
    "MissingVariable",
    "ProbeFailed",
    "StrictWarnings",
    "TopologyError",
    "TopologyWarning",
    "count",
    "shown",
]

_SHOWN = 200  # longest value quoted in a message; longer ones are cut so errors stay one line


def shown(value: object) -> str:
    """`repr` of a value, shortened so that a huge bad input does not make a huge message."""
    if isinstance(value, int) and not isinstance(value, bool):
        return count(value)  # repr() of an int past 4300 digits raises ValueError
    text = repr(value)
    if len(text) > _SHOWN:
        return f"{text[: _SHOWN - 20]}...<{len(text)} chars>"
    return text


def count(number: int) -> str:
    """An integer for a message; astronomically large ones (a pathological hostlist's host count,
    which `str()` refuses past 4300 digits) are written as a power of ten."""
    if number.bit_length() <= 200:
        return str(number)
    return f"about 10**{int(number.bit_length() * math.log10(2))}"


def _visible(text: str) -> str:
    return "".join(c if c == " " or c.isprintable() else repr(c)[1:-1] for c in text)


class TopologyWarning(UserWarning):
    """A topology was resolved, but something about it deserves a look."""


_NOTHING: Mapping[str, str] = MappingProxyType({})


class TopologyError(Exception):
    """Base of every error this library raises for bad input or a failed probe.

    `variable` is what was wrong (an environment variable, a setting, a file or a record field),
    `value` its value, `expected` what would have been right, and `related` the other variables
    (name -> value) that the rule compared it with. Each is None (or empty) where it does not apply.
    """

    variable: str | None = None
    value: object = None
    expected: str | None = None
    related: Mapping[str, str] = _NOTHING

    def __str__(self) -> str:  # KeyError would repr() the message; keep one readable line
        return str(self.args[0]) if self.args else ""

    def to_dict(self) -> dict[str, Any]:
        """The facts as JSON-safe data: type, message, and each attribute that applies."""
        out: dict[str, Any] = {"type": type(self).__name__, "message": str(self)}
        for name in ("variable", "expected", "field", "probe", "reason", "position"):
            fact = getattr(self, name, None)
            if fact is not None:
                out[name] = fact
        if self.value is not None:
            out["value"] = self.value if isinstance(self.value, (str, int, float, bool)) else repr(self.value)
        if self.related:
            out["related"] = dict(self.related)
        return out


class MissingVariable(TopologyError, KeyError):
    """A variable the chosen source needs is not in the environment."""

    def __init__(self, variable: str, expected: str, *, source: str | None = None) -> None:
        self.variable = variable
        self.expected = expected
        self.source = source  # the source that needed it
        by = f" (needed by source {source!r})" if source else ""
        super().__init__(f"{variable} is not set{by}: expected {expected}")


class InvalidVariable(TopologyError, ValueError):
    """A variable is present but its value cannot be used."""

    def __init__(
        self, variable: str, value: object, expected: str, *, related: Mapping[str, str] | None = None
    ) -> None:
        self.variable = variable
        self.value = value
        self.expected = expected
        self.related = MappingProxyType(dict(related or {}))
        super().__init__(f"{variable}={shown(value)} is invalid: expected {expected}")


class HostlistSyntaxError(InvalidVariable):
    """A hostlist does not follow the grammar; the message shows it with a caret under the fault."""

    def __init__(self, text: str, position: int, reason: str, *, variable: str = "hostlist") -> None:
        self.text = text
        self.position = position
        self.reason = reason
        # keep the caret line readable: a window of the text around the fault, control
        # characters escaped (a raw tab or newline would move the caret or split the message)
        start = max(0, position - 60)
        lead = "..." if start else ""
        before = _visible(text[start:position])
        after = _visible(text[position : start + 120])
        caret = " " * (len(lead) + len(before)) + "^"
        message = f"{variable}: {reason} at column {position + 1}\n    {lead}{before}{after}\n    {caret}"
        TopologyError.__init__(self, message)
        self.variable = variable
        self.value = text
        self.expected = reason

    def for_variable(self, variable: str) -> HostlistSyntaxError:
        """The same error, naming the environment variable the hostlist came from."""
        return HostlistSyntaxError(self.text, self.position, self.reason, variable=variable)


class InvalidTopology(TopologyError, ValueError):
    """A field of a Topology record breaks one of its invariants.

    `fields` names the other fields the invariant compares it with (`global_rank < world_size`
    gives field `global_rank`, fields `("world_size",)`), so a source can name their variables.
    """

    def __init__(self, field: str, value: object, expected: str, *, fields: tuple[str, ...] = ()) -> None:
        self.field = field
        self.variable = f"Topology.{field}"
        self.value = value
        self.expected = expected
        self.fields = fields
        super().__init__(f"Topology.{field}={shown(value)} is invalid: expected {expected}")


class InvalidSettings(TopologyError, ValueError):
    """The user's settings (devices, num_nodes, a source's options) disagree with the launcher or are invalid.

    `variable` names the setting when one setting is at fault, with its `value` and `expected`.
    """

    def __init__(
        self, message: str, *, variable: str | None = None, value: object = None, expected: str | None = None
    ) -> None:
        self.variable = variable
        self.value = value
        self.expected = expected
        super().__init__(message)


class ProbeFailed(TopologyError):
    """A probe (hostname, comm, xla, free_port, read_text, which) could not answer."""

    def __init__(self, probe: str, reason: str) -> None:
        self.probe = probe
        self.reason = reason
        super().__init__(f"probe {probe!r} failed: {reason}")


class StrictWarnings(TopologyError):
    """`strict=True` (`--strict`): the topology resolved, with warnings, and strict makes each an error.

    `warnings` holds them all; `value` is the first, and the message lists every one.
    """

    def __init__(self, warnings: tuple[str, ...], topology: str) -> None:
        self.variable = "strict"
        self.warnings = warnings
        self.value = warnings[0]
        self.expected = "a topology without warnings"
        listed = "; ".join(f"warning: {w}" for w in warnings)
        many = f"{len(warnings)} warnings" if len(warnings) > 1 else "a warning"
        super().__init__(f"strict: {topology} resolved with {many}, and strict makes warnings errors: {listed}")
