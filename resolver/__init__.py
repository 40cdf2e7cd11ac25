"""cluster-topology: who this process is, where it is and whom it talks to, as a pure function.

>>> import resolver
>>> resolver.resolve({"TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "2", "RANK": "1",
...                   "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}).global_rank
1
"""

from resolver.apply import Applied, apply
from resolver.detect import Explanation, explain, resolve, sources
from resolver.errors import (
    HostlistSyntaxError,
    InvalidSettings,
    InvalidTopology,
    InvalidVariable,
    MissingVariable,
    ProbeFailed,
    TopologyError,
    TopologyWarning,
)
from resolver.sources import Detection, Source
from resolver.spawn import spawn
from resolver.topology import SCHEMA, Topology
from resolver.validate import validate

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    """`resolver.requeue` on first use: signal handling is not needed to resolve (it costs ~1 ms)."""
    if name == "requeue":
        import resolver.requeue

        return resolver.requeue
    raise AttributeError(f"module 'resolver' has no attribute {name!r}")


__all__ = [
    "SCHEMA",
    "Applied",
    "Detection",
    "Explanation",
    "HostlistSyntaxError",
    "InvalidSettings",
    "InvalidTopology",
    "InvalidVariable",
    "MissingVariable",
    "ProbeFailed",
    "Source",
    "Topology",
    "TopologyError",
    "TopologyWarning",
    "__version__",
    "apply",
    "explain",
    "requeue",
    "resolve",
    "sources",
    "spawn",
    "validate",
]
