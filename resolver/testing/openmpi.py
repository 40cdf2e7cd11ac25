"""Open MPI 4.1.4 ``mpirun`` (PMIx 4.2.2): every rank, as measured in tests/captures/openmpi.

    openmpi_env(rank=1, np=4, hosts=("vm",), slots=2, oversubscribe=True)  -> Process: rank 1's environment
    openmpi_job(np=3, hosts=("vm", "nodeB"), slots=2)                      -> Job: every rank

The keywords are the fields of `OpenMpiLaunch` (plus `rank` for `openmpi_env`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "OpenMpiLaunch", "OpenMpiRank", "openmpi_env", "openmpi_job"]

_PORT = r"[1-9][0-9]{0,4}"
_URI = r"[0-9]+\.[0-9]+;tcp://[0-9.]+:" + _PORT + r";tcp6://\[[0-9a-f:]+\]:" + _PORT
_PMIX_URI = r"[0-9]+\.[0-9]+;tcp4://127\.0\.0\.1:" + _PORT


def _jobfam(host: str, pid: int) -> int:
    """ORTE's 16-bit job family: the one-at-a-time hash of mpirun's host name, xor its pid, folded.

    With host ``vm`` and pid 13226 it gives 0x5F54, the captures' PMIX_NAMESPACE 1599340545 - 1 >> 16.
    """
    value = 0
    for byte in host.encode():
        value = (value + byte) & 0xFFFFFFFF
        value = (value + (value << 10)) & 0xFFFFFFFF
        value ^= value >> 6
    value = (value + (value << 3)) & 0xFFFFFFFF
    value ^= value >> 11
    value = (value + (value << 15)) & 0xFFFFFFFF
    value ^= pid
    return ((value >> 16) ^ value) & 0xFFFF


def _map_by_slot(np: int, slots: Sequence[int]) -> tuple[int, ...]:
    """Open MPI's default mapping (by slot): fill each host's slots in order; extra ranks (oversubscribed)
    are spread evenly, the first hosts taking one more."""
    counts, left = [], np
    for free in slots:
        here = min(free, left)
        counts.append(here)
        left -= here
    if left:
        extra, remainder = divmod(left, len(slots))
        counts = [count + extra + (1 if index < remainder else 0) for index, count in enumerate(counts)]
    return tuple(counts)


@attrs.frozen(kw_only=True)
class OpenMpiLaunch(kit.Launch):
    """Open MPI 4.1.4 ``mpirun -n np`` (PMIx 4.2.2) over `hosts` with `slots` each, mpirun on the first host.

    Ranks are mapped by slot. Beyond the slots, `oversubscribe=True` is needed (as mpirun refuses
    otherwise); it sets OMPI_MCA_rmaps_base_oversubscribe=1, as in the captures, where it came from the
    environment (ranks are bound to cores at launch only within the slots and `cores`, when given). Its
    session directories live under `tmpdir` ($TMPDIR: Grid Engine gives each job its own).
    PMIX_NAMESPACE follows ORTE's job-family hash of mpirun's host and `mpirun_pid`.
    `command`/`args`/`wdir`: OMPI_COMMAND; OMPI_ARGV and OMPI_MCA_initial_wdir, which real mpirun also
    sets (OMPI_ARGV only with arguments) but the captures dropped: they appear only when given.
    On hosts other than mpirun's the ranks' daemon is a remote orted, whose variables differ (measured
    with two emulated hosts: jf.<family> session directories, node regex, parent URI, plm=rsh).
    `visible_devices`: the CUDA_VISIBLE_DEVICES of the launcher's environment, which every process
    inherits unchanged (None: unset).
    """

    launcher, source, mpi = "openmpi", "mpi", True
    np: int = attrs.field(validator=kit.positive)
    hosts: tuple[str, ...] = attrs.field(default=("ci1",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    slots: int | tuple[int, ...] = 2
    oversubscribe: bool = False
    command: str = "python"
    args: tuple[str, ...] = attrs.field(default=(), converter=kit.to_strings)
    wdir: str | None = None
    mpirun_pid: int = attrs.field(default=13226, validator=kit.positive)
    uid: int = 0
    munge: bool = False  # PMIx offers munge security where munged runs (it did not for the captures)
    visible_devices: tuple[str, ...] | None = attrs.field(default=None, converter=kit.to_optional_devices)
    tmpdir: str = "/tmp"  # noqa: S108 - $TMPDIR, under which Open MPI puts its session directories
    cores: int | None = None  # per host; ranks are bound at launch only when they fit (None: the slots)

    def __attrs_post_init__(self) -> None:
        if self.np > sum(self.host_slots) and not self.oversubscribe:
            raise ValueError(f"np={self.np} > {sum(self.host_slots)} slots: mpirun refuses without oversubscribe=True")

    @property
    def host_slots(self) -> tuple[int, ...]:
        return tuple(kit.capacities(self.slots, len(self.hosts)))

    def placement(self) -> tuple[int, ...]:
        return _map_by_slot(self.np, self.host_slots)

    def process(self, rank: int) -> Process:
        counts = self.placement()
        kit.index_in("rank", rank, self.np, "the job has ranks")
        daemon, first = 0, 0
        while rank >= first + counts[daemon]:
            first += counts[daemon]
            daemon += 1
        local, host = rank - first, self.hosts[daemon]
        used = sum(1 for count in counts if count)
        family = _jobfam(self.hosts[0], self.mpirun_pid)
        daemons_job, job = family << 16, (family << 16) + 1
        top = f"{self.tmpdir}/ompi.{host}.{self.uid}"
        session = f"{top}/pid.{self.mpirun_pid}" if daemon == 0 else f"{top}/jf.{family}"
        server_pid = (
            self.mpirun_pid if daemon == 0 else kit.stable_number("orted", family, host, low=2000, high=4000000)
        )
        pmix_uri = f"{daemons_job}.{daemon};tcp4://127.0.0.1:{kit.ephemeral_port('pmix', family, daemon)}"
        env = {
            "OMPI_APP_CTX_NUM_PROCS": str(self.np),
            "OMPI_COMMAND": self.command,
            "OMPI_COMM_WORLD_LOCAL_RANK": str(local),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(counts[daemon]),
            "OMPI_COMM_WORLD_NODE_RANK": str(local),  # the rank within the node, not the node's index
            "OMPI_COMM_WORLD_RANK": str(rank),
            "OMPI_COMM_WORLD_SIZE": str(self.np),
            "OMPI_FILE_LOCATION": f"{session}/0/{daemon}",
            "OMPI_FIRST_RANKS": "0",
            "OMPI_MCA_ess": "^singleton",
            "OMPI_MCA_ess_base_jobid": str(job),
            "OMPI_MCA_ess_base_vpid": str(rank),
            "OMPI_MCA_mpi_oversubscribe": "1" if counts[daemon] > self.host_slots[daemon] else "0",
            "OMPI_MCA_orte_app_num": "0",
            "OMPI_MCA_orte_ess_node_rank": str(local),
            "OMPI_MCA_orte_ess_num_procs": str(self.np),
            "OMPI_MCA_orte_hnp_uri": self._daemon_uri(family, 0),
            "OMPI_MCA_orte_jobfam_session_dir": session,
            "OMPI_MCA_orte_launch": "1",
            "OMPI_MCA_orte_local_daemon_uri": self._daemon_uri(family, daemon),
            "OMPI_MCA_orte_num_nodes": str(used),
            "OMPI_MCA_orte_precondition_transports": "-".join(
                f"{kit.stable_number('key', family, half, low=0, high=2**64 - 1):016x}" for half in (0, 1)
            ),
            "OMPI_MCA_orte_tmpdir_base": self.tmpdir,
            "OMPI_MCA_orte_top_session_dir": top,
            "OMPI_MCA_pmix": "^s1,s2,cray,isolated",
            "OMPI_MCA_shmem_RUNTIME_QUERY_hint": "mmap",
            "OMPI_NUM_APP_CTX": "1",
            "OMPI_UNIVERSE_SIZE": str(sum(self.host_slots)),
            "PMIX_BFROP_BUFFER_TYPE": "PMIX_BFROP_BUFFER_NON_DESC",
            "PMIX_DSTORE_21_BASE_PATH": f"{session}/pmix_dstor_ds21_{server_pid}",
            "PMIX_DSTORE_ESH_BASE_PATH": f"{session}/pmix_dstor_ds12_{server_pid}",
            "PMIX_GDS_MODULE": "ds21,ds12,hash",
            "PMIX_HOSTNAME": host,
            "PMIX_ID": f"{job}.{rank}",
            "PMIX_MCA_mca_base_component_show_load_errors": "1",
            "PMIX_NAMESPACE": str(job),
            "PMIX_RANK": str(rank),
            "PMIX_SECURITY_MODE": "munge,native" if self.munge else "native",
            "PMIX_SERVER_TMPDIR": session,
            "PMIX_SYSTEM_TMPDIR": self.tmpdir,
            "PMIX_VERSION": "4.2.2rc2",
        }
        env |= {f"PMIX_SERVER_URI{suffix}": pmix_uri for suffix in ("2", "21", "3", "4", "41")}
        fit = self.host_slots[daemon] if self.cores is None else min(self.cores, self.host_slots[daemon])
        if counts[daemon] <= fit:
            env["OMPI_MCA_orte_bound_at_launch"] = "1"  # bound unless oversubscribed or beyond the cores
        if self.oversubscribe:
            env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
        if daemon > 0:  # a remote orted, started by mpirun over ssh
            env |= {
                "OMPI_MCA_ess_base_num_procs": str(used),
                "OMPI_MCA_orte_node_regex": f"{','.join(self.hosts[:used])}@0({used})",
                "OMPI_MCA_orte_parent_uri": self._daemon_uri(family, 0),
                "OMPI_MCA_plm": "rsh",
                "OMPI_MCA_routed": "radix",
            }
        if self.args:
            env["OMPI_ARGV"] = " ".join(self.args)
        if self.wdir is not None:
            env["OMPI_MCA_initial_wdir"] = self.wdir
        env |= kit.visibility(self.visible_devices)
        return Process(environ=dict(sorted(env.items())), hostname=host, node=daemon)

    def _daemon_uri(self, family: int, daemon: int) -> str:
        ports = [kit.ephemeral_port("orte", family, daemon, proto) for proto in (4, 6)]
        return f"{family << 16}.{daemon};tcp://192.0.2.{2 + daemon}:{ports[0]};tcp6://[fd00::{2 + daemon:x}]:{ports[1]}"

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.np))


@attrs.frozen(kw_only=True)
class OpenMpiRank(OpenMpiLaunch, kit.ByRank):
    """Rank `rank` of an `OpenMpiLaunch`."""

    rank: int = attrs.field(default=0, validator=kit.not_negative)


openmpi_job = kit.job_builder(
    OpenMpiLaunch, doc="Every rank of one Open MPI ``mpirun``; the keywords are `OpenMpiLaunch`'s."
)
openmpi_env = kit.env_builder(
    OpenMpiRank, doc="Rank `rank`'s environment under Open MPI's mpirun; the other keywords are `OpenMpiLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    def launch(draw: st.DrawFn, count: int) -> OpenMpiLaunch:
        slots = draw(st.integers(1, 4))
        np = draw(st.integers(2, min(most, count * slots * 2)))  # one rank is not MPI (as in Lightning)
        return OpenMpiLaunch(np=np, hosts=draw(kit.host_names(count)), slots=slots, oversubscribe=np > count * slots)

    return kit.jobs_on_hosts(most // 2, launch, master=True)


LAUNCHER = Launcher(
    name="openmpi",
    nondeterministic={
        "OMPI_MCA_orte_hnp_uri": _URI,
        "OMPI_MCA_orte_local_daemon_uri": _URI,
        "OMPI_MCA_orte_parent_uri": _URI,
        "OMPI_MCA_orte_precondition_transports": r"[0-9a-f]{16}-[0-9a-f]{16}",
        "PMIX_SERVER_URI2": _PMIX_URI,
        "PMIX_SERVER_URI21": _PMIX_URI,
        "PMIX_SERVER_URI3": _PMIX_URI,
        "PMIX_SERVER_URI4": _PMIX_URI,
        "PMIX_SERVER_URI41": _PMIX_URI,
        # the pid of orted on a host other than mpirun's (mpirun's own pid is the keyword mpirun_pid)
        "PMIX_DSTORE_21_BASE_PATH": r"/tmp(/[^/]+)?/ompi\.[^/]+\.[0-9]+/(pid|jf)\.[0-9]+/pmix_dstor_ds21_[0-9]+",  # noqa: S108
        "PMIX_DSTORE_ESH_BASE_PATH": r"/tmp(/[^/]+)?/ompi\.[^/]+\.[0-9]+/(pid|jf)\.[0-9]+/pmix_dstor_ds12_[0-9]+",  # noqa: S108
    },
    jobs=_jobs,
)
