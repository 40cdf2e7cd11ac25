"""Fixtures that start real launchers. Missing launchers skip locally and fail in CI."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.launchers import slurm_cluster as harness


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[harness.Cluster]:
    """A running 4-node SLURM cluster (ci1..ci4, partition debug), shared by the session.

    Stopped at the end only if this session started it; one already running is reused.
    """
    problem = None
    if not harness.installed():
        problem = "SLURM is not installed (apt-get install slurm-wlm munge)"
    elif os.geteuid() != 0:
        problem = "the local SLURM cluster needs root"
    if problem:
        if os.environ.get("CI"):
            pytest.fail(problem)
        pytest.skip(problem)
    cluster = harness.start(4)
    try:
        yield cluster
    finally:
        if not cluster.reused:
            cluster.stop()
