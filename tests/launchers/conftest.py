"""Fixtures that start real launchers. Missing launchers skip locally and fail in CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, require_system_tests, terminate_interrupts
from tests.launchers import slurm_cluster as harness

SLURM_STATE_DIR = "CLUSTER_TOPOLOGY_SLURM_STATE_DIR"  # a cluster started by the CLI, to reuse


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[harness.Cluster]:
    """A running 4-node SLURM cluster (ci1..ci4, partition debug), shared by the session.

    A system test (tests/conftest.py): runs only with CLUSTER_TOPOLOGY_SYSTEM_TESTS=1. Each run
    starts its own cluster (a new state folder, free ports, its own munged) and stops it at the
    end, also when interrupted (Ctrl-C, SIGTERM, SIGHUP) or when a fixture fails; /etc/hosts and
    /dev are left as they were. With CLUSTER_TOPOLOGY_SLURM_STATE_DIR=DIR, a healthy cluster that
    `python tests/launchers/slurm_cluster.py start --state-dir DIR` started is used and left running.
    """
    require_system_tests(
        "starts a SLURM cluster (munged, slurmctld, 4 slurmd), maps ci1-ci4 in /etc/hosts, creates /dev/nvidia0-3"
    )
    problem = None
    if not harness.installed():
        problem = "SLURM is not installed (apt-get install slurm-wlm munge)"
    if problem:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    given = os.environ.get(SLURM_STATE_DIR)
    if given:
        healthy, status = harness.status(Path(given))
        if not healthy:
            pytest.fail(
                f"{SLURM_STATE_DIR}={given}: expected a healthy cluster started there by "
                f"`python tests/launchers/slurm_cluster.py start --state-dir {given}`; its status:\n{status}"
            )
    with terminate_interrupts():
        cluster = harness.start(4, state_dir=Path(given)) if given else harness.start(4)
        try:
            yield cluster
        finally:
            if not cluster.reused:
                cluster.stop(remove=True)
