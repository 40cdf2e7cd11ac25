"""`Origin`: where a value of the record came from, as data.

Sources produce one per field through the kit's readers (`resolver.sources.Builder`); explain,
validation, errors, the CLI and the preflight read its fields. Nothing parses its text back:
`str(origin)` is for people (`env:SLURM_PROCID`, `probe:hostname (the main node ...)`), the fields
are for code.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from resolver.errors import InvalidTopology

__all__ = ["KINDS", "Origin"]

KINDS = ("env", "probe", "file", "formula", "default", "source", "argument")
"""env: a variable as it is; probe: a probe's answer; file: a file's content; formula: computed
from variables; default: a documented default; source: a fact of how the launcher starts processes;
argument: what a caller passed (spawn, a Lightning setter)."""


def _kind(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in KINDS:
        raise InvalidTopology("provenance", value, f"an origin kind among {', '.join(KINDS)}")


def _text(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or (attribute.name == "name" and not value):
        raise InvalidTopology("provenance", value, f"origin {attribute.name}: a non-empty str")


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _variables(instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not all(isinstance(name, str) and name for name in value):
        raise InvalidTopology("provenance", value, "origin variables: names of environment variables")


@attrs.frozen
class Origin:
    """One value's origin: its `kind` (see `KINDS`), the `name` it came from, an optional `note`.

    `name` is the variable (env), the probe (`hostname`, `free_port`, `read_text`), the path (file),
    or the rule in words (formula, default, source, argument). `variables` are the environment
    variables the value was computed from: an error or a report names them.
    """

    kind: str = attrs.field(validator=_kind)
    name: str = attrs.field(validator=_text)
    note: str | None = attrs.field(default=None, validator=attrs.validators.optional(_text))
    variables: tuple[str, ...] = attrs.field(default=(), converter=_names, validator=_variables)

    @classmethod
    def env(cls, variable: str) -> Origin:
        return cls("env", variable, variables=(variable,))

    @classmethod
    def probe(cls, probe: str, note: str | None = None, *, variables: Iterable[str] = ()) -> Origin:
        return cls("probe", probe, note, tuple(variables))

    @classmethod
    def file(cls, path: str, note: str | None = None, *, variables: Iterable[str] = ()) -> Origin:
        return cls("file", path, note, tuple(variables))

    @classmethod
    def formula(cls, text: str, *, variables: Iterable[str] = ()) -> Origin:
        return cls("formula", text, variables=tuple(variables))

    @classmethod
    def default(cls, text: str) -> Origin:
        return cls("default", text)

    @classmethod
    def rule(cls, text: str) -> Origin:
        """A fact of how the launcher starts processes (kind `source`)."""
        return cls("source", text)

    @classmethod
    def argument(cls, text: str) -> Origin:
        return cls("argument", text)

    @property
    def variable(self) -> str | None:
        """The variable the value was read from as it is; None for any other kind."""
        return self.name if self.kind == "env" else None

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}" + (f" ({self.note})" if self.note else "")

    def to_dict(self) -> dict[str, Any]:
        """`{"kind", "name"}`, with `note` and `variables` when they say something."""
        out: dict[str, Any] = {"kind": self.kind, "name": self.name}
        if self.note is not None:
            out["note"] = self.note
        if self.variables != ((self.name,) if self.kind == "env" else ()):
            out["variables"] = list(self.variables)
        return out

    @classmethod
    def from_dict(cls, data: object) -> Origin:
        """The inverse of `to_dict`; anything else is an `InvalidTopology`."""
        if not isinstance(data, Mapping) or not set(data) <= {"kind", "name", "note", "variables"}:
            raise InvalidTopology("provenance", data, "an origin {kind, name[, note][, variables]}")
        kind, name = data.get("kind"), data.get("name")
        variables = data.get("variables")
        if variables is None:
            variables = [name] if kind == "env" else []
        if not isinstance(variables, list):
            raise InvalidTopology("provenance", data, "origin variables: a list of names")
        said = (kind, name, data.get("note"), tuple(variables))
        try:
            return _shared(*said)
        except TypeError:  # a value that cannot be hashed is no origin's: the constructor says why
            return cls(*said)  # type: ignore[arg-type]

    @classmethod
    def from_legacy(cls, text: object) -> Origin:
        """An origin written as text by schema 1 and 2 records (`env:RANK`): the reader of old job logs.

        The only place a provenance string is taken apart, and only for records written before
        schema 3. Prefixes that no longer exist (`spawn:`, `lightning:`) are what a caller passed.
        """
        if not isinstance(text, str) or not text:
            raise InvalidTopology("provenance", text, "an origin string such as 'env:RANK' (schema 1 and 2)")
        kind, colon, rest = text.partition(":")
        if not colon or kind not in KINDS or not rest:
            return cls.argument(text)
        return cls.env(rest) if kind == "env" else cls(kind, rest)


@functools.lru_cache(maxsize=1024)
def _shared(kind: str, name: str, note: str | None, variables: tuple[str, ...]) -> Origin:
    """One `Origin` per distinct value read back: the records of one job share a few dozen origins, and
    rank 0 of a check reads thousands of records (4,096: building each origin anew was 0.08 ms a record,
    two thirds of rebuilding it). Origins are frozen, so sharing one is safe."""
    return Origin(kind, name, note, variables)
