"""MPI launchers, detected from the variables they put in each rank's environment, never by importing mpi4py.

Lightning's MPIEnvironment imports mpi4py and asks `COMM_WORLD.Get_size() > 1`: that initialises MPI
(~0.3 s, and it can hang). Here every value the launcher wrote is taken as it is, and the comm probe
(mpi4py's COMM_WORLD, imported lazily by the probe) is asked only for what is missing: the main
address and port (unless MASTER_ADDR/MASTER_PORT are set) and the node rank (unless the launcher gives
it, or every rank is on one node). Whatever is missing travels in one collective: an `allgather` of
the hostnames (rank 0's with its endpoint) when node or local ranks are needed, else one `bcast`
of rank 0's endpoint. A comm that offers a `census` (`probes.HostCensus`: `cluster-topology exec`'s
TCP exchange, probes/tcp.py) is asked that instead of the allgather: rank 0 counts the host names
(`probes.census.Tally`) and each rank receives its own place, not every rank's name. The allgather's
count here is the definition the census follows (tests compare the two on random layouts: identical
records); this module does not import the census, as the resolver imports `probes` at run time only
after checking that it is ours. The job's host names are recorded up to `HOSTNAMES_MOST` nodes
(probes/census.py says why), either way, and above it the provenance says they were left out.

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
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from resolver.environ import is_address
from resolver.errors import InvalidVariable, ProbeFailed, TopologyError
from resolver.sources import Builder, Detection, Origin, present
from resolver.sources._registry import entry, scheduler_endpoint
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Comm, HostCensus, Probes
    from probes.census import Place

__all__ = [
    "CANDIDATES",
    "HOSTNAMES_MOST",
    "LAUNCHERS",
    "LIBMPI_HINT",
    "MPICH_HINT",
    "NAME",
    "NOT_FOUND",
    "RULE",
    "Launcher",
    "Mpi",
    "exchange",
    "launcher",
    "rank_marker",
    "started_by_mpirun",
]

NAME = "mpi"
CANDIDATES = entry(NAME).candidates  # the markers of `LAUNCHERS`


class Launcher(NamedTuple):
    """The variables one MPI launcher writes for each rank; None where it writes nothing. A row of the
    static table `LAUNCHERS` (a NamedTuple, as the registry's rows are), written with keywords."""

    name: str
    marker: str  # its presence means this launcher started the process
    rank: str
    size: str | None
    local_rank: str | None = None
    local_size: str | None = None
    node_rank: str | None = None
    job_id: str | None = None
    mpirun_only: bool = False  # written only by the MPI launcher itself, never by srun --mpi=...
    # how a rank it started reaches it (variables, or prefixes ending in "*"): one of them is always set
    # by the launcher (captured: Open MPI 4.1 and 5, MPICH 4 and 5, Intel MPI 2021); () where unknown
    contact: tuple[str, ...] = ()

    def variables(self) -> tuple[str, ...]:
        """Its variables, in the order rank, size, local rank, local size, node rank, job id."""
        names = (self.rank, self.size, self.local_rank, self.local_size, self.node_rank, self.job_id)
        return tuple(dict.fromkeys(n for n in names if n is not None))


LAUNCHERS: tuple[Launcher, ...] = (
    Launcher(
        name="Open MPI mpirun",
        marker="OMPI_COMM_WORLD_SIZE",
        rank="OMPI_COMM_WORLD_RANK",
        size="OMPI_COMM_WORLD_SIZE",
        local_rank="OMPI_COMM_WORLD_LOCAL_RANK",
        local_size="OMPI_COMM_WORLD_LOCAL_SIZE",
        job_id="PMIX_NAMESPACE",
        mpirun_only=True,
        contact=("PMIX_SERVER_URI*", "OMPI_MCA_orte_hnp_uri"),
    ),
    Launcher(
        name="MVAPICH2",
        marker="MV2_COMM_WORLD_SIZE",
        rank="MV2_COMM_WORLD_RANK",
        size="MV2_COMM_WORLD_SIZE",
        local_rank="MV2_COMM_WORLD_LOCAL_RANK",
        local_size="MV2_COMM_WORLD_LOCAL_SIZE",
        mpirun_only=True,
    ),
    Launcher(
        name="Hydra (MPICH, Intel MPI mpiexec)",
        marker="MPI_LOCALNRANKS",
        rank="PMI_RANK",
        size="PMI_SIZE",
        local_rank="MPI_LOCALRANKID",
        local_size="MPI_LOCALNRANKS",
        mpirun_only=True,
        contact=("PMI_FD", "PMI_PORT"),
    ),
    Launcher(
        name="Cray PALS",
        marker="PALS_RANKID",
        rank="PALS_RANKID",
        size="PMI_SIZE",
        local_rank="PALS_LOCAL_RANKID",
        local_size="PMI_LOCAL_SIZE",
        node_rank="PALS_NODEID",
        job_id="PALS_APID",
    ),
    Launcher(
        name="PMI",
        marker="PMI_SIZE",
        rank="PMI_RANK",
        size="PMI_SIZE",
        local_rank="PMI_LOCAL_RANK",
        local_size="PMI_LOCAL_SIZE",
        job_id="PMI_JOBID",
    ),
    Launcher(name="PMIx", marker="PMIX_RANK", rank="PMIX_RANK", size=None, job_id="PMIX_NAMESPACE"),
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

NOT_FOUND = f"none of {', '.join(CANDIDATES.names)} is set (never asks mpi4py); rule: {RULE}"

# What every rank sends in the one collective: (hostname, main address, main port, error), as
# `probes.census.Answer`. Rank 0 fills in its main endpoint; a rank whose probe failed sends its error
# instead, so that every rank learns of it from the same collective and fails the same way.
_Answer = tuple[str | None, str | None, int | None, str | None]

HOSTNAMES_MOST = 1024
"""The most nodes whose host names a record gets from the collective: `probes.census.HOSTNAMES_MOST`,
the same number (a test holds them equal), so that the allgather and the census give one record."""


def _reaches(environ: Mapping[str, str], contact: str) -> bool:
    if contact.endswith("*"):
        return any(name.startswith(contact[:-1]) for name in environ)
    return contact in environ


def _launcher_behind(environ: Mapping[str, str], found: Launcher) -> None:
    """`InvalidVariable` naming the launcher's variables when none of its contact variables is set: no
    launcher stands behind them (set by hand, or inherited by a process started outside mpirun), so
    COMM_WORLD, which disagrees with them, is a world of its own, not an mpi4py/MPI mismatch."""
    if not found.contact or any(_reaches(environ, contact) for contact in found.contact):
        return
    given = [name for name in found.variables() if name in environ]
    shown_given = ", ".join(f"{name}={environ[name]}" for name in given)
    size = environ.get(found.size) if found.size else None
    start = f"mpirun -np {size} ..." if size else "mpirun ..."
    raise InvalidVariable(
        found.marker,
        environ[found.marker],
        f"set by {found.name} for a process it started, with its contact ({' or '.join(found.contact)}); "
        f"here {shown_given} are set but no launcher stands behind them (set by hand, or inherited by a process "
        f"started outside {found.name}): start the program with the launcher ({start} python train.py), or unset "
        "those variables",
        related={name: environ[name] for name in given if name != found.marker},
    )


# The fields the comm supplies when the environment lacks them, in the order error messages name them.
_FROM_THE_COMM = {
    "global_rank": "the global rank",
    "world_size": "the world size",
    "node_rank": "the node rank",
    "local_rank": "the local rank",
    "main_address": "the main address (MASTER_ADDR)",
    "main_port": "the main port (MASTER_PORT)",
}


def launcher(environ: Mapping[str, str]) -> Launcher | None:
    """The launcher whose marker variable is set, first in `LAUNCHERS` order; None if none is."""
    for candidate in LAUNCHERS:
        if candidate.marker in environ:
            return candidate
    return None


def _size_is_one(environ: Mapping[str, str], found: Launcher) -> bool:
    return found.size is not None and environ.get(found.size) == "1"


def rank_marker(environ: Mapping[str, str]) -> str | None:
    """The MPI launcher variable that makes this process one rank of several, or None.

    A scheduler's source (Grid Engine, PBS) declines such a process: the MPI source resolves it.
    """
    found = launcher(environ)
    if found is None or _size_is_one(environ, found):
        return None
    return found.marker


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
        found = launcher(environ) if CANDIDATES.met(environ) else None
        if found is None:
            return Detection(False, NOT_FOUND, ())
        variables = present(environ, *found.variables())
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


def exchange(b: Builder, environ: Mapping[str, str], probes: Probes, found: Launcher) -> Topology:
    """`b`'s record, after the MPI source's one collective for what `b` still lacks.

    For a launcher that is not MPI but whose tasks can reach each other through MPI (Flux's PMI):
    `b` holds what its variables gave (`found` names them, for the comm's consistency check); the
    comm gives the node rank (hostnames), the local world size and rank 0's endpoint, exactly as for
    MPI ranks. Every rank must call it with the same fields missing, or the collectives do not meet.
    """
    return _Resolution(environ, probes, found=found, b=b).complete()


class _Resolution:
    """One rank's resolution: the environment's values first, then at most one collective."""

    def __init__(
        self, environ: Mapping[str, str], probes: Probes, *, found: Launcher | None = None, b: Builder | None = None
    ) -> None:
        self.environ = environ
        self.probes = probes
        self.found = launcher(environ) if found is None else found
        self.b = Builder(NAME, environ) if b is None else b
        self.error: TopologyError | None = None  # this rank's probe failure, raised after the collective

    def optional(self, field: str, variable: str | None, minimum: int = 0) -> int | None:
        return None if variable is None else self.b.optional_integer(field, variable, minimum=minimum)

    def run(self) -> Topology:
        found, b = self.found, self.b
        b.rule("creates_processes_externally", True, "mpi the launcher starts every rank")
        if found is not None:
            b.integer("global_rank", found.rank)
            if found.size is not None:
                b.integer("world_size", found.size, minimum=1)
            self.optional("local_rank", found.local_rank)
            self.optional("local_world_size", found.local_size, minimum=1)
            self.optional("node_rank", found.node_rank)
            if found.job_id is not None:
                # the MPI launcher's own job (Open MPI 4: a job family number); inside a scheduler's job,
                # resolve lays that job's facts over it (the registry's SCHEDULERS)
                b.optional_text("job_id", found.job_id)
            values = b.values
            if "node_rank" not in values and values.get("local_world_size", 0) == values.get("world_size"):
                # every rank is on this node: no hostnames needed, and the local rank is the global one
                sizes = (*b.provenance["local_world_size"].variables, *b.provenance["world_size"].variables)
                one_node = f"({found.local_size} == {found.size}: one node)"
                b.formula("node_rank", 0, f"0 {one_node}", *sizes)
                b.formula("num_nodes", 1, f"1 {one_node}", *sizes)
                if "local_rank" not in values:
                    b.formula("local_rank", values["global_rank"], f"global rank {one_node}", found.rank, *sizes)
        b.optional_address("MASTER_ADDR")
        b.optional_port("MASTER_PORT")
        if "main_address" not in b.values or "main_port" not in b.values:
            self.scheduler_endpoint()  # a scheduler around the launch (Grid Engine) may know them
        return self.complete()

    def complete(self) -> Topology:
        """The record, after one collective for whatever the builder still lacks (none if it lacks nothing)."""
        b = self.b
        if any(field not in b.values for field in _FROM_THE_COMM):
            self.check_before_the_comm()
            comm, rank, size = self.comm()
            if "local_rank" in b.values and "node_rank" in b.values:
                self.broadcast(comm, rank)
            else:
                self.gather(comm, rank, size)
        return b.build()

    def scheduler_endpoint(self) -> None:
        """The main address and port the scheduler around the launch gives, where the environment has none."""
        values = self.b.values
        one_node = values.get("num_nodes") == 1  # set above only when every rank is on this node
        for field, (value, origin) in scheduler_endpoint(self.environ, self.probes, one_node=one_node).items():
            if field in ("main_address", "main_port") and field not in values:
                self.b.set(field, value, origin)

    def check_before_the_comm(self) -> None:
        """Build a record with stand-ins for what the comm will give, so that a bad variable is named
        (as `Builder.build` names it) before MPI is initialised for the rest."""
        values = {"global_rank": 0, "local_rank": 0, "node_rank": 0, **self.b.values}
        values.setdefault("world_size", max(values["global_rank"] + 1, values.get("local_world_size") or 1))
        trial = Builder(self.b.source, self.environ)
        trial.values, trial.provenance = values, dict(self.b.provenance)
        trial.build()

    # -- the comm ------------------------------------------------------------------------------

    def needs(self) -> str:
        """What the environment lacked, for error messages."""
        return ", ".join(what for field, what in _FROM_THE_COMM.items() if field not in self.b.values)

    def comm(self) -> tuple[Comm, int, int]:
        """COMM_WORLD, checked against the launcher's rank and size before any collective."""
        found, b = self.found, self.b
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
        rank, size = b.values.get("global_rank"), b.values.get("world_size")
        if found is not None and (got_rank != rank or (size is not None and got_size != size)):
            _launcher_behind(self.environ, found)  # MPI started a world of its own: was a launcher there at all?
            told = f"{found.rank}={rank}" + (f" and {found.size}={size}" if found.size is not None else "")
            raise ProbeFailed(
                "comm", f"COMM_WORLD says rank {got_rank} of {got_size}, but the launcher set {told}: {MPICH_HINT}"
            )
        if rank is None:
            b.set("global_rank", got_rank, Origin.probe("comm.Get_rank"))
        if size is None:
            b.set("world_size", got_size, Origin.probe("comm.Get_size"))
        return comm, got_rank, got_size

    def answer(self, rank: int, *, with_host: bool) -> _Answer:
        """This rank's contribution: its hostname (when asked), rank 0's main endpoint, or the error."""
        b, probes = self.b, self.probes
        try:
            host = probes.hostname() if with_host or (rank == 0 and "main_address" not in b.values) else None
            if rank != 0:
                return (host, None, None, None)
            if "main_address" not in b.values:
                b.set("main_address", host, Origin.probe("hostname"))
            if "main_port" not in b.values:
                b.set("main_port", probes.free_port(), Origin.probe("free_port"))
        except TopologyError as exc:
            self.error = exc
            return (None, None, None, str(exc))
        return (host, b.values["main_address"], b.values["main_port"], None)

    def fail_alike(self, rank: int, failed: tuple[int, str] | None) -> None:
        """Raise on every rank alike when some rank's probe failed before the collective (`failed`: the
        first such rank in rank order, and its error)."""
        if failed is not None:
            other, error = failed
            if other == rank and self.error is not None:
                raise self.error
            raise ProbeFailed("comm", f"rank {other} could not answer: {error}")

    def gather(self, comm: Comm, rank: int, size: int) -> None:
        """One collective for every rank's hostname (rank 0's with its endpoint): node and local ranks, main
        endpoint. A comm with a `census` is asked it; any other gives every rank every name (allgather)."""
        mine = self.answer(rank, with_host=True)
        if callable(getattr(comm, "census", None)):  # not isinstance: probes' Protocols load only when asked
            place = self.census(cast("HostCensus", comm), mine)
            self.fail_alike(rank, place.failed)
            self.main_from_rank0(place.rank0, rank, "census")
            if place.seat is None:
                raise ProbeFailed("comm", f"census returned {place!r}: no place for rank {rank} among the hosts")
            self.seat("census", mine[0], place.seat, hostnames=place.hostnames)
            return
        try:
            gathered: Any = comm.allgather(mine)
        except ProbeFailed:  # a deadline (probes.bounded) or a fake's own complaint: it names the probe
            raise
        except Exception as exc:
            raise ProbeFailed("comm", f"allgather of the hostnames failed: {exc!r}") from exc
        if not isinstance(gathered, list) or len(gathered) != size:
            raise ProbeFailed("comm", f"allgather returned {gathered!r}: expected {size} hostnames")
        # a bare hostname (a plain allgather of the hostnames, as FakeComm.world gives) says nothing else
        answers = [(a, None, None, None) if isinstance(a, str) else a for a in gathered]
        if not all(map(_is_answer, answers)):
            raise ProbeFailed("comm", f"allgather returned {gathered!r}: expected {size} hostnames")
        self.fail_alike(rank, next(((r, a[3]) for r, a in enumerate(answers) if a[3] is not None), None))
        hosts = [answer[0] for answer in answers]
        if not all(isinstance(h, str) for h in hosts):
            raise ProbeFailed("comm", f"allgather returned {gathered!r}: a rank sent no hostname")
        self.main_from_rank0(answers[0], rank, "allgather")
        here = hosts[rank]
        on_host = [r for r, h in enumerate(hosts) if h == here]
        distinct = sorted(set(hosts))
        seat = (distinct.index(here), len(distinct), on_host.index(rank), len(on_host))
        self.seat("allgather", here, seat, hostnames=tuple(distinct) if len(distinct) <= HOSTNAMES_MOST else None)

    def census(self, comm: HostCensus, mine: _Answer) -> Place:
        """This rank's `probes.census.Place` from the comm's census, its fields checked."""
        try:
            place = comm.census(mine)
        except ProbeFailed:  # a deadline, or the exchange's own words: they name the probe
            raise
        except Exception as exc:
            raise ProbeFailed("comm", f"census of the hostnames failed: {exc!r}") from exc
        if not _is_place(place):
            raise ProbeFailed("comm", f"census returned {place!r}: expected this rank's place (probes.census.Place)")
        return place

    def seat(
        self, how: str, host: str | None, seat: tuple[int, int, int, int], *, hostnames: tuple[str, ...] | None
    ) -> None:
        """Set the `seat` the collective `how` gave this rank, (node rank, node count, local rank, local
        size), its `host` as it sent it, and the host names when it carried them (None: more than
        HOSTNAMES_MOST nodes)."""
        b = self.b
        node_rank, num_nodes, local_rank, local_size = seat
        if "node_rank" not in b.values:
            b.set("node_rank", node_rank, _gathered(how, f"index of this host among {num_nodes} sorted"))
            b.set("num_nodes", num_nodes, _gathered(how, "distinct hosts"))
            if hostnames is None:
                b.set(
                    "hostnames",
                    None,
                    _gathered(how, f"not recorded: {num_nodes} nodes, above the {HOSTNAMES_MOST} a census carries"),
                )
            elif all(is_address(name) for name in hostnames):  # a name no record may hold stays out of it
                b.set("hostnames", hostnames, _gathered(how, "distinct hosts, sorted: node-rank order"))
        if "local_rank" not in b.values:
            b.set("local_rank", local_rank, _gathered(how, "earlier ranks on this host"))
        if "local_world_size" not in b.values:
            b.set("local_world_size", local_size, _gathered(how, "ranks on this host"))
        claimed = b.values.get("local_world_size")
        if claimed is not None and claimed != local_size:
            variable = b.provenance["local_world_size"].variable or "local_world_size"
            b.warn(
                f"{variable}={claimed} but {local_size} ranks have host name {host!r}: the launcher "
                "and the host names disagree about what a node is; node_rank follows the host names"
            )

    def broadcast(self, comm: Comm, rank: int) -> None:
        """One bcast of rank 0's main endpoint, when nothing else is missing."""
        mine = self.answer(rank, with_host=False) if rank == 0 else None
        try:
            theirs: Any = comm.bcast(mine, root=0)
        except ProbeFailed:  # a deadline (probes.bounded) or a fake's own complaint: it names the probe
            raise
        except Exception as exc:
            raise ProbeFailed("comm", f"bcast of the main address and port failed: {exc!r}") from exc
        if not _is_answer(theirs):
            raise ProbeFailed("comm", f"bcast returned {theirs!r}: expected rank 0's (hostname, address, port)")
        self.fail_alike(rank, None if theirs[3] is None else (0, theirs[3]))
        self.main_from_rank0(theirs, rank, "bcast")

    def main_from_rank0(self, answer: _Answer, rank: int, how: str) -> None:
        """This rank's main endpoint: its own MASTER_ADDR/MASTER_PORT when set, else rank 0's."""
        _, address0, port0, _ = answer
        if address0 is None or not is_address(address0):
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
        address, port = b.values.get("main_address"), b.values.get("main_port")
        if address is None:
            b.set("main_address", address0, Origin.probe(f"comm.{how}", "rank 0's MASTER_ADDR or hostname"))
        elif address != address0:
            b.warn(f"MASTER_ADDR={address} here but rank 0 uses {address0}: the ranks will not meet")
        if port is None:
            b.set("main_port", port0, Origin.probe(f"comm.{how}", "rank 0's MASTER_PORT or free port"))
        elif port != port0:
            b.warn(f"MASTER_PORT={port} here but rank 0 uses {port0}: the ranks will not meet")


def _gathered(how: str, what: str) -> Origin:
    """The origin of a value counted from every rank's hostname, by the collective `how` (allgather, census)."""
    return Origin.probe(f"comm.{how}", f"hostnames: {what}")


def _is_answer(value: object) -> bool:
    return (
        isinstance(value, (tuple, list))
        and len(value) == 4
        and (value[0] is None or isinstance(value[0], str))
        and (value[3] is None or isinstance(value[3], str))
    )


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_place(place: object) -> bool:
    """Whether `place` has a `probes.census.Place`'s fields, each of its type (not imported here: see above)."""
    failed, seat, names = (getattr(place, name, 0) for name in ("failed", "seat", "hostnames"))
    return (
        _is_answer(getattr(place, "rank0", None))
        and (failed is None or (isinstance(failed, tuple) and len(failed) == 2 and _count(failed[0])))
        and (seat is None or (isinstance(seat, tuple) and len(seat) == 4 and all(map(_count, seat))))
        and (names is None or (isinstance(names, tuple) and all(isinstance(n, str) for n in names)))
    )
