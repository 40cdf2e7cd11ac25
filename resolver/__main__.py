"""`python -m resolver` / `cluster-topology`: print this process's topology.

Exit status: 0 resolved; 2 bad input (a TopologyError, bad settings, unreadable env file).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from resolver import __version__
from resolver._apply import variables
from resolver._detect import resolve
from resolver._explain import explain
from resolver._torchrun import render_torchrun
from resolver._validate import validate
from resolver.errors import InvalidVariable, TopologyError
from resolver.topology import Topology

__all__ = ["main", "main_exit", "parse_env_file", "render_env"]

EPILOG = """\
formats:
  text  the one-line summary, then every field with where it came from
  json  Topology.to_dict(): {"schema": 1, ...}; errors as {"error": {...}}
  env   `export KEY=value` lines for a shell: eval "$(python -m resolver --format env)";
        MASTER_ADDR MASTER_PORT WORLD_SIZE RANK LOCAL_RANK NODE_RANK, LOCAL_WORLD_SIZE when
        known, and CLUSTER_TOPOLOGY_{SOURCE,NUM_NODES,JOB_ID,JOB_NAME}; quoted so that eval
        reproduces every value exactly
  torchrun  the node arguments for torchrun (--nnodes --node-rank --master-addr --master-port,
        --nproc-per-node when known), for a process alone on its node (a platform's node agent,
        srun --ntasks-per-node=1): torchrun $(python -m resolver --format torchrun) train.py

exit status: 0 resolved; 2 a variable, file or setting is wrong (one line on stderr)
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m resolver",
        description="Resolve who this process is in a distributed job (rank, world, main address) "
        "from the launcher's environment: torchrun, SLURM, MPI, LSF, Kubeflow, XLA, or none.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"cluster-topology {__version__}")
    p.add_argument(
        "--format", choices=("text", "json", "env", "torchrun"), default="text", help="output format (default text)"
    )
    p.add_argument("--source", metavar="NAME", help="force a source (torchelastic, slurm, kubeflow, ...)")
    p.add_argument("--explain", action="store_true", help="show each candidate source and why one was chosen")
    p.add_argument(
        "--env-file",
        metavar="FILE",
        help="resolve the KEY=VALUE lines of FILE (a captured environment) instead of this process's",
    )
    p.add_argument("--devices", type=int, metavar="N", help="devices per node you intend to use (validates)")
    p.add_argument("--num-nodes", type=int, metavar="N", help="number of nodes you intend to use (validates)")
    return p


def parse_env_file(path: str) -> dict[str, str]:
    """`KEY=VALUE` lines (blank lines, `#` comments and an `export ` prefix allowed)."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"--env-file {path!r} cannot be read: {exc}") from None
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[7:].lstrip()
        key, sep, value = stripped.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum() or not key.isascii():
            raise InvalidVariable(f"{path}:{number}", line, "a KEY=VALUE line")
        out[key] = value
    return out


def render_env(topology: Topology) -> str:
    """Shell `export` lines; `shlex.quote` makes any value survive `eval` unchanged."""
    pairs = variables(topology, ranks=True)
    extra: dict[str, Any] = {
        "LOCAL_WORLD_SIZE": topology.local_world_size,
        "CLUSTER_TOPOLOGY_SOURCE": topology.source,
        "CLUSTER_TOPOLOGY_NUM_NODES": topology.num_nodes,
        "CLUSTER_TOPOLOGY_JOB_ID": topology.job_id,
        "CLUSTER_TOPOLOGY_JOB_NAME": topology.job_name,
    }
    pairs.update({k: str(v) for k, v in extra.items() if v is not None})
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in pairs.items())


def render_text(topology: Topology) -> str:
    lines = [str(topology)]
    for name, value in topology.to_dict().items():
        if name in ("schema", "provenance", "warnings", "source") or value is None:
            continue
        lines.append(f"  {name:<29} {json.dumps(value):<22} {topology.provenance.get(name, '')}".rstrip())
    lines.extend(f"warning: {w}" for w in topology.warnings)
    return "\n".join(lines) + "\n"


def _error_json(exc: BaseException) -> str:
    detail: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    for attr in ("variable", "value", "expected", "probe", "field"):
        if hasattr(exc, attr):
            detail[attr] = getattr(exc, attr) if attr != "value" else str(getattr(exc, attr))
    return json.dumps({"error": detail})


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        env = parse_env_file(args.env_file) if args.env_file else (os.environ if environ is None else environ)
        if (args.devices is None) != (args.num_nodes is None):
            raise TopologyError("--devices and --num-nodes go together: give both to validate")
        explanation = explain(env, source=args.source) if args.explain else None
        topology = resolve(env, source=args.source)
        if args.devices is not None:
            validate(topology, devices=args.devices, num_nodes=args.num_nodes)
        torchrun = render_torchrun(topology) if args.format == "torchrun" else ""
    except TopologyError as exc:
        first, *rest = str(exc).splitlines() or [""]
        print(f"error: {first}", *rest, sep="\n", file=sys.stderr)
        if args.format == "json":
            print(_error_json(exc))
        return 2
    if args.format == "json":
        data: dict[str, Any] = topology.to_dict()
        if explanation is not None:
            data = {"explain": explanation.to_dict(), "topology": data}
        print(json.dumps(data, indent=2))
    elif args.format == "torchrun":  # stdout holds only the arguments: the explanation goes to stderr
        if explanation is not None:
            print(explanation, file=sys.stderr)
        sys.stdout.write(torchrun)
    elif args.format == "env":
        if explanation is not None:
            sys.stdout.write("".join(f"# {line}\n" for line in str(explanation).splitlines()))
        sys.stdout.write(render_env(topology))
    else:
        if explanation is not None:
            print(explanation, end="\n\n")
        sys.stdout.write(render_text(topology))
    return 0


def main_exit() -> None:
    """The `cluster-topology` console script."""
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
