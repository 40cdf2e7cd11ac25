"""The Topology record: frozen, slotted, keyword-only; its invariants are validators."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from resolver.environ import ADDRESS_RE
from resolver.errors import InvalidTopology, TopologyError

__all__ = ["SCHEMA", "Topology"]

SCHEMA = 1
_SOURCE_RE = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


# The validators below run on every record built (each resolve builds one), so each starts with a
# fast path for speed: the common, valid value passes on an exact-type check (`type(v) is int`,
# a set lookup), and anything else takes the original, complete check, which alone raises.


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(minimum: int) -> Any:
    expected = f"an int >= {minimum}"

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is int and value >= minimum:  # fast path: a plain int in range
            return
        if not _is_int(value) or value < minimum:  # type: ignore[operator]
            raise InvalidTopology(attribute.name, value, expected)

    return check


def _optional_int_at_least(minimum: int) -> Any:
    """`_int_at_least(minimum)`, or None; one function rather than a wrapper around it, for speed."""
    expected = f"an int >= {minimum}"

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if value is None or (type(value) is int and value >= minimum):  # fast path
            return
        if not _is_int(value) or value < minimum:  # type: ignore[operator]
            raise InvalidTopology(attribute.name, value, expected)

    return check


def _str_or_none(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None or type(value) is str:  # fast path
        return
    if not isinstance(value, str):
        raise InvalidTopology(attribute.name, value, "a str or None")


def _address(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not (isinstance(value, str) and ADDRESS_RE.fullmatch(value)):
        raise InvalidTopology(attribute.name, value, "a non-empty host name or IP address without whitespace")


def _port(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None or (type(value) is int and 1 <= value <= 65535):  # fast path
        return
    if not (_is_int(value) and 1 <= value <= 65535):  # type: ignore[operator]
        raise InvalidTopology(attribute.name, value, "an int port in 1..65535")


# the built-in sources' names, each a full match of _SOURCE_RE (a test checks): a set lookup is
# cheaper than the regular expression, which still decides every other name
_BUILTIN_SOURCES = frozenset({"kubeflow", "lightning", "lsf", "mpi", "slurm", "torchelastic", "xla"})


def _source(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is str and value in _BUILTIN_SOURCES:  # fast path
        return
    if not (isinstance(value, str) and _SOURCE_RE.fullmatch(value)):
        raise InvalidTopology(attribute.name, value, "a lower-case source name such as 'slurm'")


def _bool(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not True and value is not False:  # bool has exactly these two instances, no subclasses
        raise InvalidTopology(attribute.name, value, "a bool")


def _freeze_provenance(value: Mapping[str, str]) -> Mapping[str, str]:
    if type(value) is dict:  # fast path: the plain dict a Builder passes
        return MappingProxyType(value.copy())
    if isinstance(value, MappingProxyType):
        return value
    if not isinstance(value, Mapping):
        raise InvalidTopology("provenance", value, "a mapping of field name to origin")
    return MappingProxyType(dict(value))


_ONLY_STR = frozenset({str})


def _provenance(instance: object, attribute: attrs.Attribute[Any], value: Mapping[str, str]) -> None:
    if _FIELD_SET.issuperset(value):  # fast path: every key a field name (in C), every origin a plain str
        for origin in value.values():
            if type(origin) is not str:
                break
        else:
            return
    names = _FIELD_NAMES
    for key, origin in value.items():
        if key not in names or not isinstance(origin, str):
            raise InvalidTopology("provenance", {key: origin}, "field name -> origin string")


def _warnings(value: Any) -> tuple[str, ...]:
    if type(value) is list or type(value) is tuple:  # fast paths: no warnings, or a sequence of plain strs
        if not value:
            return ()
        if _ONLY_STR.issuperset(map(type, value)):
            return tuple(value)
    if isinstance(value, str) or not all(isinstance(w, str) for w in value):
        raise InvalidTopology("warnings", value, "a sequence of strings")
    return tuple(value)


@attrs.frozen(kw_only=True)
class Topology:
    """Who this process is, where it is and whom it talks to.

    `provenance` maps a field name to where its value came from: `env:RANK`, `probe:free_port`,
    `default:127.0.0.1`, `formula:...`. It and `warnings` do not take part in hashing.
    """

    source: str = attrs.field(validator=_source)
    world_size: int = attrs.field(validator=_int_at_least(1))
    global_rank: int = attrs.field(validator=_int_at_least(0))
    local_rank: int = attrs.field(validator=_int_at_least(0))
    node_rank: int = attrs.field(validator=_int_at_least(0))
    num_nodes: int | None = attrs.field(default=None, validator=_optional_int_at_least(1))
    local_world_size: int | None = attrs.field(default=None, validator=_optional_int_at_least(1))
    main_address: str | None = attrs.field(default=None, validator=_address)
    main_port: int | None = attrs.field(default=None, validator=_port)
    creates_processes_externally: bool = attrs.field(default=False, validator=_bool)
    job_id: str | None = attrs.field(default=None, validator=_str_or_none)
    job_name: str | None = attrs.field(default=None, validator=_str_or_none)
    step_id: str | None = attrs.field(default=None, validator=_str_or_none)
    array_job_id: str | None = attrs.field(default=None, validator=_str_or_none)
    array_task_id: str | None = attrs.field(default=None, validator=_str_or_none)
    restart_count: int | None = attrs.field(default=None, validator=_optional_int_at_least(0))
    provenance: Mapping[str, str] = attrs.field(
        factory=dict, converter=_freeze_provenance, validator=_provenance, hash=False, repr=False
    )
    warnings: tuple[str, ...] = attrs.field(default=(), converter=_warnings, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # relations between fields: the checks attrs validators cannot express one field at a time
        # (each field read once into a local: this runs for every record)
        world_size, num_nodes, local_world_size = self.world_size, self.num_nodes, self.local_world_size
        if self.global_rank >= world_size:
            raise InvalidTopology("global_rank", self.global_rank, f"< world_size ({world_size})")
        if num_nodes is not None and self.node_rank >= num_nodes:
            raise InvalidTopology("node_rank", self.node_rank, f"< num_nodes ({num_nodes})")
        if local_world_size is not None:
            if self.local_rank >= local_world_size:
                raise InvalidTopology("local_rank", self.local_rank, f"< local_world_size ({local_world_size})")
            if local_world_size > world_size:
                raise InvalidTopology("local_world_size", local_world_size, f"<= world_size ({world_size})")
        if num_nodes is not None and num_nodes > world_size:
            raise InvalidTopology("num_nodes", num_nodes, f"<= world_size ({world_size})")

    # -- serialization -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict with a `schema` version; `from_dict` reverses it exactly."""
        out: dict[str, Any] = {"schema": SCHEMA}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if name == "provenance":
                value = dict(value)
            elif name == "warnings":
                value = list(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Rebuild a record from `to_dict()` output; a wrong schema or field is a TopologyError."""
        if not isinstance(data, Mapping):
            raise InvalidTopology("<record>", data, "a mapping from to_dict()")
        schema = data.get("schema")
        if schema != SCHEMA or isinstance(schema, bool):
            raise InvalidTopology("schema", schema, f"schema version {SCHEMA}")
        unknown = sorted(set(data) - set(_FIELD_NAMES) - {"schema"})
        if unknown:
            raise InvalidTopology(unknown[0], data[unknown[0]], f"one of the fields {', '.join(_FIELD_NAMES)}")
        fields = {k: v for k, v in data.items() if k != "schema"}
        if "warnings" in fields and not isinstance(fields["warnings"], (list, tuple)):
            raise InvalidTopology("warnings", fields["warnings"], "a list of strings")
        try:
            return cls(**fields)
        except TopologyError:
            raise
        except TypeError as exc:  # a required field missing
            raise InvalidTopology("<record>", sorted(fields), f"all required fields ({exc})") from None

    def to_json(self, **kw: Any) -> str:
        import json  # lazily: a resolve that is never serialized should not pay for json

        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_json(cls, text: str) -> Topology:
        import json

        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InvalidTopology("<json>", text, f"JSON from to_json() ({exc})") from None
        return cls.from_dict(data)

    def __str__(self) -> str:
        """One line for a job log: `torchelastic rank 3/8 local 1/4 node 1/2 main 10.1.2.3:29500 external`."""
        lws = "?" if self.local_world_size is None else str(self.local_world_size)
        nodes = "?" if self.num_nodes is None else str(self.num_nodes)
        parts = [
            self.source,
            f"rank {self.global_rank}/{self.world_size}",
            f"local {self.local_rank}/{lws}",
            f"node {self.node_rank}/{nodes}",
        ]
        if self.main_address is not None or self.main_port is not None:
            host = self.main_address or "?"
            if ":" in host and not host.startswith("["):
                host = f"[{host}]"
            parts.append(f"main {host}:{self.main_port if self.main_port is not None else '?'}")
        parts.append("external" if self.creates_processes_externally else "spawns")
        if self.job_id is not None:
            plain = self.job_id.isprintable() and not any(c.isspace() for c in self.job_id) and self.job_id
            parts.append(f"job {self.job_id if plain else repr(self.job_id)}")
        if self.warnings:
            parts.append(f"({len(self.warnings)} warning{'s' if len(self.warnings) > 1 else ''})")
        return " ".join(parts)


_FIELD_NAMES: tuple[str, ...] = tuple(a.name for a in attrs.fields(Topology))
_FIELD_SET = frozenset(_FIELD_NAMES)
