"""The one "sleep, then double the delay" of the probes and the engine: waiting for a name to resolve
(`probes.exchange.resolve_name`), for rank 0 to listen, for a route to the main address
(`resolver._network`). A module of its own so that the engine's waits need not import the exchange.
"""

from __future__ import annotations

import random
import time

__all__ = ["Backoff"]


class Backoff:
    """Sleep between attempts: `delay` (first `first` seconds) plus up to as much again at random, doubling
    up to `cap`, never past the `deadline` (a `time.monotonic()` instant).

    The random part spreads the attempts of processes that started together (gRPC's connection backoff
    asks the same of its clients), so thousands of them do not retry in step.
    """

    def __init__(self, deadline: float, cap: float, *, first: float = 0.01) -> None:
        self.deadline, self.cap, self.delay = deadline, cap, first

    def pause(self) -> None:
        wait = self.delay * (1 + random.random())  # noqa: S311 - spreading retries, not secrets
        time.sleep(min(wait, max(0.0, self.deadline - time.monotonic())))
        self.delay = min(self.cap, self.delay * 2)
