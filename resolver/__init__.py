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

from resolver._apply import Applied, apply
from resolver._detect import Candidate, Explanation, explain, resolve
from resolver._spawn import spawn
from resolver._validate import validate
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
from resolver.topology import SCHEMA, Topology

__version__ = "0.1.0"

__all__ = [
    "SCHEMA",
    "Applied",
    "Candidate",
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
    "resolve",
    "spawn",
    "validate",
]
