"""MPI launchers, detected from the variables they put in each rank's environment, never by importing mpi4py.

Lightning's MPIEnvironment imports mpi4py and asks `COMM_WORLD.Get_size() > 1`: that initialises MPI
(~0.3 s, and it can hang). Here every value the launcher wrote is taken as it is, and the comm probe
(mpi4py's COMM_WORLD, imported lazily by the probe) is asked only for what is missing: the main
address and port (unless MASTER_ADDR/MASTER_PORT are set) and the node rank (unless the launcher gives
it, or every rank is on one node). Whatever is missing travels in one collective: an `allgather` of
the hostnames (rank 0's with its endpoint) when node or local ranks are needed, else one `bcast`
of rank 0's endpoint.

Which launcher wrote the variables, first match wins (`LAUNCHERS`):

    Open MPI mpirun   OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, PMIX_NAMESPACE (job id)
    MVAPICH2          MV2_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}
    Hydra (MPICH and Intel MPI mpiexec)   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS
    Cray PALS         PALS_RANKID, PMI_SIZE, PALS_LOCAL_RANKID, PMI_LOCAL_SIZE, PALS_NODEID, PALS_APID
    PMI               PMI_RANK, PMI_SIZE, PMI_LOCAL_RANK, PMI_LOCAL_SIZE, PMI_JOBID
    PMIx              PMIX_RANK (no size: the comm gives it), PMIX_NAMESPACE

`OMPI_COMM_WORLD_NODE_RANK` is the rank within the node, not the node's index, and `OMPI_UNIVERSE_SIZE`
is the slot count: neither is used. A world of size 1 is not MPI (as in Lightning).

MPI and SLURM: the first three launchers' variables are written only by mpirun/mpiexec themselves,
never by srun. When mpirun runs inside a SLURM allocation it starts its daemons with srun, so its
ranks also carry that daemon step's SLURM_STEP_ID/SLURM_PROCID/SLURM_NTASKS: they describe the
daemons, not the ranks. Those ranks are MPI (`started_by_mpirun` says so; the SLURM source steps
aside). PMI_*, PMIX_* and PALS_* alone can come from `srun --mpi=pmi2|pmix|cray_shasta`, which is a
SLURM launch: SLURM, earlier in the detection order, wins over them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from resolver import environ as env
from resolver.environ import ADDRESS_RE
from resolver.errors import ProbeFailed, TopologyError
from resolver.sources import Builder, Detection
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Comm, Probes

__all__ = ["LAUNCHERS", "Launcher", "Mpi", "launcher", "started_by_mpirun"]

NAME = "mpi"


class Launcher(NamedTuple):
    """The variables one MPI launcher writes for each rank; None where it writes nothing.

    A NamedTuple, not an attrs class: six of them are built on every `import resolver`.
    """

    name: str
    marker: str  # its presence means this launcher started the process
    rank: str
    size: str | None
    local_rank: str | None = None
    local_size: str | None = None
    node_rank: str | None = None
    job_id: str | None = None
    mpirun_only: bool = False  # written only by the MPI launcher itself, never by srun --mpi=...

    @property
    def names(self) -> tuple[str, ...]:
        """Its variables, in the order rank, size, local rank, local size, node rank, job id."""
        names = (self.rank, self.size, self.local_rank, self.local_size, self.node_rank, self.job_id)
        return tuple(dict.fromkeys(n for n in names if n is not None))

    @property
    def one_node(self) -> str:
        return f"({self.local_size} == {self.size}: one node)"

    def variables(self) -> tuple[str, ...]:
        return self.names


LAUNCHERS: tuple[Launcher, ...] = (
    Launcher(
        "Open MPI mpirun",
        marker="OMPI_COMM_WORLD_SIZE",
        rank="OMPI_COMM_WORLD_RANK",
        size="OMPI_COMM_WORLD_SIZE",
        local_rank="OMPI_COMM_WORLD_LOCAL_RANK",
        local_size="OMPI_COMM_WORLD_LOCAL_SIZE",
        job_id="PMIX_NAMESPACE",
        mpirun_only=True,
    ),
    Launcher(
        "MVAPICH2",
        marker="MV2_COMM_WORLD_SIZE",
        rank="MV2_COMM_WORLD_RANK",
        size="MV2_COMM_WORLD_SIZE",
        local_rank="MV2_COMM_WORLD_LOCAL_RANK",
        local_size="MV2_COMM_WORLD_LOCAL_SIZE",
        mpirun_only=True,
    ),
    Launcher(
        "Hydra (MPICH, Intel MPI mpiexec)",
        marker="MPI_LOCALNRANKS",
        rank="PMI_RANK",
        size="PMI_SIZE",
        local_rank="MPI_LOCALRANKID",
        local_size="MPI_LOCALNRANKS",
        mpirun_only=True,
    ),
    Launcher(
        "Cray PALS",
        marker="PALS_RANKID",
        rank="PALS_RANKID",
        size="PMI_SIZE",
        local_rank="PALS_LOCAL_RANKID",
        local_size="PMI_LOCAL_SIZE",
        node_rank="PALS_NODEID",
        job_id="PALS_APID",
    ),
    Launcher(
        "PMI",
        marker="PMI_SIZE",
        rank="PMI_RANK",
        size="PMI_SIZE",
        local_rank="PMI_LOCAL_RANK",
        local_size="PMI_LOCAL_SIZE",
        job_id="PMI_JOBID",
    ),
    Launcher("PMIx", marker="PMIX_RANK", rank="PMIX_RANK", size=None, job_id="PMIX_NAMESPACE"),
)

RULE = (
    "OMPI_COMM_WORLD_*, MV2_COMM_WORLD_* and Hydra's MPI_LOCALNRANKS come only from mpirun/mpiexec, so they "
    "win over SLURM step variables (under mpirun those describe its srun-started daemons); PMI_*, PMIX_*, "
    "PALS_* alone may come from srun --mpi=..., where SLURM, earlier in the order, wins"
)
MPICH_HINT = (
    "mpi4py is not using the MPI library of the launcher that started this process, so each rank runs "
    "alone: the mpi4py wheel does this under MPICH's mpiexec unless MPI4PY_MPIABI=mpich and a directory "
    "holding a libmpi.so.12 -> libmpich.so.12 link is on LD_LIBRARY_PATH (under Open MPI's mpirun: "
    "MPI4PY_MPIABI=openmpi); check with python -c 'from mpi4py import MPI; print(MPI.Get_library_version())'"
)

LIBMPI_HINT = (
    "the mpi4py wheel's MPICH build (MPI4PY_MPIABI=mpich) loads libmpi.so.12, which Debian and Ubuntu name "
    "libmpich.so.12: put a directory holding a libmpi.so.12 -> libmpich.so.12 link on LD_LIBRARY_PATH"
)

NOT_FOUND = f"none of {', '.join(c.marker for c in LAUNCHERS)} is set (never asks mpi4py); rule: {RULE}"
_NOT_FOUND = Detection(False, NOT_FOUND, ())

# What travels in the one collective: each rank's hostname (a plain str, as in a bare allgather of
# the hostnames), and from rank 0 (hostname, main address, main port, error). A rank whose probe
# failed sends that tuple too, with the error, so that every rank fails the same way.
_Payload = tuple[str | None, str | None, int | None, str | None]


class _Plan(NamedTuple):
    """What detect and resolve need of one launcher beyond its fields, computed once per launcher."""

    launcher: Launcher
    names: tuple[str, ...]  # Launcher.names
    one_node: tuple[str, str, str]  # the origins of node_rank, num_nodes and local_rank on one node


def _make_plan(found: Launcher) -> _Plan:
    one_node = found.one_node
    origins = ("formula:0 " + one_node, "formula:1 " + one_node, "formula:global rank " + one_node)
    return _Plan(found, found.names, origins)


# For speed: detect and resolve run on every resolve, and `Launcher.names`/`one_node` build their
# values on each access. Keyed by marker (a str hashes faster than a Launcher); a launcher that is
# not one of these objects gets its plan made when asked.
_PLANS: dict[str, _Plan] = {found.marker: _make_plan(found) for found in LAUNCHERS}


def _plan(found: Launcher) -> _Plan:
    plan = _PLANS.get(found.marker)
    return plan if plan is not None and plan.launcher is found else _make_plan(found)


def launcher(environ: Mapping[str, str]) -> Launcher | None:
    """The launcher whose marker variable is set, first in `LAUNCHERS` order; None if none is."""
    for candidate in LAUNCHERS:
        if candidate.marker in environ:
            return candidate
    return None


def _size_is_one(environ: Mapping[str, str], found: Launcher) -> bool:
    return found.size is not None and environ.get(found.size) == "1"


def started_by_mpirun(environ: Mapping[str, str]) -> str | None:
    """The variable showing that mpirun/mpiexec (not srun) started this process, or None.

    It names a variable only an MPI launcher writes (OMPI_COMM_WORLD_SIZE, MV2_COMM_WORLD_SIZE,
    MPI_LOCALNRANKS) for a world larger than one: then the MPI source matches and the SLURM source
    must not, whatever SLURM_* variables the process also carries.
    """
    found = launcher(environ)
    if found is None or not found.mpirun_only or _size_is_one(environ, found):
        return None
    return found.marker


class Mpi:
    """MPI ranks started by mpirun/mpiexec (or a PMI/PMIx launcher), from their variables and the comm."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        found = launcher(environ)
        if found is None:
            return _NOT_FOUND  # preallocated for speed: the answer of most non-MPI resolves
        variables = env.present(environ, *_plan(found).names)
        if found.size is None:
            return Detection(
                True, f"{found.marker} is set ({found.name}); the comm gives the world size; rule: {RULE}", variables
            )
        if _size_is_one(environ, found):
            return Detection(False, f"{found.size}=1 ({found.name}): a world of size 1 is not MPI", variables)
        size = environ.get(found.size, "<unset>")
        who = "mpirun/mpiexec started this process" if found.mpirun_only else "unless SLURM matched first"
        return Detection(True, f"{found.size}={size} ({found.name}): {who}; rule: {RULE}", variables)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        return _Resolution(environ, probes).run()


class _Resolution:
    """One rank's resolution: the environment's values first, then at most one collective."""

    __slots__ = (
        "address",
        "b",
        "environ",
        "error",
        "found",
        "local_rank",
        "local_size",
        "node",
        "port",
        "probes",
        "rank",
        "size",
    )

    def __init__(self, environ: Mapping[str, str], probes: Probes) -> None:
        self.environ = environ
        self.probes = probes
        self.found = launcher(environ)
        self.b = Builder(NAME, environ)
        self.error: TopologyError | None = None  # this rank's probe failure, raised after the collective
        # what the environment gave; None is what the comm must supply (set by `run`)
        self.rank: int | None = None
        self.size: int | None = None
        self.local_rank: int | None = None
        self.local_size: int | None = None
        self.node: int | None = None
        self.address: str | None = None
        self.port: int | None = None

    def optional(self, field: str, variable: str | None, minimum: int = 0) -> int | None:
        return None if variable is None else self.b.optional_int(field, variable, minimum=minimum)

    def run(self) -> Topology:
        # locals on the way, stored on self once: this runs on every MPI resolve
        environ, found, b = self.environ, self.found, self.b
        rank = size = local_rank = local_size = node = address = port = None
        b.set("creates_processes_externally", True, "source:mpi the launcher starts every rank")
        if found is not None:
            rank = b.env("global_rank", env.integer(environ, found.rank, source=NAME), found.rank)
            if found.size is not None:
                size = b.env("world_size", env.integer(environ, found.size, minimum=1, source=NAME), found.size)
            local_rank = self.optional("local_rank", found.local_rank)
            local_size = self.optional("local_world_size", found.local_size, minimum=1)
            node = self.optional("node_rank", found.node_rank)
            if found.job_id is not None and found.job_id in environ:
                b.env("job_id", env.text(environ, found.job_id), found.job_id)
            if node is None and size is not None and local_size == size:
                # every rank is on this node: no hostnames needed, and the local rank is the global one
                node_origin, nodes_origin, local_origin = _plan(found).one_node
                node = b.set("node_rank", 0, node_origin)
                b.set("num_nodes", 1, nodes_origin)
                if local_rank is None:
                    local_rank = b.set("local_rank", rank, local_origin)
        address = b.optional_address("MASTER_ADDR")
        port = b.optional_port("MASTER_PORT")
        self.rank, self.size, self.local_rank, self.local_size = rank, size, local_rank, local_size
        self.node, self.address, self.port = node, address, port

        if rank is None or size is None or node is None or local_rank is None or address is None or port is None:
            self.precheck()  # a bad variable is named before MPI is initialised for the rest
            comm, rank, size = self.comm()
            if local_rank is None or node is None:
                self.gather(comm, rank, size)
            else:
                self.broadcast(comm, rank)
        return b.build()

    def precheck(self) -> None:
        """The environment's values checked against each other before the comm is asked for the rest.

        The comparisons are cheap; only when one fails is a record built (with neutral stand-ins for
        the missing fields), so that the error names the variable exactly as `Builder.build` does.
        """
        rank, size, local_rank, local_size = self.rank, self.size, self.local_rank, self.local_size
        if (
            (rank is not None and size is not None and rank >= size)
            or (local_rank is not None and local_size is not None and local_rank >= local_size)
            or (local_size is not None and size is not None and local_size > size)
        ):
            values = dict(self.b.values)
            values.setdefault("global_rank", 0)
            values.setdefault("world_size", max(values["global_rank"] + 1, values.get("local_world_size") or 1))
            values.setdefault("local_rank", 0)
            values.setdefault("node_rank", 0)
            trial = Builder(NAME, self.environ)
            trial.values, trial.provenance = values, dict(self.b.provenance)
            trial.build()

    # -- the comm ------------------------------------------------------------------------------

    def needs(self) -> str:
        """What the environment lacked, for error messages."""
        missing = (
            ("the global rank", self.rank),
            ("the world size", self.size),
            ("the node rank", self.node),
            ("the local rank", self.local_rank),
            ("the main address (MASTER_ADDR)", self.address),
            ("the main port (MASTER_PORT)", self.port),
        )
        return ", ".join(what for what, value in missing if value is None)

    def comm(self) -> tuple[Comm, int, int]:
        """COMM_WORLD, checked against the launcher's rank and size before any collective."""
        found, rank, size = self.found, self.rank, self.size
        try:
            comm = self.probes.comm()
            got_size, got_rank = comm.Get_size(), comm.Get_rank()
        except ProbeFailed as exc:
            hint = f"; {LIBMPI_HINT}" if "libmpi.so.12" in exc.reason else ""
            raise ProbeFailed("comm", f"{exc.reason} (the comm was needed for {self.needs()}){hint}") from exc
        except Exception as exc:
            raise ProbeFailed("comm", f"{exc!r} (the comm was needed for {self.needs()})") from exc
        if not (isinstance(got_size, int) and isinstance(got_rank, int) and 0 <= got_rank < got_size):
            raise ProbeFailed("comm", f"Get_rank()={got_rank!r}, Get_size()={got_size!r}: expected 0 <= rank < size")
        if found is not None and (got_rank != rank or (size is not None and got_size != size)):
            told = f"{found.rank}={rank}" + (f" and {found.size}={size}" if found.size is not None else "")
            raise ProbeFailed(
                "comm", f"COMM_WORLD says rank {got_rank} of {got_size}, but the launcher set {told}: {MPICH_HINT}"
            )
        if rank is None:
            rank = self.b.set("global_rank", got_rank, "probe:comm.Get_rank")
        if size is None:
            size = self.b.set("world_size", got_size, "probe:comm.Get_size")
        return comm, rank, size

    def endpoint(self, *, with_host: bool) -> _Payload:
        """Rank 0's contribution: its hostname and its main endpoint, or the error that prevented them."""
        address, port, host = self.address, self.port, None
        try:
            if with_host or address is None:
                host = self.probes.hostname()
            if address is None:
                address = self.b.set("main_address", host, "probe:hostname")
            if port is None:
                port = self.b.set("main_port", self.probes.free_port(), "probe:free_port")
        except TopologyError as exc:
            self.error = exc
            return (None, None, None, str(exc))
        return (host, address, port, None)

    def hostname(self) -> str | _Payload:
        try:
            return self.probes.hostname()
        except TopologyError as exc:
            self.error = exc
            return (None, None, None, str(exc))

    def failed(self, rank: int, payloads: list[_Payload]) -> None:
        """Raise on every rank alike when some rank's probe failed before the collective."""
        for other, payload in enumerate(payloads):
            if payload[3] is not None:
                if other == rank and self.error is not None:
                    raise self.error
                raise ProbeFailed("comm", f"rank {other} could not answer: {payload[3]}")

    def gather(self, comm: Comm, rank: int, size: int) -> None:
        """One allgather of every rank's hostname (rank 0's with its endpoint): node and local ranks, main endpoint."""
        b = self.b
        mine = self.endpoint(with_host=True) if rank == 0 else self.hostname()
        try:
            gathered: Any = comm.allgather(mine)
        except ProbeFailed:  # a deadline (probes.bounded) or a fake's own complaint: it names the probe
            raise
        except Exception as exc:
            raise ProbeFailed("comm", f"allgather of the hostnames failed: {exc!r}") from exc
        if not isinstance(gathered, list) or len(gathered) != size:
            raise ProbeFailed("comm", f"allgather returned {gathered!r}: expected {size} hostnames")
        payloads = [(p, None, None, None) if isinstance(p, str) else p for p in gathered]
        if not all(_payload(p) for p in payloads):
            raise ProbeFailed("comm", f"allgather returned {gathered!r}: expected {size} hostnames")
        self.failed(rank, payloads)
        hosts: list[str] = [p[0] for p in payloads]
        if not all(isinstance(h, str) for h in hosts):
            raise ProbeFailed("comm", f"allgather returned {gathered!r}: a rank sent no hostname")
        self.main_from_rank0(payloads[0], rank, "allgather")
        here = hosts[rank]
        on_host = [r for r, h in enumerate(hosts) if h == here]
        origin = "probe:comm.allgather of hostnames"
        if self.node is None:
            distinct = sorted(set(hosts))
            b.set("node_rank", distinct.index(here), f"{origin}: index of this host among {len(distinct)} sorted")
            b.set("num_nodes", len(distinct), f"{origin}: distinct hosts")
        if self.local_rank is None:
            b.set("local_rank", on_host.index(rank), f"{origin}: earlier ranks on this host")
            if self.local_size is None:
                b.set("local_world_size", len(on_host), f"{origin}: ranks on this host")
        if self.local_size is not None and self.local_size != len(on_host):
            variable = b.provenance["local_world_size"].removeprefix("env:")
            b.warn(
                f"{variable}={self.local_size} but {len(on_host)} ranks have host name {here!r}: the launcher "
                "and the host names disagree about what a node is; node_rank follows the host names"
            )

    def broadcast(self, comm: Comm, rank: int) -> None:
        """One bcast of rank 0's main endpoint, when nothing else is missing."""
        mine = self.endpoint(with_host=False) if rank == 0 else None
        try:
            theirs: Any = comm.bcast(mine, root=0)
        except ProbeFailed:  # a deadline (probes.bounded) or a fake's own complaint: it names the probe
            raise
        except Exception as exc:
            raise ProbeFailed("comm", f"bcast of the main address and port failed: {exc!r}") from exc
        if not _payload(theirs):
            raise ProbeFailed("comm", f"bcast returned {theirs!r}: expected rank 0's (hostname, address, port)")
        self.failed(rank, [theirs])
        self.main_from_rank0(theirs, rank, "bcast")

    def main_from_rank0(self, payload: _Payload, rank: int, how: str) -> None:
        """This rank's main endpoint: its own MASTER_ADDR/MASTER_PORT when set, else rank 0's."""
        _, address0, port0, _ = payload
        if address0 is None or not ADDRESS_RE.fullmatch(address0):
            raise ProbeFailed(
                "hostname",
                f"rank 0's host name {address0!r} cannot be the main address: expected a host name or IP address "
                "without spaces or shell syntax; set MASTER_ADDR",
            )
        if not isinstance(port0, int) or isinstance(port0, bool) or not 1 <= port0 <= 65535:
            raise ProbeFailed("free_port", f"rank 0's main port {port0!r} is not a TCP port 1..65535; set MASTER_PORT")
        if rank == 0:
            return  # its own values are already set, with their provenance
        b = self.b
        if self.address is None:
            b.set("main_address", address0, f"probe:comm.{how}: rank 0's MASTER_ADDR or hostname")
        elif self.address != address0:
            b.warn(f"MASTER_ADDR={self.address} here but rank 0 uses {address0}: the ranks will not meet")
        if self.port is None:
            b.set("main_port", port0, f"probe:comm.{how}: rank 0's MASTER_PORT or free port")
        elif self.port != port0:
            b.warn(f"MASTER_PORT={self.port} here but rank 0 uses {port0}: the ranks will not meet")


def _payload(value: object) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) == 4
        and (value[0] is None or isinstance(value[0], str))
        and (value[3] is None or isinstance(value[3], str))
    )
