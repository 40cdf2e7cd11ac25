"""`cluster-topology check` and `cluster-topology exec --check`: the CLI over `resolver.check`.

    srun cluster-topology check [--timeout S] [--format text|json]

Exit status: 0 the job is healthy; 3 a problem was found (on every process, not only the one at
fault); 2 this process cannot read its own environment and cannot even find the main endpoint.
Text: one line when healthy, else one line per problem; rank 0 adds the job's map, one line per
node. JSON: one object on stdout, nothing else. Rank 0's progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

from resolver.errors import TopologyError

if TYPE_CHECKING:
    from probes import Probes
    from resolver._check import CheckReport

__all__ = ["HEALTHY", "PROBLEM", "UNREADABLE", "add_options", "add_parser", "main", "run", "run_before_exec"]

HEALTHY, UNREADABLE, PROBLEM = 0, 2, 3
DEFAULT_TIMEOUT = 60.0


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value < 1e6:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"--timeout {raw!r}: expected a number of seconds > 0")
    return value


def add_options(parser: argparse.ArgumentParser, *, for_exec: bool = False) -> None:
    """The check's own options (`exec` takes `--check` and `--check-timeout`)."""
    if for_exec:
        parser.add_argument(
            "--check",
            action="store_true",
            help="first run the preflight check with every other process; start PROGRAM only if it passes (else 3)",
        )
        parser.add_argument(
            "--check-timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="S", help="seconds the check may take"
        )
        return
    parser.add_argument(
        "--timeout", type=_seconds, default=DEFAULT_TIMEOUT, metavar="S", help="seconds to wait for every process (60)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    parser.add_argument("--source", metavar="NAME", help="force a source by name")
    parser.add_argument(
        "--allow-loopback", action="store_true", help="allow a loopback main address across nodes emulated on one host"
    )


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `check` on an argparse subparsers object."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help="preflight: meet every process of the job at the main endpoint and report what would hang it",
        description="Run by every process of the job where training would run (srun cluster-topology check). "
        "Every process resolves its record, all meet at the main endpoint, and each prints rank 0's verdict. "
        "Exit 0 healthy, 3 a problem found, 2 this process's own environment is unreadable.",
    )
    add_options(parser)
    return parser


@contextmanager
def _progress_to(stream: TextIO) -> Iterator[None]:
    """Rank 0's progress (the `resolver` logger's INFO lines) on `stream` while the check runs."""
    import logging  # only the check logs: `--format env` should not load it (tests/test_imports.py)

    logger = logging.getLogger("resolver")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    previous = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _check(
    environ: Mapping[str, str],
    probes: Probes | None,
    *,
    timeout: float,
    source: str | None,
    allow_loopback: bool,
    ifname: bool = False,
) -> CheckReport:
    from resolver._check import check  # sockets and selectors load only when a check runs, not for `--format env`

    with _progress_to(sys.stderr):
        return check(environ, probes, timeout=timeout, source=source, allow_loopback=allow_loopback, ifname=ifname)


def _error(exc: TopologyError, as_json: bool) -> int:
    first, *rest = str(exc).splitlines() or [""]
    print(f"error: {first}", *rest, sep="\n", file=sys.stderr)
    if as_json:
        sys.stdout.write(json.dumps({"ok": False, "error": exc.to_dict()}) + "\n")
        sys.stdout.flush()
    return UNREADABLE


def run(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """`cluster-topology check`: print the report, return the exit status."""
    as_json = args.format == "json"
    try:
        report = _check(environ, None, timeout=args.timeout, source=args.source, allow_loopback=args.allow_loopback)
    except TopologyError as exc:
        return _error(exc, as_json)
    if as_json:
        sys.stdout.write(json.dumps(report.to_dict()) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in report.lines()))
    sys.stdout.flush()
    return HEALTHY if report.ok else PROBLEM


def main(prog: str, arguments: list[str], environ: Mapping[str, str]) -> int:
    """`PROG check [options]`: parse `arguments`, run the check, return the exit status."""
    parser = add_parser(argparse.ArgumentParser(prog=prog).add_subparsers())
    return run(parser.parse_args(arguments), environ)


def run_before_exec(
    args: argparse.Namespace, environ: Mapping[str, str], probes: Probes | None
) -> tuple[int, str | None]:
    """`exec --check`: the check first, its report on stderr (stdout is PROGRAM's); 0 lets PROGRAM start.
    Also the interface toward rank 0 the check found (for `--ifname`), or None."""
    if not getattr(args, "check", False):
        return HEALTHY, None
    try:
        report = _check(
            environ,
            probes,
            timeout=args.check_timeout,
            source=args.source,
            allow_loopback=args.allow_loopback,
            ifname=getattr(args, "ifname", False),
        )
    except TopologyError as exc:
        return _error(exc, False), None
    shown = report.lines()
    warned = [line for line in shown if line.startswith("warning: ")]
    lines = ([line for line in shown if not line.startswith("warning: ")] if not report.ok else shown[:1]) + warned
    sys.stderr.write("".join(f"check: {line}\n" for line in lines))
    sys.stderr.flush()
    return (HEALTHY if report.ok else PROBLEM), report.interface
