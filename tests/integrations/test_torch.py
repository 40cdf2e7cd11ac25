"""resolver.integrations.torch in one process: a real world-of-one gloo group, and the environment around it."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import resolver
from resolver import Topology
from tests.integrations import require_module, run_python

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = timedelta(seconds=30)

torch: Any = require_module("torch", "torch")
dist: Any = require_module("torch.distributed", "torch")

from resolver.integrations import torch as integration  # noqa: E402  (only once torch is known to import)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def snapshot() -> dict[str, str]:
    """os.environ without the variable pytest itself rewrites at each phase of a test."""
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def one_process(**fields: Any) -> Topology:
    return Topology(
        **{
            "source": "lightning",
            "world_size": 1,
            "global_rank": 0,
            "local_rank": 0,
            "node_rank": 0,
            "main_address": "127.0.0.1",
            "main_port": free_port(),
            **fields,
        }
    )


@pytest.fixture(autouse=True)
def _no_group_left() -> Iterator[None]:
    """Each test starts and ends without a default group, and with os.environ as it found it."""
    assert not dist.is_initialized()
    before = snapshot()
    yield
    if dist.is_initialized():
        dist.destroy_process_group()
        pytest.fail("the test left torch's default process group initialized")
    assert snapshot() == before


# -- the process group ---------------------------------------------------------------------------


def test_with_block_forms_the_group_with_the_ranks_and_restores_the_environment() -> None:
    topology = one_process()
    before = snapshot()
    with integration.init_process_group(topology, timeout=TIMEOUT) as group:
        assert group.active and group.backend == "gloo" and group.topology is topology
        assert {k: os.environ[k] for k in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK")} == {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(topology.main_port),
            "WORLD_SIZE": "1",
            "RANK": "0",
            "LOCAL_RANK": "0",
        }
        assert (dist.get_rank(), dist.get_world_size(), dist.get_backend()) == (0, 1, "gloo")
        value = torch.tensor([5.0])
        dist.all_reduce(value)
        assert value.item() == 5.0
    assert not dist.is_initialized()
    assert not group.active
    assert snapshot() == before
    assert "destroyed" in repr(group)


def test_destroy_process_group_from_torch_also_restores_the_environment() -> None:
    before = snapshot()
    group = integration.init_process_group(one_process(), timeout=TIMEOUT)
    assert os.environ["NODE_RANK"] == "0"
    dist.destroy_process_group()  # torch's own call: the finalizer on the freed group runs the teardown
    assert not group.active
    assert snapshot() == before
    group.destroy()  # idempotent
    assert not group.active


def test_destroy_leaves_alone_a_default_group_it_did_not_make() -> None:
    group = integration.init_process_group(one_process(), timeout=TIMEOUT)
    dist.destroy_process_group()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        group.destroy()
        assert dist.is_initialized()  # someone else's group is theirs to destroy
    finally:
        dist.destroy_process_group()


def test_topology_none_resolves_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    for key, value in {
        "TORCHELASTIC_RUN_ID": "none",
        "WORLD_SIZE": "1",
        "RANK": "0",
        "LOCAL_RANK": "0",
        "GROUP_RANK": "0",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("NODE_RANK", raising=False)
    before = snapshot()
    with integration.init_process_group(timeout=TIMEOUT) as group:
        assert (group.topology.source, group.topology.main_port) == ("torchelastic", port)
        assert os.environ["NODE_RANK"] == "0"  # torchrun sets none; env:// users may read it
    assert snapshot() == before


def test_a_failed_init_restores_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot()
    seen: dict[str, str] = {}

    def refuse(**kw: Any) -> None:
        seen.update({k: os.environ[k] for k in ("MASTER_ADDR", "RANK")})
        raise RuntimeError("the rendezvous failed")

    monkeypatch.setattr(dist, "init_process_group", refuse)
    with pytest.raises(RuntimeError, match="rendezvous failed"):
        integration.init_process_group(one_process(), timeout=TIMEOUT)
    assert seen == {"MASTER_ADDR": "127.0.0.1", "RANK": "0"}  # it was applied when torch was called
    assert snapshot() == before


def test_a_second_init_is_refused_before_anything_is_written() -> None:
    with integration.init_process_group(one_process(), timeout=TIMEOUT):
        during = snapshot()
        with pytest.raises(RuntimeError, match="already exists"):
            integration.init_process_group(one_process(main_port=1234))
        assert snapshot() == during


@pytest.mark.parametrize("keyword", ["init_method", "rank", "world_size", "store"])
def test_what_the_topology_decides_cannot_be_passed(keyword: str) -> None:
    before = snapshot()
    with pytest.raises(TypeError, match=keyword):
        integration.init_process_group(one_process(), **{keyword: None})
    assert snapshot() == before


def test_not_a_topology_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="Topology or None"):
        integration.init_process_group({"world_size": 1})  # type: ignore[arg-type]


# -- the backend ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cuda", "nccl", "expected"),
    [(False, False, "gloo"), (False, True, "gloo"), (True, False, "gloo"), (True, True, "nccl")],
)
def test_default_backend(monkeypatch: pytest.MonkeyPatch, cuda: bool, nccl: bool, expected: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: nccl)
    assert integration.default_backend() == expected


def test_default_backend_here_is_gloo() -> None:
    assert integration.default_backend() == ("nccl" if torch.cuda.is_available() else "gloo")


# -- imports -------------------------------------------------------------------------------------


def test_without_torch_the_import_error_names_the_extra() -> None:
    code = """if True:
        import json, sys
        sys.modules["torch"] = None  # as if torch were not installed
        import resolver.integrations  # the package itself needs nothing
        try:
            import resolver.integrations.torch
        except ImportError as exc:
            print(json.dumps({"message": str(exc), "name": exc.name, "cause": type(exc.__cause__).__name__}))
        else:
            print(json.dumps({"message": None}))
    """
    result = run_python(code)
    assert result["message"] is not None
    assert "pip install 'cluster-topology[torch]'" in result["message"]
    assert "resolver.integrations.torch needs torch" in result["message"]
    assert (result["name"], result["cause"]) == ("torch", "ModuleNotFoundError")


def test_the_integrations_package_imports_neither_torch_nor_lightning() -> None:
    loaded = run_python("import sys, json, resolver, resolver.integrations; print(json.dumps(sorted(sys.modules)))")
    assert not [m for m in loaded if m.split(".")[0] in ("torch", "lightning", "lightning_fabric")]


@pytest.mark.parametrize(
    ("visible", "device", "cuda", "expected"),
    [
        (("0", "1", "2", "3"), 2, True, 2),
        (("5",), 0, True, 0),  # srun --gpus-per-task=1: the task's one GPU is cuda:0, whatever its local rank
        (("0", "1"), None, True, None),  # the record cannot tell: no guess
        (None, None, True, None),
        (("0", "1", "2", "3"), 2, False, None),  # no CUDA: nothing to set
    ],
)
def test_cuda_device_is_the_records_device_when_cuda_is_there(
    visible: tuple[str, ...] | None, device: int | None, cuda: bool, expected: int | None
) -> None:
    t = one_process(world_size=4, global_rank=3, local_rank=3, visible_devices=visible, local_device=device)
    assert integration.cuda_device(t, cuda_available=cuda) == expected


def test_without_cuda_no_device_is_set_and_gloo_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(device: object) -> None:
        raise AssertionError(f"set_device({device!r}) without CUDA")

    monkeypatch.setattr(torch.cuda, "set_device", refuse)
    t = one_process(visible_devices=("0",), local_device=0)
    with integration.init_process_group(t, timeout=TIMEOUT) as group:
        assert group.backend == "gloo" and dist.get_world_size() == 1


def test_with_cuda_the_device_is_set_and_nccl_gets_device_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """The call path with CUDA present, recorded (this machine has no GPU): set_device, then device_id."""
    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))

    def init(**kw: Any) -> None:
        calls.append(("init", kw.get("device_id")))
        raise RuntimeError("stop here: no NCCL on this machine")

    monkeypatch.setattr(dist, "init_process_group", init)
    before = snapshot()
    t = one_process(world_size=4, global_rank=1, local_rank=1, visible_devices=("0", "1", "2", "3"), local_device=1)
    with pytest.raises(RuntimeError, match="stop here"):
        integration.init_process_group(t, backend="nccl")
    assert calls == [("set_device", 1), ("init", torch.device("cuda", 1))]
    assert snapshot() == before
    calls.clear()
    with pytest.raises(RuntimeError, match="stop here"):
        integration.init_process_group(t, backend="nccl", device_id=torch.device("cuda", 3))  # yours wins
    assert calls == [("init", torch.device("cuda", 3))]
    calls.clear()
    unknown = one_process(world_size=4, global_rank=1, local_rank=1, visible_devices=("0", "1"))
    with pytest.raises(RuntimeError, match="stop here"):
        integration.init_process_group(unknown, backend="nccl")
    assert calls == [("init", None)]  # never cuda:<local_rank> as a guess


# -- issue 15: warnings are logged, a loopback address across nodes is refused ----------------------


def test_the_topologys_warnings_are_logged_before_the_group_forms(caplog: pytest.LogCaptureFixture) -> None:
    topology = one_process(warnings=("MASTER_PORT is not set; look at this",))
    with caplog.at_level("WARNING", logger="resolver"), integration.init_process_group(topology, timeout=TIMEOUT):
        pass
    (record,) = [r for r in caplog.records if r.name == "resolver.integrations.torch"]
    assert record.levelname == "WARNING" and "MASTER_PORT is not set; look at this" in record.getMessage()


def test_a_handed_in_loopback_topology_across_nodes_is_refused_before_anything_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    node1 = one_process(world_size=2, global_rank=1, node_rank=1, num_nodes=2)  # main 127.0.0.1
    before = snapshot()
    monkeypatch.delenv("CLUSTER_TOPOLOGY_ALLOW_LOOPBACK", raising=False)
    with pytest.raises(resolver.InvalidVariable, match="not a loopback address"):
        integration.init_process_group(node1, timeout=TIMEOUT)
    assert snapshot() == before and not dist.is_initialized()
