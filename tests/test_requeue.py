from __future__ import annotations

import os
import signal
from collections.abc import Sequence

import pytest

from resolver import InvalidSettings, InvalidVariable, MissingVariable, requeue

JOB = {"SLURM_JOB_ID": "42"}


class Recorder:
    def __init__(self, status: int = 0) -> None:
        self.calls: list[list[str]] = []
        self.status = status

    def __call__(self, args: Sequence[str]) -> int:
        self.calls.append(list(args))
        return self.status


def test_signal_runs_callback_then_requeues_once_and_restores_the_handler() -> None:
    before = signal.getsignal(signal.SIGUSR1)
    ran: list[int] = []
    runner = Recorder()
    with requeue.on_signal(lambda: ran.append(1), environ=JOB, rank=0, runner=runner) as handle:
        os.kill(os.getpid(), signal.SIGUSR1)
        os.kill(os.getpid(), signal.SIGUSR1)
    assert ran == [1]
    assert runner.calls == [["scontrol", "requeue", "42"]]
    assert (handle.fired, handle.requeued) == (2, True)
    assert signal.getsignal(signal.SIGUSR1) is before


def test_only_rank_zero_requeues_and_failures_are_reported() -> None:
    runner = Recorder()
    with requeue.on_signal(environ=JOB, rank=3, runner=runner, signum=signal.SIGUSR2) as handle:
        os.kill(os.getpid(), signal.SIGUSR2)
    assert runner.calls == []
    assert handle.requeued is None
    failing = Recorder(status=1)
    with requeue.on_signal(environ=JOB, rank=0, runner=failing) as handle:
        os.kill(os.getpid(), signal.SIGUSR1)
    assert handle.requeued is False


def test_requeue_happens_even_if_the_callback_fails() -> None:
    runner = Recorder()

    def boom() -> None:
        raise RuntimeError("disk full")

    with requeue.on_signal(boom, environ=JOB, rank=0, runner=runner), pytest.raises(RuntimeError, match="disk"):
        os.kill(os.getpid(), signal.SIGUSR1)
    assert runner.calls == [["scontrol", "requeue", "42"]]


def test_array_job_id_and_rank_from_resolve() -> None:
    assert requeue.job_id({"SLURM_JOB_ID": "7", "SLURM_ARRAY_JOB_ID": "5", "SLURM_ARRAY_TASK_ID": "1"}) == "5_1"
    handle = requeue.on_signal(environ={"SLURM_JOB_ID": "9", "MASTER_PORT": "1"}, runner=Recorder())
    handle.uninstall()
    assert handle.rank == 0


@pytest.mark.parametrize(
    ("environ", "error", "variable"),
    [
        ({}, MissingVariable, "SLURM_JOB_ID"),
        ({"SLURM_JOB_ID": "4; rm -rf /"}, InvalidVariable, "SLURM_JOB_ID"),
        ({"SLURM_ARRAY_JOB_ID": "5"}, MissingVariable, "SLURM_ARRAY_TASK_ID"),
        ({"SLURM_ARRAY_JOB_ID": "5", "SLURM_ARRAY_TASK_ID": "x"}, InvalidVariable, "SLURM_ARRAY_TASK_ID"),
    ],
)
def test_bad_job_ids_are_refused_at_install(environ: dict[str, str], error: type[Exception], variable: str) -> None:
    with pytest.raises(error) as info:
        requeue.on_signal(environ=environ, rank=0, runner=Recorder())
    assert getattr(info.value, "variable", None) == variable


def test_only_the_documented_signals() -> None:
    with pytest.raises(InvalidSettings, match="expected one of SIGUSR1, SIGUSR2, SIGTERM"):
        requeue.on_signal(environ=JOB, rank=0, signum=signal.SIGINT)
