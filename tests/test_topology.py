from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from hypothesis import given

import resolver
from resolver import SCHEMA, InvalidTopology, Origin, Topology, TopologyError
from resolver.testing import topologies

DEVICE_FIELDS = ("visible_devices", "local_device")
BASE: dict[str, Any] = {
    "source": "torchelastic",
    "world_size": 8,
    "global_rank": 3,
    "local_rank": 1,
    "node_rank": 1,
    "num_nodes": 2,
    "local_world_size": 4,
    "main_address": "10.1.2.3",
    "main_port": 29500,
    "creates_processes_externally": True,
}


def test_one_line_str_for_job_logs() -> None:
    assert str(Topology(**BASE)) == "torchelastic rank 3/8 local 1/4 node 1/2 main 10.1.2.3:29500 external"


def test_str_marks_unknowns_ipv6_and_warnings() -> None:
    t = Topology(
        source="lightning",
        world_size=1,
        global_rank=0,
        local_rank=0,
        node_rank=0,
        main_address="fe80::1",
        main_port=1,
        warnings=["w"],
    )
    assert str(t) == "lightning rank 0/1 local 0/? node 0/? main [fe80::1]:1 spawns (1 warning)"


def test_frozen_slotted_keyword_only() -> None:
    t = Topology(**BASE)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        t.world_size = 2  # type: ignore[misc]
    assert not hasattr(t, "__dict__")
    with pytest.raises(TypeError):
        Topology("torchelastic", 1, 0, 0, 0)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        ({"world_size": 0}, "world_size", ">= 1"),
        ({"world_size": True}, "world_size", "an int"),
        ({"global_rank": -1}, "global_rank", ">= 0"),
        ({"global_rank": 8}, "global_rank", "< world_size (8)"),
        ({"local_rank": 4}, "local_rank", "< local_world_size (4)"),
        ({"local_rank": -1}, "local_rank", ">= 0"),
        ({"node_rank": 2}, "node_rank", "< num_nodes (2)"),
        ({"node_rank": -3}, "node_rank", ">= 0"),
        ({"num_nodes": 9}, "num_nodes", "<= world_size"),
        ({"local_world_size": 9}, "local_world_size", "<= world_size"),
        ({"main_port": 0}, "main_port", "1..65535"),
        ({"main_port": 65536}, "main_port", "1..65535"),
        ({"main_port": "29500"}, "main_port", "1..65535"),
        ({"main_address": ""}, "main_address", "host name"),
        ({"main_address": "a b"}, "main_address", "RFC 1123"),
        ({"main_address": "host\n"}, "main_address", "RFC 1123"),
        ({"main_address": "[::1]"}, "main_address", "without brackets"),
        ({"main_address": "$(reboot)"}, "main_address", "host name"),
        ({"source": "Not A Name"}, "source", "source name"),
        ({"creates_processes_externally": 1}, "creates_processes_externally", "a bool"),
        ({"job_id": 5}, "job_id", "str or None"),
        ({"provenance": {"nope": "env:X"}}, "provenance", "field name"),
        ({"warnings": "one string"}, "warnings", "sequence of strings"),
    ],
)
def test_invariants(change: dict[str, Any], field: str, expected: str) -> None:
    with pytest.raises(InvalidTopology) as info:
        Topology(**{**BASE, **change})
    assert info.value.field == field
    assert expected in str(info.value)
    assert isinstance(info.value, (TopologyError, ValueError))


def test_evolve_revalidates() -> None:
    with pytest.raises(InvalidTopology):
        attrs.evolve(Topology(**BASE), global_rank=100)


def test_hashable_and_provenance_is_read_only() -> None:
    t = Topology(**BASE, provenance={"world_size": Origin.env("WORLD_SIZE")})
    assert hash(t) == hash(Topology(**BASE))
    with pytest.raises(TypeError):
        t.provenance["world_size"] = "x"  # type: ignore[index]


def test_to_dict_is_json_safe_with_schema() -> None:
    t = Topology(**BASE, provenance={"world_size": Origin.env("WORLD_SIZE")}, warnings=["careful"])
    data = t.to_dict()
    assert data["schema"] == SCHEMA == 3
    assert json.loads(json.dumps(data)) == data
    assert Topology.from_dict(data) == t
    assert Topology.from_json(t.to_json()) == t
    assert Topology.from_dict(data).provenance == t.provenance


@pytest.mark.parametrize(
    ("tamper", "field"),
    [
        ({"schema": 4}, "schema"),
        ({"schema": 1, "visible_devices": ["0"]}, "visible_devices"),
        ({"visible_devices": "0"}, "visible_devices"),
        ({"visible_devices": ["0", "0"]}, "visible_devices"),
        ({"visible_devices": ["0,1"]}, "visible_devices"),
        ({"local_device": 0}, "local_device"),
        ({"visible_devices": [], "local_device": 0}, "local_device"),
        ({"visible_devices": ["3"], "local_device": 1}, "local_device"),
        ({"schema": True}, "schema"),
        ({"schema": None}, "schema"),
        ({"extra": 1}, "extra"),
        ({"world_size": "8"}, "world_size"),
        ({"global_rank": 99}, "global_rank"),
        ({"warnings": "x"}, "warnings"),
        ({"provenance": ["x"]}, "provenance"),
    ],
)
def test_from_dict_refuses_tampered_records(tamper: dict[str, Any], field: str) -> None:
    data = {**Topology(**BASE).to_dict(), **tamper}
    with pytest.raises(InvalidTopology) as info:
        Topology.from_dict(data)
    assert info.value.field == field


def test_schema_1_records_still_load_without_devices() -> None:
    old = {key: value for key, value in Topology(**BASE).to_dict().items() if key not in DEVICE_FIELDS}
    loaded = Topology.from_dict({**old, "schema": 1})
    assert loaded == Topology(**BASE)
    assert (loaded.visible_devices, loaded.local_device) == (None, None)
    assert loaded.to_dict()["schema"] == 3  # written again under the current schema


def test_schema_2_job_logs_load_their_origins_written_as_text() -> None:
    """A record a job log kept last month (schema 2, each origin as text) loads, its origins as records."""
    old = {**Topology(**BASE).to_dict(), "schema": 2}
    old["provenance"] = {
        "world_size": "env:SLURM_NTASKS",
        "main_port": "formula:15000 + last four digits of SLURM_JOB_ID",
        "main_address": "probe:hostname (the main node, which AWS Batch does not tell its address)",
        "global_rank": "spawn: node_rank * devices + local_rank with devices=4",
        "local_rank": "lightning:set_local_rank(1)",
    }
    loaded = Topology.from_dict(old)
    assert loaded.provenance["world_size"] == Origin.env("SLURM_NTASKS")
    assert loaded.provenance["world_size"].variable == "SLURM_NTASKS"
    assert loaded.provenance["main_port"].kind == "formula"
    assert loaded.provenance["global_rank"].kind == loaded.provenance["local_rank"].kind == "argument"
    for field in ("world_size", "main_port", "main_address"):
        assert str(loaded.provenance[field]) == old["provenance"][field]  # the text as it was written
    assert str(loaded.provenance["local_rank"]) == "argument:lightning:set_local_rank(1)"
    again = loaded.to_dict()
    assert again["schema"] == 3 and Topology.from_dict(again) == loaded
    assert again["provenance"]["world_size"] == {"kind": "env", "name": "SLURM_NTASKS"}


@pytest.mark.parametrize("origins", [{"world_size": "env:X"}, {"world_size": {"kind": "env"}}, {"x": 1}])
def test_schema_3_origins_are_objects(origins: object) -> None:
    with pytest.raises(InvalidTopology) as info:
        Topology.from_dict({**Topology(**BASE).to_dict(), "provenance": origins})
    assert info.value.field == "provenance"


@pytest.mark.parametrize(
    "bad", [{"kind": "env", "name": ["X"]}, {"kind": "env", "name": "X", "note": {}}, {"kind": ["env"], "name": "X"}]
)
def test_origins_read_back_are_shared_and_junk_is_still_refused(bad: dict[str, object]) -> None:
    """Records of one job share their origins (rank 0 of a check reads thousands): one object per value."""
    first, second = (
        Topology.from_json(Topology(**BASE, provenance={"world_size": Origin.env("W")}).to_json()) for _ in "ab"
    )
    assert first.provenance["world_size"] is second.provenance["world_size"]
    assert Origin.from_dict({"kind": "formula", "name": "a*b", "variables": ["A", "B"]}).variables == ("A", "B")
    with pytest.raises(InvalidTopology) as info:  # unhashable values fall through to the validators
        Origin.from_dict(bad)
    assert info.value.field == "provenance"


@pytest.mark.parametrize(
    ("visible", "device", "shown"),
    [
        (("0", "1"), 1, " device 1/2 (1) "),
        (("GPU-5d3c0b3e",), 0, " device 0/1 (GPU-5d3c0b3e) "),
        (("0", "1", "2"), None, " device ?/3 "),
        ((), None, " device ?/0 "),
    ],
)
def test_str_shows_the_device(visible: tuple[str, ...], device: int | None, shown: str) -> None:
    t = Topology(**BASE, visible_devices=visible, local_device=device, job_id="7")
    assert shown in str(t) and str(t).endswith(" job 7")
    assert Topology.from_json(t.to_json()) == t
    assert t.to_dict()["visible_devices"] == list(visible)


def test_device_fields_take_part_in_equality() -> None:
    assert Topology(**BASE, visible_devices=["0", "1"], local_device=0) != Topology(
        **BASE, visible_devices=["0", "1"], local_device=1
    )
    assert Topology(**BASE, visible_devices=iter(["0"])).visible_devices == ("0",)  # an iterator is read


def test_from_dict_missing_field_and_not_a_mapping() -> None:
    data = Topology(**BASE).to_dict()
    del data["world_size"]
    with pytest.raises(TopologyError, match="required"):
        Topology.from_dict(data)
    with pytest.raises(TopologyError):
        Topology.from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(TopologyError):
        Topology.from_json("{not json")


@given(topologies())
def test_round_trip(t: Topology) -> None:
    assert Topology.from_dict(t.to_dict()) == t
    assert Topology.from_json(t.to_json()) == t
    line = str(t)
    assert line.startswith(f"{t.source} rank {t.global_rank}/{t.world_size} ")
    assert "\n" not in line and "\r" not in line  # one line in a job log, whatever the job id


def test_records_pickle_copy_and_keep_their_own_provenance() -> None:
    import copy
    import pickle
    from types import MappingProxyType

    origins = {"world_size": Origin.env("WORLD_SIZE")}
    proxy = MappingProxyType(origins)
    t = Topology(
        source="lightning",
        world_size=2,
        global_rank=1,
        local_rank=1,
        node_rank=0,
        provenance=proxy,
        warnings=iter(["w"]),
    )
    origins["world_size"] = Origin.default("changed")
    assert t.provenance["world_size"] == Origin.env("WORLD_SIZE")  # a copy, not the caller's proxy
    assert t.warnings == ("w",)  # an iterator is read, not dropped
    for same in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):  # noqa: S301 - our own bytes
        assert same == t and same.to_dict() == t.to_dict()
    workers = resolver.spawn(t, devices=2, num_nodes=1)
    assert pickle.loads(pickle.dumps(workers)) == workers  # noqa: S301


@pytest.mark.parametrize("bad", ["w", [1], 3, [None]])
def test_warnings_must_be_strings(bad: object) -> None:
    with pytest.raises(InvalidTopology):
        Topology(source="x", world_size=1, global_rank=0, local_rank=0, node_rank=0, warnings=bad)


def test_repr_names_every_shown_field_in_order() -> None:
    record = Topology(
        source="slurm",
        world_size=4,
        global_rank=1,
        local_rank=1,
        node_rank=0,
        main_address="node1",
        main_port=29500,
        visible_devices=["0", "1"],
        local_device=1,
        provenance={"world_size": Origin.env("SLURM_NTASKS")},
        warnings=["w"],
    )
    assert repr(record) == (
        "Topology(source='slurm', world_size=4, global_rank=1, local_rank=1, node_rank=0, num_nodes=None, "
        "local_world_size=None, nproc_per_node=None, main_address='node1', main_port=29500, "
        "creates_processes_externally=False, job_id=None, job_name=None, step_id=None, array_job_id=None, "
        "array_task_id=None, restart_count=None, visible_devices=('0', '1'), local_device=1, hostnames=None)"
    )
    detection = resolver.Detection(True, "SLURM_NTASKS is set", ["SLURM_NTASKS"])
    assert repr(detection) == (
        "Detection(matched=True, reason='SLURM_NTASKS is set', variables=('SLURM_NTASKS',), warning=None)"
    )


def test_main_and_local_main_are_derived_and_kept_honest_in_json() -> None:
    node = Topology(source="slurm", world_size=4, global_rank=2, local_rank=0, node_rank=1, num_nodes=2)
    assert (node.is_main, node.is_local_main) == (False, True)
    data = node.to_dict()
    assert (data["is_main"], data["is_local_main"]) == (False, True)
    assert Topology.from_dict(data) == node
    with pytest.raises(InvalidTopology) as info:
        Topology.from_dict({**data, "is_main": True})
    assert info.value.field == "is_main"


def test_hostnames_are_one_per_node_in_node_rank_order() -> None:
    t = Topology(
        source="slurm", world_size=4, global_rank=3, local_rank=1, node_rank=1, num_nodes=2, hostnames=["a", "b"]
    )
    assert t.hostnames == ("a", "b") and t.hostnames[t.node_rank] == "b"
    assert Topology.from_json(t.to_json()) == t
    for bad, field in ((["a"], "hostnames"), (["a", "b c"], "hostnames"), ([], "hostnames"), ("ab", "hostnames")):
        with pytest.raises(InvalidTopology) as info:
            Topology(source="slurm", world_size=4, global_rank=3, local_rank=1, node_rank=1, num_nodes=2, hostnames=bad)
        assert info.value.field == field
    with pytest.raises(InvalidTopology) as info:
        Topology(source="x", world_size=4, global_rank=3, local_rank=1, node_rank=2, hostnames=["a", "b"])
    assert info.value.field == "node_rank"
