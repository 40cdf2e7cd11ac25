"""Checking a builder of resolver.testing against the captures of its launcher (tests/captures)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import attrs

import probes
import resolver
from resolver import testing as rt
from tests.conftest import CAPTURES, read_capture

FAKE = probes.fake(free_port=4242, which={})  # what a non-task (batch script, salloc shell) may ask

# capture files (in rank order) -> the builder call that must reproduce them
Cases = list[tuple[tuple[str, ...], Callable[[], rt.Job]]]


def ranks(pattern: str, n: int) -> tuple[str, ...]:
    return tuple(pattern.format(i) for i in range(n))


def case_id(files: tuple[str, ...]) -> str:
    return files[0].rsplit("/", 1)[0] + "/" + files[0].rsplit("/", 1)[1].split("-")[0]


def assert_same_variables(built: Mapping[str, str], real: Mapping[str, str], launcher: str) -> None:
    """The same keys; the same values except the documented non-deterministic ones, which have their shape."""
    assert sorted(built) == sorted(real), (
        f"extra: {sorted(set(built) - set(real))}, missing: {sorted(set(real) - set(built))}"
    )
    shapes = rt.NONDETERMINISTIC[launcher]
    differ = {k: (built[k], real[k]) for k in real if k not in shapes and built[k] != real[k]}
    assert not differ, differ
    for key, shape in shapes.items():
        for env in (built, real):
            if key in env:
                assert re.fullmatch(shape, env[key]), (key, env[key], shape)


def assert_reproduces(files: tuple[str, ...], launcher: str, job: rt.Job) -> None:
    """`job` has the captured processes' variables, and resolving either gives the same records."""
    assert job.launcher == launcher and len(job) == len(files)
    real = [read_capture(CAPTURES / name) for name in files]
    for built, env in zip(job.environs, real, strict=True):
        assert_same_variables(built, env, launcher)
    # resolving the capture and the builder's environment gives the same record, provenance included
    captured = attrs.evolve(job, processes=tuple(attrs.evolve(p, environ=e) for p, e in zip(job, real, strict=True)))
    # (the multi-node captures were made on one host: their main address may be loopback)
    resolved = job.resolve(allow_loopback=True), captured.resolve(allow_loopback=True)
    assert [t.to_dict() for t in resolved[0]] == [t.to_dict() for t in resolved[1]]


def assert_reproduces_one(name: str, launcher: str, built: Mapping[str, str]) -> None:
    """One process that is no task of a job (a batch script, an salloc shell) against its capture."""
    real = read_capture(CAPTURES / name)
    assert_same_variables(built, real, launcher)
    assert resolver.resolve(built, FAKE).to_dict() == resolver.resolve(real, FAKE).to_dict()
