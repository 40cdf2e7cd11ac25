"""Fixtures that start real launchers. Missing launchers skip locally and fail in CI."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI, require_system_tests, require_tool, terminate_interrupts
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


@pytest.fixture
def fake_ssh(tmp_path: Path) -> Path:
    """An `ssh` for the MPI launchers (and JAX's, the check's mpirun): runs the remote command in new
    UTS+mount namespaces named after the host, with nodeA and nodeB in a private /etc/hosts."""
    require_tool("unshare", "mount", "hostname")
    hosts = tmp_path / "fake-ssh-hosts"  # its own name: a test may also write a hosts file
    hosts.write_text(Path("/etc/hosts").read_text() + "\n127.0.0.1 nodeA nodeB\n")
    script = tmp_path / "fake-ssh"
    script.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        # fake-ssh [options] HOST COMMAND...: COMMAND on "host" HOST (a UTS namespace of that name)
        while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
        host=$1; shift
        exec unshare --uts --mount sh -c \\
            'hostname "$1" && mount --bind "$2" /etc/hosts && exec sh -c "$3"' fake-ssh "$host" {hosts} "$*"
        """)
    )
    script.chmod(0o755)
    return script
