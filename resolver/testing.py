"""Environments shaped exactly like real launchers', for testing code that resolves a topology.

Builders (no dependency beyond this library): each describes one launch with keywords and gives
what the launcher puts in each process's environment, variable for variable, as measured in the
captures under ``tests/captures`` (SLURM 22.05, Open MPI 4.1.4, MPICH 4.0.2, torchrun):

    slurm_env(procid=3, nodes=("ci1", "ci2"), ntasks=4)   -> dict: one srun task's environment
    slurm_job(nodes=("ci1", "ci2"), ntasks=4)             -> Job: every task of that launch

and likewise ``torchrun_env/torchrun_job``, ``openmpi_env/openmpi_job``, ``mpich_env/mpich_job``,
``kubeflow_env/kubeflow_job``, ``lsf_env/lsf_job`` (LSF's source also reads the rankfile, so
``lsf_env`` returns a `Process` with ``.environ`` and ``.files``). The keywords of each pair are
the fields of its launch class (`SlurmLaunch`, `TorchrunLaunch`, ...). Values a launcher picks at
random (ports, pids, temporary directories) are plausible and derived from the keywords, so a
builder is a pure function; `NONDETERMINISTIC` lists them with the shape of their values.

A `Job` holds every process of one launch with the host it runs on; ``job.resolve()`` resolves
each with its own fake probes (MPI ranks in threads over ``FakeComm.connected``, so collectives
meet) and `assert_consistent` checks that the answers form one world.

Strategies: `jobs()` and `topologies()` return Hypothesis strategies. Hypothesis is a test extra,
not a dependency: it is imported when a strategy function is called, never at import, so the
builders work without it. Nothing here is imported by ``import resolver``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from resolver import hostlist
from resolver._detect import resolve as _resolve
from resolver.errors import TopologyError
from resolver.topology import Topology

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from probes import Probes

__all__ = [
    "LAUNCHERS",
    "NONDETERMINISTIC",
    "Job",
    "KubeflowLaunch",
    "LsfLaunch",
    "MpichLaunch",
    "OpenMpiLaunch",
    "Process",
    "SlurmLaunch",
    "TorchrunLaunch",
    "assert_consistent",
    "jobs",
    "kubeflow_env",
    "kubeflow_job",
    "lsf_env",
    "lsf_job",
    "mpich_env",
    "mpich_job",
    "openmpi_env",
    "openmpi_job",
    "slurm_batch_env",
    "slurm_env",
    "slurm_job",
    "slurm_salloc_env",
    "slurm_tasks_per_node",
    "topologies",
    "topology_schema",
    "torchrun_env",
    "torchrun_job",
]

LAUNCHERS = ("slurm", "torchrun", "kubeflow", "openmpi", "mpich", "lsf")

# Variables whose values the launcher picks at random or from the machine's state: the builders give
# plausible values of this shape (a regular expression); every other value is exactly the launcher's.
_PORT = r"[1-9][0-9]{0,4}"
_URI = r"[0-9]+\.[0-9]+;tcp://[0-9.]+:" + _PORT + r";tcp6://\[[0-9a-f:]+\]:" + _PORT
_PMIX_URI = r"[0-9]+\.[0-9]+;tcp4://127\.0\.0\.1:" + _PORT
NONDETERMINISTIC: Mapping[str, Mapping[str, str]] = {
    "slurm": {"SLURM_TASK_PID": r"[1-9][0-9]*", "SLURM_SRUN_COMM_PORT": _PORT, "SLURM_STEP_LAUNCHER_PORT": _PORT},
    "torchrun": {
        "MASTER_PORT": _PORT,  # c10d only: a free port of group rank 0's host; static passes --master-port
        "TORCHELASTIC_ERROR_FILE": (
            r"/tmp/torchelastic_[a-z0-9_]{8}/[^/]+_[a-z0-9_]{8}"  # noqa: S108 - a pattern of torch's path
            r"/attempt_[0-9]+/[0-9]+/error\.json"
        ),
    },
    "kubeflow": {},
    "openmpi": {
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
        "PMIX_DSTORE_21_BASE_PATH": r"/tmp/ompi\.[^/]+\.[0-9]+/(pid|jf)\.[0-9]+/pmix_dstor_ds21_[0-9]+",  # noqa: S108
        "PMIX_DSTORE_ESH_BASE_PATH": r"/tmp/ompi\.[^/]+\.[0-9]+/(pid|jf)\.[0-9]+/pmix_dstor_ds12_[0-9]+",  # noqa: S108
    },
    "mpich": {"PMI_FD": r"[0-9]+"},
    "lsf": {},
}


def _number(*parts: object, low: int, high: int) -> int:
    """A plausible 'random' number in low..high, the same for the same parts (builders stay pure)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return low + int.from_bytes(digest, "big") % (high - low + 1)


def _token(*parts: object, length: int = 8) -> str:
    """A plausible tempfile-style name: `length` characters of [a-z0-9_], the same for the same parts."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789_"
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=32).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:length])


def _ephemeral_port(*parts: object) -> int:
    return _number("port", *parts, low=32768, high=60999)  # Linux's default ip_local_port_range


def _hosts(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError(f"expected a sequence of host names, got the string {value!r}")
    return tuple(value)


def _optional_hosts(value: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if value is None else _hosts(value)


def _distinct(instance: object, attribute: attrs.Attribute[Any], value: tuple[str, ...] | None) -> None:
    if value is None:
        return
    if not value:
        raise ValueError(f"{attribute.name}: at least one host")
    if len(set(value)) != len(value):
        raise ValueError(f"{attribute.name}={value!r}: each host once")


def _positive(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{attribute.name}={value!r}: expected an int >= 1")


def _not_negative(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(f"{attribute.name}={value!r}: expected an int >= 0")


# -- processes and jobs ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Process:
    """One process of a launch: its environment, the host it runs on, its node and the files it can read.

    `node` is the launcher's index of the node (agent, pod) the process belongs to; processes with the
    same `node` must resolve to the same node rank, and processes with different ones to different ranks.
    """

    environ: dict[str, str]
    hostname: str
    node: int = 0
    files: Mapping[str, str] = attrs.field(factory=dict)

    def probes(self, **answers: Any) -> Probes:
        """`probes.fake` that answers this process's host name and files, plus `answers` (free_port=...)."""
        from probes import fake

        return fake(hostname=self.hostname, files=dict(self.files) or None, **answers)


@attrs.frozen(kw_only=True)
class Job:
    """Every process of one launch, in global-rank order, and the source that must resolve them.

    `call` is the builder call that made it (what Hypothesis prints for a failing example).
    `forced`: the source is chosen with ``source=`` (Kubeflow is never auto-detected).
    """

    launcher: str
    source: str
    processes: tuple[Process, ...] = attrs.field(repr=False)
    forced: bool = False
    call: str = ""

    def __len__(self) -> int:
        return len(self.processes)

    @property
    def environs(self) -> tuple[dict[str, str], ...]:
        """Each process's environment, in global-rank order."""
        return tuple(p.environ for p in self.processes)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The host each process runs on."""
        return tuple(p.hostname for p in self.processes)

    def resolve(self, *, timeout: float = 30.0) -> tuple[Topology, ...]:
        """Resolve every process with its own fake probes; the first rank's `TopologyError` is raised.

        Each process gets its host name, its files and a free port of its own (40000 + its index, so a
        rank that uses its own port instead of rank 0's shows). MPI ranks get the communicators of one
        world (`FakeComm.connected`) and run in threads, so their collectives really meet.
        """
        source = self.source if self.forced else None
        if self.launcher not in _MPI_LAUNCHERS:
            return tuple(_resolve(p.environ, p.probes(free_port=40000 + i), source=source) for i, p in enumerate(self))
        return self._resolve_world(source, timeout)

    def __iter__(self) -> Iterator[Process]:
        return iter(self.processes)

    def _resolve_world(self, source: str | None, timeout: float) -> tuple[Topology, ...]:
        from probes.fakes import FakeComm

        comms = FakeComm.connected(len(self), timeout=timeout)
        results: list[Topology | TopologyError | None] = [None] * len(self)

        def run(i: int) -> None:
            process = self.processes[i]
            try:
                results[i] = _resolve(
                    process.environ, process.probes(free_port=40000 + i, comm=comms[i]), source=source
                )
            except TopologyError as exc:
                results[i] = exc
                meeting = comms[i].meeting
                if meeting is not None:
                    meeting.abort()  # the other ranks fail now instead of at the timeout

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(self))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout + 5)
        out: list[Topology] = []
        for i, result in enumerate(results):
            if result is None:
                raise AssertionError(f"rank {i} of {self.call} did not finish within {timeout + 5} s")
            if isinstance(result, TopologyError):
                raise result
            out.append(result)
        return tuple(out)


def assert_consistent(topologies: Sequence[Topology], job: Job | None = None) -> None:
    """Raise AssertionError unless `topologies` (one per process, in rank order) form one world.

    One world: the same world size on every process, ranks 0..n-1 each once, one main address and
    port, one source; node ranks 0..num_nodes-1, and on each node local ranks 0..k-1 each once with
    local world size k. With `job`: process i has global rank i, the job's source, and processes
    share a node rank exactly when the launcher put them on the same node.
    """
    n = len(topologies)
    problems: list[str] = []
    if n == 0:
        raise AssertionError("no topologies")
    if {t.world_size for t in topologies} != {n}:
        problems.append(f"world sizes {sorted({t.world_size for t in topologies})} for {n} processes")
    if sorted(t.global_rank for t in topologies) != list(range(n)):
        problems.append(f"global ranks {sorted(t.global_rank for t in topologies)}: expected 0..{n - 1} once each")
    for what, values in (
        ("main endpoints", {(t.main_address, t.main_port) for t in topologies}),
        ("sources", {t.source for t in topologies}),
        ("num_nodes", {t.num_nodes for t in topologies}),
        ("creates_processes_externally", {t.creates_processes_externally for t in topologies}),
    ):
        if len(values) != 1:
            problems.append(f"{len(values)} different {what}: {sorted(values, key=repr)}")
    groups: dict[int, list[Topology]] = {}
    for t in topologies:
        groups.setdefault(t.node_rank, []).append(t)
    nodes = topologies[0].num_nodes
    if sorted(groups) != list(range(len(groups) if nodes is None else nodes)):
        problems.append(f"node ranks {sorted(groups)} for num_nodes={nodes}")
    for node, members in sorted(groups.items()):
        if sorted(t.local_rank for t in members) != list(range(len(members))):
            problems.append(f"node {node}: local ranks {sorted(t.local_rank for t in members)}")
        if {t.local_world_size for t in members} - {None, len(members)}:
            problems.append(
                f"node {node}: local world sizes {[t.local_world_size for t in members]}, {len(members)} ranks"
            )
    if job is not None:
        problems += _against_job(topologies, job)
    if problems:
        raise AssertionError(f"not one world ({job.call if job else f'{n} topologies'}): " + "; ".join(problems))


def _against_job(topologies: Sequence[Topology], job: Job) -> list[str]:
    problems = []
    if len(job) != len(topologies):
        return [f"{len(topologies)} topologies for {len(job)} processes"]
    if [t.global_rank for t in topologies] != list(range(len(job))):
        problems.append(f"process i must have global rank i: got {[t.global_rank for t in topologies]}")
    if {t.source for t in topologies} != {job.source}:
        problems.append(f"sources {sorted({t.source for t in topologies})}: expected {job.source!r}")
    launcher_nodes = _partition(p.node for p in job)
    resolved_nodes = _partition(t.node_rank for t in topologies)
    if launcher_nodes != resolved_nodes:
        problems.append(f"processes by node rank {resolved_nodes}, by the launcher's node {launcher_nodes}")
    return problems


def _partition(keys: Iterable[object]) -> list[list[int]]:
    groups: dict[object, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return sorted(groups.values())


# -- SLURM -----------------------------------------------------------------------------------------------

Allocation = Literal["srun", "sbatch", "salloc"]
_SLURM_DEFAULT_NAMES = {"srun": "python", "sbatch": "job.sh", "salloc": "interactive"}


def slurm_tasks_per_node(
    ntasks: int, nodes: int, *, capacity: int | Sequence[int] = 4, tasks_per_node: int | None = None
) -> tuple[int, ...]:
    """How SLURM 22.05 (select/cons_tres, one CPU per task, block distribution) places ntasks on nodes.

    Every node gets one task, then the nodes are filled in order up to their capacity (their CPUs,
    or `tasks_per_node` for ``--ntasks-per-node``): node i gets ``min(capacity_i, tasks left - nodes
    after i)``. It is not ceil(n/N): on the captures' 4-CPU nodes ``-N2 -n4`` gives 3,1
    (f_2node_srun_N2_n4), ``-N3 -n9`` gives 4,4,1 (h_4node_srun_N3_n9_noncontig), ``-N2 -n3``
    gives 2,1 and ``-N2 --ntasks-per-node=2`` gives 2,2.
    """
    caps = [tasks_per_node] * nodes if tasks_per_node is not None else _capacities(capacity, nodes)
    if nodes < 1 or ntasks < nodes:
        raise ValueError(f"{ntasks} task(s) on {nodes} node(s): SLURM puts at least one task on each node")
    if ntasks > sum(caps):
        raise ValueError(f"{ntasks} tasks do not fit on {nodes} node(s) of {caps} CPUs (SLURM refuses the job)")
    counts, left = [], ntasks
    for index, cap in enumerate(caps):
        here = min(cap, left - (nodes - index - 1))
        counts.append(here)
        left -= here
    return tuple(counts)


def _capacities(capacity: int | Sequence[int], nodes: int) -> list[int]:
    if isinstance(capacity, int):
        return [capacity] * nodes
    if len(capacity) != nodes:
        raise ValueError(f"capacity {list(capacity)} for {nodes} nodes")
    return list(capacity)


def _slurm_counts(counts: Sequence[int]) -> str:
    """[4, 4, 1] -> '4(x2),1': SLURM's compressed tasks-per-node notation."""
    out: list[str] = []
    index = 0
    while index < len(counts):
        end = index
        while end + 1 < len(counts) and counts[end + 1] == counts[index]:
            end += 1
        repeat = end - index + 1
        out.append(f"{counts[index]}(x{repeat})" if repeat > 1 else str(counts[index]))
        index = end + 1
    return ",".join(out)


@attrs.frozen(kw_only=True)
class SlurmLaunch:
    """One SLURM 22.05 launch: an allocation (made by srun itself, sbatch or salloc) and one srun step.

    Allocation: `nodes` (``-N``/``-w``, in SLURM's order), `ntasks` (``-n``; default one per node, or
    `tasks_per_node` per node), `tasks_per_node` (``--ntasks-per-node``), `cpus_per_node` (what each
    node offers; 4 on the captures' cluster). The step: `step_id`; inside sbatch/salloc a step may run
    on `step_nodes` with `step_ntasks` or `step_tasks_per_node` (default: the whole allocation), and
    then its tasks are placed by the same rule within the allocation's CPUs of those nodes.
    `job_name` defaults to what SLURM names it: the command for srun (``python``), the script for
    sbatch (``job.sh``), ``interactive`` for salloc. `array` (sbatch ``--array``, e.g. ``range(0, 2)``)
    with `array_task_id`: `job_id` is then SLURM_ARRAY_JOB_ID, and each task's own SLURM_JOB_ID is
    ``job_id + 1 + position`` except the last task's, which keeps `job_id` (as measured with
    ``--array=0-1``: task 0 got 6, task 1 kept 5; assumes the tasks start together in index order).
    `restart_count` sets SLURM_RESTART_COUNT (a requeued job). The rest are site facts.
    """

    nodes: tuple[str, ...] = attrs.field(default=("ci1",), converter=_hosts, validator=_distinct)
    ntasks: int | None = attrs.field(default=None, validator=_positive)
    tasks_per_node: int | None = attrs.field(default=None, validator=_positive)
    cpus_per_node: int = attrs.field(default=4, validator=_positive)
    allocation: Allocation = "srun"
    step_id: int = attrs.field(default=0, validator=_not_negative)
    step_nodes: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_hosts, validator=_distinct)
    step_ntasks: int | None = attrs.field(default=None, validator=_positive)
    step_tasks_per_node: int | None = attrs.field(default=None, validator=_positive)
    job_id: int = attrs.field(default=1, validator=_positive)
    job_name: str | None = None
    array: range | None = None
    array_task_id: int | None = None
    restart_count: int | None = attrs.field(default=None, validator=_not_negative)
    submit_host: str | None = None  # where srun/sbatch/salloc ran; default the first node
    submit_dir: str = "/home/user/job"
    cluster: str = "ci"
    partition: str = "debug"
    user: str = "root"
    uid: int = 0
    gid: int = 0
    controller: str = "127.0.0.1"  # slurmctld's address
    launch_address: str = "127.0.0.1"  # the address of the host that ran srun

    def __attrs_post_init__(self) -> None:
        if self.allocation not in _SLURM_DEFAULT_NAMES:
            raise ValueError(f"allocation={self.allocation!r}: expected srun, sbatch or salloc")
        in_step = (self.step_nodes, self.step_ntasks, self.step_tasks_per_node)
        if self.allocation == "srun" and in_step != (None, None, None):
            raise ValueError("step_nodes/step_ntasks/step_tasks_per_node need allocation='sbatch' or 'salloc'")
        if self.step_nodes is not None and not set(self.step_nodes) <= set(self.nodes):
            raise ValueError(f"step_nodes={self.step_nodes!r} must be among nodes={self.nodes!r}")
        if self.array is not None:
            if self.allocation != "sbatch" or not len(self.array):
                raise ValueError("array= needs allocation='sbatch' and a non-empty range")
            if self.array_task_id not in self.array:
                raise ValueError(f"array_task_id={self.array_task_id!r} must be in array={self.array!r}")
        elif self.array_task_id is not None:
            raise ValueError("array_task_id= needs array=")
        self.layout()  # refuse a launch SLURM would refuse, now rather than on first use

    # -- the allocation and the step -------------------------------------------------------------------

    @property
    def total_tasks(self) -> int:
        return self.ntasks or len(self.nodes) * (self.tasks_per_node or 1)

    def allocation_layout(self) -> tuple[int, ...]:
        """Tasks (= CPUs, one per task) the allocation has on each of `nodes`."""
        return slurm_tasks_per_node(
            self.total_tasks, len(self.nodes), capacity=self.cpus_per_node, tasks_per_node=self.tasks_per_node
        )

    def step_hosts(self) -> tuple[str, ...]:
        if self.step_nodes is None:
            return self.nodes
        return tuple(node for node in self.nodes if node in self.step_nodes)  # SLURM's order

    def layout(self) -> tuple[int, ...]:
        """Tasks of the step on each of `step_hosts()`."""
        allocated = dict(zip(self.nodes, self.allocation_layout(), strict=True))
        hosts = self.step_hosts()
        if hosts == self.nodes and self.step_ntasks is None and self.step_tasks_per_node is None:
            return self.allocation_layout()
        per_node = self.step_tasks_per_node
        ntasks = self.step_ntasks or (per_node * len(hosts) if per_node else len(hosts))
        return slurm_tasks_per_node(ntasks, len(hosts), capacity=[allocated[h] for h in hosts], tasks_per_node=per_node)

    @property
    def name(self) -> str:
        return self.job_name if self.job_name is not None else _SLURM_DEFAULT_NAMES[self.allocation]

    @property
    def own_job_id(self) -> int:
        """SLURM_JOB_ID: `job_id`, or for an array task the id SLURM gave that task."""
        if self.array is None or self.array_task_id is None:
            return self.job_id
        position = self.array.index(self.array_task_id)
        return self.job_id if position == len(self.array) - 1 else self.job_id + 1 + position

    # -- environments -----------------------------------------------------------------------------------

    def job_variables(self) -> dict[str, str]:
        """What the allocation itself sets: the salloc shell has exactly these."""
        layout = self.allocation_layout()
        nodelist = hostlist.compress(self.nodes)
        env = {
            "SLURM_CLUSTER_NAME": self.cluster,
            "SLURM_CONF": "/etc/slurm/slurm.conf",
            "SLURM_JOBID": str(self.own_job_id),
            "SLURM_JOB_ID": str(self.own_job_id),
            "SLURM_JOB_CPUS_PER_NODE": _slurm_counts(layout),
            "SLURM_JOB_NAME": self.name,
            "SLURM_JOB_NODELIST": nodelist,
            "SLURM_JOB_NUM_NODES": str(len(self.nodes)),
            "SLURM_JOB_PARTITION": self.partition,
            "SLURM_NNODES": str(len(self.nodes)),
            "SLURM_NODELIST": nodelist,
            "SLURM_NPROCS": str(self.total_tasks),
            "SLURM_NTASKS": str(self.total_tasks),
            "SLURM_SUBMIT_DIR": self.submit_dir,
            "SLURM_SUBMIT_HOST": self.submit_host or self.nodes[0],
            "SLURM_TASKS_PER_NODE": _slurm_counts(layout),
        }
        if self.tasks_per_node is not None:
            env["SLURM_NTASKS_PER_NODE"] = str(self.tasks_per_node)
        if self.allocation != "srun":
            env["SLURM_NODE_ALIASES"] = "(null)"
        if self.array is not None:
            env |= {
                "SLURM_ARRAY_JOB_ID": str(self.job_id),
                "SLURM_ARRAY_TASK_COUNT": str(len(self.array)),
                "SLURM_ARRAY_TASK_ID": str(self.array_task_id),
                "SLURM_ARRAY_TASK_MAX": str(self.array[-1]),
                "SLURM_ARRAY_TASK_MIN": str(self.array[0]),
                "SLURM_ARRAY_TASK_STEP": str(self.array.step),
            }
        if self.restart_count is not None:
            env["SLURM_RESTART_COUNT"] = str(self.restart_count)
        return env

    def _process_variables(
        self, node: str, procid: int, localid: int, nodeid: int, gtids: Sequence[int]
    ) -> dict[str, str]:
        """What slurmd sets for one process (a task, or the batch script) on `node`."""
        allocated = dict(zip(self.nodes, self.allocation_layout(), strict=True))
        return {
            "SLURMD_NODENAME": node,
            "SLURM_CPUS_ON_NODE": str(allocated[node]),
            "SLURM_GTIDS": ",".join(map(str, gtids)),
            "SLURM_JOB_GID": str(self.gid),
            "SLURM_JOB_UID": str(self.uid),
            "SLURM_JOB_USER": self.user,
            "SLURM_LOCALID": str(localid),
            "SLURM_NODEID": str(nodeid),
            "SLURM_PRIO_PROCESS": "0",
            "SLURM_PROCID": str(procid),
            "SLURM_TASK_PID": str(_number("pid", self.own_job_id, self.step_id, procid, low=2000, high=4000000)),
            "SLURM_TOPOLOGY_ADDR": node,
            "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
            "SLURM_WORKING_CLUSTER": f"{self.cluster}:{self.controller}:6817:9728:109",  # port, RPC 22.05, cons_tres
        }

    def batch_script_variables(self) -> dict[str, str]:
        """The batch script's own environment (allocation='sbatch'): one process, not task 0 of the step."""
        if self.allocation != "sbatch":
            raise ValueError("the batch script exists only with allocation='sbatch'")
        head = self.nodes[0]
        env = self.job_variables() | self._process_variables(head, 0, 0, 0, [0])
        env |= {"ENVIRONMENT": "BATCH", "HOSTNAME": head}
        return dict(sorted(env.items()))

    def task_variables(self, procid: int) -> dict[str, str]:
        """srun task `procid`'s environment."""
        layout = self.layout()
        hosts = self.step_hosts()
        if not 0 <= procid < sum(layout):
            raise ValueError(f"procid={procid}: the step has tasks 0..{sum(layout) - 1}")
        nodeid, first = 0, 0
        while procid >= first + layout[nodeid]:
            first += layout[nodeid]
            nodeid += 1
        node = hosts[nodeid]
        env = self.job_variables()
        if self.allocation == "sbatch":
            env |= {"ENVIRONMENT": "BATCH", "HOSTNAME": self.nodes[0]}  # inherited from the batch script
        env |= self._process_variables(node, procid, procid - first, nodeid, range(first, first + layout[nodeid]))
        port = str(_ephemeral_port("srun", self.own_job_id, self.step_id))
        ntasks = str(sum(layout))
        env |= {
            "SLURM_LAUNCH_NODE_IPADDR": self.launch_address,
            "SLURM_NNODES": str(len(hosts)),
            "SLURM_NPROCS": ntasks,
            "SLURM_NTASKS": ntasks,
            "SLURM_SRUN_COMM_HOST": self.launch_address,
            "SLURM_SRUN_COMM_PORT": port,
            "SLURM_STEPID": str(self.step_id),
            "SLURM_STEP_ID": str(self.step_id),
            "SLURM_STEP_LAUNCHER_PORT": port,
            "SLURM_STEP_NODELIST": hostlist.compress(hosts),
            "SLURM_STEP_NUM_NODES": str(len(hosts)),
            "SLURM_STEP_NUM_TASKS": ntasks,
            "SLURM_STEP_TASKS_PER_NODE": _slurm_counts(layout),
            "SLURM_TASKS_PER_NODE": _slurm_counts(layout),
            "SLURM_UMASK": "0022",
        }
        if self.step_tasks_per_node is not None:
            env["SLURM_NTASKS_PER_NODE"] = str(self.step_tasks_per_node)
        if self.allocation != "srun":
            # srun inside an allocation: block when tasks outnumber nodes, else cyclic (as measured)
            env["SLURM_DISTRIBUTION"] = "block" if sum(layout) > len(hosts) else "cyclic"
            env["SLURM_JOB_CPUS_PER_NODE_PACK_GROUP_0"] = env["SLURM_JOB_CPUS_PER_NODE"]
        return dict(sorted(env.items()))

    def job(self) -> Job:
        layout = self.layout()
        nodes = [index for index, count in enumerate(layout) for _ in range(count)]
        hosts = self.step_hosts()
        processes = tuple(
            Process(environ=self.task_variables(procid), hostname=hosts[node], node=node)
            for procid, node in enumerate(nodes)
        )
        return Job(launcher="slurm", source="slurm", processes=processes, call=f"slurm_job(**{_fields(self)})")


def _fields(launch: attrs.AttrsInstance) -> dict[str, Any]:
    """A launch's keywords that differ from the defaults, for Job.call."""
    out = {}
    for field in attrs.fields(type(launch)):
        value = getattr(launch, field.name)
        if value != field.default:
            out[field.name] = value
    return out


def slurm_job(**launch: Any) -> Job:
    """Every task of one srun step; the keywords are `SlurmLaunch`'s."""
    return SlurmLaunch(**launch).job()


def slurm_env(*, procid: int = 0, **launch: Any) -> dict[str, str]:
    """srun task `procid`'s environment; the other keywords are `SlurmLaunch`'s."""
    return SlurmLaunch(**launch).task_variables(procid)


def slurm_batch_env(**launch: Any) -> dict[str, str]:
    """The sbatch script's own environment (ENVIRONMENT=BATCH, no SLURM_STEP_ID); keywords of `SlurmLaunch`."""
    return SlurmLaunch(**{"allocation": "sbatch", **launch}).batch_script_variables()


def slurm_salloc_env(**launch: Any) -> dict[str, str]:
    """The salloc shell's environment (no SLURM_PROCID: not a task); keywords of `SlurmLaunch`."""
    spec = SlurmLaunch(**{"allocation": "salloc", **launch})
    if spec.allocation != "salloc":
        raise ValueError("the salloc shell exists only with allocation='salloc'")
    return dict(sorted(spec.job_variables().items()))


# -- torchrun --------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TorchrunLaunch:
    """One torchrun launch (torch 2.x): `nnodes` agents of `nproc_per_node` workers each.

    `hosts` are the agents' hosts (default node1, node2, ...). With ``rdzv="c10d"`` MASTER_ADDR is
    group rank 0's host and MASTER_PORT a free port there (the captures' agents ran on one machine:
    ``localhost``); with ``rdzv="static"`` they are ``--master-addr``/``--master-port`` (default
    127.0.0.1:29500). Group ranks follow the agents' order here (c10d orders them by arrival).
    """

    nnodes: int = attrs.field(default=1, validator=_positive)
    nproc_per_node: int = attrs.field(default=1, validator=_positive)
    rdzv: Literal["c10d", "static"] = "c10d"
    hosts: tuple[str, ...] | None = attrs.field(default=None, converter=_optional_hosts)
    master_addr: str | None = None
    master_port: int | None = attrs.field(default=None, validator=_positive)
    run_id: str = "none"
    restart_count: int = attrs.field(default=0, validator=_not_negative)
    max_restarts: int = attrs.field(default=0, validator=_not_negative)
    role: str = "default"

    def __attrs_post_init__(self) -> None:
        if self.rdzv not in ("c10d", "static"):
            raise ValueError(f"rdzv={self.rdzv!r}: expected 'c10d' or 'static'")
        if self.hosts is not None and len(self.hosts) != self.nnodes:
            raise ValueError(f"hosts={self.hosts!r}: one per node (nnodes={self.nnodes})")

    @property
    def agent_hosts(self) -> tuple[str, ...]:
        return self.hosts if self.hosts is not None else tuple(f"node{i + 1}" for i in range(self.nnodes))

    def endpoint(self) -> tuple[str, int]:
        if self.rdzv == "static":
            return self.master_addr or "127.0.0.1", self.master_port or 29500
        port = self.master_port or _ephemeral_port("torchrun", self.run_id, self.restart_count, self.agent_hosts)
        return self.master_addr or self.agent_hosts[0], port

    def worker_variables(self, node_rank: int, local_rank: int) -> dict[str, str]:
        if not (0 <= node_rank < self.nnodes and 0 <= local_rank < self.nproc_per_node):
            raise ValueError(
                f"node_rank={node_rank}, local_rank={local_rank} outside {self.nnodes}x{self.nproc_per_node}"
            )
        world = self.nnodes * self.nproc_per_node
        rank = node_rank * self.nproc_per_node + local_rank
        address, port = self.endpoint()
        agent = (self.run_id, self.restart_count, node_rank, self.agent_hosts[node_rank])
        error_file = (
            f"/tmp/torchelastic_{_token('agent', *agent)}/{self.run_id}_{_token('run', *agent)}"  # noqa: S108 - torch's path
            f"/attempt_{self.restart_count}/{local_rank}/error.json"
        )
        env = {
            "GROUP_RANK": str(node_rank),
            "GROUP_WORLD_SIZE": str(self.nnodes),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(self.nproc_per_node),
            "MASTER_ADDR": address,
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "ROLE_NAME": self.role,
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(world),
            "TORCHELASTIC_ERROR_FILE": error_file,
            "TORCHELASTIC_MAX_RESTARTS": str(self.max_restarts),
            "TORCHELASTIC_RESTART_COUNT": str(self.restart_count),
            "TORCHELASTIC_RUN_ID": self.run_id,
            "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "WORLD_SIZE": str(world),
        }
        if self.nproc_per_node > 1:  # torchrun sets it when it starts several workers (unless already set)
            env["OMP_NUM_THREADS"] = "1"
        return dict(sorted(env.items()))

    def job(self) -> Job:
        processes = tuple(
            Process(environ=self.worker_variables(node, local), hostname=self.agent_hosts[node], node=node)
            for node in range(self.nnodes)
            for local in range(self.nproc_per_node)
        )
        return Job(
            launcher="torchrun", source="torchelastic", processes=processes, call=f"torchrun_job(**{_fields(self)})"
        )


def torchrun_job(**launch: Any) -> Job:
    """Every worker of one torchrun launch; the keywords are `TorchrunLaunch`'s."""
    return TorchrunLaunch(**launch).job()


def torchrun_env(*, node_rank: int = 0, local_rank: int = 0, **launch: Any) -> dict[str, str]:
    """The environment of worker `local_rank` of agent `node_rank`; the other keywords are `TorchrunLaunch`'s."""
    return TorchrunLaunch(**launch).worker_variables(node_rank, local_rank)


# -- Kubeflow ----------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class KubeflowLaunch:
    """A Kubeflow training-operator (v1.7+) PyTorchJob without elasticPolicy: one Master and `workers` Workers.

    Pod i is ``{name}-master-0`` (rank 0) or ``{name}-worker-{i-1}``; MASTER_ADDR is the master's
    service name, MASTER_PORT the container port named ``pytorchjob-port`` (default 23456).
    WORLD_SIZE is replicas x nprocPerNode (``"auto"`` or a number counts 1 here: the Kubeflow source
    describes one process per pod; with more, the pods run torchrun).
    """

    workers: int = attrs.field(default=1, validator=_not_negative)
    name: str = "pytorch-job"
    port: int = attrs.field(default=23456, validator=_positive)
    nproc_per_node: str = "auto"

    @property
    def replicas(self) -> int:
        return 1 + self.workers

    def pod(self, rank: int) -> str:
        return f"{self.name}-master-0" if rank == 0 else f"{self.name}-worker-{rank - 1}"

    def pod_variables(self, rank: int) -> dict[str, str]:
        if not 0 <= rank < self.replicas:
            raise ValueError(f"rank={rank}: the job has pods 0..{self.replicas - 1}")
        per_pod = int(self.nproc_per_node) if self.nproc_per_node.isdigit() else 1
        env = {
            "MASTER_ADDR": self.pod(0),
            "MASTER_PORT": str(self.port),
            "PET_MASTER_ADDR": self.pod(0),
            "PET_MASTER_PORT": str(self.port),
            "PET_NNODES": str(self.replicas),
            "PET_NODE_RANK": str(rank),
            "PET_NPROC_PER_NODE": self.nproc_per_node,
            "PYTHONUNBUFFERED": "0",
            "RANK": str(rank),
            "WORLD_SIZE": str(self.replicas * per_pod),
        }
        return dict(sorted(env.items()))

    def job(self) -> Job:
        processes = tuple(
            Process(environ=self.pod_variables(rank), hostname=self.pod(rank), node=rank)
            for rank in range(self.replicas)
        )
        call = f"kubeflow_job(**{_fields(self)})"
        return Job(launcher="kubeflow", source="kubeflow", forced=True, processes=processes, call=call)


def kubeflow_job(**launch: Any) -> Job:
    """Every pod of one PyTorchJob (resolve with ``source="kubeflow"``); keywords of `KubeflowLaunch`."""
    return KubeflowLaunch(**launch).job()


def kubeflow_env(*, rank: int = 0, **launch: Any) -> dict[str, str]:
    """Pod `rank`'s environment as the training operator sets it; the other keywords are `KubeflowLaunch`'s."""
    return KubeflowLaunch(**launch).pod_variables(rank)


# -- Open MPI ----------------------------------------------------------------------------------------------

_MPI_LAUNCHERS = ("openmpi", "mpich")


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
class OpenMpiLaunch:
    """Open MPI 4.1.4 ``mpirun -n np`` (PMIx 4.2.2) over `hosts` with `slots` each, mpirun on the first host.

    Ranks are mapped by slot. Beyond the slots, `oversubscribe=True` is needed (as mpirun refuses
    otherwise); it sets OMPI_MCA_rmaps_base_oversubscribe=1, as in the captures, where it came from the
    environment. PMIX_NAMESPACE follows ORTE's job-family hash of mpirun's host and `mpirun_pid`.
    `command`/`args`/`wdir`: OMPI_COMMAND; OMPI_ARGV and OMPI_MCA_initial_wdir, which real mpirun also
    sets (OMPI_ARGV only with arguments) but the captures dropped: they appear only when given.
    On hosts other than mpirun's the ranks' daemon is a remote orted, whose variables differ (measured
    with two emulated hosts: jf.<family> session directories, node regex, parent URI, plm=rsh).
    """

    np: int = attrs.field(validator=_positive)
    hosts: tuple[str, ...] = attrs.field(default=("ci1",), converter=_hosts, validator=_distinct)
    slots: int | tuple[int, ...] = 2
    oversubscribe: bool = False
    command: str = "python"
    args: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    wdir: str | None = None
    mpirun_pid: int = attrs.field(default=13226, validator=_positive)
    uid: int = 0
    munge: bool = False  # PMIx offers munge security where munged runs (it did not for the captures)

    def __attrs_post_init__(self) -> None:
        if self.np > sum(self.host_slots) and not self.oversubscribe:
            raise ValueError(f"np={self.np} > {sum(self.host_slots)} slots: mpirun refuses without oversubscribe=True")

    @property
    def host_slots(self) -> tuple[int, ...]:
        return tuple(_capacities(self.slots if isinstance(self.slots, int) else list(self.slots), len(self.hosts)))

    def placement(self) -> tuple[int, ...]:
        return _map_by_slot(self.np, self.host_slots)

    def rank_variables(self, rank: int) -> dict[str, str]:
        counts = self.placement()
        if not 0 <= rank < self.np:
            raise ValueError(f"rank={rank}: the job has ranks 0..{self.np - 1}")
        daemon, first = 0, 0
        while rank >= first + counts[daemon]:
            first += counts[daemon]
            daemon += 1
        local, host = rank - first, self.hosts[daemon]
        used = sum(1 for count in counts if count)
        family = _jobfam(self.hosts[0], self.mpirun_pid)
        daemons_job, job = family << 16, (family << 16) + 1
        top = f"/tmp/ompi.{host}.{self.uid}"  # noqa: S108 - Open MPI's session directory
        session = f"{top}/pid.{self.mpirun_pid}" if daemon == 0 else f"{top}/jf.{family}"
        server_pid = self.mpirun_pid if daemon == 0 else _number("orted", family, host, low=2000, high=4000000)
        pmix_uri = f"{daemons_job}.{daemon};tcp4://127.0.0.1:{_ephemeral_port('pmix', family, daemon)}"
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
                f"{_number('key', family, half, low=0, high=2**64 - 1):016x}" for half in (0, 1)
            ),
            "OMPI_MCA_orte_tmpdir_base": "/tmp",  # noqa: S108
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
            "PMIX_SYSTEM_TMPDIR": "/tmp",  # noqa: S108
            "PMIX_VERSION": "4.2.2rc2",
        }
        env |= {f"PMIX_SERVER_URI{suffix}": pmix_uri for suffix in ("2", "21", "3", "4", "41")}
        if counts[daemon] <= self.host_slots[daemon]:
            env["OMPI_MCA_orte_bound_at_launch"] = "1"  # ranks are bound to cores unless oversubscribed
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
        return dict(sorted(env.items()))

    def _daemon_uri(self, family: int, daemon: int) -> str:
        ports = [_ephemeral_port("orte", family, daemon, proto) for proto in (4, 6)]
        return f"{family << 16}.{daemon};tcp://192.0.2.{2 + daemon}:{ports[0]};tcp6://[fd00::{2 + daemon:x}]:{ports[1]}"

    def job(self) -> Job:
        nodes = [index for index, count in enumerate(self.placement()) for _ in range(count)]
        processes = tuple(
            Process(environ=self.rank_variables(rank), hostname=self.hosts[node], node=node)
            for rank, node in enumerate(nodes)
        )
        return Job(launcher="openmpi", source="mpi", processes=processes, call=f"openmpi_job(**{_fields(self)})")


def openmpi_job(**launch: Any) -> Job:
    """Every rank of one Open MPI ``mpirun``; the keywords are `OpenMpiLaunch`'s."""
    return OpenMpiLaunch(**launch).job()


def openmpi_env(*, rank: int = 0, **launch: Any) -> dict[str, str]:
    """Rank `rank`'s environment under Open MPI's mpirun; the other keywords are `OpenMpiLaunch`'s."""
    return OpenMpiLaunch(**launch).rank_variables(rank)


# -- MPICH -------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MpichLaunch:
    """MPICH 4.0.2 ``mpiexec -n n -hosts h1:c1,h2:c2`` (Hydra), run on `launch_host` (default the first host).

    Hydra deals the ranks out in turns, `counts[i]` (default 1) to host i at a time, round and round:
    ``-hosts nodeA,nodeB -n 4`` puts ranks 0,2 on nodeA and 1,3 on nodeB; ``-hosts nodeA:2,nodeB:2 -n 3``
    puts 0,1 on nodeA and 2 on nodeB (both measured with two emulated hosts). Ranks on the launch host
    are children of a local proxy and also get HYDI_CONTROL_FD; ranks started over ssh do not.
    """

    n: int = attrs.field(validator=_positive)
    hosts: tuple[str, ...] = attrs.field(default=("ci1",), converter=_hosts, validator=_distinct)
    counts: int | tuple[int, ...] = 1
    launch_host: str | None = None

    def placement(self) -> tuple[int, ...]:
        """The host index of each rank."""
        counts = _capacities(self.counts if isinstance(self.counts, int) else list(self.counts), len(self.hosts))
        if min(counts) < 1:
            raise ValueError(f"counts={self.counts!r}: each host takes at least one rank per turn")
        out: list[int] = []
        while len(out) < self.n:
            for host, count in enumerate(counts):
                out += [host] * min(count, self.n - len(out))
        return tuple(out)

    def rank_variables(self, rank: int) -> dict[str, str]:
        placement = self.placement()
        if not 0 <= rank < self.n:
            raise ValueError(f"rank={rank}: the job has ranks 0..{self.n - 1}")
        node = placement[rank]
        local = placement[:rank].count(node)
        host = self.hosts[node]
        env = {
            "MPIR_CVAR_CH3_INTERFACE_HOSTNAME": host,
            "MPI_LOCALNRANKS": str(placement.count(node)),
            "MPI_LOCALRANKID": str(local),
            "PMI_FD": str(6 + 2 * local + _number("fd", rank, low=0, high=1)),
            "PMI_RANK": str(rank),
            "PMI_SIZE": str(self.n),
        }
        if host == (self.launch_host or self.hosts[0]):
            env["HYDI_CONTROL_FD"] = "7"
        return dict(sorted(env.items()))

    def job(self) -> Job:
        processes = tuple(
            Process(environ=self.rank_variables(rank), hostname=self.hosts[node], node=node)
            for rank, node in enumerate(self.placement())
        )
        return Job(launcher="mpich", source="mpi", processes=processes, call=f"mpich_job(**{_fields(self)})")


def mpich_job(**launch: Any) -> Job:
    """Every rank of one MPICH (Hydra) ``mpiexec``; the keywords are `MpichLaunch`'s."""
    return MpichLaunch(**launch).job()


def mpich_env(*, rank: int = 0, **launch: Any) -> dict[str, str]:
    """Rank `rank`'s environment under MPICH's mpiexec; the other keywords are `MpichLaunch`'s."""
    return MpichLaunch(**launch).rank_variables(rank)


# -- LSF / jsrun --------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class LsfLaunch:
    """An LSF job (``bsub``) whose tasks jsrun starts: `tasks_per_host` on each of `hosts`, in order.

    Not checked against a capture (there is none here): the variables are those LSF documents for job
    execution (LSB_JOBID, LSB_JOBNAME, LSB_QUEUE, LSB_MCPU_HOSTS, LSB_DJOB_HOSTFILE, LSB_DJOB_RANKFILE)
    and jsrun's JSM_NAMESPACE_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}. The rankfile lists `launch_host` once,
    then each compute host once per slot (`slots_per_host`, default `tasks_per_host`). LSB_JOBINDEX is
    `job_index`: LSF sets it for every job, 0 unless the job is an element of a job array (``bsub -J
    "name[1-10]"``), whose elements share `job_id`.
    """

    hosts: tuple[str, ...] = attrs.field(default=("a01n01",), converter=_hosts, validator=_distinct)
    tasks_per_host: int = attrs.field(default=1, validator=_positive)
    slots_per_host: int | None = attrs.field(default=None, validator=_positive)
    launch_host: str = "batch1"
    job_id: int = attrs.field(default=1234, validator=_positive)
    job_index: int = attrs.field(default=0, validator=_not_negative)
    job_name: str = "job"
    queue: str = "batch"
    home: str = "/home/user"

    def __attrs_post_init__(self) -> None:
        if self.launch_host in self.hosts:
            raise ValueError(f"launch_host={self.launch_host!r} runs no task: it cannot be a compute host")

    @property
    def ntasks(self) -> int:
        return len(self.hosts) * self.tasks_per_host

    @property
    def rankfile(self) -> str:
        return f"{self.home}/.lsbatch/{self.job_id}.rankfile"

    @property
    def hostfile(self) -> str:
        return f"{self.home}/.lsbatch/{self.job_id}.hostfile"

    def files(self) -> dict[str, str]:
        slots = self.slots_per_host or self.tasks_per_host
        text = self.launch_host + "\n" + "".join(f"{host}\n" * slots for host in self.hosts)
        return {self.rankfile: text, self.hostfile: text}

    def task(self, rank: int) -> Process:
        if not 0 <= rank < self.ntasks:
            raise ValueError(f"rank={rank}: the job has tasks 0..{self.ntasks - 1}")
        node, local = divmod(rank, self.tasks_per_host)
        slots = self.slots_per_host or self.tasks_per_host
        env = {
            "JSM_NAMESPACE_LOCAL_RANK": str(local),
            "JSM_NAMESPACE_LOCAL_SIZE": str(self.tasks_per_host),
            "JSM_NAMESPACE_RANK": str(rank),
            "JSM_NAMESPACE_SIZE": str(self.ntasks),
            "LSB_DJOB_HOSTFILE": self.hostfile,
            "LSB_DJOB_RANKFILE": self.rankfile,
            "LSB_JOBID": str(self.job_id),
            "LSB_JOBINDEX": str(self.job_index),
            "LSB_JOBNAME": self.job_name,
            "LSB_MCPU_HOSTS": " ".join([self.launch_host, "1", *(f"{host} {slots}" for host in self.hosts)]),
            "LSB_QUEUE": self.queue,
        }
        return Process(environ=dict(sorted(env.items())), hostname=self.hosts[node], node=node, files=self.files())

    def job(self) -> Job:
        processes = tuple(self.task(rank) for rank in range(self.ntasks))
        return Job(launcher="lsf", source="lsf", processes=processes, call=f"lsf_job(**{_fields(self)})")


def lsf_job(**launch: Any) -> Job:
    """Every jsrun task of one LSF job; the keywords are `LsfLaunch`'s."""
    return LsfLaunch(**launch).job()


def lsf_env(*, rank: int = 0, **launch: Any) -> Process:
    """Task `rank` of a jsrun launch: ``.environ``, ``.files`` (the rankfile), ``.hostname``, ``.probes()``."""
    return LsfLaunch(**launch).task(rank)


# -- the JSON Schema -----------------------------------------------------------------------------------------


def topology_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `Topology.to_dict()` output, shipped as resolver/topology.schema.json."""
    import json
    from importlib import resources

    text = resources.files("resolver").joinpath("topology.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


# -- Hypothesis strategies ------------------------------------------------------------------------------------


def jobs(*, launchers: Sequence[str] = LAUNCHERS, max_processes: int = 16) -> SearchStrategy[Job]:
    """Whole launches of the given launchers (every process's environment, host and files).

    Needs hypothesis (a test extra), imported here. Each job resolves, process by process, to one
    world: ``assert_consistent(job.resolve(), job)``.
    """
    from hypothesis import strategies as st

    unknown = sorted(set(launchers) - set(LAUNCHERS))
    if unknown or not launchers:
        raise ValueError(f"launchers={list(launchers)!r}: expected some of {LAUNCHERS}")
    makers: dict[str, Callable[[], SearchStrategy[Job]]] = {
        "slurm": lambda: _slurm_jobs(max_processes),
        "torchrun": lambda: _torchrun_jobs(max_processes),
        "kubeflow": lambda: _kubeflow_jobs(max_processes),
        "openmpi": lambda: _openmpi_jobs(max_processes),
        "mpich": lambda: _mpich_jobs(max_processes),
        "lsf": lambda: _lsf_jobs(max_processes),
    }
    return st.one_of([makers[name]() for name in launchers])


def _host_names(count: int, *, prefix: str | None = None) -> SearchStrategy[tuple[str, ...]]:
    """`count` distinct host names: a numbered family (ci1, rack1-n07) or arbitrary DNS-like names."""
    from hypothesis import strategies as st

    numbered = st.tuples(
        st.sampled_from([prefix] if prefix else ["ci", "node", "gpu-", "rack1-n"]),
        st.integers(0, 3),  # zero padding
        st.integers(0, 990),
        st.integers(1, 3),  # step between numbers: gaps as in ci[1-2,4]
    ).map(lambda t: tuple(f"{t[0]}{str(t[2] + i * t[3]).zfill(t[1])}" for i in range(count)))
    if prefix:
        return numbered
    named = st.lists(
        st.from_regex(r"[a-z][a-z0-9-]{0,6}[a-z]", fullmatch=True), min_size=count, max_size=count, unique=True
    )
    return st.one_of(numbered, named.map(tuple))


def _slurm_jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        count = draw(st.integers(1, min(4, most)))
        nodes = draw(_host_names(count))
        cpus = draw(st.integers(1, 4))
        allocation = draw(st.sampled_from(["srun", "sbatch", "salloc"]))
        per_node = draw(st.none() | st.integers(1, cpus))
        capacity = per_node or cpus
        ntasks = None if per_node else draw(st.integers(count, min(count * capacity, most)))
        launch: dict[str, Any] = {
            "nodes": nodes,
            "ntasks": ntasks,
            "tasks_per_node": per_node,
            "cpus_per_node": cpus,
            "allocation": allocation,
            "job_id": draw(st.integers(1, 10**7)),
            "step_id": draw(st.integers(0, 5)),
        }
        if allocation != "srun" and draw(st.booleans()):
            allocated = dict(
                zip(
                    nodes,
                    slurm_tasks_per_node(ntasks or count * capacity, count, capacity=cpus, tasks_per_node=per_node),
                    strict=True,
                )
            )
            chosen = draw(st.lists(st.sampled_from(nodes), min_size=1, unique=True))
            room = sum(allocated[n] for n in chosen)
            launch["step_nodes"] = tuple(chosen)
            launch["step_ntasks"] = draw(st.integers(len(chosen), min(room, most)))
        if allocation == "sbatch" and draw(st.booleans()):
            start, size = draw(st.integers(0, 20)), draw(st.integers(1, 4))
            launch["array"] = range(start, start + size)
            launch["array_task_id"] = draw(st.sampled_from(launch["array"]))
        # bash/interactive name an interactive shell only for one task: real launches of several tasks
        launch["job_name"] = draw(st.sampled_from(["python", "job.sh", "train"]))
        if draw(st.booleans()):
            launch["restart_count"] = draw(st.integers(0, 3))
        return SlurmLaunch(**launch).job()

    return build()


def _torchrun_jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        nnodes = draw(st.integers(1, min(3, most)))
        rdzv: Literal["c10d", "static"] = draw(st.sampled_from(["c10d", "static"]))
        launch = TorchrunLaunch(
            nnodes=nnodes,
            nproc_per_node=draw(st.integers(1, max(1, min(4, most // nnodes)))),
            rdzv=rdzv,
            hosts=draw(_host_names(nnodes)),
            run_id=draw(st.sampled_from(["none", "42", "job-7"])),
            restart_count=draw(st.integers(0, 3)),
            max_restarts=3,
        )
        return launch.job()

    return build()


def _kubeflow_jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    names = st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True)
    return st.builds(
        lambda workers, name, port: KubeflowLaunch(workers=workers, name=name, port=port).job(),
        st.integers(0, most - 1),
        names,
        st.integers(1024, 65535),
    )


def _master() -> SearchStrategy[dict[str, str]]:
    """MASTER_ADDR/MASTER_PORT exported to every rank (``mpirun -x``), or nothing (the comm finds them)."""
    from hypothesis import strategies as st

    return st.one_of(
        st.just({}),
        st.builds(lambda port: {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": str(port)}, st.integers(1024, 65535)),
    )


def _with_master(job: Job, master: Mapping[str, str]) -> Job:
    processes = tuple(attrs.evolve(p, environ={**p.environ, **master}) for p in job)
    return attrs.evolve(job, processes=processes, call=job.call + (f" with {dict(master)}" if master else ""))


def _openmpi_jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        count = draw(st.integers(1, min(3, most // 2)))
        slots = draw(st.integers(1, 4))
        np = draw(st.integers(2, min(most, count * slots * 2)))  # one rank is not MPI (as in Lightning)
        launch = OpenMpiLaunch(np=np, hosts=draw(_host_names(count)), slots=slots, oversubscribe=np > count * slots)
        return _with_master(launch.job(), draw(_master()))

    return build()


def _mpich_jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        count = draw(st.integers(1, min(3, most // 2)))
        hosts = draw(_host_names(count))
        counts = tuple(draw(st.lists(st.integers(1, 3), min_size=count, max_size=count)))
        launch = MpichLaunch(n=draw(st.integers(2, most)), hosts=hosts, counts=counts)
        return _with_master(launch.job(), draw(_master()))

    return build()


def _lsf_jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        count = draw(st.integers(1, min(3, most)))
        per_host = draw(st.integers(1, max(1, min(4, most // count))))
        launch = LsfLaunch(
            hosts=draw(_host_names(count, prefix="a01n")),
            tasks_per_host=per_host,
            slots_per_host=draw(st.integers(per_host, per_host + 2)),
            job_id=draw(st.integers(1, 10**7)),
            job_index=draw(st.sampled_from([0, 0, 1]) | st.integers(0, 10**5)),
        )
        return launch.job()

    return build()


def topologies(*, max_world_size: int = 1 << 20) -> SearchStrategy[Topology]:
    """Valid `Topology` records, every field exercised; needs hypothesis (a test extra), imported here."""
    from hypothesis import strategies as st

    from resolver.environ import ADDRESS_RE
    from resolver.topology import _SOURCE_RE

    names = [field.name for field in attrs.fields(Topology)]
    text = st.text(max_size=24)

    @st.composite
    def build(draw: st.DrawFn) -> Topology:
        world = draw(st.integers(1, max_world_size))
        nodes = draw(st.none() | st.integers(1, world))
        local_size = draw(st.none() | st.integers(1, world))
        return Topology(
            source=draw(
                st.sampled_from(["slurm", "torchelastic", "mpi", "lsf", "kubeflow", "xla", "lightning"])
                | st.from_regex(_SOURCE_RE, fullmatch=True)
            ),
            world_size=world,
            global_rank=draw(st.integers(0, world - 1)),
            local_rank=draw(st.integers(0, (local_size or world) - 1)),
            node_rank=draw(st.integers(0, (nodes or world) - 1)),
            num_nodes=nodes,
            local_world_size=local_size,
            main_address=draw(st.none() | st.from_regex(ADDRESS_RE, fullmatch=True)),
            main_port=draw(st.none() | st.integers(1, 65535)),
            creates_processes_externally=draw(st.booleans()),
            job_id=draw(st.none() | text),
            job_name=draw(st.none() | text),
            step_id=draw(st.none() | text),
            array_job_id=draw(st.none() | text),
            array_task_id=draw(st.none() | text),
            restart_count=draw(st.none() | st.integers(0, 10**6)),
            provenance=draw(st.dictionaries(st.sampled_from(names), text, max_size=4)),
            warnings=draw(st.lists(text, max_size=3)),
        )

    return build()
