"""The kit for source authors, and the registry of sources.

A source is any object with `name`, `auto`, `detect(environ)` and `resolve(environ, probes)`:

- `detect(environ)` returns a `Detection` (or a bool) and never asks a probe;
- `resolve(environ, probes)` returns a `Topology` or raises a `TopologyError`, reading variables
  through the typed readers re-exported here (each error names its variable) and collecting values
  with their provenance in a `Builder`;
- `auto = False` keeps a source out of auto-detection (Kubeflow, XLA): it is chosen with `source=`.

The built-in sources are listed, in detection order, in `resolver/sources/_registry.py`; third
parties add theirs through the `resolver.sources` entry-point group. `registered()` gives them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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
from resolver.errors import InvalidTopology, InvalidVariable, ProbeFailed, shown
from resolver.topology import Topology, _repr

if TYPE_CHECKING:
    from probes import Probes
    from resolver.sources._binding import DeviceBinding

__all__ = [
    "JOB_FIELDS",
    "Builder",
    "Detection",
    "DeviceBinding",
    "Environ",
    "JobFacts",
    "Source",
    "address",
    "by_name",
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
    "registered",
    "same_host",
    "scheduler_endpoint",
    "short_host",
    "text",
    "this_host",
]

Environ = Mapping[str, str]


def __getattr__(name: str) -> Any:
    # only a launcher that binds devices (SLURM) makes a DeviceBinding: its class is built on first use
    if name == "DeviceBinding":
        from resolver.sources._binding import DeviceBinding

        return DeviceBinding
    if name in _source_modules():  # `resolver.sources.slurm` without importing it first
        import importlib

        return importlib.import_module(f"resolver.sources.{name}")
    raise AttributeError(f"module 'resolver.sources' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_source_modules()})


def _source_modules() -> set[str]:
    """The built-in source modules' names (`slurm`, `mpi`, ...), as the registry lists them."""
    from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ON_REQUEST

    return {entry.target.partition(":")[0].rpartition(".")[2] for entry in (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)}


def _names(variables: Iterable[str]) -> tuple[str, ...]:
    return tuple(variables)


@attrs.frozen(repr=False)
class Detection:
    """Whether a source matched, on which variables, and why (for `explain`). Truthy when matched.

    `warning` is set by a source that declines but has something to tell: it becomes a warning of
    the topology that a later source resolves (e.g. "this is the SLURM batch script itself").
    """

    matched: bool
    reason: str
    variables: tuple[str, ...] = attrs.field(default=(), converter=_names)
    warning: str | None = None

    __repr__ = _repr

    def __bool__(self) -> bool:
        return self.matched


@runtime_checkable
class Source(Protocol):
    """What the resolver asks of a source; see the module docstring."""

    name: str
    auto: bool

    def detect(self, environ: Environ) -> Detection | bool: ...

    def resolve(self, environ: Environ, probes: Probes) -> Topology: ...


class Builder:
    """Collects a source's values with their provenance, then builds the record.

    When the record refuses a value, the error is re-raised naming the variable the value came
    from, with the variables of the fields the invariant compared it with in `related`.
    """

    __slots__ = ("environ", "provenance", "source", "values", "warnings")

    def __init__(self, source: str, environ: Environ) -> None:
        self.source = source
        self.environ = environ
        self.values: dict[str, Any] = {}
        self.provenance: dict[str, str] = {}
        self.warnings: list[str] = []

    def set(self, field: str, value: Any, origin: str) -> Any:
        """Record `field = value`, which came from `origin` (`default:...`, `formula:...`, `probe:...`)."""
        self.values[field] = value
        self.provenance[field] = origin
        return value

    def env(self, field: str, value: Any, variable: str) -> Any:
        """Record `field = value`, read from the environment variable `variable`."""
        return self.set(field, value, f"env:{variable}")

    def optional_int(self, field: str, variable: str, *, minimum: int = 0) -> int | None:
        """Take `field` from `variable` when it is set; None (and nothing recorded) otherwise."""
        value = optional_integer(self.environ, variable, minimum=minimum)
        if value is not None:
            self.env(field, value, variable)
        return value

    def optional_address(self, variable: str = "MASTER_ADDR") -> str | None:
        """The main address from `variable` when it is set."""
        if variable not in self.environ:
            return None
        address: str = self.env("main_address", check_address(variable, self.environ[variable]), variable)
        return address

    def optional_port(self, variable: str = "MASTER_PORT") -> int | None:
        """The main port from `variable` when it is set."""
        if variable not in self.environ:
            return None
        port: int = self.env("main_port", check_port(variable, self.environ[variable]), variable)
        return port

    def facts(self, facts: JobFacts) -> None:
        """Record a scheduler's job facts (see `JobFacts`)."""
        for field, (value, origin) in facts.items():
            self.set(field, value, origin)

    def warn(self, message: str) -> None:
        """A warning for the record: resolved, but worth a look."""
        self.warnings.append(message)

    def _variable(self, field: str) -> str | None:
        origin = self.provenance.get(field, "")
        return origin[4:] if origin.startswith("env:") else None

    def build(self) -> Topology:
        """The record; a refused value is an error naming the variable it came from."""
        try:
            return Topology(source=self.source, provenance=self.provenance, warnings=self.warnings, **self.values)
        except InvalidTopology as exc:
            origin = self.provenance.get(exc.field, "")
            if origin.startswith("probe:"):
                raise ProbeFailed(origin[6:], f"answered {exc.value!r}: expected {exc.expected}") from None
            variable = self._variable(exc.field)
            if variable is None:
                raise
            related = {}
            for field in exc.fields:
                other = self._variable(field)
                if other is not None:
                    related[field] = (other, self.environ.get(other, ""))
            notes = "; ".join(f"{field} from {name}={value}" for field, (name, value) in related.items())
            expected = f"{exc.expected} ({notes})" if notes else str(exc.expected)
            raise InvalidVariable(
                variable,
                self.environ.get(variable, exc.value),
                expected,
                related=dict(related.values()),
            ) from None


JOB_FIELDS = ("job_id", "job_name", "step_id", "array_job_id", "array_task_id", "restart_count")

JobFacts = dict[str, tuple[object, str]]
"""What a scheduler says of the job around a process: job field -> (value, origin such as `env:SLURM_JOB_ID`).

A scheduler module (SLURM, LSF, Grid Engine, PBS, Flux, a cloud platform...) gives them with a
`job_facts(environ) -> JobFacts` function listed in the registry's `SCHEDULERS`; `resolve` lays
them over whatever launcher started the process (mpirun inside sbatch gets SLURM's job id). Only
the fields in `JOB_FIELDS` may appear.
"""


def scheduler_endpoint(environ: Environ, probes: Probes, *, one_node: bool) -> JobFacts:
    """The main address and port a scheduler gives the MPI ranks inside its allocation, with origins.

    Asks the registry's `ENDPOINTS` in order; the first candidate that answers wins; {} if none does.
    `one_node` (every rank on this node) lets it read files that only some hosts have: then every
    rank sees the same file system, so all of them skip the MPI exchange, or none does.
    """
    from resolver.sources._registry import ENDPOINTS

    for entry in ENDPOINTS:
        if entry.is_candidate(environ):
            found: JobFacts = entry.attribute()(environ, probes, one_node=one_node)
            if found:
                return found
    return {}


def read_job_facts(environ: Environ, table: tuple[tuple[str, str], ...], *, restart: str | None = None) -> JobFacts:
    """`JobFacts` from a table of (field, variable) read as they are, and an integer restart counter."""
    facts: JobFacts = {
        field: (environ[variable], f"env:{variable}") for field, variable in table if variable in environ
    }
    if restart is not None:
        count = optional_integer(environ, restart)
        if count is not None:
            facts["restart_count"] = (count, f"env:{restart}")
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


def registered(*, auto_only: bool = False) -> tuple[Source, ...]:
    """Every known source in detection order (plugins just before the default, on-request ones last).

    `auto_only` keeps the auto-detected ones. This imports every source module; `resolve` does not.
    """
    from resolver import _detect

    return _detect.registered(auto_only=auto_only)


def by_name(name: str) -> Source:
    """The source called `name` (built-in or plugin); `InvalidSettings` naming the known ones otherwise."""
    from resolver import _detect

    return _detect.by_name(name)
