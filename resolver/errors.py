"""One tree of errors. Every message names the variable (or probe), the value and what was expected.

TopologyError
├── MissingVariable       (also KeyError)
├── InvalidVariable       (also ValueError)
│   └── HostlistSyntaxError   points at the column
├── InvalidTopology       (also ValueError)  a record field breaks an invariant
├── InvalidSettings       (also ValueError)  devices/num_nodes disagree with the launcher
└── ProbeFailed           a probe could not answer
"""

from __future__ import annotations

__all__ = [
    "HostlistSyntaxError",
    "InvalidSettings",
    "InvalidTopology",
    "InvalidVariable",
    "MissingVariable",
    "ProbeFailed",
    "TopologyError",
    "TopologyWarning",
]

_SHOWN = 200  # longest value quoted in a message; longer ones are cut so errors stay one line


def shown(value: object) -> str:
    """`repr` of a value, shortened so that a huge bad input does not make a huge message."""
    text = repr(value)
    if len(text) > _SHOWN:
        return f"{text[: _SHOWN - 20]}...<{len(text)} chars>"
    return text


def _visible(text: str) -> str:
    return "".join(c if c == " " or c.isprintable() else repr(c)[1:-1] for c in text)


class TopologyWarning(UserWarning):
    """A topology was resolved, but something about it deserves a look."""


class TopologyError(Exception):
    """Base of every error this library raises for bad input or a failed probe."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep one readable line
        return str(self.args[0]) if self.args else ""


class MissingVariable(TopologyError, KeyError):
    """A variable the chosen source needs is not in the environment."""

    def __init__(self, variable: str, expected: str, *, source: str | None = None) -> None:
        self.variable = variable
        self.expected = expected
        self.source = source
        by = f" (needed by source {source!r})" if source else ""
        super().__init__(f"{variable} is not set{by}: expected {expected}")


class InvalidVariable(TopologyError, ValueError):
    """A variable is present but its value cannot be used."""

    def __init__(self, variable: str, value: object, expected: str) -> None:
        self.variable = variable
        self.value = value
        self.expected = expected
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
    """A field of a Topology record breaks one of its invariants."""

    def __init__(self, field: str, value: object, expected: str) -> None:
        self.field = field
        self.value = value
        self.expected = expected
        super().__init__(f"Topology.{field}={shown(value)} is invalid: expected {expected}")


class InvalidSettings(TopologyError, ValueError):
    """The user's settings (devices, num_nodes) disagree with what the launcher set up."""


class ProbeFailed(TopologyError):
    """A probe (hostname, comm, xla, free_port, read_text, which) could not answer."""

    def __init__(self, probe: str, reason: str) -> None:
        self.probe = probe
        self.reason = reason
        super().__init__(f"probe {probe!r} failed: {reason}")
