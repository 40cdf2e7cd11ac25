"""`cluster-topology` (or `python -m resolver`): print this process's topology, or run a program in it.

    cluster-topology [options]                     print the topology (text, json, env)
    cluster-topology exec [options] -- PROGRAM ... write the env:// variables and exec PROGRAM
    cluster-topology check [options]               preflight: every process meets rank 0 (resolver/_check_cli.py)

Exit status: 0 resolved; 2 bad input (a TopologyError, bad settings, unreadable env file), with one
line on stderr; `exec` then does not start PROGRAM. A closed stdout (`| head -1`) ends quietly with
141, the status of a tool killed by SIGPIPE. Warnings go to stderr in every format; `--strict`
makes them errors. This module parses arguments and dispatches: the inputs (`_envfile`,
`_offline`), the formats (`_render`), `exec` (`_exec`) and `check` (`_check_cli`) are modules of their own.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import resolver
from resolver import __version__, _check_cli, _offline
from resolver._detect import ALLOW_LOOPBACK, resolve
from resolver._envfile import parse_env_file
from resolver._help import CHECK_HELP, EXEC_HELP, EXEC_USAGE, IFNAME_HELP
from resolver._render import FORMATS, RENDERERS, render, render_env, render_error, render_json, render_text
from resolver._validate import validate
from resolver.environ import check_integer, check_port
from resolver.errors import InvalidSettings, InvalidVariable, TopologyError
from resolver.sources._registry import ENTRIES
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["RENDERERS", "main", "main_exit", "parse_env_file", "render_env", "render_json", "render_text"]

SIGPIPE_STATUS = 128 + 13
_Inputs = tuple[Mapping[str, str], "Probes | None"]  # the environment to resolve, the probes to ask


class _Command(NamedTuple):
    """A subcommand: `PROG NAME USAGE`, its lines in --help, and what parses its arguments and runs it."""

    usage: str
    help: str
    run: Callable[[str, list[str], Mapping[str, str]], int]


def _epilog() -> str:
    commands = "".join(command.help for command in COMMANDS.values())
    return f"""\
commands:
{commands}
{FORMATS}
warnings go to stderr in every format; --strict makes each one an error (exit 2).
A topology spanning several nodes whose main address is loopback (127.0.0.0/8, ::1,
localhost) is refused; --allow-loopback or {ALLOW_LOOPBACK}=1 allows it for nodes
emulated on one host.

{_offline.HELP}
exit status: 0 resolved; 2 a variable, file or setting is wrong (one line on stderr)
"""


def _checked(check: Callable[[str, str], int], name: str) -> Callable[[str], int]:
    """An argparse `type` from an `environ` check, so that a bad value is a usage error naming the option."""

    def parse(raw: str) -> int:
        try:
            return check(name, raw)
        except InvalidVariable as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _options() -> argparse.ArgumentParser:
    """The options `cluster-topology` and each of its commands share."""
    p = argparse.ArgumentParser(add_help=False)
    sources = ", ".join(entry.name for entry in ENTRIES)  # the registry's order: detected, the default, by name
    p.add_argument("--source", metavar="NAME", help=f"force a source: {sources}, or an installed plugin's name")
    p.add_argument("--strict", action="store_true", help="treat every warning as an error (exit 2)")
    p.add_argument(
        "--allow-loopback",
        action="store_true",
        help=f"allow a loopback main address across nodes emulated on one host (as {ALLOW_LOOPBACK}=1)",
    )
    p.add_argument(
        "--bind-device",
        action="store_true",
        help="narrow CUDA_VISIBLE_DEVICES (and the other visibility variables set) to this process's "
        "device, so a program's device 0 is its own (exec, --format env); exit 2 when the device is unknown",
    )
    p.add_argument("--ifname", action="store_true", help=IFNAME_HELP)
    count = _checked(check_integer, "--devices"), _checked(check_integer, "--num-nodes")
    p.add_argument("--devices", type=count[0], metavar="N", help="devices per node you intend to use")
    p.add_argument("--num-nodes", type=count[1], metavar="N", help="number of nodes you intend to use")
    offline = p.add_argument_group("offline (--env-file)")
    offline.add_argument(
        "--env-file",
        metavar="FILE",
        help="resolve a captured environment (KEY=VALUE lines, --format env output, or /proc/PID/environ)",
    )
    offline.add_argument("--hostname", metavar="NAME", help="the host name of the captured process")
    port = _checked(check_port, "--free-port")
    offline.add_argument("--free-port", type=port, metavar="PORT", help="the answer to 'a free port'")
    offline.add_argument(
        "--file",
        action="append",
        default=[],
        metavar="PATH[=LOCAL]",
        help="a file a source may read (a rankfile, a hostfile): PATH, or its copy LOCAL; repeatable",
    )
    return p


def _prog(argv0: str) -> str:
    name = os.path.basename(argv0)
    return "python -m resolver" if name in ("__main__.py", "") else name


def _parser(prog: str) -> argparse.ArgumentParser:
    """The parser of `prog` without a command: print the topology."""
    top = argparse.ArgumentParser(
        prog=prog,
        usage="\n       ".join([f"{prog} [options]", *(f"{prog} {n} {c.usage}" for n, c in COMMANDS.items())]),
        description="Resolve who this process is in a distributed job (rank, world, main address) "
        "from the launcher's environment: one of the sources --source names, or a plugin's.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_options()],
    )
    top.add_argument("--version", action="version", version=f"cluster-topology {__version__}")
    top.add_argument("--format", choices=tuple(RENDERERS), default="text", help="output format (default text)")
    top.add_argument("--explain", action="store_true", help="show each candidate source and why one was chosen")
    return top


def _inputs(args: argparse.Namespace, environ: Mapping[str, str]) -> _Inputs:
    """The environment to resolve and the probes to ask: `--env-file`'s, else the live ones (None: the default)."""
    return _offline.captured(args.env_file, args.hostname, args.free_port, args.file) or (environ, None)


def _resolve(args: argparse.Namespace, environ: Mapping[str, str], probes: Probes | None) -> Topology:
    """`resolve` with the options, then the check of --devices and --num-nodes against the result."""
    if (args.devices is None) != (args.num_nodes is None):
        raise InvalidSettings("--devices and --num-nodes go together: give both to validate")
    topology = resolve(environ, probes, source=args.source, strict=args.strict, allow_loopback=args.allow_loopback)
    if args.devices is not None:
        validate(topology, devices=args.devices, num_nodes=args.num_nodes)
    return topology


def _fail(exc: TopologyError, as_json: bool = False) -> int:
    first, *rest = str(exc).splitlines() or [""]
    print(f"error: {first}", *rest, sep="\n", file=sys.stderr)
    if as_json:
        print(render_error(exc), end="", flush=True)
    return 2


def _warn(topology: Topology) -> None:
    for warning in topology.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _interface(args: argparse.Namespace, topology: Topology, inputs: _Inputs) -> dict[str, str] | None:
    """`--ifname`'s variables (resolver/_exec.py), or None without it."""
    if not args.ifname:
        return None
    from resolver import _exec as exec_  # as in _exec below

    return exec_.interface_variables(args, topology, *inputs, format_=args.format)


def _print(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """`cluster-topology [options]`: the topology in `--format`, after the `--explain` answer when asked."""
    try:
        resolved, probes = _inputs(args, environ)
        # `resolver.explain` imports its module on first use, and only --explain asks: 3.8% of `--format env`
        explanation = resolver.explain(resolved, source=args.source) if args.explain else None
        topology = _resolve(args, resolved, probes)
        _warn(topology)
        extra = _interface(args, topology, (resolved, probes))
        output = render(args.format, topology, explanation, bind=resolved if args.bind_device else None, extra=extra)
    except TopologyError as exc:
        return _fail(exc, as_json=args.format == "json")
    print(output, end="", flush=True)
    return 0


def _exec(prog: str, arguments: list[str], environ: Mapping[str, str]) -> int:
    from resolver import _exec as exec_  # only exec and --ifname load it: 1.6% of --format env, needed under 1.40x

    parser = exec_.parser(prog, _options())
    args = parser.parse_args(arguments)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no PROGRAM: cluster-topology exec [options] -- PROGRAM [ARGS...]")
    checked, interface = _check_cli.run_before_exec(
        args, environ, exec_.probes_without_mpi(environ) if args.check else None
    )
    if checked:
        return checked
    try:
        resolved, offline = _inputs(args, environ)
        probes = exec_.probes_without_mpi(environ) if offline is None else offline
        topology = _resolve(args, resolved, probes)
        if topology.main_address is None or topology.main_port is None:
            raise InvalidSettings(f"the {topology.source} topology has no main address and port: {topology}")
        _warn(topology)
        extra = exec_.interface_variables(args, topology, resolved, probes, known=interface)
        child = exec_.child_environment(environ, topology, bind=resolved if args.bind_device else None, extra=extra)
    except TopologyError as exc:
        return _fail(exc)
    return exec_.replace(program, child)


COMMANDS: dict[str, _Command] = {
    "exec": _Command(EXEC_USAGE, EXEC_HELP, _exec),
    "check": _Command("[options]", CHECK_HELP, _check_cli.main),
}
"""The subcommands, `cluster-topology NAME ...`; without one, `_print` prints the topology."""


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run `cluster-topology` with `argv` (default `sys.argv[1:]`) over `environ` (default `os.environ`)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    prog = _prog(sys.argv[0])
    try:
        if arguments[:1] and arguments[0] in COMMANDS:
            return COMMANDS[arguments[0]].run(prog, arguments[1:], env)
        return _print(_parser(prog).parse_args(arguments), env)
    except BrokenPipeError:
        # the reader went away (| head -1): say nothing more, and end as a tool that SIGPIPE killed
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_STATUS


def main_exit() -> None:
    """The `cluster-topology` console script."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
