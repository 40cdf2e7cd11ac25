"""What a launcher's builder module is made of: the `Launch` base, `job_builder` and `env_builder`,
field converters and validators, and stable "random" values.

A launch class is an ``@attrs.frozen(kw_only=True)`` subclass of `Launch` whose fields are the
launcher's options with their defaults, written once; a subclass of it adds the index of one process
(``node: int = 0``) and says which process that is (``one()``; `ByNode` and `ByRank` say it for a
``node`` or a ``rank``). ``job_builder(AzureMlLaunch, ...)`` and ``env_builder(AzureMlNode, ...)``
give ``azureml_job`` and ``azureml_env``, functions with exactly the classes' keywords (mypy checks
every call: ``slurm_env(node=...)`` is an error), so a builder never repeats a field or a default.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, ParamSpec, Protocol, TypeVar, cast

import attrs

from resolver.testing.world import Job, Process

if TYPE_CHECKING:
    from hypothesis.strategies import DrawFn, SearchStrategy

P = ParamSpec("P")
L = TypeVar("L")
R = TypeVar("R")


class Launch:
    """What every launch class shares: its `processes()`, in global-rank order, make its `Job`.

    A subclass names its `launcher` (its name in `resolver.testing.LAUNCHERS` and its builders'
    prefix), its `source` where another source than the launcher's name resolves it, `forced` and
    `mpi` where they hold for every launch (see `Job`), and `job_options()`: `Job`'s fields that
    depend on the launch (mpi, main, aliases, source).
    """

    __slots__ = ()
    launcher: ClassVar[str]
    source: ClassVar[str | None] = None
    forced: ClassVar[bool] = False
    mpi: ClassVar[bool] = False

    def processes(self) -> Iterable[Process]:
        raise NotImplementedError

    def job_options(self) -> Mapping[str, Any]:
        return {}

    def job(self) -> Job:
        """Every process of the launch, in global-rank order."""
        options = {"source": self.source or self.launcher, "forced": self.forced, "mpi": self.mpi, **self.job_options()}
        call = f"{self.launcher}_job(**{changed_fields(cast('attrs.AttrsInstance', self))})"
        return Job(launcher=self.launcher, processes=tuple(self.processes()), call=call, **options)


class OneProcess(Protocol):
    """A launch class that adds a process's index: ``one()`` is that process."""

    def one(self) -> Process: ...


class _Ranked(Protocol):
    @property
    def rank(self) -> int: ...

    def process(self, rank: int, /) -> Process: ...


class _Noded(Protocol):
    @property
    def node(self) -> int: ...

    def process(self, node: int, /) -> Process: ...


class ByRank:
    """Mixin of a launch class that adds the field ``rank``: its ``one()`` is ``process(rank)``."""

    __slots__ = ()

    def one(self: _Ranked) -> Process:
        return self.process(self.rank)


class ByNode:
    """Mixin of a launch class that adds the field ``node``: its ``one()`` is ``process(node)``."""

    __slots__ = ()

    def one(self: _Noded) -> Process:
        return self.process(self.node)


def one(process: OneProcess) -> Process:
    """What an ``*_env`` builder gives: `process`'s ``one()``."""
    return process.one()


def builder(launch: Callable[P, L], build: Callable[[L], R], *, name: str, doc: str) -> Callable[P, R]:
    """A function taking `launch`'s keywords and giving ``build(launch(**keywords))``, named `name`."""

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        return build(launch(*args, **kwargs))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = doc
    call.__module__ = launch.__module__
    returns = inspect.signature(build).return_annotation
    call.__signature__ = inspect.signature(launch).replace(return_annotation=returns)  # type: ignore[attr-defined]
    return call


def job_builder(launch: Callable[P, Launch], *, doc: str) -> Callable[P, Job]:
    """``<launcher>_job``: every process of the launch `launch`'s keywords describe."""
    name = cast("type[Launch]", launch).launcher
    return builder(launch, Launch.job, name=f"{name}_job", doc=doc)


def env_builder(process: Callable[P, OneProcess], *, doc: str, name: str | None = None) -> Callable[P, Process]:
    """``<launcher>_env`` (or `name`): the one process (``one()``) that `process`'s keywords describe."""
    name = name or f"{cast('type[Launch]', process).launcher}_env"
    return builder(process, one, name=name, doc=doc)


def index_in(name: str, value: int, count: int, where: str) -> int:
    """`value`, the index `name` of one of `count` processes, or a ValueError saying `where` they are numbered."""
    if not 0 <= value < count:
        raise ValueError(f"{name}={value}: {where} 0..{count - 1}")
    return value


def stable_number(*parts: object, low: int, high: int) -> int:
    """A plausible 'random' number in low..high, the same for the same parts (builders stay pure)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return low + int.from_bytes(digest, "big") % (high - low + 1)


def stable_token(*parts: object, length: int = 8) -> str:
    """A plausible tempfile-style name: `length` characters of [a-z0-9_], the same for the same parts."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_"
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=32).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:length])


def ephemeral_port(*parts: object) -> int:
    return stable_number("port", *parts, low=32768, high=60999)  # Linux's default ip_local_port_range


def to_hosts(value: Iterable[str]) -> tuple[str, ...]:
    """Converter of a field of host names: any sequence of them, but not one string."""
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of host names, got the string {value!r}")
    return tuple(value)


def to_optional_devices(value: Iterable[str | int] | None) -> tuple[str, ...] | None:
    """Converter of a visibility list: device indexes or ids, as CUDA_VISIBLE_DEVICES lists them."""
    if value is None:
        return None
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of devices, got the string {value!r}")
    return tuple(str(device) for device in value)


def visibility(devices: tuple[str, ...] | None) -> dict[str, str]:
    """`CUDA_VISIBLE_DEVICES` as set in the launcher's own environment, which every process inherits."""
    return {} if devices is None else {"CUDA_VISIBLE_DEVICES": ",".join(devices)}


def to_strings(value: Iterable[str]) -> tuple[str, ...]:
    """Converter of a field of words (a command and its arguments): any sequence of them, but not one string."""
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of strings, got the string {value!r}")
    return tuple(value)


def to_optional_hosts(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else to_hosts(value)


def distinct_hosts(instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is None:
        return
    if not value:
        raise ValueError(f"{attribute.name}: at least one host")
    if len(set(value)) != len(value):
        raise ValueError(f"{attribute.name}={value!r}: each host once")


def positive(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{attribute.name}={value!r}: expected an int >= 1")


def not_negative(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{attribute.name}={value!r}: expected an int >= 0")


def capacities(capacity: int | Sequence[int], nodes: int) -> list[int]:
    """One capacity for every node, or one per node (checked)."""
    if isinstance(capacity, int):
        return [capacity] * nodes
    if len(capacity) != nodes:
        raise ValueError(f"capacity {list(capacity)} for {nodes} nodes")
    return list(capacity)


def changed_fields(launch: attrs.AttrsInstance) -> dict[str, Any]:
    """A launch's keywords that differ from the defaults, for `Job.call`."""
    out = {}
    for field in attrs.fields(type(launch)):
        value = getattr(launch, field.name)
        if value != field.default:
            out[field.name] = value
    return out


def host_names(count: int, *, prefix: str | None = None) -> SearchStrategy[tuple[str, ...]]:
    """`count` distinct host names: a numbered family (ci1, rack1-n07) or arbitrary DNS-like names."""
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    numbered = st.tuples(
        st.sampled_from([prefix] if prefix else ["ci", "node", "gpu-", "rack1-n"]),
        st.integers(0, 3),  # zero padding
        st.integers(0, 990),
        st.integers(1, 3),  # step between numbers: gaps as in ci[1-2,4]
    ).map(lambda t: tuple(f"{t[0]}{str(t[2] + i * t[3]).zfill(t[1])}" for i in range(count)))
    if prefix:
        return numbered
    named = st.lists(
        st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z]", fullmatch=True), min_size=count, max_size=count, unique=True
    )
    return st.one_of(numbered, named.map(tuple))


def mpi_master() -> SearchStrategy[dict[str, str]]:
    """MASTER_ADDR/MASTER_PORT exported to every rank (``mpirun -x``), or nothing (the comm finds them)."""
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    return st.one_of(
        st.just({}),
        st.builds(lambda port: {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": str(port)}, st.integers(1024, 65535)),
    )


def jobs_on_hosts(
    most_hosts: int, launch: Callable[[DrawFn, int], Launch], *, master: bool = False
) -> SearchStrategy[Job]:
    """A launcher's ``_jobs`` strategy: the jobs of the launches ``launch(draw, count)`` describes on
    `count` hosts, 1 to ``min(3, most_hosts)``; with `master`, an MPI launch's, MASTER_ADDR/MASTER_PORT
    exported to every rank or not (`mpi_master`)."""
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    @st.composite
    def build(draw: DrawFn) -> Job:
        job = launch(draw, draw(st.integers(1, min(3, most_hosts)))).job()
        return with_master(job, draw(mpi_master())) if master else job

    return build()


def with_master(job: Job, master: Mapping[str, str]) -> Job:
    """`job` with `master` added to every process's environment (and said in its call)."""
    processes = tuple(attrs.evolve(p, environ={**p.environ, **master}) for p in job)
    return attrs.evolve(job, processes=processes, call=job.call + (f" with {dict(master)}" if master else ""))
