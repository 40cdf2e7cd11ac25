"""The Topology record: frozen, slotted, keyword-only; its invariants are validators."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from resolver.environ import is_address
from resolver.errors import InvalidTopology, TopologyError
from resolver.origin import Origin

__all__ = ["SCHEMA", "SCHEMAS", "Topology", "topology_schema"]

SCHEMA = 3
# versions from_dict reads: schema 1 records lack the device fields (None); schema 1 and 2 write each
# origin as text (`env:RANK`), read by `Origin.from_legacy`
SCHEMAS = (1, 2, 3)
_SOURCE_RE = re.compile(r"[a-z][a-z0-9_.-]{0,63}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_at_least(minimum: int) -> Any:
    expected = f"an int >= {minimum}"

    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not (_is_int(value) and value >= minimum):  # type: ignore[operator]
            raise InvalidTopology(attribute.name, value, expected)

    return check


def _str_or_none(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidTopology(attribute.name, value, "a str or None")


def _address(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not is_address(value):
        raise InvalidTopology(
            attribute.name, value, "a host name (RFC 1123), an IPv4 address or an IPv6 address without brackets"
        )


def _port(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not (_is_int(value) and 1 <= value <= 65535):  # type: ignore[operator]
        raise InvalidTopology(attribute.name, value, "an int port in 1..65535")


def _source(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not (isinstance(value, str) and _SOURCE_RE.fullmatch(value)):
        raise InvalidTopology(attribute.name, value, "a lower-case source name such as 'slurm'")


def _bool(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not True and value is not False:  # bool has exactly these two instances, no subclasses
        raise InvalidTopology(attribute.name, value, "a bool")


def _freeze_provenance(value: object) -> Mapping[str, Origin]:
    """A read-only copy: the record never shares a mapping its caller can still change."""
    if not isinstance(value, Mapping):
        raise InvalidTopology("provenance", value, "a mapping of field name to origin")
    return MappingProxyType(dict(value))


def _provenance(instance: object, attribute: attrs.Attribute[Any], value: Mapping[str, Origin]) -> None:
    for key, origin in value.items():
        if key not in _FIELD_NAMES or not isinstance(origin, Origin):
            raise InvalidTopology("provenance", {key: origin}, "field name -> Origin")


def _devices(value: object) -> tuple[str, ...] | None:
    """None, or a sequence of device names kept as a tuple (an iterator is read once, not dropped)."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidTopology("visible_devices", value, "None or a sequence of device names")
    return tuple(value)


def _device_names(instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is None:
        return
    if not all(isinstance(name, str) and name and "," not in name for name in value):
        raise InvalidTopology(attribute.name, value, "device names: non-empty strings without ','")
    if len(set(value)) != len(value):
        raise InvalidTopology(attribute.name, value, "each device once")


def _hostnames(value: object) -> tuple[str, ...] | None:
    """None, or a sequence of host names kept as a tuple."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidTopology("hostnames", value, "None or a sequence of host names, one per node")
    return tuple(value)


def _host_names(instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is not None and not (value and all(is_address(name) for name in value)):
        raise InvalidTopology(attribute.name, value, "host names or IP addresses, one per node, in node-rank order")


def _warnings(value: object) -> tuple[str, ...]:
    """Any iterable of strings, kept as a tuple (an iterator is read once, not dropped)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise InvalidTopology("warnings", value, "a sequence of strings")
    warnings = tuple(value)
    if not all(isinstance(w, str) for w in warnings):
        raise InvalidTopology("warnings", warnings, "a sequence of strings")
    return warnings


@attrs.frozen(kw_only=True)
class Topology:
    """Who this process is, where it is and whom it talks to.

    `provenance` maps a field name to the `Origin` of its value (the variable, probe, formula or
    default it came from). It and `warnings` do not take part in hashing.

    `nproc_per_node`: how many workers each node runs, when a node-level platform says it; set on a
    node agent (the process the platform started, which starts the node's workers itself) and kept
    by `spawn`, None everywhere else.

    `visible_devices` are the accelerators this process can see, in the order its runtime numbers
    them, as the visibility variable spells them (indexes, UUIDs, MIG ids); `local_device` is the
    one it should use, as an index into that list (the ordinal `torch.cuda.set_device` takes).
    Either is None when nothing can tell (the rule: "Which device is mine" in the documentation).

    `hostnames` are the job's hosts in node-rank order (host `node_rank` is this process's), when the
    source knows them (SLURM's node list, a scheduler's host file, a platform's host list); None
    otherwise. `is_main` (global rank 0) and `is_local_main` (local rank 0) are derived; `to_dict`
    writes them too, and `from_dict` refuses a record whose values disagree with its ranks.
    """

    source: str = attrs.field(validator=_source)
    world_size: int = attrs.field(validator=_int_at_least(1))
    global_rank: int = attrs.field(validator=_int_at_least(0))
    local_rank: int = attrs.field(validator=_int_at_least(0))
    node_rank: int = attrs.field(validator=_int_at_least(0))
    num_nodes: int | None = attrs.field(default=None, validator=attrs.validators.optional(_int_at_least(1)))
    local_world_size: int | None = attrs.field(default=None, validator=attrs.validators.optional(_int_at_least(1)))
    nproc_per_node: int | None = attrs.field(default=None, validator=attrs.validators.optional(_int_at_least(1)))
    main_address: str | None = attrs.field(default=None, validator=_address)
    main_port: int | None = attrs.field(default=None, validator=_port)
    creates_processes_externally: bool = attrs.field(default=False, validator=_bool)
    job_id: str | None = attrs.field(default=None, validator=_str_or_none)
    job_name: str | None = attrs.field(default=None, validator=_str_or_none)
    step_id: str | None = attrs.field(default=None, validator=_str_or_none)
    array_job_id: str | None = attrs.field(default=None, validator=_str_or_none)
    array_task_id: str | None = attrs.field(default=None, validator=_str_or_none)
    restart_count: int | None = attrs.field(default=None, validator=attrs.validators.optional(_int_at_least(0)))
    visible_devices: tuple[str, ...] | None = attrs.field(default=None, converter=_devices, validator=_device_names)
    local_device: int | None = attrs.field(default=None, validator=attrs.validators.optional(_int_at_least(0)))
    hostnames: tuple[str, ...] | None = attrs.field(default=None, converter=_hostnames, validator=_host_names)
    provenance: Mapping[str, Origin] = attrs.field(
        factory=dict, converter=_freeze_provenance, validator=_provenance, hash=False, repr=False
    )
    warnings: tuple[str, ...] = attrs.field(default=(), converter=_warnings, hash=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # relations between fields: the checks attrs validators cannot express one field at a time
        if self.global_rank >= self.world_size:
            raise InvalidTopology(
                "global_rank", self.global_rank, f"< world_size ({self.world_size})", fields=("world_size",)
            )
        if self.num_nodes is not None and self.node_rank >= self.num_nodes:
            raise InvalidTopology("node_rank", self.node_rank, f"< num_nodes ({self.num_nodes})", fields=("num_nodes",))
        if self.local_world_size is not None:
            if self.local_rank >= self.local_world_size:
                raise InvalidTopology(
                    "local_rank",
                    self.local_rank,
                    f"< local_world_size ({self.local_world_size})",
                    fields=("local_world_size",),
                )
            if self.local_world_size > self.world_size:
                raise InvalidTopology(
                    "local_world_size",
                    self.local_world_size,
                    f"<= world_size ({self.world_size})",
                    fields=("world_size",),
                )
        if self.local_device is not None:
            visible = self.visible_devices
            if visible is None or self.local_device >= len(visible):
                count = "no visible_devices" if visible is None else f"{len(visible)} visible device(s)"
                raise InvalidTopology(
                    "local_device",
                    self.local_device,
                    f"an index into visible_devices ({count})",
                    fields=("visible_devices",),
                )
        if self.hostnames is not None:
            nodes = len(self.hostnames)
            if self.num_nodes is not None and nodes != self.num_nodes:
                raise InvalidTopology(
                    "hostnames", self.hostnames, f"one host per node ({self.num_nodes})", fields=("num_nodes",)
                )
            if self.node_rank >= nodes:
                raise InvalidTopology(
                    "node_rank", self.node_rank, f"< the number of hostnames ({nodes})", fields=("hostnames",)
                )
        if self.num_nodes is not None and self.num_nodes > self.world_size:
            raise InvalidTopology(
                "num_nodes", self.num_nodes, f"<= world_size ({self.world_size})", fields=("world_size",)
            )

    @property
    def is_main(self) -> bool:
        """Whether this is the job's main process: global rank 0."""
        return self.global_rank == 0

    @property
    def is_local_main(self) -> bool:
        """Whether this is its node's main process: local rank 0."""
        return self.local_rank == 0

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle (and copy) through `to_dict`/`from_dict`: the record crosses to spawned workers re-validated."""
        return (_from_dict, (self.to_dict(),))

    # -- serialization -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict with a `schema` version; `from_dict` reverses it exactly."""
        out: dict[str, Any] = {"schema": SCHEMA}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if name == "provenance":
                value = {field: origin.to_dict() for field, origin in value.items()}
            elif name == "warnings" or (name in ("visible_devices", "hostnames") and value is not None):
                value = list(value)
            out[name] = value
        out["is_main"], out["is_local_main"] = self.is_main, self.is_local_main
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Topology:
        """Rebuild a record from `to_dict()` output; a wrong schema or field is a TopologyError."""
        if not isinstance(data, Mapping):
            raise InvalidTopology("<record>", data, "a mapping from to_dict()")
        schema = data.get("schema")
        if schema not in SCHEMAS or isinstance(schema, bool):
            raise InvalidTopology("schema", schema, f"a schema version among {', '.join(map(str, SCHEMAS))}")
        if schema == 1 and ("visible_devices" in data or "local_device" in data):
            field = "visible_devices" if "visible_devices" in data else "local_device"
            raise InvalidTopology(field, data[field], "no device fields in a schema 1 record")
        unknown = sorted(set(data) - set(_FIELD_NAMES) - {"schema", *_DERIVED})
        if unknown:
            raise InvalidTopology(unknown[0], data[unknown[0]], f"one of the fields {', '.join(_FIELD_NAMES)}")
        fields = {k: v for k, v in data.items() if k != "schema" and k not in _DERIVED}
        if "provenance" in fields:
            fields["provenance"] = _origins(fields["provenance"], legacy=schema < 3)
        if "warnings" in fields and not isinstance(fields["warnings"], (list, tuple)):
            raise InvalidTopology("warnings", fields["warnings"], "a list of strings")
        for name in ("visible_devices", "hostnames"):
            listed = fields.get(name)
            if listed is not None and not isinstance(listed, (list, tuple)):
                raise InvalidTopology(name, listed, "null or a list of strings")
        try:
            record = cls(**fields)
        except TopologyError:
            raise
        except TypeError as exc:  # a required field missing
            raise InvalidTopology("<record>", sorted(fields), f"all required fields ({exc})") from None
        for name in _DERIVED:
            if name in data and data[name] is not getattr(record, name):
                raise InvalidTopology(name, data[name], f"{getattr(record, name)}, as the record's ranks say")
        return record

    def to_json(self, **kw: Any) -> str:
        """`to_dict()` as JSON text; keywords go to `json.dumps` (`indent=2`, `sort_keys=True`)."""
        import json  # only a record's JSON needs it: at the top it cost 2.1% of a resolve (callgrind, lean venv: 5.2 M)

        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_json(cls, text: str) -> Topology:
        """Rebuild a record from `to_json()` text; text that is not JSON, or a wrong record, is a TopologyError."""
        import json  # as in to_json

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
        if self.visible_devices is not None:
            parts.append(self._device())
        if self.job_id is not None:
            plain = self.job_id.isprintable() and not any(c.isspace() for c in self.job_id) and self.job_id
            parts.append(f"job {self.job_id if plain else repr(self.job_id)}")
        if self.warnings:
            parts.append(f"({len(self.warnings)} warning{'s' if len(self.warnings) > 1 else ''})")
        return " ".join(parts)

    def _device(self) -> str:
        """`device 1/4 (GPU-5d3c)`: the ordinal of the visible devices, and what the list calls it."""
        visible = self.visible_devices or ()
        if self.local_device is None:
            return f"device ?/{len(visible)}"
        name = visible[self.local_device]
        plain = name.isprintable() and not any(c.isspace() for c in name)
        return f"device {self.local_device}/{len(visible)} ({name if plain else repr(name)})"


_FIELD_NAMES: tuple[str, ...] = tuple(a.name for a in attrs.fields(Topology))
_DERIVED = ("is_main", "is_local_main")  # written by to_dict, checked by from_dict


def _origins(data: object, *, legacy: bool) -> dict[str, Origin]:
    """A record's provenance as `to_dict` wrote it: origin objects, or text before schema 3."""
    if not isinstance(data, Mapping):
        raise InvalidTopology("provenance", data, "a mapping of field name to origin")
    read = Origin.from_legacy if legacy else Origin.from_dict
    return {field: read(origin) for field, origin in data.items()}


def _from_dict(data: Mapping[str, Any]) -> Topology:
    return Topology.from_dict(data)


def topology_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `Topology.to_dict()` output, shipped as resolver/topology.schema.json."""
    import json  # as in Topology.to_json
    from importlib import resources  # only the schema's reader needs the package-data machinery

    text = resources.files("resolver").joinpath("topology.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
