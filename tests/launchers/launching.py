"""Running a real launcher from a test: bounded in time, and nothing of it left behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import pytest


def launch(
    args: list[str],
    env: Mapping[str, str],
    *,
    timeout: float,
    answers_in: Path | None = None,
    count: int = 0,
) -> str:
    """Run a launcher in its own session; on timeout, or when it is done, kill what is left of it.

    With `answers_in`, first wait (bounded) until `count` answer files are there: workers spawned
    by the process (Fabric's, say) may still be writing theirs when it exits. Returns the
    output (stdout and stderr); a non-zero exit fails the test with the output's tail.
    """
    with subprocess.Popen(
        args, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"{args!r} did not finish in {timeout} s:\n{output[-5000:]}")
        finally:
            deadline = time.monotonic() + 60
            while answers_in is not None and len(list(answers_in.glob("*.json"))) < count:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{args!r} exited {proc.returncode}:\n{output[-5000:]}"
    return output
