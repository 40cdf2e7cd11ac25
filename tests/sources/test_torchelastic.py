from __future__ import annotations

from pathlib import Path

import pytest

import probes
import resolver
from resolver import InvalidSettings, InvalidVariable, MissingVariable, Origin
from tests.conftest import captures, read_capture

FAKE = probes.fake()  # torchelastic asks no probe: any question would raise ProbeFailed


@pytest.mark.parametrize("path", captures("torchrun/*/*.env"), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_real_torchrun_captures(path: Path) -> None:
    env = read_capture(path)
    t = resolver.resolve(env, FAKE, allow_loopback=True)  # two nodes emulated on one host
    assert t.source == "torchelastic"
    assert t.world_size == int(env["WORLD_SIZE"])
    assert t.global_rank == int(env["RANK"])
    assert t.local_rank == int(env["LOCAL_RANK"])
    assert t.node_rank == int(env["GROUP_RANK"])
    assert t.num_nodes == int(env["GROUP_WORLD_SIZE"])
    assert t.local_world_size == int(env["LOCAL_WORLD_SIZE"])
    assert (t.main_address, t.main_port) == (env["MASTER_ADDR"], int(env["MASTER_PORT"]))
    assert t.creates_processes_externally
    assert t.job_id == env["TORCHELASTIC_RUN_ID"]
    assert t.restart_count == 0
    assert t.provenance["node_rank"] == Origin.env("GROUP_RANK")
    assert t.warnings == ()
    resolver.validate(t, devices=t.local_world_size, num_nodes=t.num_nodes)


def test_a_whole_job_is_consistent() -> None:
    tops = [
        resolver.resolve(read_capture(p), FAKE, allow_loopback=True) for p in captures("torchrun/2node_static/*.env")
    ]
    assert sorted(t.global_rank for t in tops) == [0, 1, 2, 3]
    assert len({(t.main_address, t.main_port) for t in tops}) == 1
    assert {t.node_rank for t in tops} == {0, 1}


LIGHTNING_ONLY = {"RANK": "1", "GROUP_RANK": "0", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "WORLD_SIZE": "2"}


def test_lightning_detection_set_without_run_id_and_default_endpoint() -> None:
    t = resolver.resolve(LIGHTNING_ONLY, FAKE)
    assert t.source == "torchelastic"
    assert (t.main_address, t.main_port) == ("127.0.0.1", 12910)
    assert t.provenance["main_port"] == Origin.default("12910")
    assert t.warnings == ("MASTER_ADDR is not set; using 127.0.0.1", "MASTER_PORT is not set; using 12910")
    assert t.num_nodes is None


def test_not_detected_on_partial_variables() -> None:
    env = {"RANK": "0", "LOCAL_RANK": "0"}
    assert resolver.resolve(env, probes.fake(free_port=1234)).source == "lightning"


@pytest.mark.parametrize(
    ("change", "variable"),
    [
        ({"WORLD_SIZE": None}, "WORLD_SIZE"),
        ({"RANK": None}, "RANK"),
        ({"LOCAL_RANK": None}, "LOCAL_RANK"),
    ],
)
def test_missing_required(change: dict[str, None], variable: str) -> None:
    env = {k: v for k, v in {**LIGHTNING_ONLY, "TORCHELASTIC_RUN_ID": "x"}.items() if k not in change}
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(env, FAKE)
    assert info.value.variable == variable


@pytest.mark.parametrize(
    ("change", "variable", "expected"),
    [
        ({"RANK": "2"}, "RANK", "< world_size (2) (world_size from WORLD_SIZE=2)"),
        ({"RANK": "-1"}, "RANK", "decimal integer"),
        ({"WORLD_SIZE": "0"}, "WORLD_SIZE", ">= 1"),
        ({"LOCAL_RANK": "2"}, "LOCAL_RANK", "< local_world_size (2)"),
        ({"GROUP_RANK": "3", "GROUP_WORLD_SIZE": "2"}, "GROUP_RANK", "< num_nodes (2)"),
        ({"MASTER_PORT": "80abc"}, "MASTER_PORT", "TCP port"),
        ({"MASTER_ADDR": "a b"}, "MASTER_ADDR", "host name"),
        ({"TORCHELASTIC_RESTART_COUNT": "x"}, "TORCHELASTIC_RESTART_COUNT", "decimal integer"),
    ],
)
def test_invalid_values_name_the_variable(change: dict[str, str], variable: str, expected: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**LIGHTNING_ONLY, **change}, FAKE)
    assert info.value.variable == variable
    assert expected in str(info.value)


def test_validate_like_lightning() -> None:
    t = resolver.resolve({**LIGHTNING_ONLY, "GROUP_WORLD_SIZE": "1"}, FAKE)
    with pytest.raises(InvalidSettings, match=r"HINT: set devices=2"):
        resolver.validate(t, devices=4, num_nodes=1)
    with pytest.raises(InvalidSettings, match=r"HINT: set num_nodes=1"):
        resolver.validate(t, devices=2, num_nodes=2)
    no_local = resolver.resolve(
        {k: v for k, v in LIGHTNING_ONLY.items() if k != "LOCAL_WORLD_SIZE"} | {"TORCHELASTIC_RUN_ID": "r"}, FAKE
    )
    with pytest.raises(InvalidSettings, match=r"product \(3\) does not match the world size \(2"):
        resolver.validate(no_local, devices=3, num_nodes=1)
    resolver.validate(no_local, devices=1, num_nodes=2)


TWO_NODES = {
    "TORCHELASTIC_RUN_ID": "none",
    "WORLD_SIZE": "8",
    "GROUP_WORLD_SIZE": "2",
    "LOCAL_WORLD_SIZE": "4",
    "MASTER_ADDR": "10.1.2.3",
    "MASTER_PORT": "29500",
}


@pytest.mark.parametrize(("group", "local"), [(0, 0), (0, 3), (1, 0), (1, 3)])
def test_a_rank_torchrun_cannot_assign_is_named_with_the_formula(group: int, local: int) -> None:
    """Every node runs LOCAL_WORLD_SIZE workers: torchrun's RANK is GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK."""
    right = group * 4 + local
    env = {**TWO_NODES, "GROUP_RANK": str(group), "LOCAL_RANK": str(local)}
    assert resolver.resolve({**env, "RANK": str(right)}, probes.fake()).global_rank == right
    wrong = (right + 1) % 8
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**env, "RANK": str(wrong)}, probes.fake())
    assert info.value.variable == "RANK" and info.value.value == str(wrong)
    assert f"GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK = {group} * 4 + {local} = {right}" in str(info.value)


def test_nodes_with_different_worker_counts_keep_their_ranks() -> None:
    """WORLD_SIZE != GROUP_WORLD_SIZE * LOCAL_WORLD_SIZE: torchrun's numbering is not the product rule."""
    uneven = {
        **TWO_NODES,
        "WORLD_SIZE": "6",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "LOCAL_RANK": "0",
        "RANK": "4",
    }
    assert resolver.resolve(uneven, probes.fake()).global_rank == 4
    no_group_size = {k: v for k, v in TWO_NODES.items() if k != "GROUP_WORLD_SIZE"}
    odd = {**no_group_size, "GROUP_RANK": "0", "LOCAL_RANK": "1", "RANK": "3"}
    assert resolver.resolve(odd, probes.fake()).global_rank == 3  # without GROUP_WORLD_SIZE nothing says the rule
