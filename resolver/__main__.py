"""`cluster-topology` (or `python -m resolver`): print this process's topology, or run a program in it.

    cluster-topology [options]                     print the topology (text, json, env)
    cluster-topology exec [options] -- PROGRAM ... write the env:// variables and exec PROGRAM
    cluster-topology check [options]               preflight: every process meets rank 0 (resolver/_check_cli.py)

Exit status: 0 resolved; 2 bad input (a TopologyError, bad settings, unreadable env file), with one
line on stderr; `exec` then does not start PROGRAM. A closed stdout (`| head -1`) ends quietly with
141, the status of a tool killed by SIGPIPE. Warnings go to stderr in every format; `--strict`
makes them errors.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from resolver import __version__, _check_cli
from resolver._apply import environment
from resolver._detect import ALLOW_LOOPBACK, require_probes, resolve
from resolver._devices import bind
from resolver.environ import check_integer, check_port
from resolver.errors import InvalidSettings, InvalidVariable, ProbeFailed, TopologyError
from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ON_REQUEST
from resolver.topology import Topology

# A format, an option or a command imports what only it uses (json, textwrap, signal, explain,
# validate, the torchrun renderer), so that `--format env` loads no more than it needs.
if TYPE_CHECKING:
    from probes import Probes
    from resolver._explain import Explanation

__all__ = ["RENDERERS", "main", "main_exit", "parse_env_file", "render_env", "render_json", "render_text"]

SOURCES = ", ".join(entry.name for entry in (*DETECTION_ORDER, DEFAULT, *ON_REQUEST))
SIGPIPE_STATUS = 128 + 13

EPILOG = f"""\
commands:
  check [--timeout S] [--format text|json]
        preflight, run by every process: exit 0 healthy, 3 a problem found, 2 unreadable
  exec [options] -- PROGRAM [ARGS...]
        resolve, write the env:// variables (MASTER_ADDR MASTER_PORT WORLD_SIZE RANK
        LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK) and replace this process with
        PROGRAM: srun cluster-topology exec -- python train.py; with --bind-device the
        visibility variables name this process's device alone, so PROGRAM's cuda:0 is its own

formats:
  text  the one-line summary, then every field with where it came from
  json  Topology.to_dict(): {{"schema": 2, ...}}; errors as {{"error": {{...}}}}
  env   `export KEY=value` lines, quoted so that eval reproduces every value:
          env="$(cluster-topology --format env)" || exit 2; eval "$env"
        (a plain eval "$(...)" ignores the status, and the script goes on with RANK unset)
  torchrun  the node arguments for torchrun (--nnodes --node-rank --master-addr --master-port,
        --nproc-per-node when known), for a process alone on its node (a platform's node agent,
        srun --ntasks-per-node=1): torchrun $(python -m resolver --format torchrun) train.py;
        --explain goes to stderr

warnings go to stderr in every format; --strict makes each one an error (exit 2).
A topology spanning several nodes whose main address is loopback (127.0.0.0/8, ::1,
localhost) is refused; --allow-loopback or {ALLOW_LOOPBACK}=1 allows it for nodes
emulated on one host.

--env-file resolves a captured environment offline: KEY=VALUE lines (`env` output), the
quoted lines of --format env, or a NUL-separated /proc/PID/environ. Nothing is asked of
this machine: --hostname, --free-port and --file answer the questions a source asks.

exit status: 0 resolved; 2 a variable, file or setting is wrong (one line on stderr)
"""


def _count(name: str, minimum: int = 0) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            return check_integer(name, raw, minimum)
        except InvalidVariable as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _port(raw: str) -> int:
    try:
        return check_port("--free-port", raw)
    except InvalidVariable as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _options() -> argparse.ArgumentParser:
    """The options `cluster-topology` and `cluster-topology exec` share."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--source", metavar="NAME", help=f"force a source: {SOURCES}, or an installed plugin's name")
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
    p.add_argument("--devices", type=_count("--devices"), metavar="N", help="devices per node you intend to use")
    p.add_argument("--num-nodes", type=_count("--num-nodes"), metavar="N", help="number of nodes you intend to use")
    offline = p.add_argument_group("offline (--env-file)")
    offline.add_argument(
        "--env-file",
        metavar="FILE",
        help="resolve a captured environment (KEY=VALUE lines, --format env output, or /proc/PID/environ)",
    )
    offline.add_argument("--hostname", metavar="NAME", help="the host name of the captured process")
    offline.add_argument("--free-port", type=_port, metavar="PORT", help="the answer to 'a free port'")
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


def _parsers(prog: str) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    shared = _options()
    top = argparse.ArgumentParser(
        prog=prog,
        usage=f"{prog} [options]\n       {prog} exec [options] -- PROGRAM [ARGS...]\n       {prog} check [options]",
        description="Resolve who this process is in a distributed job (rank, world, main address) "
        "from the launcher's environment: torchrun, SLURM, MPI, LSF, Grid Engine, Kubeflow, XLA, or none.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[shared],
    )
    top.add_argument("--version", action="version", version=f"cluster-topology {__version__}")
    top.add_argument("--format", choices=tuple(RENDERERS), default="text", help="output format (default text)")
    top.add_argument("--explain", action="store_true", help="show each candidate source and why one was chosen")
    run = argparse.ArgumentParser(
        prog=f"{prog} exec",
        usage=f"{prog} exec [options] -- PROGRAM [ARGS...]",
        description="Resolve this process's topology, write the env:// variables and exec PROGRAM "
        "(its pid, signals and exit status are PROGRAM's). On an error: one line on stderr, exit 2, "
        "PROGRAM is not started.",
        parents=[shared],
    )
    _check_cli.add_options(run, for_exec=True)
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="PROGRAM [ARGS...]")
    return top, run


# -- reading a captured environment -------------------------------------------------------------------


def parse_env_file(path: str) -> dict[str, str]:
    """A captured environment: NUL-separated `KEY=VALUE` entries (/proc/PID/environ), or lines:
    `KEY=VALUE` (`env` output), with blank lines, `#` comments, an `export ` prefix, and values
    quoted as `--format env` writes them (a quoted value may span lines)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(64 * 1024 * 1024 + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"--env-file {path!r} cannot be read: {exc}") from None
    if len(data) > 64 * 1024 * 1024:
        raise InvalidVariable("--env-file", path, "a captured environment of at most 64 MiB")
    if "\0" in text:
        return _parse_nul(path, text)
    return _parse_lines(path, text)


def _valid_key(key: str) -> bool:
    return bool(key) and key.isascii() and key.replace("_", "a").isalnum() and not key[0].isdigit()


def _parse_nul(path: str, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, entry in enumerate(text.split("\0"), 1):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key or "\n" in key:
            raise InvalidVariable(f"{path}: entry {number}", entry, "a NUL-separated KEY=VALUE entry")
        out[key] = value
    return out


def _parse_lines(path: str, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = text.split("\n")
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[7:].lstrip()
        key, sep, value = stripped.partition("=")
        if not sep or not _valid_key(key):
            raise InvalidVariable(f"{path}:{number}", line, "a KEY=VALUE line")
        if value[:1] in ("'", '"'):  # quoted as a shell word (--format env): it may go on over lines
            first = number
            while True:
                try:
                    words = shlex.split(value)
                except ValueError:  # an unterminated quote: the value continues on the next line
                    if number >= len(lines):
                        raise InvalidVariable(f"{path}:{first}", line, "a closing quote") from None
                    value += "\n" + lines[number]
                    number += 1
                    continue
                break
            if len(words) != 1:
                raise InvalidVariable(f"{path}:{first}", line, "one shell word after '=', as --format env writes")
            value = words[0]
        out[key] = value
    return out


class _Offline:
    """The probes of a captured environment: only what the command line answers."""

    def __init__(self, hostname: str | None, free_port: int | None, files: Sequence[str]) -> None:
        self.hostname_answer = hostname
        self.port_answer = free_port
        self.files: dict[str, str] = {}
        for item in files:
            remote, sep, local = item.partition("=")
            self.files[remote] = local if sep else remote

    def probes(self) -> Probes:
        require_probes()
        from probes import Probes

        return Probes(
            hostname=self.hostname,
            comm=self.comm,
            xla=self.xla,
            free_port=self.free_port,
            read_text=self.read_text,
            which=self.which,
        )

    @staticmethod
    def _unanswered(probe: str, how: str) -> ProbeFailed:
        return ProbeFailed(probe, f"--env-file resolves offline and nothing answers it: {how}")

    def hostname(self) -> str:
        if self.hostname_answer is None:
            raise self._unanswered("hostname", "pass --hostname NAME (the captured process's host)")
        return self.hostname_answer

    def free_port(self) -> int:
        if self.port_answer is None:
            raise self._unanswered("free_port", "pass --free-port PORT, or capture MASTER_PORT")
        return self.port_answer

    def read_text(self, path: str) -> str:
        if path not in self.files:
            raise self._unanswered("read_text", f"pass --file {path} (or --file {path}=COPY) to read {path!r}")
        require_probes()
        from probes import live

        return live.read_text(self.files[path])

    def which(self, name: str) -> str | None:
        raise self._unanswered("which", f"whether {name!r} is on the captured process's PATH is unknown")

    def comm(self) -> Any:
        raise self._unanswered(
            "comm",
            "the MPI ranks cannot be asked; capture MASTER_ADDR, MASTER_PORT and the node rank with the environment",
        )

    def xla(self) -> Any:
        raise self._unanswered("xla", "the TPU runtime of the captured process cannot be asked")


# -- rendering --------------------------------------------------------------------------------------


def render_env(topology: Topology) -> str:
    """Shell `export` lines; `shlex.quote` makes any value survive `eval` unchanged."""
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in environment(topology).items())


def render_text(topology: Topology) -> str:
    import json

    lines = [str(topology)]
    for name, value in topology.to_dict().items():
        if name in ("schema", "provenance", "warnings", "source") or value is None:
            continue
        lines.append(f"  {name:<29} {json.dumps(value):<22} {topology.provenance.get(name, '')}".rstrip())
    return "\n".join(lines) + "\n"


def render_json(topology: Topology) -> str:
    import json

    return json.dumps(topology.to_dict(), indent=2) + "\n"


def _wrapped(explanation: Explanation, prefix: str = "") -> str:
    """The explanation, each line wrapped to the terminal's width (`COLUMNS` when set); into a pipe
    or a file, one line per candidate, for grep."""
    import shutil
    import textwrap

    if "COLUMNS" not in os.environ and not sys.stdout.isatty():
        return "".join(f"{prefix}{line}\n" for line in str(explanation).splitlines())
    width = max(40, shutil.get_terminal_size((80, 24)).columns - 1) - len(prefix)
    return "".join(
        f"{prefix}{part}\n"
        for line in str(explanation).splitlines()
        for part in textwrap.wrap(line, width, subsequent_indent=" " * 16, break_on_hyphens=False) or [""]
    )


def _text(topology: Topology, explanation: Explanation | None) -> str:
    return ("" if explanation is None else _wrapped(explanation) + "\n") + render_text(topology)


def _json(topology: Topology, explanation: Explanation | None) -> str:
    if explanation is None:
        return render_json(topology)
    import json

    return json.dumps({"explain": explanation.to_dict(), "topology": topology.to_dict()}, indent=2) + "\n"


def _env(topology: Topology, explanation: Explanation | None) -> str:
    return ("" if explanation is None else _wrapped(explanation, "# ")) + render_env(topology)


def _exports(changes: Mapping[str, str]) -> str:
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in changes.items())


def _torchrun(topology: Topology, explanation: Explanation | None) -> str:
    from resolver._torchrun import render_torchrun

    arguments = render_torchrun(topology)
    if explanation is not None:  # stdout holds only the arguments
        sys.stderr.write(_wrapped(explanation))
    return arguments


RENDERERS: dict[str, Callable[[Topology, Explanation | None], str]] = {
    "text": _text,
    "json": _json,
    "env": _env,
    "torchrun": _torchrun,
}
"""`--format NAME`: the topology (and the `--explain` answer, when asked) as text for stdout; a
renderer may raise a TopologyError (the record cannot be said in that format)."""


# -- running ------------------------------------------------------------------------------------------


def _without_mpi(environ: Mapping[str, str]) -> Probes:
    """The live probes, with the communicator replaced by a TCP exchange at MASTER_ADDR:MASTER_PORT.

    For `exec`: PROGRAM may initialise MPI, and under Open MPI 4 a rank initialises it once only
    (see probes/tcp.py), so the process that execs never does.
    """
    import attrs

    from resolver._detect import PROBE_TIMEOUT

    require_probes()
    from probes import system

    def comm() -> Any:
        from probes.tcp import TcpComm
        from resolver import environ as env
        from resolver.sources.mpi import launcher

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


def _resolve(
    args: argparse.Namespace, environ: Mapping[str, str], *, running: bool = False
) -> tuple[Topology, Mapping[str, str]]:
    probes: Probes | None = _without_mpi(environ) if running else None
    if args.env_file:
        environ = parse_env_file(args.env_file)
        probes = _Offline(args.hostname, args.free_port, args.file).probes()
    elif args.hostname is not None or args.free_port is not None or args.file:
        raise InvalidSettings(
            "--hostname, --free-port and --file answer for a captured environment: use them with --env-file"
        )
    if (args.devices is None) != (args.num_nodes is None):
        raise InvalidSettings("--devices and --num-nodes go together: give both to validate")
    topology = resolve(environ, probes, source=args.source, strict=args.strict, allow_loopback=args.allow_loopback)
    if args.devices is not None:
        from resolver._validate import validate

        validate(topology, devices=args.devices, num_nodes=args.num_nodes)
    return topology, environ


def _fail(exc: TopologyError, as_json: bool = False) -> int:
    first, *rest = str(exc).splitlines() or [""]
    print(f"error: {first}", *rest, sep="\n", file=sys.stderr)
    if as_json:
        import json

        _write(json.dumps({"error": exc.to_dict()}) + "\n")
    return 2


def _warn(topology: Topology) -> None:
    for warning in topology.warnings:
        print(f"warning: {warning}", file=sys.stderr)


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    top, run = _parsers(_prog(sys.argv[0]))
    env = os.environ if environ is None else environ
    try:
        if arguments[:1] == ["exec"]:
            return _exec(run, arguments[1:], env)
        if arguments[:1] == ["check"]:
            commands = argparse.ArgumentParser(prog=top.prog).add_subparsers()
            return _check_cli.run(_check_cli.add_parser(commands).parse_args(arguments[1:]), env)
        args = top.parse_args(arguments)
        try:
            explanation: Explanation | None = None
            if args.explain:
                from resolver._explain import explain

                explanation = explain(parse_env_file(args.env_file) if args.env_file else env, source=args.source)
            topology, resolved = _resolve(args, env)
            _warn(topology)
            output = RENDERERS[args.format](topology, explanation)
            if args.bind_device:
                if args.format != "env":
                    raise InvalidSettings(
                        f"--bind-device changes the environment: it goes with exec or --format env, not {args.format}",
                        variable="--bind-device",
                        value=args.format,
                        expected="--format env",
                    )
                output += _exports(bind(topology, resolved))
        except TopologyError as exc:
            return _fail(exc, as_json=args.format == "json")
        _write(output)
    except BrokenPipeError:
        # the reader went away (| head -1): say nothing more, and end as a tool that SIGPIPE killed
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return SIGPIPE_STATUS
    return 0


def _exec(parser: argparse.ArgumentParser, arguments: list[str], environ: Mapping[str, str]) -> int:
    args = parser.parse_args(arguments)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no PROGRAM: cluster-topology exec [options] -- PROGRAM [ARGS...]")
    checked = _check_cli.run_before_exec(args, environ, _without_mpi(environ) if args.check else None)
    if checked:
        return checked
    try:
        topology, resolved = _resolve(args, environ, running=True)
        if topology.main_address is None or topology.main_port is None:
            raise InvalidSettings(f"the {topology.source} topology has no main address and port: {topology}")
    except TopologyError as exc:
        return _fail(exc)
    _warn(topology)
    child = {**environ, **environment(topology)}
    if topology.local_world_size is None:
        child.pop("LOCAL_WORLD_SIZE", None)  # an inherited value would contradict an unknown one
    if args.bind_device:
        try:
            child.update(bind(topology, resolved))
        except TopologyError as exc:
            return _fail(exc)
    return _replace(program, child)


def _replace(program: list[str], environ: dict[str, str]) -> int:
    """exec PROGRAM with `environ` (this process becomes it); if that fails, one line and 2."""
    sys.stdout.flush()
    sys.stderr.flush()
    import signal

    # Python ignores SIGPIPE and SIGXFSZ; an exec'd program must get the defaults a shell would give it
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        os.execvpe(program[0], program, environ)  # noqa: S606 - the user's PROGRAM, as env(1) runs it
    except OSError as exc:
        print(f"error: cannot run {program[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 2


def main_exit() -> None:
    """The `cluster-topology` console script."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
