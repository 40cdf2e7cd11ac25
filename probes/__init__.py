"""What the resolver may ask the outside world, as injected callables.

A `Probes` bundle holds ten questions: `hostname()`, `comm()` (an mpi4py-shaped communicator),
`xla()` (a torch_xla.runtime-shaped object), `free_port()`, `read_text(path)`, `which(name)`,
`device_count()` (the accelerators on this node, asked only when no visibility variable says), and
the network ones that only the preflight and `exec --ifname` ask (`resolve` makes no network call):
`interfaces()`, `lookup(name)` and `route(destination)` (probes/network.py).
`system()` answers them for real, importing mpi4py or torch_xla only when asked;
`fake(...)` answers only what it was given and raises `ProbeFailed` naming the probe otherwise.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from probes._bundle import Comm, HostCensus, Probes, XlaRuntime
    from probes.fakes import FakeComm, FakeXla

__all__ = ["Comm", "HostCensus", "Probes", "XlaRuntime", "fake", "system"]

# The mark by which the resolver tells this package from a user's own probes.py that shadows it
# (resolver/_shadow.py): a module named probes without it is not ours.
__distribution__ = "cluster-topology"


_SUBMODULES = (
    "bounded",
    "census",
    "exchange",
    "fakes",
    "hostlocal",
    "limits",
    "live",
    "network",
    "nonblocking",
    "tcp",
)  # attributes, imported on first use


def __getattr__(name: str) -> Any:
    # first use: importing the bundle, the live probes and the fakes with the package costs 3.5% of
    # resolve(os.environ) (callgrind: 290,461,944 instructions against 280,508,964), which needs none of them
    if name in ("Comm", "HostCensus", "Probes", "XlaRuntime"):
        from probes import _bundle  # on first use (3.5%, above)

        return getattr(_bundle, name)
    if name in _SUBMODULES:
        return importlib.import_module(f"probes.{name}")
    raise AttributeError(f"module 'probes' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})


def system(*, timeout: float | None = None) -> Probes:
    """The live probes of this machine.

    With `timeout` (seconds), a file read and every MPI collective must finish within it, else
    `ProbeFailed` (the other live probes are kernel calls that cannot hang); see
    `probes.bounded`, which also bounds probes of your own. `resolve(environ)` asks the same live
    probes, bounded the same way with 120 s, one at a time as it needs them (`probes.live.probe`).
    """
    if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)):
        raise TypeError(f"timeout must be a number of seconds or None, not {timeout!r}")
    from probes import live  # on first use, as in __getattr__ above (3.5%)
    from probes._bundle import Probes  # as above

    return Probes(**{name: live.probe(name, timeout=timeout) for name in live.NAMES})


def fake(
    *,
    hostname: str | None = None,
    free_port: int | None = None,
    files: Mapping[str, str] | None = None,
    which: Mapping[str, str] | None = None,
    comm: FakeComm | Comm | None = None,
    xla: FakeXla | XlaRuntime | None = None,
    devices: int | None = None,
    interfaces: Mapping[str, Sequence[str]] | None = None,
    names: Mapping[str, Sequence[str]] | None = None,
    routes: Mapping[str, str] | None = None,
) -> Probes:
    """Probes that answer only what they were given; any other question raises `ProbeFailed`.

    `devices` is the answer of `device_count()`: the accelerators the node has. The network, for
    the preflight and `--ifname`: `interfaces` (interface -> its addresses), `names` (name -> the
    addresses it resolves to; an address stands for itself) and `routes` (a destination, name or
    address, -> the interface toward it; an address of `interfaces` is reached on the interface
    holding it, a loopback one on `lo`).
    """
    from probes.fakes import make  # on first use, as in __getattr__ above (3.5%)

    return make(
        hostname=hostname,
        free_port=free_port,
        files=files,
        which=which,
        comm=comm,
        xla=xla,
        devices=devices,
        interfaces=interfaces,
        names=names,
        routes=routes,
    )
