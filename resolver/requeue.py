"""SLURM auto-requeue, an effect: on a signal, run the user's callback, then `scontrol requeue` once.

    with resolver.requeue.on_signal(save_checkpoint):          # SIGUSR1, as Lightning
        train()

Submit with `sbatch --signal=B:USR1@90` (B: sends it to the batch script) or `--signal=USR1@90`
(to every task: the callback runs on every rank, the requeue on global rank 0 only).
The previous handler is restored on exit.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence
from types import FrameType, TracebackType
from typing import Any

from resolver._detect import resolve
from resolver.errors import InvalidSettings, InvalidVariable, MissingVariable

__all__ = ["SIGNALS", "Requeue", "Runner", "job_id", "on_signal"]

SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)
_JOB_ID = re.compile(r"[0-9]{1,18}")

Runner = Callable[[Sequence[str]], int]


def job_id(environ: Mapping[str, str]) -> str:
    """The id `scontrol requeue` needs: `ARRAYJOB_TASK` for an array task, else `SLURM_JOB_ID`."""
    if "SLURM_ARRAY_JOB_ID" in environ:
        parts = [("SLURM_ARRAY_JOB_ID", environ["SLURM_ARRAY_JOB_ID"])]
        if "SLURM_ARRAY_TASK_ID" not in environ:
            raise MissingVariable("SLURM_ARRAY_TASK_ID", "the array task id beside SLURM_ARRAY_JOB_ID")
        parts.append(("SLURM_ARRAY_TASK_ID", environ["SLURM_ARRAY_TASK_ID"]))
    elif "SLURM_JOB_ID" in environ:
        parts = [("SLURM_JOB_ID", environ["SLURM_JOB_ID"])]
    else:
        raise MissingVariable("SLURM_JOB_ID", "a SLURM job id: requeue works only inside a SLURM job")
    for name, value in parts:
        if not _JOB_ID.fullmatch(value):
            raise InvalidVariable(name, value, "a decimal job id")
    return "_".join(value for _, value in parts)


def _scontrol(args: Sequence[str]) -> int:
    import subprocess  # lazily: subprocess costs more to import than the whole resolve

    return subprocess.run(list(args), check=False).returncode


class Requeue:
    """An installed handler. `fired` counts signals, `requeued` says whether scontrol succeeded."""

    def __init__(
        self,
        callback: Callable[[], object] | None,
        *,
        signum: int,
        environ: Mapping[str, str],
        rank: int,
        runner: Runner,
    ) -> None:
        if signum not in SIGNALS:
            names = ", ".join(signal.Signals(s).name for s in SIGNALS)
            raise InvalidSettings(f"signum={signum!r} is invalid: expected one of {names}")
        self.job = job_id(environ)  # checked now, not when the signal arrives
        self.callback = callback
        self.signum = signal.Signals(signum)
        self.rank = rank
        self.runner = runner
        self.fired = 0
        self.requeued: bool | None = None  # None: not tried (not yet, or not this rank)
        self._previous: Any = None
        self._installed = False

    def install(self) -> Requeue:
        if not self._installed:
            self._previous = signal.signal(self.signum, self._handle)
            self._installed = True
        return self

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(self.signum, self._previous)
            self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.fired += 1
        if self.fired > 1:  # once: SLURM may repeat the signal while the job winds down
            return
        try:
            if self.callback is not None:
                self.callback()
        finally:
            if self.rank == 0:
                self.requeued = self.runner(["scontrol", "requeue", self.job]) == 0

    def __enter__(self) -> Requeue:
        return self.install()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.uninstall()


def on_signal(
    callback: Callable[[], object] | None = None,
    *,
    signum: int = signal.SIGUSR1,
    environ: Mapping[str, str] | None = None,
    rank: int | None = None,
    runner: Runner = _scontrol,
) -> Requeue:
    """Install the requeue handler (also a context manager that restores the previous one).

    `rank` defaults to the global rank `resolve(environ)` gives; only rank 0 calls scontrol.
    `runner` runs the scontrol command line and returns its exit status (tests inject one).
    """
    env = os.environ if environ is None else environ
    if rank is None:
        rank = resolve(env).global_rank
    return Requeue(callback, signum=signum, environ=env, rank=rank, runner=runner).install()
