"""resolver.schema: the shipped JSON Schema describes every record `Topology.to_dict` writes, and no other."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from hypothesis import given, settings

import resolver
from resolver import Topology, TopologyError
from resolver import testing as rt
from resolver.schema import topology_schema
from resolver.topology import _SOURCE_RE

ROOT = Path(__file__).resolve().parent.parent

SCHEMA = topology_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_schema_is_a_valid_2020_12_schema_of_every_field() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    fields = [field.name for field in attrs.fields(Topology)]
    derived = ["is_main", "is_local_main"]  # written by to_dict from the ranks
    assert SCHEMA["required"] == ["schema", *fields, *derived] == list(SCHEMA["properties"])
    assert SCHEMA["properties"]["schema"]["const"] == resolver.SCHEMA
    # the pattern is the characters of is_address (the full rule is Python's): brackets are not among them
    address = re.compile(SCHEMA["properties"]["main_address"]["pattern"])
    assert address.search("fe80::1%eth0") and address.search("n001.example") and not address.search("[::1]")
    assert SCHEMA["properties"]["source"]["pattern"] == f"^{_SOURCE_RE.pattern}$"
    assert SCHEMA["properties"]["provenance"]["propertyNames"]["enum"] == fields


def test_the_schema_ships_in_the_package() -> None:
    assert json.loads((ROOT / "resolver" / "topology.schema.json").read_text()) == SCHEMA


@settings(max_examples=300)
@given(rt.topologies())
def test_every_record_validates_and_round_trips(t: Topology) -> None:
    data = t.to_dict()
    VALIDATOR.validate(data)
    VALIDATOR.validate(json.loads(t.to_json()))
    assert Topology.from_dict(data) == t


TAMPERED: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("schema 4", lambda d: d.update(schema=4)),
    ("devices as text", lambda d: d.update(visible_devices="0,1")),
    ("a device twice", lambda d: d.update(visible_devices=["0", "0"])),
    ("a device with no name", lambda d: d.update(visible_devices=[""])),
    ("negative local device", lambda d: d.update(visible_devices=["0"], local_device=-1)),
    ("local device as text", lambda d: d.update(visible_devices=["0"], local_device="0")),
    ("schema missing", lambda d: d.pop("schema")),
    ("unknown field", lambda d: d.update(rank=0)),
    ("field missing", lambda d: d.pop("world_size")),
    ("world size 0", lambda d: d.update(world_size=0)),
    ("rank as text", lambda d: d.update(global_rank="0")),
    ("rank as bool", lambda d: d.update(global_rank=False)),
    ("negative local rank", lambda d: d.update(local_rank=-1)),
    ("zero nodes", lambda d: d.update(num_nodes=0)),
    ("port 0", lambda d: d.update(main_port=0)),
    ("port 65536", lambda d: d.update(main_port=65536)),
    ("address with a space", lambda d: d.update(main_address="10.0.0.1 x")),
    ("address empty", lambda d: d.update(main_address="")),
    ("address with a trailing newline", lambda d: d.update(main_address="10.0.0.1\n")),
    ("address with shell syntax", lambda d: d.update(main_address="$(reboot)")),
    ("source upper case", lambda d: d.update(source="SLURM")),
    ("external as text", lambda d: d.update(creates_processes_externally="yes")),
    ("job id as int", lambda d: d.update(job_id=7)),
    ("provenance of an unknown field", lambda d: d["provenance"].update(rank={"kind": "env", "name": "RANK"})),
    ("provenance not an origin", lambda d: d["provenance"].update(world_size=1)),
    ("origin as text (schema 2)", lambda d: d["provenance"].update(world_size="env:WORLD_SIZE")),
    ("origin of an unknown kind", lambda d: d["provenance"].update(world_size={"kind": "guess", "name": "x"})),
    ("origin without a name", lambda d: d["provenance"].update(world_size={"kind": "env"})),
    ("warnings as text", lambda d: d.update(warnings="careful")),
    ("warning not text", lambda d: d.update(warnings=[1])),
    ("negative restart count", lambda d: d.update(restart_count=-1)),
]


@pytest.mark.parametrize(("what", "tamper"), TAMPERED, ids=[what for what, _ in TAMPERED])
def test_tampered_records_are_rejected_by_the_schema_and_by_from_dict(
    what: str, tamper: Callable[[dict[str, Any]], None]
) -> None:
    job = rt.slurm_job(nodes=("ci1", "ci2"), ntasks=3, job_id=77)
    data = copy.deepcopy(job.resolve()[2].to_dict())
    VALIDATOR.validate(data)
    tamper(data)
    assert list(VALIDATOR.iter_errors(data)), f"the schema accepted {what}"
    if what not in ("field missing",):  # from_dict fills omitted optional fields; world_size is required there too
        with pytest.raises(TopologyError):
            Topology.from_dict(data)


def test_the_schema_function_lives_next_to_the_record() -> None:
    import resolver
    import resolver.schema
    import resolver.testing
    import resolver.topology

    assert resolver.topology_schema is resolver.topology.topology_schema
    assert resolver.schema.topology_schema is resolver.topology_schema is resolver.testing.topology_schema
    fields = {a.name for a in attrs.fields(resolver.Topology)}
    assert resolver.topology_schema()["properties"].keys() == {"schema", *fields, "is_main", "is_local_main"}
