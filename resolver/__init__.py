"""cluster-topology: who this process is, where it is and whom it talks to, as a pure function.

>>> import resolver
>>> resolver.resolve({"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "2", "RANK": "1",
...                   "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}).global_rank
1

This module is the public API. The engine lives in private modules (`resolver._detect`,
`resolver._apply`, ...); the public submodules are `resolver.sources` (the kit for source
authors), `resolver.testing`, `resolver.hostlist`, `resolver.errors`, `resolver.topology`,
`resolver.requeue` and `resolver.integrations`.
"""

from typing import TYPE_CHECKING, Any

from resolver._detect import resolve
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
from resolver.sources import Detection, Source
from resolver.topology import SCHEMA, Topology, topology_schema

if TYPE_CHECKING:
    from resolver._apply import Applied, apply
    from resolver._check import CheckReport, check
    from resolver._explain import Candidate, Explanation, explain
    from resolver._spawn import spawn
    from resolver._validate import validate

__version__ = "0.1.0"

# Resolving needs only `resolve`; the rest of the API is imported on first use.
_LAZY = {
    "Applied": "resolver._apply",
    "apply": "resolver._apply",
    "Candidate": "resolver._explain",
    "CheckReport": "resolver._check",
    "check": "resolver._check",
    "Explanation": "resolver._explain",
    "explain": "resolver._explain",
    "spawn": "resolver._spawn",
    "validate": "resolver._validate",
}


# Public submodules, attributes of `resolver` imported on first use (the modules of
# `resolver.integrations` need an extra each: they are imported by name).
_SUBMODULES = ("hostlist", "integrations", "requeue", "schema", "testing")


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in _SUBMODULES:
        return importlib.import_module(f"resolver.{name}")
    raise AttributeError(f"module 'resolver' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_SUBMODULES})


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
    "ProbeFailed",
    "Source",
    "StrictWarnings",
    "Topology",
    "TopologyError",
    "TopologyWarning",
    "__version__",
    "apply",
    "check",
    "explain",
    "resolve",
    "spawn",
    "topology_schema",
    "validate",
]
