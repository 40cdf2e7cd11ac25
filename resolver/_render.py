"""The output formats of `cluster-topology --format NAME`, and the variables `exec` and `--format env` set."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from resolver._apply import environment
from resolver._devices import bind as bind_device
from resolver._torchrun import render_torchrun
from resolver.errors import InvalidSettings, TopologyError
from resolver.topology import SCHEMA, Topology

if TYPE_CHECKING:
    from resolver._explain import Explanation  # only --explain makes one, and loads its module (resolver/__main__.py)

__all__ = [
    "FORMATS",
    "RENDERERS",
    "Renderer",
    "exports",
    "render",
    "render_env",
    "render_error",
    "render_json",
    "render_text",
]

Renderer = Callable[[Topology, "Explanation | None"], str]


def exports(
    topology: Topology, *, bind: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The variables `exec` sets and `--format env` exports: `environment(topology)`, and given `bind`
    (the environment resolved, for `--bind-device`) the visibility variables narrowed to this process's
    device (`resolver._devices.bind`); then `extra` (`--ifname`'s interface variables)."""
    out = environment(topology)
    if bind is not None:
        out.update(bind_device(topology, bind))
    out.update(extra or {})
    return out


def render_env(
    topology: Topology, *, bind: Mapping[str, str] | None = None, extra: Mapping[str, str] | None = None
) -> str:
    """`exports(topology, bind=bind, extra=extra)` as `export` lines; `shlex.quote` makes any value survive
    `eval` unchanged."""
    lines = exports(topology, bind=bind, extra=extra).items()
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in lines)


def render_text(topology: Topology) -> str:
    """The one-line summary, then each known field, its value and where it came from."""
    lines = [str(topology)]
    for name, value in topology.to_dict().items():
        if name in ("schema", "provenance", "warnings", "source") or value is None:
            continue
        lines.append(f"  {name:<29} {json.dumps(value):<22} {topology.provenance.get(name, '')}".rstrip())
    return "\n".join(lines) + "\n"


def render_json(topology: Topology) -> str:
    """`Topology.to_dict()` as indented JSON."""
    return json.dumps(topology.to_dict(), indent=2) + "\n"


def render_error(error: TopologyError) -> str:
    """`--format json`'s answer when resolving failed: `{"error": {...}}` on one line."""
    return json.dumps({"error": error.to_dict()}) + "\n"


def _text(topology: Topology, explanation: Explanation | None) -> str:
    return ("" if explanation is None else explanation.wrapped() + "\n") + render_text(topology)


def _json(topology: Topology, explanation: Explanation | None) -> str:
    if explanation is None:
        return render_json(topology)
    return json.dumps({"explain": explanation.to_dict(), "topology": topology.to_dict()}, indent=2) + "\n"


def _env(
    topology: Topology,
    explanation: Explanation | None,
    bind: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    return ("" if explanation is None else explanation.wrapped("# ")) + render_env(topology, bind=bind, extra=extra)


def _torchrun(topology: Topology, explanation: Explanation | None) -> str:
    arguments = render_torchrun(topology)
    if explanation is not None:  # stdout holds only the arguments
        sys.stderr.write(explanation.wrapped())
    return arguments


RENDERERS: dict[str, Renderer] = {"text": _text, "json": _json, "env": _env, "torchrun": _torchrun}
"""`--format NAME`: the topology (and the `--explain` answer, when asked) as text for stdout; a
renderer may raise a TopologyError (the record cannot be said in that format)."""
FORMATS = f"""\
formats:
  text  the one-line summary, then every field with where it came from
  json  Topology.to_dict(): {{"schema": {SCHEMA}, ...}}; errors as {{"error": {{...}}}}
  env   `export KEY=value` lines, quoted so that eval reproduces every value:
          env="$(cluster-topology --format env)" || exit 2; eval "$env"
        (a plain eval "$(...)" ignores the status, and the script goes on with RANK unset)
  torchrun  the node arguments for torchrun (--nnodes --node-rank --master-addr --master-port,
        --nproc-per-node when known), for a process alone on its node (a platform's node agent,
        srun --ntasks-per-node=1): torchrun $(python -m resolver --format torchrun) train.py;
        --explain goes to stderr
"""
"""What `--help` says of each format."""


def render(
    name: str,
    topology: Topology,
    explanation: Explanation | None = None,
    *,
    bind: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    """`--format NAME` of `topology`; `bind` (the environment resolved, `--bind-device`) and `extra` (more
    variables, `--ifname`'s) go with `env` only."""
    if bind is None and extra is None:
        return RENDERERS[name](topology, explanation)
    if name != "env":
        option = "--bind-device" if bind is not None else "--ifname"
        raise InvalidSettings(
            f"{option} changes the environment: it goes with exec or --format env, not {name}",
            variable=option,
            value=name,
            expected="--format env",
        )
    return _env(topology, explanation, bind, extra)
