"""One process of a real JAX launch: form JAX's world one way, all-gather, write what happened as JSON.

    python jax_worker.py MODE OUT_DIR

MODE is `ours` (`resolver.integrations.jax.initialize()`), `check` (`resolver.check()` first, then
`initialize()`), `plain` (`jax.distributed.initialize()`
with JAX's own detection; only `initialization_timeout` is given, so a failure ends in bounded
time), or `master` (`jax.distributed.initialize` at MASTER_ADDR:MASTER_PORT with RANK and
WORLD_SIZE: what a torchrun user would write by hand).

The file OUT_DIR/<pid>.json is written twice: `"status": "started"` before JAX is called, then
`"ok"` or `"error"` with what JAX said. A process that dies inside JAX (a signal) leaves only the
first. The launcher's own word (its rank and size variables, the node) is recorded beside JAX's
answers; the test compares them.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

TIMEOUT = 40  # seconds JAX's clients keep trying to reach the coordinator

LAUNCHERS = (  # (rank variable, size variable): the first pair present is the launcher's word
    ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("RANK", "WORLD_SIZE"),
)


def truth() -> dict[str, Any]:
    for rank, size in LAUNCHERS:
        if rank in os.environ and size in os.environ:
            return {"rank": int(os.environ[rank]), "size": int(os.environ[size]), "from": [rank, size]}
    raise SystemExit(f"no launcher rank/size variables among {LAUNCHERS}")


def write(path: Path, record: dict[str, Any]) -> None:
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(record))
    partial.replace(path)


def detected() -> Any:
    """What JAX's own cluster detection would choose here (its private helper; None if it moved)."""
    try:
        from jax._src import clusters

        found = clusters.ClusterEnv.auto_detect_unset_distributed_params(None, None, None, None, None, 10)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    address, count, pid, devices = found
    return {"coordinator_address": address, "num_processes": count, "process_id": pid, "local_device_ids": devices}


def main() -> None:
    mode, out = sys.argv[1], Path(sys.argv[2])
    path = out / f"{os.getpid()}.json"
    record: dict[str, Any] = {
        "mode": mode,
        "status": "started",
        "truth": truth(),
        "node": os.environ.get("SLURMD_NODENAME") or socket.gethostname(),
        "step": os.environ.get("SLURM_STEP_ID"),
        "pid": os.getpid(),
        "torch_before": "torch" in sys.modules,
    }
    import jax

    record["detected"] = detected()
    write(path, record)
    try:
        if mode in ("ours", "check"):
            from resolver.integrations.jax import initialize

            if mode == "check":  # the preflight first, on the same main endpoint JAX then listens on
                import resolver

                report = resolver.check(os.environ, timeout=TIMEOUT)
                record["check"] = {"ok": report.ok, "problems": [str(p) for p in report.problems]}
            topology = initialize(initialization_timeout=TIMEOUT)
            record["topology"] = topology.to_dict()
        elif mode == "plain":
            jax.distributed.initialize(initialization_timeout=TIMEOUT)
        elif mode == "master":
            address = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
            jax.distributed.initialize(
                address,
                int(os.environ["WORLD_SIZE"]),
                int(os.environ["RANK"]),
                initialization_timeout=TIMEOUT,
            )
        else:
            raise SystemExit(f"unknown mode {mode!r}: ours, check, plain or master")
    except Exception as exc:
        record.update(status="error", error=f"{type(exc).__name__}: {exc}"[:2000])
        write(path, record)
        return
    record["torch_after"] = "torch" in sys.modules  # before anything else could import it
    import numpy as np
    from jax._src import distributed
    from jax.experimental import multihost_utils

    # every process's launcher rank and SLURM step (-1 without one): a world mixing steps shows here
    step = int(record["step"]) if record["step"] is not None else -1
    gathered = np.asarray(multihost_utils.process_allgather(np.array([record["truth"]["rank"], step])))
    record.update(
        status="ok",
        process_index=jax.process_index(),
        process_count=jax.process_count(),
        gathered=[int(x) for x in gathered.reshape(-1, 2)[:, 0]],
        gathered_steps=[int(x) for x in gathered.reshape(-1, 2)[:, 1]],
        coordinator_address=distributed.global_state.coordinator_address,
        devices=len(jax.devices()),
    )
    write(path, record)


if __name__ == "__main__":
    main()
