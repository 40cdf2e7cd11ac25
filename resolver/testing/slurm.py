"""SLURM 22.05: srun tasks, the sbatch script and the salloc shell, as measured in tests/captures/slurm.

    slurm_env(procid=3, nodes=("ci1", "ci2"), ntasks=4)   -> Process: one srun task's environment
    slurm_job(nodes=("ci1", "ci2"), ntasks=4)             -> Job: every task of that launch
    slurm_batch_env(...), slurm_salloc_env(...)           -> Process: the batch script, the salloc shell

The keywords are the fields of `SlurmLaunch` (plus `procid` for `slurm_env`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs

from resolver import hostlist
from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = [
    "LAUNCHER",
    "Allocation",
    "SlurmBatchScript",
    "SlurmLaunch",
    "SlurmSallocShell",
    "SlurmTask",
    "slurm_batch_env",
    "slurm_env",
    "slurm_job",
    "slurm_salloc_env",
    "slurm_tasks_per_node",
]

_PORT = r"[1-9][0-9]{0,4}"

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
    caps = [tasks_per_node] * nodes if tasks_per_node is not None else kit.capacities(capacity, nodes)
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
class SlurmLaunch(kit.Launch):
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

    GPUs (tests/captures-hpc/slurm-gpu; the site has `node_gpus` per node): `gpus_per_task`
    (``--gpus-per-task=N``) gives each task N GPUs of its own, the next N of its node's, with
    ``SLURMD_TRES_BIND=gpu:per_task:N``; `gpus_per_node` (``--gpus-per-node=N``, ``--gres=gpu:N``,
    or sbatch's job-level ``--gres``) gives every task of a node the same N; `gpu_bind`
    (``--gpu-bind=single:K``, with `gpus_per_node`) narrows each task to GPU ``local id // K``.
    SLURM sets `CUDA_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`, `ZE_AFFINITY_MASK`,
    `GPU_DEVICE_ORDINAL` and `SLURM_STEP_GPUS` to the task's list (no device cgroup: the GPUs'
    positions in the node's gres list), `SLURM_GPUS_ON_NODE` to the step's GPUs on the node, and
    `SLURMD_TRES_BIND` where the binding narrows the task's list (not on a node of one task); the
    batch script has `SLURM_JOB_GPUS` instead of `SLURM_STEP_GPUS`, and its steps inherit it.
    """

    launcher = "slurm"
    nodes: tuple[str, ...] = attrs.field(default=("ci1",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    ntasks: int | None = attrs.field(default=None, validator=kit.positive)
    tasks_per_node: int | None = attrs.field(default=None, validator=kit.positive)
    cpus_per_node: int = attrs.field(default=4, validator=kit.positive)
    allocation: Allocation = "srun"
    step_id: int = attrs.field(default=0, validator=kit.not_negative)
    step_nodes: tuple[str, ...] | None = attrs.field(
        default=None, converter=kit.to_optional_hosts, validator=kit.distinct_hosts
    )
    step_ntasks: int | None = attrs.field(default=None, validator=kit.positive)
    step_tasks_per_node: int | None = attrs.field(default=None, validator=kit.positive)
    job_id: int = attrs.field(default=1, validator=kit.positive)
    job_name: str | None = None
    array: range | None = None
    array_task_id: int | None = None
    restart_count: int | None = attrs.field(default=None, validator=kit.not_negative)
    gpus_per_task: int | None = attrs.field(default=None, validator=kit.positive)
    gpus_per_node: int | None = attrs.field(default=None, validator=kit.positive)
    gpu_bind: str | None = None
    node_gpus: int = attrs.field(default=4, validator=kit.positive)  # the site's GPUs per node
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
        self._check_gpus()
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

    def _check_gpus(self) -> None:
        if self.gpus_per_task is not None and self.gpus_per_node is not None:
            raise ValueError("gpus_per_task and gpus_per_node: give one (SLURM refuses both)")
        if self.gpu_bind is not None:
            kind, _, tasks = self.gpu_bind.partition(":")
            if kind != "single" or not tasks.isdigit() or int(tasks) < 1 or self.gpus_per_node is None:
                raise ValueError(f"gpu_bind={self.gpu_bind!r}: only 'single:K' with gpus_per_node is modelled")
        if self.gpus_per_node is not None and self.gpus_per_node > self.node_gpus:
            raise ValueError(f"gpus_per_node={self.gpus_per_node} > node_gpus={self.node_gpus}: SLURM refuses the job")
        if self.gpus_per_task is not None:
            most = max(self.layout()) * self.gpus_per_task
            if most > self.node_gpus:
                raise ValueError(f"{most} GPUs on one node > node_gpus={self.node_gpus}: SLURM refuses the job")

    def gpus(self, localid: int, tasks_here: int) -> tuple[tuple[int, ...], int]:
        """The GPUs task `localid` of a node running `tasks_here` tasks sees, and the step's GPUs there."""
        if self.gpus_per_task is not None:
            first = localid * self.gpus_per_task
            return tuple(range(first, first + self.gpus_per_task)), tasks_here * self.gpus_per_task
        if self.gpus_per_node is None:
            return (), 0
        if self.gpu_bind is not None:
            per_gpu = int(self.gpu_bind.partition(":")[2])
            return (min(localid // per_gpu, self.gpus_per_node - 1),), self.gpus_per_node
        return tuple(range(self.gpus_per_node)), self.gpus_per_node

    def _gpu_variables(self, visible: Sequence[int], on_node: int, scope: str) -> dict[str, str]:
        if not on_node:
            return {}
        listed = ",".join(map(str, visible))
        env = dict.fromkeys(("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK"), listed)
        env |= {"GPU_DEVICE_ORDINAL": listed, scope: listed, "SLURM_GPUS_ON_NODE": str(on_node)}
        if len(visible) == on_node:
            pass  # the binding narrows nothing: slurmd leaves SLURMD_TRES_BIND out (a4's lone task on ci2)
        elif self.gpus_per_task is not None:
            env["SLURMD_TRES_BIND"] = f"gpu:per_task:{self.gpus_per_task}"
        elif self.gpu_bind is not None:
            env["SLURMD_TRES_BIND"] = f"gpu:{self.gpu_bind}"
        return env

    def _job_gpus(self) -> dict[str, str]:
        """What the batch script has, and its steps inherit: the job's GPUs on the first node."""
        count = self.gpus_per_node or (self.gpus_per_task or 0) * self.allocation_layout()[0]
        if self.allocation != "sbatch" or not count:
            return {}
        env = self._gpu_variables(range(count), count, "SLURM_JOB_GPUS")
        env.pop("SLURMD_TRES_BIND", None)  # a binding is a step's (not measured for the script)
        return env

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
            "SLURM_TASK_PID": str(
                kit.stable_number("pid", self.own_job_id, self.step_id, procid, low=2000, high=4000000)
            ),
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
        env |= {"ENVIRONMENT": "BATCH", "HOSTNAME": head} | self._job_gpus()
        return dict(sorted(env.items()))

    def process(self, procid: int) -> Process:
        """srun task `procid`."""
        layout = self.layout()
        hosts = self.step_hosts()
        kit.index_in("procid", procid, sum(layout), "the step has tasks")
        nodeid, first = 0, 0
        while procid >= first + layout[nodeid]:
            first += layout[nodeid]
            nodeid += 1
        node = hosts[nodeid]
        env = self.job_variables()
        if self.allocation == "sbatch":
            env |= {"ENVIRONMENT": "BATCH", "HOSTNAME": self.nodes[0]}  # inherited from the batch script
        env |= self._process_variables(node, procid, procid - first, nodeid, range(first, first + layout[nodeid]))
        env |= {k: v for k, v in self._job_gpus().items() if k == "SLURM_JOB_GPUS"}  # inherited from the script
        env |= self._gpu_variables(*self.gpus(procid - first, layout[nodeid]), "SLURM_STEP_GPUS")
        port = str(kit.ephemeral_port("srun", self.own_job_id, self.step_id))
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
        return Process(environ=dict(sorted(env.items())), hostname=node, node=nodeid)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(sum(self.layout())))


@attrs.frozen(kw_only=True)
class SlurmTask(SlurmLaunch):
    """Task `procid` of a `SlurmLaunch`'s step."""

    procid: int = attrs.field(default=0, validator=kit.not_negative)

    def one(self) -> Process:
        return self.process(self.procid)


@attrs.frozen(kw_only=True)
class SlurmBatchScript(SlurmLaunch):
    """The batch script of an sbatch allocation: a `SlurmLaunch` whose allocation defaults to sbatch."""

    allocation: Allocation = "sbatch"

    def one(self) -> Process:
        return Process(environ=self.batch_script_variables(), hostname=self.nodes[0])


@attrs.frozen(kw_only=True)
class SlurmSallocShell(SlurmLaunch):
    """The shell salloc starts: a `SlurmLaunch` whose allocation defaults to salloc."""

    allocation: Allocation = "salloc"

    def one(self) -> Process:
        """The shell, on the host salloc ran on."""
        if self.allocation != "salloc":
            raise ValueError("the salloc shell exists only with allocation='salloc'")
        return Process(environ=dict(sorted(self.job_variables().items())), hostname=self.submit_host or self.nodes[0])


slurm_job = kit.job_builder(SlurmLaunch, doc="Every task of one srun step; the keywords are `SlurmLaunch`'s.")
slurm_env = kit.env_builder(SlurmTask, doc="srun task `procid`'s environment; the other keywords are `SlurmLaunch`'s.")
slurm_batch_env = kit.env_builder(
    SlurmBatchScript,
    name="slurm_batch_env",
    doc="The sbatch script's own environment (ENVIRONMENT=BATCH, no SLURM_STEP_ID); keywords of `SlurmLaunch`.",
)
slurm_salloc_env = kit.env_builder(
    SlurmSallocShell,
    name="slurm_salloc_env",
    doc="The salloc shell's environment (no SLURM_PROCID: not a task); keywords of `SlurmLaunch`.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        count = draw(st.integers(1, min(4, most)))
        nodes = draw(kit.host_names(count))
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
        gpus = draw(st.sampled_from(["none", "per_task", "per_node", "single"]))
        if gpus == "per_task":
            busiest = max(SlurmLaunch(**launch).layout())
            if busiest <= 4:
                launch["gpus_per_task"] = draw(st.integers(1, 4 // busiest))
        elif gpus != "none":
            launch["gpus_per_node"] = draw(st.integers(1, 4))
            if gpus == "single":
                launch["gpu_bind"] = f"single:{draw(st.integers(1, 4))}"
        return SlurmLaunch(**launch).job()

    return build()


LAUNCHER = Launcher(
    name="slurm",
    nondeterministic={
        "SLURM_TASK_PID": r"[1-9][0-9]*",
        "SLURM_SRUN_COMM_PORT": _PORT,
        "SLURM_STEP_LAUNCHER_PORT": _PORT,
    },
    jobs=_jobs,
)
