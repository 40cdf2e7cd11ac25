"""The live probes, one function each; `probe(name)` gives one, bounded when asked to.

Each imports what it needs when it is called: mpi4py (`comm`), torch_xla (`xla`), the socket
module (`hostname`, `free_port`). A resolve that asks only `device_count` loads none of them.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from resolver.errors import ProbeFailed

if TYPE_CHECKING:
    from probes import Comm, XlaRuntime
    from probes.network import Route

__all__ = [
    "KFD_NODES",
    "MAX_FILE_BYTES",
    "MAY_HANG",
    "NAMES",
    "NVIDIA_GPUS",
    "comm",
    "device_count",
    "file_bytes",
    "free_port",
    "hostname",
    "interfaces",
    "lookup",
    "probe",
    "read_text",
    "route",
    "which",
    "xla",
]

NAMES = (  # a Probes bundle's
    "hostname",
    "comm",
    "xla",
    "free_port",
    "read_text",
    "which",
    "device_count",
    "interfaces",
    "lookup",
    "route",
)
# hostname, free_port, which and device_count are kernel calls that cannot hang, and a thread costs
# more than the call; xla must be asked from the thread that runs torch_xla
MAY_HANG = ("read_text", "comm")


def probe(name: str, *, timeout: float | None = None) -> Callable[..., Any]:
    """The live probe `name`. With `timeout` (seconds), those that can hang are bounded by it.

    Those are `MAY_HANG`: `read_text` (a rankfile on a hung NFS mount) and the collectives of
    `comm` (see `probes.bounded`). `probes.system()` builds its bundle from these probes; `resolve`
    asks them one at a time, with `timeout=120`.
    """
    if name not in NAMES:
        raise ValueError(f"name={name!r}: expected one of {', '.join(NAMES)}")
    function: Callable[..., Any] = globals()[name]
    if timeout is None or name not in MAY_HANG:
        return function
    from probes.bounded import bound  # only a probe that may hang loads it: a resolve imports what it asks

    return bound(name, function, float(timeout))


def hostname() -> str:
    """This machine's host name, as the kernel has it."""
    import _socket  # the C module: `socket` would add a third of a resolve's start-up for two calls

    try:
        return _socket.gethostname()
    except OSError as exc:  # pragma: no cover - the kernel always has a name
        raise ProbeFailed("hostname", str(exc)) from exc


_CHOSEN: dict[int, int] = {}  # pid -> the port free_port chose in that process


def free_port() -> int:
    """A TCP port that was free on loopback when this process first asked (the kernel picks it).

    The same port for the life of the process: two resolves in one process (the one you log, the
    one `init_process_group()` makes again) must name the same endpoint. Keyed by pid, so that a
    forked child asks the kernel for its own.
    """
    pid = os.getpid()
    chosen = _CHOSEN.get(pid)
    if chosen is None:
        chosen = _CHOSEN[pid] = _pick_port()
    return chosen


def _pick_port() -> int:
    import _socket  # as in hostname()

    try:
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
            return port
        finally:
            sock.close()
    except OSError as exc:
        raise ProbeFailed("free_port", f"could not bind a loopback port: {exc}") from exc


MAX_FILE_BYTES = 64 * 1024 * 1024  # a rankfile of a million hosts is ~20 MB


def read_text(path: str) -> str:
    """A regular file's text, at most MAX_FILE_BYTES: not a FIFO or device that never ends."""
    try:
        data = file_bytes(path, MAX_FILE_BYTES)
        if data is None:
            raise ProbeFailed("read_text", f"{path!r} is not a regular file")
        if len(data) > MAX_FILE_BYTES:
            raise ProbeFailed("read_text", f"{path!r} is larger than {MAX_FILE_BYTES} bytes")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProbeFailed("read_text", f"cannot read {path!r}: {exc}") from exc


def file_bytes(path: str, limit: int) -> bytes | None:
    """The first `limit` + 1 bytes of the regular file `path` (more than `limit` says it is larger);
    None for a FIFO, a device or anything else that may never end. Opening never waits, and OSError
    says the file cannot be opened or read (a folder: IsADirectoryError). `read_text` and the plugin
    scan use it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # O_NONBLOCK: opening a FIFO must not wait
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # reading a folder fails below, as it should
            return None
        chunks = []
        wanted = limit + 1
        while wanted > 0 and (chunk := os.read(fd, min(wanted, 1 << 20))):
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def which(name: str) -> str | None:
    """The path of the command `name` on PATH, as `shutil.which` finds it; None if there is none."""
    import shutil  # only when asked: shutil is 3.4% of a resolve's instructions (7.8 M under callgrind)

    return shutil.which(name)


NVIDIA_GPUS = "/proc/driver/nvidia/gpus"  # one folder per GPU the driver manages, named by PCI address
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"  # AMD: one node per CPU or GPU agent; a GPU has gpu_id != 0


def device_count() -> int:
    """The accelerators of this node, without importing torch: NVIDIA's, else AMD's.

    The NVIDIA driver lists each GPU under /proc/driver/nvidia/gpus; the AMD kernel driver (KFD)
    lists each agent under its topology, CPUs with `gpu_id` 0. Device nodes (/dev/nvidiaN) are not
    counted: they can exist without a GPU or a driver (SLURM test clusters make them with mknod).
    No driver: ProbeFailed.
    """
    try:
        return len(os.listdir(NVIDIA_GPUS))
    except OSError:
        pass
    try:
        nodes = os.listdir(KFD_NODES)
    except OSError:
        raise ProbeFailed("device_count", f"neither {NVIDIA_GPUS} (NVIDIA) nor {KFD_NODES} (AMD) exists") from None
    return sum(_gpu_id(os.path.join(KFD_NODES, node, "gpu_id")) not in ("", "0") for node in nodes)


def _gpu_id(path: str) -> str:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def comm() -> Comm:
    """mpi4py's COMM_WORLD; importing mpi4py.MPI initialises MPI, so this runs only on demand."""
    try:
        from mpi4py import MPI  # an optional extra; importing it initialises MPI, so only on demand
    except ImportError as exc:
        raise ProbeFailed("comm", f"mpi4py is not importable ({exc}); pip install 'cluster-topology[mpi]'") from exc
    except Exception as exc:  # MPI_Init failures surface as arbitrary errors
        raise ProbeFailed("comm", f"MPI initialisation failed: {exc!r}") from exc
    world: Any = MPI.COMM_WORLD
    return world  # type: ignore[no-any-return]


def xla() -> XlaRuntime:
    """torch_xla.runtime, imported only when the XLA source asks."""
    try:
        # an optional extra (its own venv), imported only when the XLA source asks
        from torch_xla import runtime  # type: ignore[import-not-found, unused-ignore]
    except ImportError as exc:
        raise ProbeFailed("xla", f"torch_xla is not importable ({exc}); pip install 'cluster-topology[xla]'") from exc
    except Exception as exc:
        raise ProbeFailed("xla", f"importing torch_xla failed: {exc!r}") from exc
    result: Any = runtime
    return result  # type: ignore[no-any-return]


# the network probes (probes/network.py): asked by the preflight and `exec --ifname`, never by `resolve`


def interfaces() -> dict[str, tuple[str, ...]]:
    """This host's interfaces and their addresses (`probes.network.interfaces`)."""
    from probes import network  # ctypes and ipaddress load only when the network is asked about

    return network.interfaces()


def lookup(name: str) -> tuple[str, ...]:
    """The addresses `name` resolves to here, in getaddrinfo's order (`probes.network.lookup`)."""
    from probes import network  # as above

    return network.lookup(name)


def route(destination: str) -> Route:
    """The interface and local address traffic to `destination` leaves from (`probes.network.route`)."""
    from probes import network  # as above

    return network.route(destination)
