"""resolver.integrations.jax against a fake `jax` (and a fake torch store): what reaches
`jax.distributed.initialize`, in what order, and what never does. Runs without JAX installed.

The real launches are tests/launchers/test_jax.py.
"""

from __future__ import annotations

import logging
import re
import sys
import types
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

import probes
import resolver
from resolver import InvalidSettings, InvalidVariable, Topology, TopologyError
from resolver.integrations import jax as integration
from tests.integrations import require_module, run_python

SLURM = {  # srun -N2 -n4, task 2 (the first task of the second node)
    "SLURM_JOB_ID": "77",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "2",
    "SLURM_LOCALID": "0",
    "SLURM_NODEID": "1",
    "SLURM_NTASKS": "4",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_NNODES": "2",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_STEP_NODELIST": "node[07-08]",
    "SLURM_JOB_NODELIST": "node[07-08]",
    "SLURM_NODELIST": "node[07-08]",
    "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
    "SLURM_TASKS_PER_NODE": "2(x2)",
    "SLURM_JOB_NAME": "train",
}


PROXIES = ("grpc_proxy", "https_proxy", "http_proxy")


def torchrun(rank: int, **extra: str) -> dict[str, str]:
    """A worker of `torchrun --nnodes=1 --nproc-per-node=2` (torch 2.13.0 sets the agent-store variable)."""
    return {
        "TORCHELASTIC_RUN_ID": "none",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "GROUP_RANK": "0",
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_WORLD_SIZE": "1",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29400",
        **extra,
    }


class FakeJax:
    """Records the calls `jax.distributed.initialize` receives (and the names waited for before it)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.waited: list[tuple[str, int, float]] = []
        self.module = types.ModuleType("jax")
        distributed = types.ModuleType("jax.distributed")
        distributed.initialize = self.initialize  # type: ignore[attr-defined]
        self.module.distributed = distributed  # type: ignore[attr-defined]

    def initialize(self, **kw: Any) -> None:
        self.calls.append(kw)


class FakeStore:
    """torch.distributed.TCPStore as a client of one shared table (the agent's store)."""

    table: ClassVar[dict[str, bytes]] = {}
    opened: ClassVar[list[tuple[str, int, bool, timedelta]]] = []
    fail_get: ClassVar[Exception | None] = None

    def __init__(self, host: str, port: int, *, is_master: bool, timeout: timedelta) -> None:
        FakeStore.opened.append((host, port, is_master, timeout))

    def set(self, key: str, value: str) -> None:
        FakeStore.table[key] = value.encode()

    def get(self, key: str) -> bytes:
        if FakeStore.fail_get is not None:
            raise FakeStore.fail_get
        return FakeStore.table[key]


@pytest.fixture
def jax(monkeypatch: pytest.MonkeyPatch) -> FakeJax:
    fake = FakeJax()
    monkeypatch.setitem(sys.modules, "jax", fake.module)
    monkeypatch.delenv("JAX_LOCAL_DEVICE_IDS", raising=False)
    for name in (*PROXIES, "no_grpc_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    # the coordinator's name (node07, 10.0.0.1...) is not waited for here: tests of wait_for_name below
    monkeypatch.setattr(
        integration, "wait_for_name", lambda host, port, *, timeout: fake.waited.append((host, port, timeout))
    )
    return fake


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> type[FakeStore]:
    torch = types.ModuleType("torch")
    distributed = types.ModuleType("torch.distributed")
    distributed.TCPStore = FakeStore  # type: ignore[attr-defined]
    torch.distributed = distributed  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch.distributed", distributed)
    FakeStore.table, FakeStore.opened, FakeStore.fail_get = {}, [], None
    return FakeStore


def no_module(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make `import name` fail, as when it is not installed."""
    monkeypatch.setitem(sys.modules, name, None)


def test_slurm_task_gets_the_records_world(jax: FakeJax) -> None:
    fakes = probes.fake(hostname="node08")
    topology = integration.initialize(SLURM, fakes)
    assert topology == resolver.resolve(SLURM, fakes)
    port = topology.main_port
    assert jax.calls == [
        {
            "coordinator_address": f"node07:{port}",
            "num_processes": 4,
            "process_id": 2,
            "cluster_detection_method": "deactivate",  # JAX would otherwise set local_device_ids=[SLURM_LOCALID]
        }
    ]


def test_overrides_pass_through_and_win(jax: FakeJax) -> None:
    fakes = probes.fake(hostname="node08")
    integration.initialize(SLURM, fakes, initialization_timeout=7, local_device_ids=[3], heartbeat_timeout_seconds=9)
    (call,) = jax.calls
    assert (call["initialization_timeout"], call["local_device_ids"], call["heartbeat_timeout_seconds"]) == (7, [3], 9)
    assert call["num_processes"] == 4


def test_a_coordinator_of_your_own_is_used_as_given(jax: FakeJax, monkeypatch: pytest.MonkeyPatch) -> None:
    no_module(monkeypatch, "torch")  # the agent store is not asked: torch is not needed
    integration.initialize(torchrun(1, TORCHELASTIC_USE_AGENT_STORE="True"), coordinator_address="10.0.0.1:5000")
    assert jax.calls[0]["coordinator_address"] == "10.0.0.1:5000"
    assert jax.calls[0]["process_id"] == 1


def test_the_records_device_becomes_local_device_ids(jax: FakeJax) -> None:
    env = torchrun(1, CUDA_VISIBLE_DEVICES="4,5")  # no agent store variable: MASTER_PORT is free
    topology = integration.initialize(env)
    assert (topology.visible_devices, topology.local_device) == (("4", "5"), 1)
    assert jax.calls[0]["local_device_ids"] == [1]  # the ordinal among the visible devices, as JAX numbers them
    assert jax.calls[0]["coordinator_address"] == "10.0.0.1:29400"


def test_jax_local_device_ids_of_your_own_win(jax: FakeJax, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAX_LOCAL_DEVICE_IDS", "0")
    integration.initialize(torchrun(1, CUDA_VISIBLE_DEVICES="4,5"))
    assert "local_device_ids" not in jax.calls[0]  # JAX reads the variable itself


def test_shared_devices_pass_no_device_ids(jax: FakeJax) -> None:
    env = torchrun(2, WORLD_SIZE="3", LOCAL_WORLD_SIZE="3", CUDA_VISIBLE_DEVICES="0,1")  # 3 workers, 2 GPUs
    topology = integration.initialize(env)
    assert topology.local_device is None and topology.warnings  # shared, and nothing says how: ...
    assert "local_device_ids" not in jax.calls[0]
    assert jax.calls[0]["cluster_detection_method"] == "deactivate"  # ... and JAX does not guess either


def test_ipv6_main_address_in_brackets(jax: FakeJax) -> None:
    integration.initialize(torchrun(0, MASTER_ADDR="fd00::1"))
    assert jax.calls[0]["coordinator_address"] == "[fd00::1]:29400"


def test_a_topology_error_comes_before_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    no_module(monkeypatch, "jax")  # importing JAX would fail: the TopologyError must come first
    with pytest.raises(TopologyError, match="RANK"):
        integration.initialize(torchrun(5))


def test_without_jax_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    no_module(monkeypatch, "jax")
    with pytest.raises(ImportError, match=re.escape("pip install 'cluster-topology[jax]'")) as info:
        integration.initialize(torchrun(0))
    assert info.value.name == "jax"


def test_importing_the_module_imports_neither_jax_nor_torch() -> None:
    code = (
        "import json, sys, resolver.integrations.jax\n"
        "print(json.dumps(sorted(m for m in ('jax', 'torch', 'numpy') if m in sys.modules)))"
    )
    assert run_python(code) == []


def test_warnings_are_logged_before_jax(jax: FakeJax, caplog: pytest.LogCaptureFixture) -> None:
    env = torchrun(0)
    del env["MASTER_PORT"]
    with caplog.at_level(logging.WARNING, logger="resolver.integrations.jax"):
        topology = integration.initialize(env)
    assert topology.warnings
    assert [r.getMessage() for r in caplog.records] == [f"{topology}: {w}" for w in topology.warnings]


def test_a_record_without_main_address_is_refused_before_jax() -> None:
    topology = Topology(source="custom", world_size=2, global_rank=0, local_rank=0, node_rank=0, main_port=1234)
    with pytest.raises(InvalidSettings, match="has no main_address") as info:
        integration.arguments(topology)
    assert (info.value.variable, info.value.value) == ("main_address", None)


# -- torchrun's agent store ------------------------------------------------------------------------


def test_process_0_publishes_a_free_port_in_the_agent_store(jax: FakeJax, store: type[FakeStore]) -> None:
    env = torchrun(0, TORCHELASTIC_USE_AGENT_STORE="True", TORCHELASTIC_RESTART_COUNT="2")
    integration.initialize(env, probes.fake(free_port=41000), initialization_timeout=12)
    assert store.opened == [("10.0.0.1", 29400, False, timedelta(seconds=12))]  # a client of the agent's store
    assert store.table == {"cluster-topology/jax/none/2/port": b"41000"}
    assert jax.calls[0]["coordinator_address"] == "10.0.0.1:41000"


def test_the_others_read_it(jax: FakeJax, store: type[FakeStore]) -> None:
    store.table["cluster-topology/jax/none/0/port"] = b"41000"
    fakes = probes.fake()  # no free_port: process 1 must not pick one
    integration.initialize(torchrun(1, TORCHELASTIC_USE_AGENT_STORE="True"), fakes)
    assert jax.calls[0]["coordinator_address"] == "10.0.0.1:41000"
    assert store.opened[0][:3] == ("10.0.0.1", 29400, False)


def test_a_port_never_published_is_a_timeout_naming_the_key(jax: FakeJax, store: type[FakeStore]) -> None:
    store.fail_get = RuntimeError("Socket Timeout")
    with pytest.raises(TimeoutError, match=re.escape("'cluster-topology/jax/none/0/port'")) as info:
        integration.initialize(torchrun(1, TORCHELASTIC_USE_AGENT_STORE="True"), initialization_timeout=3)
    assert "waited 3 s" in str(info.value) and "10.0.0.1:29400" in str(info.value)
    assert jax.calls == []


def test_a_published_value_that_is_no_port_is_refused(jax: FakeJax, store: type[FakeStore]) -> None:
    store.table["cluster-topology/jax/none/0/port"] = b"99999"
    with pytest.raises(InvalidVariable, match="99999"):
        integration.initialize(torchrun(1, TORCHELASTIC_USE_AGENT_STORE="True"))
    assert jax.calls == []


def test_without_the_agent_store_master_port_is_used_and_torch_is_not_imported(
    jax: FakeJax, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_module(monkeypatch, "torch")
    integration.initialize(torchrun(0, TORCHELASTIC_USE_AGENT_STORE="False"))
    assert jax.calls[0]["coordinator_address"] == "10.0.0.1:29400"


def test_the_agent_store_only_holds_master_port() -> None:
    """A record whose main port is not MASTER_PORT (SLURM's, say) is not torchrun's store, whatever the variable."""
    fakes = probes.fake(hostname="node08")
    env = {**SLURM, "TORCHELASTIC_USE_AGENT_STORE": "True"}
    assert not integration.uses_agent_store(resolver.resolve(env, fakes), env)
    worker = torchrun(0, TORCHELASTIC_USE_AGENT_STORE="True")
    assert integration.uses_agent_store(resolver.resolve(worker), worker)


# -- what JAX reads from the environment -----------------------------------------------------------


def test_jax_reads_only_these_variables_of_its_own() -> None:
    """The docs say JAX's initialize reads JAX_COORDINATOR_*, JAX_LOCAL_DEVICE_IDS (and the partition
    index), never a process count or id: read the installed JAX's source to keep that true."""
    distributed = require_module("jax._src.distributed", "jax")  # skips locally, fails in CI without JAX
    cluster = require_module("jax._src.clusters.cluster", "jax")
    read: set[str] = set()
    for module in (distributed, cluster):
        text = Path(str(module.__file__)).read_text()
        read |= set(re.findall(r"os\.environ(?:\.get\(|\[)\s*['\"](JAX_[A-Z_]+)['\"]", text))
    partition = {"JAX_PARTITION_INDEX", "JAX_SLICE_INDEX"}  # multi-slice TPU partitions, not ranks
    assert read == set(integration.JAX_ENVIRONMENT) | partition


# -- the network in front of the coordinator (issue 33) ---------------------------------------------------


def test_the_coordinators_name_is_waited_for_before_jax(jax: FakeJax) -> None:
    topology = integration.initialize(SLURM, probes.fake(hostname="node08"), initialization_timeout=30)
    assert jax.waited == [("node07", topology.main_port, 30.0)] and len(jax.calls) == 1


@pytest.mark.parametrize("variable", PROXIES)
def test_a_proxy_that_would_carry_the_coordinator_is_refused_by_name(
    jax: FakeJax, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.setenv(variable, "http://127.0.0.1:9")
    with pytest.raises(InvalidSettings, match=f"{variable}=http://127.0.0.1:9 would carry JAX's coordinator") as e:
        integration.initialize(SLURM, probes.fake(hostname="node08"))
    assert e.value.variable == variable and "no_proxy" in str(e.value)
    assert not jax.calls


def test_a_proxy_that_no_proxy_covers_is_left_alone(jax: FakeJax, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.setenv("no_proxy", "localhost,node07")
    integration.initialize(SLURM, probes.fake(hostname="node08"))
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # gRPC reads the lower-case names only
    monkeypatch.delenv("http_proxy")
    integration.initialize(SLURM, probes.fake(hostname="node08"))
    assert len(jax.calls) == 2


def test_wait_for_name_returns_at_once_for_a_name_that_resolves() -> None:
    integration.wait_for_name("127.0.0.1", 1234, timeout=1)


def test_wait_for_name_names_a_name_that_never_resolves() -> None:
    with pytest.raises(TimeoutError, match=r"'no-such-host\.invalid' did not resolve here in \d"):
        integration.wait_for_name("no-such-host.invalid", 1234, timeout=0.5)


def test_wait_for_name_waits_for_a_late_name(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    import socket
    import time

    real = socket.getaddrinfo
    appears = time.monotonic() + 1.2

    def late(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "coordinator.test" and time.monotonic() < appears:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real("127.0.0.1" if host == "coordinator.test" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", late)
    with caplog.at_level(logging.WARNING, logger="resolver.integrations.jax"):
        integration.wait_for_name("coordinator.test", 1234, timeout=10)
    assert time.monotonic() >= appears
    said = [r.getMessage() for r in caplog.records if "coordinator.test resolved after " in r.getMessage()]
    assert said and float(said[0].split(" after ")[1].split(" s")[0]) >= 1.2, caplog.records  # a loaded machine: later
