"""`DeviceBinding`, re-exported by the kit (`resolver.sources`): only launchers that bind devices need it."""

from __future__ import annotations

import attrs

__all__ = ["DeviceBinding"]


@attrs.frozen
class DeviceBinding:
    """A launcher's binding of accelerators to this process, from `variable` (e.g. SLURMD_TRES_BIND).

    `own` is how many devices the launcher gave this process alone (SLURM `--gpus-per-task=2`: 2),
    or None when the binding does not say that the process's devices are its own (`--gpu-bind=closest`).
    A launcher module exposes `device_binding(environ) -> DeviceBinding | None`, listed in the
    registry's `DEVICE_BINDINGS`; resolver/_devices.py consults it for any source.
    """

    variable: str
    own: int | None
