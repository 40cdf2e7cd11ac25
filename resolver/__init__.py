"""cluster-topology: who this process is, where it is and whom it talks to, as a pure function.

>>> import resolver
>>> resolver.resolve({"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "2", "RANK": "1",
...                   "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}).global_rank
1

This module is the public API; the engine behind it lives in private modules. The public
submodules are `resolver.sources` (the kit for source authors), `resolver.testing`,
`resolver.hostlist`, `resolver.errors`, `resolver.topology`, `resolver.origin`, `resolver.requeue`
and `resolver.integrations`.
"""

import importlib as _importlib
import typing as _typing

from resolver._detect import by_name, registered, resolve
from resolver.errors import (
    HostlistSyntaxError,
    InvalidSettings,
    InvalidTopology,
    InvalidVariable,
    MissingVariable,
    ProbeFailed,
    StrictWarnings,
    TopologyError,
    TopologyWarning,
)
from resolver.origin import Origin
from resolver.sources import Detection, Source
from resolver.topology import SCHEMA, Topology, topology_schema

if _typing.TYPE_CHECKING:
    from resolver._apply import Applied, apply
    from resolver._check import CheckReport, check
    from resolver._explain import Candidate, Explanation, explain
    from resolver._spawn import spawn
    from resolver._validate import validate

from resolver._version import __version__

__all__ = [
    "SCHEMA",
    "Applied",
    "Candidate",
    "CheckReport",
    "Detection",
    "Explanation",
    "HostlistSyntaxError",
    "InvalidSettings",
    "InvalidTopology",
    "InvalidVariable",
    "MissingVariable",
    "Origin",
    "ProbeFailed",
    "Source",
    "StrictWarnings",
    "Topology",
    "TopologyError",
    "TopologyWarning",
    "__version__",
    "apply",
    "by_name",
    "check",
    "explain",
    "registered",
    "resolve",
    "spawn",
    "topology_schema",
    "validate",
]

# Public submodules that resolving does not need, attributes of `resolver` imported on first use:
# `resolver.testing` alone imports Hypothesis-free builders for twenty launchers.
_SUBMODULES = ("hostlist", "integrations", "requeue", "schema", "testing")
# Imported on first use, where a resolve does not need them: the rest of the engine (measured with
# callgrind, importing it up front costs 2.6% of `resolve(os.environ)`), and the preflight, whose exchange
# loads socket, selectors and json (tests/test_imports.py holds a resolve to loading no socket module).
_LAZY = {
    "Applied": "resolver._apply",
    "apply": "resolver._apply",
    "Candidate": "resolver._explain",
    "Explanation": "resolver._explain",
    "explain": "resolver._explain",
    "spawn": "resolver._spawn",
    "validate": "resolver._validate",
    "CheckReport": "resolver._check",
    "check": "resolver._check",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(_importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return _importlib.import_module(f"resolver.{name}")
    raise AttributeError(f"module 'resolver' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API: `__all__` and the public submodules."""
    return sorted({*__all__, *_SUBMODULES, "environ", "errors", "origin", "sources", "topology"})
