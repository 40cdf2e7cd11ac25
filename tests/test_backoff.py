"""The one backoff of the exchange's and the engine's waits: doubling, jittered, capped, bounded by the deadline."""

from __future__ import annotations

import time

import pytest

from probes._backoff import Backoff


def test_the_delay_doubles_up_to_the_cap_with_up_to_as_much_again_at_random(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    backoff = Backoff(time.monotonic() + 3600, 0.4, first=0.05)
    for _ in range(6):
        backoff.pause()
    bases = [0.05, 0.1, 0.2, 0.4, 0.4, 0.4]
    assert all(base <= wait <= 2 * base for wait, base in zip(slept, bases, strict=True)), slept


def test_no_pause_outlasts_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []
    monkeypatch.setattr(time, "sleep", slept.append)
    Backoff(time.monotonic() + 0.001, 10.0, first=5.0).pause()
    Backoff(time.monotonic() - 1, 10.0).pause()
    assert slept[0] <= 0.001 and slept[1] == 0.0
