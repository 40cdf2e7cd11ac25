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
from resolver._help import EXEC_USAGE
from resolver._render import exports
from resolver.errors import ProbeFailed
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "IFNAME_TIMEOUT",
    "child_environment",
    "interface_variables",
    "parser",
    "probes_without_mpi",
    "replace",
]

DESCRIPTION = (
    "Resolve this process's topology, write the env:// variables and exec PROGRAM (its pid, signals and exit "
    "status are PROGRAM's). On an error: one line on stderr, exit 2, PROGRAM is not started."
)


def parser(prog: str, shared: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`PROG exec`: the options it shares with PROG, `--check` (resolver/_check_cli.py), then PROGRAM [ARGS...]."""
    exec_ = argparse.ArgumentParser(
        prog=f"{prog} exec", usage=f"{prog} exec {EXEC_USAGE}", description=DESCRIPTION, parents=[shared]
    )
    _check_cli.add_options(exec_, for_exec=True)
    exec_.add_argument("program", nargs=argparse.REMAINDER, metavar="PROGRAM [ARGS...]")
    return exec_


def probes_without_mpi(environ: Mapping[str, str]) -> Probes:
    """The live probes, with the communicator replaced by a TCP exchange at MASTER_ADDR:MASTER_PORT.

    PROGRAM may initialise MPI, and under Open MPI 4 a rank initialises it once only
    (see probes/tcp.py), so the process that execs never does. The MPI source asks that exchange
    for its `census`: the ranks of a host meet rank 0 through one leader, and each learns its own
    place, so rank 0 holds a connection per host and sends no rank every rank's host name.
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
        size = env.integer(environ, found.size, minimum=1)
        local = None if found.local_size is None else env.optional_integer(environ, found.local_size, minimum=1)
        local_rank = None if found.local_rank is None else env.optional_integer(environ, found.local_rank)
        return TcpComm(
            env.integer(environ, found.rank),
            size,
            env.address(environ, "MASTER_ADDR"),
            env.port(environ, "MASTER_PORT"),
            timeout=PROBE_TIMEOUT,
            # the ranks on this host, as the launcher says: host leaders go to rank 0 once theirs came, and
            # rank 0 sizes its open-file limit for that many hosts (a wrong value costs a wait, never a result)
            local_size=local if local is not None and local <= size else None,
            local_rank=local_rank,
        )

    return attrs.evolve(system(timeout=PROBE_TIMEOUT), comm=comm)


def child_environment(
    environ: Mapping[str, str],
    topology: Topology,
    *,
    bind: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """PROGRAM's environment: `environ` with `exports(topology, bind=bind, extra=extra)` written over it."""
    child = {**environ, **exports(topology, bind=bind, extra=extra)}
    if topology.local_world_size is None:
        child.pop("LOCAL_WORLD_SIZE", None)  # an inherited value would contradict an unknown one
    return child


IFNAME_TIMEOUT = 60.0  # seconds `--format env --ifname` waits for a main address that does not resolve yet


def interface_variables(
    args: argparse.Namespace,
    topology: Topology,
    environ: Mapping[str, str],
    probes: Probes | None,
    *,
    known: str | None = None,
    format_: str = "env",
) -> dict[str, str] | None:
    """`--ifname` (None without it): GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (`=name`, NCCL's exact form)
    naming this host's interface toward the main address (`known`, when the check found it), but for those
    `environ` sets (the user's value wins). A main address that does not resolve yet is waited for
    (`--check-timeout` under exec, else IFNAME_TIMEOUT), with a line on stderr every 3 s. With a `format_`
    other than env (`--format`), nothing is asked: {} for render to refuse."""
    if not getattr(args, "ifname", False):
        return None
    if format_ != "env":
        return {}  # render() refuses --ifname with any other format, naming both
    from resolver._network import ifname_exports  # as below

    if known is not None:
        return ifname_exports(environ, known)
    timeout = getattr(args, "check_timeout", IFNAME_TIMEOUT)
    require_probes()
    from probes import system  # after require_probes, as above
    from resolver._network import ifname_exports, toward_main  # ctypes, for the interfaces: only with --ifname

    def waiting(why: str, waited: float) -> None:
        print(
            f"cluster-topology: {topology.main_address} does not resolve yet ({why}); waited {waited:.0f} s",
            file=sys.stderr,
        )

    interface = toward_main(
        topology.main_address,
        probes if probes is not None else system(),
        timeout=timeout,
        spans_nodes=_spans_nodes(topology) and topology.node_rank == 0,
        on_wait=waiting,
    )
    return ifname_exports(environ, interface)


def _spans_nodes(topology: Topology) -> bool:
    """Whether the job runs on more than one node: its node count, else more processes than this node's."""
    if topology.num_nodes is not None:
        return topology.num_nodes > 1
    return topology.local_world_size is not None and topology.world_size > topology.local_world_size


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
