"""JAX's multi-process world from a Topology: one call, under any launcher the resolver knows.

    from resolver.integrations.jax import initialize

    topology = initialize()          # resolves os.environ, then jax.distributed.initialize(...)
    assert jax.process_index() == topology.global_rank

`initialize()` resolves the record and calls `jax.distributed.initialize` with

- `coordinator_address="<main_address>:<coordinator port>"` (an IPv6 address in brackets),
- `num_processes=world_size`, `process_id=global_rank`,
- `local_device_ids=[local_device]` when the record knows this process's device (`local_device`
  is the ordinal among the devices the process can see, which is what JAX's `local_device_ids`
  are: JAX writes them to `jax_cuda_visible_devices`/`jax_rocm_visible_devices`); nothing when it
  does not, or when `JAX_LOCAL_DEVICE_IDS` is in `os.environ` (JAX reads that one itself),
- `cluster_detection_method="deactivate"`: with any of its four arguments left None, JAX runs its
  own SLURM / Open MPI detection, which sets `local_device_ids=[SLURM_LOCALID]` (or Open MPI's
  local rank) whatever the devices are; the record's answer, or all visible devices, it is.

Keyword overrides go to `jax.distributed.initialize` as given and win over these (say
`initialization_timeout=60`, `coordinator_bind_address=...`, or `local_device_ids=[...]`).

The coordinator port. JAX's coordinator is a gRPC server that process 0 starts on the port of
`coordinator_address` (bound on `[::]`). Under SLURM, MPI and the schedulers the record's
`main_port` is a port nothing holds, so it is that. Under torchrun with
`TORCHELASTIC_USE_AGENT_STORE=True` (torch 2.13.0 sets it with static and c10d rendezvous alike)
`MASTER_PORT` is held by the agent's TCPStore: JAX cannot bind it (measured with JAX 0.10.2: gRPC
logs "Failed to add port to server", process 0 raises `JaxRuntimeError: Failed to start RPC
server` or, once, died of SIGSEGV, and the others abort at their timeout). There process 0 takes a
free port and publishes it in that store (a torch `TCPStore`
client at MASTER_ADDR:MASTER_PORT, key `cluster-topology/jax/<run id>/<restart count>/port`), and
the others read it (waiting up to `initialization_timeout`, JAX's 300 s by default). torch is
imported only then; torchrun is torch's, so it is there.

JAX itself reads only `JAX_COORDINATOR_ADDRESS`, `JAX_COORDINATOR_PORT`,
`JAX_COORDINATOR_BIND_ADDRESS` and `JAX_LOCAL_DEVICE_IDS` from the environment (jax/_src/distributed.py
and jax/_src/clusters/cluster.py, JAX 0.10.2), never a process count or id: a shell-level
`cluster-topology exec` cannot hand JAX a world, this call is the way. JAX_COORDINATOR_ADDRESS and
JAX_COORDINATOR_PORT are not used here (JAX reads them only for arguments left None; pass
`coordinator_address=` to choose one); JAX_COORDINATOR_BIND_ADDRESS still applies.

Errors: resolution fails with the `TopologyError` as usual, and a record without a main address or
port with `InvalidSettings`, before JAX is imported; JAX is imported only when `initialize` runs
(an ImportError names the `jax` extra). The topology's warnings are logged (logger
`resolver.integrations.jax`, level WARNING) before JAX is called.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from resolver._detect import require_probes, resolve
from resolver.errors import InvalidSettings, InvalidVariable
from resolver.integrations import missing
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "AGENT_STORE",
    "DEFAULT_TIMEOUT",
    "JAX_ENVIRONMENT",
    "STORE_KEY",
    "arguments",
    "coordinator_port",
    "initialize",
    "refuse_proxy",
    "uses_agent_store",
    "wait_for_name",
]


def _log() -> logging.Logger:
    """This module's logger."""
    return logging.getLogger(__name__)


# the variables jax.distributed.initialize reads from os.environ (JAX 0.10.2)
JAX_ENVIRONMENT = (
    "JAX_COORDINATOR_ADDRESS",
    "JAX_COORDINATOR_PORT",
    "JAX_COORDINATOR_BIND_ADDRESS",
    "JAX_LOCAL_DEVICE_IDS",
)
# torchrun's agent sets it for each worker; torch compares it with str(True)
# (torch/distributed/rendezvous.py, _torchelastic_use_agent_store)
AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
STORE_KEY = "cluster-topology/jax/{run_id}/{restart_count}/port"
DEFAULT_TIMEOUT = 300  # seconds: jax.distributed.initialize's own initialization_timeout


def _variable(topology: Topology, field: str) -> str | None:
    """The environment variable a field was read as it is from, or None (its `Origin.variable`)."""
    origin = topology.provenance.get(field)
    return None if origin is None else origin.variable


def uses_agent_store(topology: Topology, environ: Mapping[str, str]) -> bool:
    """True when the record's main port is torchrun's MASTER_PORT and torchrun's agent store holds it."""
    return environ.get(AGENT_STORE) == "True" and _variable(topology, "main_port") == "MASTER_PORT"


def _endpoint(topology: Topology) -> tuple[str, int]:
    if topology.main_address is None or topology.main_port is None:
        name = "main_address" if topology.main_address is None else "main_port"
        raise InvalidSettings(
            f"the {topology.source} record ({topology}) has no {name}, which JAX's coordinator_address needs; "
            f"pass coordinator_address='host:port' to initialize()",
            variable=name,
            value=None,
            expected="a main address and port for JAX's coordinator",
        )
    return topology.main_address, topology.main_port


def coordinator_port(
    topology: Topology,
    environ: Mapping[str, str],
    probes: Probes | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> int:
    """The port of JAX's coordinator: `main_port`, or under torchrun's agent store one process 0 publishes there."""
    address, port = _endpoint(topology)
    if not uses_agent_store(topology, environ):
        return port
    key = STORE_KEY.format(
        run_id=topology.job_id if topology.job_id is not None else "none",
        restart_count=topology.restart_count if topology.restart_count is not None else 0,
    )
    try:
        # torch is an optional extra, imported only here; the ignore: TCPStore is re-exported from torch._C
        from torch.distributed import TCPStore  # type: ignore[attr-defined]
    except ImportError as exc:
        raise missing(__name__, "torch (to reach torchrun's agent store)", "torch", exc) from exc
    where = f"torchrun's agent store at {address}:{port} ({AGENT_STORE}=True)"
    store = TCPStore(address, port, is_master=False, timeout=timedelta(seconds=timeout))
    if topology.global_rank == 0:
        if probes is None:
            require_probes()
            from probes import live  # after require_probes: a user's probes.py may shadow ours

            chosen = live.free_port()
        else:
            chosen = probes.free_port()
        store.set(key, str(chosen))
        _log().info("JAX coordinator port %d published under %r in %s", chosen, key, where)
        return chosen
    try:
        raw = store.get(key)
    except Exception as exc:  # torch raises DistStoreError (a RuntimeError) on its timeout
        raise TimeoutError(
            f"process {topology.global_rank} waited {timeout} s for process 0 to publish JAX's coordinator "
            f"port under {key!r} in {where}: {exc}. Did process 0 call resolver.integrations.jax.initialize()?"
        ) from exc
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
        raise InvalidVariable(key, text, f"a port in 1..65535 written by process 0 into {where}")
    return int(text)


def arguments(topology: Topology, port: int | None = None) -> dict[str, Any]:
    """The keywords for `jax.distributed.initialize` from a record (`port` replaces `main_port`)."""
    address, main_port = _endpoint(topology)
    host = f"[{address}]" if ":" in address else address
    out: dict[str, Any] = {
        "coordinator_address": f"{host}:{main_port if port is None else port}",
        "num_processes": topology.world_size,
        "process_id": topology.global_rank,
        "cluster_detection_method": "deactivate",
    }
    if topology.local_device is not None and "JAX_LOCAL_DEVICE_IDS" not in os.environ:
        out["local_device_ids"] = [topology.local_device]
    return out


def initialize(
    environ: Mapping[str, str] | None = None,
    probes: Probes | None = None,
    **overrides: Any,
) -> Topology:
    """Resolve `environ` (default `os.environ`), form JAX's world with `jax.distributed.initialize`, return the record.

    `overrides` go to `jax.distributed.initialize` and win over the record's arguments; with a
    `coordinator_address` of your own no coordinator port is chosen (and torch is not imported).
    """
    env: Mapping[str, str] = os.environ if environ is None else environ
    topology = resolve(env, probes)
    keywords = arguments(topology)  # a record without an endpoint fails here, before JAX
    try:
        import jax  # an optional extra, imported only by the call that needs it
    except ImportError as exc:
        raise missing(__name__, "jax", "jax", exc) from exc
    if "coordinator_address" not in overrides:
        timeout = overrides.get("initialization_timeout", DEFAULT_TIMEOUT)
        keywords = arguments(topology, coordinator_port(topology, env, probes, timeout=timeout))
    keywords.update(overrides)
    if topology.warnings:
        log = _log()
        for warning in topology.warnings:
            log.warning("%s: %s", topology, warning)
    host, port = _split(str(keywords["coordinator_address"]))
    refuse_proxy(host, os.environ)  # gRPC reads the process's own environment, whatever `environ` was
    wait_for_name(host, port, timeout=float(keywords.get("initialization_timeout", DEFAULT_TIMEOUT)))
    jax.distributed.initialize(**keywords)
    return topology


def _split(coordinator: str) -> tuple[str, int]:
    host, _, port = coordinator.rpartition(":")
    return host.strip("[]"), int(port) if port.isdigit() else 0


def refuse_proxy(host: str, environ: Mapping[str, str]) -> None:
    """Refuse, by name, a proxy that would carry the coordinator's gRPC traffic to `host`.

    gRPC takes the first of grpc_proxy, https_proxy, http_proxy that has a value for every channel,
    unless `host` is in the first of no_grpc_proxy, no_proxy that has one (gRPC's
    doc/environment_variables.md). Measured with JAX 0.10.2: with any of the three set to a proxy
    that does not connect onward, every process's client sends `CONNECT <coordinator>` to the proxy, and
    `jax.distributed.initialize` aborts the process (SIGABRT) after its `initialization_timeout`; JAX
    only logs that proxy variables "may cause a hang". The upper-case HTTP_PROXY is not read by gRPC.
    """
    from resolver._network import proxy  # the rule the preflight applies too

    found = proxy(environ, host)
    if found is None:
        return
    variable, value = found
    raise InvalidSettings(
        f"{variable}={value} would carry JAX's coordinator connections to {host} (gRPC honours it, and JAX "
        f"then hangs until its initialization_timeout): add {host} to no_proxy (or no_grpc_proxy), or unset "
        f"{variable} for the job",
        variable=variable,
        value=value,
        expected=f"no proxy for the coordinator: {host} in no_grpc_proxy or no_proxy",
    )


def wait_for_name(host: str, port: int, *, timeout: float) -> None:
    """Wait, with backoff, up to `timeout` seconds for the coordinator's `host` to resolve (on Kubernetes a
    pod's DNS record appears after the pod starts; JAX's client would fail at once), logging the wait every
    3 s; a `TimeoutError` naming the name and the resolver's last answer when it never does."""
    require_probes()
    import time

    from probes.exchange import ExchangeFailed, resolve_name  # after require_probes: ours, not a user's probes.py

    def waiting(why: str, waited: float) -> None:
        _log().warning(
            "JAX's coordinator %s does not resolve yet (%s); waited %.0f s of %.0f", host, why, waited, timeout
        )

    try:
        _, waited = resolve_name(host, port, deadline=time.monotonic() + timeout, on_wait=waiting)
    except ExchangeFailed as exc:
        raise TimeoutError(f"JAX's coordinator address: {exc}") from None
    if waited >= 1.0:
        _log().warning("JAX's coordinator %s resolved after %.1f s", host, waited)
