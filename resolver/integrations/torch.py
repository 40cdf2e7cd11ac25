"""torch.distributed from a Topology: resolve, apply the `env://` ranks, form the default group,
and restore the environment when that group is destroyed.

    from resolver.integrations.torch import init_process_group

    with init_process_group() as group:       # resolves os.environ; gloo on CPU, nccl with CUDA
        torch.distributed.all_reduce(tensor)
    # here the group is destroyed and os.environ is exactly as before

The device: when CUDA is available and the record knows this process's device
(`Topology.local_device`), `torch.cuda.set_device` is called with it and,
for NCCL, `device_id` is passed (eager NCCL initialisation on the right GPU); when the record says
None, nothing is set and its warning says why: `cuda:<local_rank>` is not guessed. A `device_id`
of your own wins and nothing is set.

The topology's warnings are logged (`logging`, logger `resolver.integrations.torch`, level WARNING)
before the group forms; a topology spanning several nodes with a loopback main address is refused
(see `resolver.resolve`; CLUSTER_TOPOLOGY_ALLOW_LOOPBACK=1 in os.environ allows it).

Teardown happens on the first of: `Group.destroy()` (or leaving the `with` block), or the
default process group object being freed after `torch.distributed.destroy_process_group()`
(a `weakref.finalize` on it; in CPython that is at once, unless something still holds the
group). torch itself is not patched.
"""

from __future__ import annotations

import logging
import os
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Any

from resolver._apply import Applied, apply
from resolver._detect import enforce, resolve
from resolver.integrations import missing
from resolver.topology import Topology

try:
    import torch
    import torch.distributed as dist
except ImportError as exc:
    raise missing(__name__, "torch", "torch", exc) from exc

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

__all__ = ["DECIDED", "Group", "cuda_device", "default_backend", "init_process_group"]

_LOG = logging.getLogger(__name__)

# what the topology decides: passing one of these would contradict it (or bypass env://)
DECIDED = ("init_method", "rank", "store", "world_size")


def default_backend() -> str:
    """`nccl` when CUDA is available and torch has NCCL, else `gloo`."""
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def cuda_device(topology: Topology, *, cuda_available: bool) -> int | None:
    """The CUDA ordinal this process should use: the record's `local_device` when CUDA is there.

    None when CUDA is not available or the record cannot tell (never `local_rank` as a guess).
    """
    return topology.local_device if cuda_available else None


class Group:
    """The default process group `init_process_group` formed, and the environment it applied.

    `destroy()` destroys the group (if it is still torch's default group) and restores the
    environment; it is idempotent, and is what leaving a `with` block does.
    """

    __slots__ = ("_applied", "_finalizer", "_group", "backend", "topology")

    def __init__(self, topology: Topology, backend: str, applied: Applied, group: ProcessGroup) -> None:
        self.topology = topology
        self.backend = backend
        self._applied = applied
        self._group = weakref.ref(group)  # a strong reference would keep the group from being freed
        self._finalizer = weakref.finalize(group, applied.teardown)
        self._finalizer.atexit = False  # at interpreter exit the environment no longer matters

    @property
    def applied(self) -> Applied:
        """What was written into `os.environ`, and what was there before."""
        return self._applied

    @property
    def active(self) -> bool:
        """True until the environment has been restored."""
        return self._applied.active

    def destroy(self) -> None:
        """Destroy the group if it is still torch's default group, then restore the environment."""
        try:
            if dist.is_initialized() and dist.group.WORLD is not None and dist.group.WORLD is self._group():
                dist.destroy_process_group()
        finally:
            self._finalizer()  # runs the teardown at most once, whoever comes first

    def __enter__(self) -> Group:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.destroy()

    def __repr__(self) -> str:
        state = "active" if self.active else "destroyed"
        return f"<Group {state} {self.backend} {self.topology}>"


def init_process_group(topology: Topology | None = None, *, backend: str | None = None, **kw: Any) -> Group:
    """Form torch's default process group from `topology` (default: `resolve(os.environ)`).

    Applies the topology with `ranks=True` (MASTER_ADDR/PORT, WORLD_SIZE, RANK, LOCAL_RANK,
    NODE_RANK) and calls `torch.distributed.init_process_group(backend, init_method="env://", **kw)`;
    `backend=None` means `default_backend()`. Other keywords (`timeout`, `device_id`, ...) pass
    through; `init_method`, `rank`, `world_size` and `store` are the topology's to decide. Without a
    `device_id`, the record's device (`cuda_device`) is made current and, for NCCL, passed as it.
    """
    decided = sorted(set(kw) & set(DECIDED))
    if decided:
        raise TypeError(
            f"init_process_group() got {', '.join(decided)}: the topology decides them "
            "(env:// with its ranks); call torch.distributed.init_process_group yourself to choose them"
        )
    if not dist.is_available():
        raise RuntimeError("this torch build has no torch.distributed")
    if dist.is_initialized():
        raise RuntimeError("torch's default process group already exists: destroy it first")
    if topology is None:
        topology = resolve(os.environ)
    elif not isinstance(topology, Topology):
        raise TypeError(f"init_process_group() needs a Topology or None, got {type(topology).__name__}")
    else:
        enforce(topology, os.environ, strict=False, allow_loopback=False)
    for warning in topology.warnings:
        _LOG.warning("%s: %s", topology, warning)
    chosen = default_backend() if backend is None else backend
    if "device_id" not in kw:
        ordinal = cuda_device(topology, cuda_available=torch.cuda.is_available())
        if ordinal is not None:
            torch.cuda.set_device(ordinal)
            if "nccl" in chosen:  # "nccl", or a per-device list such as "cpu:gloo,cuda:nccl"
                kw["device_id"] = torch.device("cuda", ordinal)
    applied = apply(topology, ranks=True)
    try:
        dist.init_process_group(backend=chosen, init_method="env://", **kw)
        group = dist.group.WORLD
        if group is None:  # pragma: no cover - torch sets it whenever init succeeds
            raise RuntimeError("torch.distributed.init_process_group returned without a default group")
    except BaseException:
        applied.teardown()
        raise
    return Group(topology, chosen, applied, group)
