"""Which accelerator is mine: `visible_devices` and `local_device`, for any source.

Visibility. A runtime enumerates only the devices its variable lists, in the list's order, and
numbers them from 0: `CUDA_VISIBLE_DEVICES` (NVIDIA; HIP reads it too), `HIP_VISIBLE_DEVICES`,
`ROCR_VISIBLE_DEVICES` and `GPU_DEVICE_ORDINAL` (AMD: ROCR exposes devices to every ROCm
application, HIP/CUDA and GPU_DEVICE_ORDINAL index into what ROCR exposed), `ZE_AFFINITY_MASK`
(Intel Level Zero; entries `device` or `device.subdevice`, no UUIDs). The first of these that is set, in
that order, is the list; an ordinal is kept only if it is valid in every one of them that is set
(which runtime reads which variable depends on the vendor, which the environment does not say).
Entries are indexes, UUIDs (`GPU-...`) or MIG ids (`MIG-...`). As CUDA documents, a negative
index ends the list (the devices before it stay visible): `CUDA_VISIBLE_DEVICES=-1` hides every
device; so does an empty value, and SLURM's `NoDevFiles` (a GPU gres without device files). A
value that is none of these (an empty entry, a duplicate, `0x1`, a space) is an error naming it.

SLURM sets all of them to the same list, plus `SLURM_STEP_GPUS` (`SLURM_JOB_GPUS` in the batch
script): the positions of the GPUs in the node's gres list, which are not what a process under a
device cgroup sees. When only those are set (something removed the vendor variables), the
ordinal is unknown: None with a warning. When no variable is set at all, the `device_count`
probe counts the node's devices (every one is visible); a probe that cannot answer, or a node
without accelerators, leaves both fields None.

Which one (n visible devices, m processes on the node):
- n == 1: that one (0). SLURM `--gpus-per-task=1`, `--ntasks-per-gpu=1`, `--gpu-bind=single:1`.
- the launcher bound n > 1 devices to this process alone (SLURM `--gpus-per-task=n` says
  `SLURMD_TRES_BIND=gpu:per_task:n`): the first of them (0).
- the launcher says how the node's processes share what they see (`DeviceBinding.sets`): the
  processes that see one set take its devices in turn, by local rank. SLURM `--gpu-bind=closest`
  where the task sees every GPU the step has on its node (its `SLURM_STEP_GPUS` as long as
  `SLURM_GPUS_ON_NODE`; SLURM narrows `SLURM_STEP_GPUS` per task like `CUDA_VISIBLE_DEVICES`, so
  comparing those two says nothing): every task of the node sees that list, so its local rank's
  device, or None with a warning when local_rank >= n. SLURM `--gpu-bind=mask_gpu:M0,M1,...`: srun(1)
  maps "the lowest task ID on each node ... to the first mask specified in the list, etc." and
  reuses the list (measured: `0x3,0xc` for four tasks gives tasks 0 and 2 GPUs 0,1, tasks 1 and 3
  GPUs 2,3); so a task alone on its mask takes the first device of its set, and tasks sharing a mask
  (a reused list, `0x3*2`) take its devices in local-rank order. Overlapping masks, or masks naming
  more GPUs than the step has on the node (slurmstepd then binds the task whose mask names none of
  them to the step's first GPU, which another task also sees: measured), say nothing: None with a
  warning. Not visible in the environment: under `closest` with gres.conf `Cores=`, a task whose CPUs
  span every GPU's cores next to a task narrowed to one of them; under `mask_gpu` on a node whose GPUs
  the step holds only some of (srun(1): "all GPUs on each node in the job should be allocated for
  predictable binding results"), a mask outside them.
- another binding by the launcher (`map_gpu`, `single:K`, ...) with n > 1: the other
  processes' lists are not known, so None with a warning.
- no binding: every process of the node sees the same list (SLURM `--gpus-per-node`, `--gres`,
  torchrun, mpirun pass one environment to all): with n >= m, the local rank's.
- 1 < n < m, or m unknown: the devices are shared and nothing says how: None with a warning
  naming the variables, never an ordinal that another process also takes or that does not exist.

Docs: CUDA C Programming Guide, "CUDA Environment Variables" (CUDA_VISIBLE_DEVICES);
https://rocm.docs.amd.com/en/latest/conceptual/gpu-isolation.html (ROCR/HIP/GPU_DEVICE_ORDINAL);
Level Zero spec, "Environment Variables" (ZE_AFFINITY_MASK); https://slurm.schedmd.com/gres.html
and srun(1) (--gpus-per-task, --gpu-bind, SLURMD_TRES_BIND: https://slurm.schedmd.com/srun.html#OPT_gpu-bind).
Measured: tests/captures-hpc/slurm-gpu (the c* cases closest, the d* cases mask_gpu).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import attrs

from resolver.errors import InvalidSettings, InvalidVariable, TopologyError
from resolver.origin import Origin
from resolver.sources._registry import DEVICE_BINDINGS
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes
    from resolver.sources._offers import DeviceBinding

__all__ = ["SCHEDULER_LISTS", "VISIBILITY", "assign", "bind", "parse_devices"]

VISIBILITY = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "GPU_DEVICE_ORDINAL",
)
SCHEDULER_LISTS = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
NO_DEVICE_FILES = "NoDevFiles"  # SLURM's value for a GPU gres configured without device files

_ID_CHARACTERS = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/_.:-")
_EXPECTED = "a comma-separated list of device indexes, UUIDs (GPU-...) or MIG ids (MIG-...), each once"


def _index(entry: str) -> bool:
    """An ASCII device index of at most 9 digits."""
    return 0 < len(entry) <= 9 and entry.isascii() and entry.isdigit()


def _valid(entry: str, level_zero: bool) -> bool:
    """`N`; for Level Zero `N.M` (device.subdevice); for the others `GPU-...`/`MIG-...` ids."""
    if _index(entry):
        return True
    if level_zero:
        device, dot, subdevice = entry.partition(".")
        return bool(dot) and _index(device) and _index(subdevice)
    name = entry[4:]
    return (
        entry[:4] in ("GPU-", "MIG-")
        and 0 < len(name) <= 128
        and name[0].isascii()
        and name[0].isalnum()
        and _ID_CHARACTERS.issuperset(name)
    )


def _negative(entry: str) -> bool:
    return entry[:1] == "-" and _index(entry[1:])


def parse_devices(variable: str, raw: str) -> tuple[tuple[str, ...], str | None]:
    """The devices `raw` makes visible, and a note when entries were dropped; InvalidVariable if malformed."""
    if raw in ("", NO_DEVICE_FILES):
        return (), None
    level_zero = variable == "ZE_AFFINITY_MASK"
    devices: list[str] = []
    entries = raw.split(",")
    for position, entry in enumerate(entries):
        if _negative(entry):
            dropped = entries[position + 1 :]
            if any(not (_valid(e, level_zero) or _negative(e)) for e in dropped):
                raise InvalidVariable(variable, raw, _EXPECTED)
            note = f"{variable}={raw}: the runtime stops at {entry}, so {', '.join(dropped)} stay hidden"
            return tuple(devices), note if dropped else None
        if not _valid(entry, level_zero) or entry in devices:
            raise InvalidVariable(variable, raw, _EXPECTED)
        devices.append(entry)
    return tuple(devices), None


class _Answer:
    """What the rule found: the list and the ordinal, each with its origin, and warnings."""

    __slots__ = ("device", "device_from", "visible", "visible_from", "warnings")

    def __init__(
        self,
        visible: tuple[str, ...] | None = None,
        visible_from: Origin | None = None,
        device: int | None = None,
        device_from: Origin | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        self.visible, self.visible_from = visible, visible_from
        self.device, self.device_from = device, device_from
        self.warnings = warnings


def assign(environ: Mapping[str, str], topology: Topology, probes: Probes) -> Topology:
    """`topology` with `visible_devices` and `local_device` filled in (a source that set them is kept)."""
    if topology.visible_devices is not None:
        return topology
    answer = _answer(environ, topology, probes)
    if answer.visible is None and not answer.warnings:
        return topology
    provenance = dict(topology.provenance)
    if answer.visible_from is not None:
        provenance["visible_devices"] = answer.visible_from
    if answer.device is not None and answer.device_from is not None:
        provenance["local_device"] = answer.device_from
    return attrs.evolve(
        topology,
        visible_devices=answer.visible,
        local_device=answer.device,
        provenance=provenance,
        warnings=(*topology.warnings, *answer.warnings),
    )


def _answer(environ: Mapping[str, str], topology: Topology, probes: Probes) -> _Answer:
    binding = _binding(environ)  # read even where the rule will not need it: a malformed value is an error
    lists: dict[str, tuple[str, ...]] = {}
    notes: list[str] = []
    for variable in VISIBILITY:
        if variable in environ:
            lists[variable], note = parse_devices(variable, environ[variable])
            if note:
                notes.append(note)
    if not lists:
        return _without_variables(environ, topology, probes, binding)
    variable, visible = next(iter(lists.items()))
    shown = f"{variable}={environ[variable]}"
    device, device_from, warning = _choose(environ, topology, len(visible), shown, binding, listed_by=(variable,))
    if device is not None:
        short = [f"{other}={environ[other]}" for other, seen in lists.items() if device >= len(seen)]
        if short:
            warning = (
                f"{shown} makes device {device} this process's, but {', '.join(short)} lists fewer devices; "
                "which of these variables the runtime reads depends on the vendor, so local_device is None"
            )
            device = None
    warnings = (*notes, warning) if warning else tuple(notes)
    return _Answer(visible, Origin.env(variable), device, device_from, warnings)


def _without_variables(
    environ: Mapping[str, str], topology: Topology, probes: Probes, binding: DeviceBinding | None
) -> _Answer:
    given = [f"{name}={environ[name]}" for name in SCHEDULER_LISTS if name in environ]
    if given:
        return _Answer(
            warnings=(
                f"{given[0]} names the GPUs SLURM gave, but none of {', '.join(VISIBILITY)} is set (SLURM sets them "
                "itself: something removed them), so the ordinal this process sees them under is unknown",
            )
        )
    try:
        count = probes.device_count()
    except TopologyError:  # a probe that cannot answer: nothing says
        return _Answer()
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        return _Answer()
    visible = tuple(str(i) for i in range(count))
    shown = f"the node's {count} device(s) (probe:device_count)"
    device, device_from, warning = _choose(environ, topology, count, shown, binding, listed_by=())
    return _Answer(visible, Origin.probe("device_count"), device, device_from, (warning,) if warning else ())


def _choose(
    environ: Mapping[str, str],
    topology: Topology,
    n: int,
    shown: str,
    binding: DeviceBinding | None,
    *,
    listed_by: tuple[str, ...],
) -> tuple[int | None, Origin | None, str]:
    """The ordinal for `n` visible devices (listed by the variables `listed_by`), where it came from,
    and a warning when it is None."""
    if n == 0:
        return None, None, ""
    if n == 1:
        return 0, Origin.formula(f"the only visible device ({shown})", variables=listed_by), ""
    if binding is not None:
        return _bound(environ, topology, n, shown, binding=binding, listed_by=listed_by)
    local = topology.local_world_size if topology.world_size > 1 else 1
    if local is not None and n >= local:
        formula = f"local_rank, the {local} process(es) of the node sharing {shown}"
        origin = topology.provenance.get("local_rank")
        variables = (*(origin.variables if origin else ()), *listed_by)
        return topology.local_rank, Origin.formula(formula, variables=variables), ""
    if local is None:
        processes = "an unknown number of processes on this node"
    else:
        processes = f"the {local} processes on this node ({topology.provenance.get('local_world_size', 'resolved')})"
    return (
        None,
        None,
        (
            f"{shown} lists {n} devices shared by {processes}; "
            f"which one this process should use is not determined, so local_device is None: give each process its "
            f"own devices (srun --gpus-per-task=1 or --gpu-bind=single:1) or choose local_rank % {n} yourself"
        ),
    )


def _bound(
    environ: Mapping[str, str],
    topology: Topology,
    n: int,
    shown: str,
    *,
    binding: DeviceBinding,
    listed_by: tuple[str, ...],
) -> tuple[int | None, Origin | None, str]:
    """The ordinal the launcher's binding gives this process among its `n` visible devices, or a warning."""
    bound = f"{binding.variable}={environ[binding.variable]}"
    if binding.own == n:
        formula = f"first of the {n} devices {bound} binds to this process alone"
        return 0, Origin.formula(formula, variables=(binding.variable,)), ""
    if binding.sets:
        return _in_turn(topology, n, shown, bound=bound, binding=binding, listed_by=listed_by)
    why = f" ({binding.note})" if binding.note else ""
    return (
        None,
        None,
        (
            f"{shown} lists {n} devices and {bound} binds them in a way that does not say which one this process "
            f"should use{why}, so local_device is None"
        ),
    )


def _in_turn(
    topology: Topology,
    n: int,
    shown: str,
    *,
    bound: str,
    binding: DeviceBinding,
    listed_by: tuple[str, ...],
) -> tuple[int | None, Origin | None, str]:
    """The binding's sets, shared in turn: the i-th process of the node (by local rank) that sees this
    process's set takes its i-th device."""
    rank, sets = topology.local_rank, binding.sets
    if rank is None:
        return None, None, f"{shown} lists {n} devices that {bound} shares by local rank, which is unknown"
    mine = sets[rank % len(sets)]
    turn = sum(1 for other in range(rank) if sets[other % len(sets)] == mine)
    sharing = "the node's processes" if len(set(sets)) == 1 else "the node's processes of this process's set"
    if turn >= n:
        return (
            None,
            None,
            (
                f"{shown} lists {n} devices that {bound} gives to {sharing}; this one (local_rank {rank}) is number "
                f"{turn + 1} of them, so local_device is None: run at most {n} processes per set of devices"
            ),
        )
    origin = topology.provenance.get("local_rank")
    variables = (binding.variable, *(origin.variables if origin else ()), *listed_by)
    formula = f"device {turn} of {shown}: the local_rank order of {sharing}, which {bound} gives those devices"
    return turn, Origin.formula(formula, variables=variables), ""


def _binding(environ: Mapping[str, str]) -> DeviceBinding | None:
    """The first launcher binding of devices to this process (the registry's DEVICE_BINDINGS)."""
    for entry in DEVICE_BINDINGS:
        if entry.devices is not None and entry.devices.met(environ):
            found = entry.device_binding()(environ)
            if found is not None:
                return found
    return None


def bind(topology: Topology, environ: Mapping[str, str]) -> dict[str, str]:
    """The visibility variables narrowed to this process's device, so that a program's device 0 is it.

    Pure: `environ` is read, the changes are returned (`cluster-topology exec --bind-device` writes
    them into the program's environment; `--format env --bind-device` exports them). Each vendor
    variable that is set becomes the one entry of its own list at `local_device`, as SLURM itself
    narrows every one of them under `--gpu-bind=single:1` (captured); they must list the same
    devices, since which of them a runtime reads depends on the vendor. With no variable set (the
    device-count probe answered), `CUDA_VISIBLE_DEVICES` is set, which CUDA and HIP read.
    InvalidSettings when the record does not know the device.
    """
    visible, device = topology.visible_devices, topology.local_device
    if visible is None or device is None:
        why = topology.warnings[-1] if topology.warnings else "no visibility variable or device probe says"
        raise InvalidSettings(
            f"cannot bind this process to its device: the {topology.source} record does not know it "
            f"(visible_devices={None if visible is None else list(visible)}, local_device={device}): {why}",
            variable="local_device",
            value=device,
            expected="a device the record knows",
        )
    origin = topology.provenance.get("visible_devices")
    if origin is None or origin.kind != "env":
        return {"CUDA_VISIBLE_DEVICES": visible[device]}
    lists = {name: environ[name] for name in VISIBILITY if name in environ}
    if len(set(lists.values())) > 1:
        shown = ", ".join(f"{name}={value}" for name, value in lists.items())
        raise InvalidSettings(
            f"cannot bind this process to its device: {shown} list different devices, and which of them "
            "a runtime reads depends on the vendor; narrow the one your runtime reads yourself",
            variable=next(iter(lists)),
            value=next(iter(lists.values())),
            expected="every set visibility variable listing the same devices",
        )
    return dict.fromkeys(lists, visible[device])
