"""What a source module offers any process besides its source, typed: job facts, a main endpoint for
MPI ranks, a device binding (`Offers`, and `DeviceBinding`, the record a binding answers).

A module of its own, imported by the modules that offer something (and by the registry when it asks
one): in the kit, which loads on every resolve, its classes cost 1.5% of a default resolve
(callgrind, lean venv: 3.8 M instructions of 238.8 M); `DeviceBinding` is a NamedTuple, a small value
compared by value, for the same reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Protocol

from resolver.sources._kit import Environ, JobFacts

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["DeviceBinding", "Offers"]


class DeviceBinding(NamedTuple):
    """A launcher's binding of accelerators to this process, from `variable` (e.g. SLURMD_TRES_BIND).

    `own` is how many devices the launcher gave this process alone (SLURM `--gpus-per-task=2`: 2),
    or None when the binding does not say that the process's devices are its own.
    `sets` says how the processes of a node share what they see, by local rank: the process of local
    rank r sees the set `sets[r % len(sets)]` (equal values: the same devices; different values:
    disjoint ones), and the processes of one set take its devices in turn, the i-th of them in
    local-rank order the i-th device (SLURM `--gpu-bind=closest` where every task sees all the step's
    GPUs: `(0,)`; `--gpu-bind=mask_gpu:0x3,0xc`: `(3, 12)`). Empty: the binding does not say;
    `note` then says why, for the warning.
    A launcher module that binds devices has `device_binding(environ) -> DeviceBinding | None` and says
    so in its registry entry; the engine's device rule consults it for any source.
    """

    variable: str
    own: int | None
    sets: tuple[int, ...] = ()
    note: str = ""


if TYPE_CHECKING:  # the capabilities' types, for mypy: at run time only the functions exist

    class JobFactsReader(Protocol):
        """A module's `job_facts(environ)`: the job's facts for any process inside the job."""

        def __call__(self, environ: Environ, /) -> JobFacts: ...

    class EndpointReader(Protocol):
        """A module's `main_endpoint(environ, probes, *, one_node)`: the main address and port it gives the
        MPI ranks inside its allocation."""

        def __call__(self, environ: Environ, probes: Probes, /, *, one_node: bool) -> JobFacts: ...

    class BindingReader(Protocol):
        """A module's `device_binding(environ)`: the launcher's binding of accelerators to the process."""

        def __call__(self, environ: Environ, /) -> DeviceBinding | None: ...


class Offers:
    """What a source module offers any process besides its source, typed so that mypy checks each
    function against its capability: a module with any of them ends with
    ``OFFERS = Offers(job_facts=job_facts, ...)``, and its registry entry declares the variables that
    make each worth asking (`facts=`, `endpoint=`, `devices=`; a test holds the two equal)."""

    __slots__ = ("device_binding", "job_facts", "main_endpoint")

    def __init__(
        self,
        *,
        job_facts: JobFactsReader | None = None,
        main_endpoint: EndpointReader | None = None,
        device_binding: BindingReader | None = None,
    ) -> None:
        self.job_facts = job_facts
        self.main_endpoint = main_endpoint
        self.device_binding = device_binding
