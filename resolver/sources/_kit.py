"""The kit's core: what a source is, its detection, the `Builder` and its readers, job facts, hosts.

A source is any object with `name`, `auto`, `detect(environ)` and `resolve(environ, probes)`:

- `detect(environ)` returns a `Detection` (or a bool) and never asks a probe;
- `resolve(environ, probes)` returns a `Topology` or raises a `TopologyError`, reading variables
  through a `Builder`, whose readers check each value, record its `Origin` and name the variable in
  every error;
- `auto = False` keeps a source out of auto-detection (Kubeflow, XLA): it is chosen with `source=`.

The kit sits below the engine: it imports the core (topology, origin, errors, environ) and the
probes, never `resolver._detect` or anything above it. The built-in sources are one table,
`resolver/sources/_registry.py`; third parties add theirs through the `resolver.sources` entry-point
group.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar, runtime_checkable

import attrs

from resolver.environ import (
    address,
    check_address,
    check_integer,
    check_port,
    integer,
    optional_integer,
    optional_text,
    port,
    present,
    text,
)
from resolver.errors import InvalidSettings, InvalidTopology, InvalidVariable, ProbeFailed, TopologyError, shown
from resolver.origin import Origin
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "JOB_FIELDS",
    "RECORD_FIELDS",
    "Builder",
    "Candidates",
    "Detection",
    "Environ",
    "JobFacts",
    "Origin",
    "Source",
    "address",
    "all_of",
    "any_of",
    "check_address",
    "check_integer",
    "check_port",
    "integer",
    "optional_integer",
    "optional_text",
    "port",
    "present",
    "read_if_here",
    "read_job_facts",
    "refused",
    "same_host",
    "short_host",
    "text",
    "this_host",
]

Environ = Mapping[str, str]
T = TypeVar("T")


def _names(variables: Iterable[str]) -> tuple[str, ...]:
    return tuple(variables)


@attrs.frozen
class Detection:
    """Whether a source matched, on which variables, and why (for `explain`). Truthy when matched.

    `warning` is set by a source that declines but has something to tell: it becomes a warning of
    the topology that a later source resolves (e.g. "this is the SLURM batch script itself").
    """

    matched: bool
    reason: str
    variables: tuple[str, ...] = attrs.field(default=(), converter=_names)
    warning: str | None = None

    def __bool__(self) -> bool:
        return self.matched


class Candidates(NamedTuple):
    """The variables whose presence makes a source a candidate: all of them (`all_of`) or any (`any_of`).

    Declared once, in the source's registry entry: `resolve` asks a source only when they are met,
    and the source's `detect()` starts from them (`entry("pbs").candidates.unmet(environ, ...)`).
    An empty `any_of()` is always met (the default source). A NamedTuple, as the registry's entries
    are: a static declaration compared by value, which every start-up builds (an attrs class costs
    1% of a resolve to create).
    """

    names: tuple[str, ...]
    every: bool = False

    def met(self, environ: Environ) -> bool:
        if self.every:
            return all(name in environ for name in self.names)
        return not self.names or any(name in environ for name in self.names)

    def present(self, environ: Environ) -> tuple[str, ...]:
        return present(environ, *self.names)

    def unmet(self, environ: Environ, what: str) -> Detection | None:
        """None when met; else a declining Detection: "not {what}: A and B are not set" (or "B not set"
        when A is)."""
        if self.met(environ):
            return None
        found = self.present(environ)
        if found:  # all_of, partly met
            missing = " and ".join(name for name in self.names if name not in found)
            return Detection(False, f"not {what}: {missing} not set", found)
        joined = (" and " if self.every else " or ").join(self.names)
        return Detection(False, f"not {what}: {joined} {'is' if len(self.names) == 1 else 'are'} not set", ())


def all_of(*names: str) -> Candidates:
    """Candidates met when every one of `names` is set."""
    return Candidates(names, every=True)


def any_of(*names: str) -> Candidates:
    """Candidates met when one of `names` is set (`any_of()`: always)."""
    return Candidates(names)


@runtime_checkable
class Source(Protocol):
    """What the resolver asks of a source; see the module docstring."""

    name: str
    auto: bool

    def detect(self, environ: Environ) -> Detection | bool: ...

    def resolve(self, environ: Environ, probes: Probes) -> Topology: ...


class Builder:
    """Collects a source's values with their origins, then builds the record.

    The readers take the field and the variable once: `b.integer("global_rank", "SLURM_PROCID")`
    reads the variable, checks it, records `Origin.env("SLURM_PROCID")` and returns the value; an
    error names the variable. When the record refuses a value, the error names the variable the
    value came from, with the variables of the fields the invariant compared it with in `related`.
    """

    __slots__ = ("environ", "provenance", "source", "values", "warnings")

    def __init__(self, source: str, environ: Environ) -> None:
        self.source = source
        self.environ = environ
        self.values: dict[str, Any] = {}
        self.provenance: dict[str, Origin] = {}
        self.warnings: list[str] = []

    def set(self, field: str, value: T, origin: Origin) -> T:
        """Record `field = value`, which came from `origin`; a name that is no field of the record is an
        `InvalidSettings` naming it, at the first resolve that reaches it."""
        if field not in RECORD_FIELDS:
            raise unknown_field(self.source, field)
        self.values[field] = value
        self.provenance[field] = origin
        return value

    def formula(self, field: str, value: T, text: str, *variables: str) -> T:
        """Record a value computed from `variables` by the rule `text`."""
        return self.set(field, value, Origin.formula(text, variables=variables))

    def default(self, field: str, value: T, text: str) -> T:
        """Record a documented default (`text` says which)."""
        return self.set(field, value, Origin.default(text))

    def rule(self, field: str, value: T, text: str) -> T:
        """Record a fact of how the launcher starts processes (`text` says which)."""
        return self.set(field, value, Origin.rule(text))

    # -- readers: the variable once, checked, recorded ------------------------------------------

    def integer(
        self,
        field: str,
        variable: str,
        *,
        minimum: int = 0,
        maximum: int | None = None,
        expected: str | None = None,
        malformed: str = "",
    ) -> int:
        """A required decimal integer from `variable`; `expected`: what a missing one would have held,
        `malformed`: what a set one must be (else "a decimal integer >= minimum")."""
        raw = text(self.environ, variable, source=self.source, expected=expected or f"a decimal integer >= {minimum}")
        return self.set(field, check_integer(variable, raw, minimum, maximum, malformed), Origin.env(variable))

    def optional_integer(
        self, field: str, variable: str, *, minimum: int = 0, maximum: int | None = None, expected: str = ""
    ) -> int | None:
        """`field` from `variable` when it is set; None (and nothing recorded) otherwise."""
        if variable not in self.environ:
            return None
        value = check_integer(variable, self.environ[variable], minimum, maximum, expected=expected)
        return self.set(field, value, Origin.env(variable))

    def read_integer(
        self, variable: str, *, minimum: int = 0, maximum: int | None = None, expected: str | None = None
    ) -> int:
        """A required integer that fills no field by itself (a main node's or a slice's index): checked,
        an error naming `variable`; the field computed from it records it in its formula."""
        return integer(self.environ, variable, minimum=minimum, maximum=maximum, source=self.source, expected=expected)

    def text(self, field: str, variable: str, *, expected: str = "a value") -> str:
        """A required variable as it is."""
        return self.set(
            field, text(self.environ, variable, source=self.source, expected=expected), Origin.env(variable)
        )

    def optional_text(self, field: str, variable: str) -> str | None:
        """`field` from `variable` as it is, when it is set."""
        value = self.environ.get(variable)
        return None if value is None else self.set(field, value, Origin.env(variable))

    def address(self, variable: str, *, expected: str | None = None) -> str:
        """The main address (``main_address``) from `variable`, required: a host name or IP address."""
        value = address(self.environ, variable, source=self.source, expected=expected)
        return self.set("main_address", value, Origin.env(variable))

    def optional_address(self, variable: str = "MASTER_ADDR") -> str | None:
        """The main address from `variable` when it is set; None (and nothing recorded) otherwise."""
        if variable not in self.environ:
            return None
        return self.set("main_address", check_address(variable, self.environ[variable]), Origin.env(variable))

    def port(self, variable: str, *, expected: str | None = None) -> int:
        """The main port (``main_port``) from `variable`, required: a TCP port."""
        return self.set(
            "main_port", port(self.environ, variable, source=self.source, expected=expected), Origin.env(variable)
        )

    def optional_port(self, variable: str = "MASTER_PORT") -> int | None:
        """The main port from `variable` when it is set; None (and nothing recorded) otherwise."""
        if variable not in self.environ:
            return None
        return self.set("main_port", check_port(variable, self.environ[variable]), Origin.env(variable))

    def facts(self, facts: JobFacts) -> None:
        """Record a scheduler's job facts (see `JobFacts`)."""
        for field, (value, origin) in facts.items():
            self.set(field, value, origin)

    def warn(self, message: str) -> None:
        """A warning for the record: resolved, but worth a look."""
        self.warnings.append(message)

    def build(self) -> Topology:
        """The record; a refused value is an error naming the variable it came from."""
        try:
            return Topology(source=self.source, provenance=self.provenance, warnings=self.warnings, **self.values)
        except InvalidTopology as exc:
            raise refused(exc, self.provenance, self.environ) from None


RECORD_FIELDS = frozenset(attrs.fields_dict(Topology)) - {"source", "provenance", "warnings"}
"""The fields a `Builder` fills: the record's, but for those the builder itself gives."""


def unknown_field(source: str, field: str) -> InvalidSettings:
    """The error for a field the record does not have (`b.set("nod_rank", ...)`): it names the field."""
    fields = ", ".join(sorted(RECORD_FIELDS))
    return InvalidSettings(
        f"source {source!r} records {field!r}, which is no field of the Topology (its fields: {fields})"
    )


def refused(exc: InvalidTopology, provenance: Mapping[str, Origin], environ: Environ) -> TopologyError:
    """The error to raise when the record refuses a value: it names the variable the value came from
    (or the probe that answered it), with the variables of the fields the invariant compared it with."""
    origin = provenance.get(exc.field)
    if origin is not None and origin.kind == "probe":
        return ProbeFailed(origin.name, f"answered {exc.value!r}: expected {exc.expected}")
    variable = None if origin is None else origin.variable
    if variable is None:
        return exc
    related = {}
    for field in exc.fields:
        other = provenance.get(field)
        if other is not None and other.variable is not None:
            related[field] = (other.variable, environ.get(other.variable, ""))
    notes = "; ".join(f"{field} from {name}={value}" for field, (name, value) in related.items())
    expected = f"{exc.expected} ({notes})" if notes else str(exc.expected)
    return InvalidVariable(variable, environ.get(variable, exc.value), expected, related=dict(related.values()))


JOB_FIELDS = ("job_id", "job_name", "step_id", "array_job_id", "array_task_id", "restart_count")

JobFacts = dict[str, tuple[object, Origin]]
"""What a scheduler says of the job around a process: job field -> (value, its Origin).

A scheduler module (SLURM, LSF, Grid Engine, PBS, Flux, a cloud platform...) gives them with a
`job_facts(environ) -> JobFacts` function, declared in its registry entry; `resolve` lays them over
whatever launcher started the process (mpirun inside sbatch gets SLURM's job id). Only the fields in
`JOB_FIELDS` may appear (and, from a `main_endpoint`, `main_address` and `main_port`).
"""


def read_job_facts(environ: Environ, table: tuple[tuple[str, str], ...], *, restart: str | None = None) -> JobFacts:
    """`JobFacts` from a table of (field, variable) read as they are, and an integer restart counter."""
    facts: JobFacts = {
        field: (environ[variable], Origin.env(variable)) for field, variable in table if variable in environ
    }
    if restart is not None:
        count = optional_integer(environ, restart)
        if count is not None:
            facts["restart_count"] = (count, Origin.env(restart))
    return facts


def read_if_here(probes: Probes, variable: str, path: str) -> str | None:
    """The text of the file `variable` names (`path`), through the file probe; None where this host
    cannot read it (a scheduler writes some files on one host only). An answer that is not a str is
    a `ProbeFailed`."""
    try:
        text = probes.read_text(path)
    except ProbeFailed:
        return None
    if not isinstance(text, str):
        raise ProbeFailed("read_text", f"answered {shown(text)} for {variable}={path!r}: expected a str")
    return text


def this_host(probes: Probes) -> str:
    """This host's name, from the hostname probe; `ProbeFailed` if it answers anything but a non-empty str."""
    name = probes.hostname()
    if not isinstance(name, str) or not name:
        raise ProbeFailed("hostname", f"answered {shown(name)}: expected a non-empty str")
    return name


def short_host(name: str) -> str | None:
    """The first label of a host name, lower-cased; None for an IP address, which has no short form."""
    if ":" in name:
        return None
    label = name.split(".", 1)[0]
    if not label or (label.isascii() and label.isdigit()):  # `10` of 10.0.0.1 names no host
        return None
    return label.lower()


def same_host(name: str, other: str) -> bool:
    """Whether two names name one host: equal, or with the same short name (`node1`, `NODE1.cluster`)."""
    short = short_host(name)
    return name == other or (short is not None and short == short_host(other))
