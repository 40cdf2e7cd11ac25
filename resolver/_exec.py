"""`cluster-topology exec`: the probes it resolves with, the environment PROGRAM gets, and the exec itself."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from resolver import _check_cli
from resolver import environ as env
from resolver._detect import PROBE_TIMEOUT, require_probes
from resolver._render import exports
from resolver.errors import ProbeFailed
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["HELP", "USAGE", "child_environment", "parser", "probes_without_mpi", "replace"]

USAGE = "[options] -- PROGRAM [ARGS...]"
HELP = f"""\
  exec {USAGE}
        resolve, write the env:// variables (MASTER_ADDR MASTER_PORT WORLD_SIZE RANK
        LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK) and replace this process with
        PROGRAM: srun cluster-topology exec -- python train.py; with --bind-device the
        visibility variables name this process's device alone, so PROGRAM's cuda:0 is its own
"""
DESCRIPTION = (
    "Resolve this process's topology, write the env:// variables and exec PROGRAM (its pid, signals and exit "
    "status are PROGRAM's). On an error: one line on stderr, exit 2, PROGRAM is not started."
)


def parser(prog: str, shared: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`PROG exec`: the options it shares with PROG, `--check` (resolver/_check_cli.py), then PROGRAM [ARGS...]."""
    exec_ = argparse.ArgumentParser(
        prog=f"{prog} exec", usage=f"{prog} exec {USAGE}", description=DESCRIPTION, parents=[shared]
    )
    _check_cli.add_options(exec_, for_exec=True)
    exec_.add_argument("program", nargs=argparse.REMAINDER, metavar="PROGRAM [ARGS...]")
    return exec_


def probes_without_mpi(environ: Mapping[str, str]) -> Probes:
    """The live probes, with the communicator replaced by a TCP exchange at MASTER_ADDR:MASTER_PORT.

    PROGRAM may initialise MPI, and under Open MPI 4 a rank initialises it once only
    (see probes/tcp.py), so the process that execs never does.
    """
    require_probes()
    from probes import system  # after require_probes: a user's probes.py may shadow ours (resolver/_shadow.py)

    def comm() -> Any:
        # only MPI ranks get here: probes.tcp (socket) would add 5.8% to `--format env` under callgrind, and a
        # source module is imported only when needed, as the registry does (mpi: 1.8%)
        from probes.tcp import TcpComm
        from resolver.sources.mpi import launcher  # the MPI source module: as above

        found = launcher(environ)
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name not in environ]
        if found is None or found.size is None or missing:
            unset = " and ".join(missing) or "the launcher's world size"
            raise ProbeFailed(
                "comm",
                "cluster-topology exec does not initialise MPI (PROGRAM may: Open MPI lets a rank do it once) and "
                f"exchanges host names over TCP at MASTER_ADDR:MASTER_PORT instead, but {unset} is not set: "
                "pass them to every rank (mpirun -x MASTER_ADDR=<first host> -x MASTER_PORT=29500)",
            )
        return TcpComm(
            env.integer(environ, found.rank),
            env.integer(environ, found.size, minimum=1),
            env.address(environ, "MASTER_ADDR"),
            env.port(environ, "MASTER_PORT"),
            timeout=PROBE_TIMEOUT,
        )

    return attrs.evolve(system(timeout=PROBE_TIMEOUT), comm=comm)


def child_environment(
    environ: Mapping[str, str], topology: Topology, *, bind: Mapping[str, str] | None = None
) -> dict[str, str]:
    """PROGRAM's environment: `environ` with `exports(topology, bind=bind)` written over it."""
    child = {**environ, **exports(topology, bind=bind)}
    if topology.local_world_size is None:
        child.pop("LOCAL_WORLD_SIZE", None)  # an inherited value would contradict an unknown one
    return child


def replace(program: list[str], environ: Mapping[str, str]) -> int:
    """exec PROGRAM with `environ` (this process becomes it); if that fails, one line on stderr and 2."""
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ; an exec'd program must get the defaults a shell would give it
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvpe(program[0], program, environ)  # noqa: S606 - the user's PROGRAM, as env(1) runs it
    except OSError as exc:
        print(f"error: cannot run {program[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2
