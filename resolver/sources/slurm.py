"""SLURM: an srun task, in step scope when inside an allocation.

Who is an srun task (Lightning's intent, with its misses fixed):
- `SLURM_NTASKS` must be set, and the process must be a task: `SLURM_STEP_ID` or `SLURM_PROCID`
  set. The salloc shell has no `SLURM_PROCID`; the batch script has `ENVIRONMENT=BATCH` and no
  `SLURM_STEP_ID`: both are one process, not task 0 of `SLURM_NTASKS`, and go to the next source.
- The job names `bash` and `interactive` mean an interactive shell (`srun --pty bash`, salloc)
  only for a one-task step; `srun -n4 bash -c "python train.py"` is a launch of four tasks.
- A process started by `mpirun`/`mpiexec` inside the allocation carries variables only an MPI
  launcher writes (`OMPI_COMM_WORLD_*`, `MV2_COMM_WORLD_*`, Hydra's `MPI_LOCALNRANKS`); its
  SLURM variables describe mpirun's srun-started daemons, so SLURM declines and MPI resolves it,
  on every rank alike (a per-rank comparison of values could split one job between sources).
  `srun --mpi=pmi2|pmix` writes only `PMI_*`/`PMIX_*` and stays SLURM.

Task 0's node: under block, cyclic and plane distributions task 0 runs on the first node of the
step's nodelist, which is the main address. Under `--distribution=arbitrary` (`SLURM_DISTRIBUTION`
starts with `arbitrary`) srun places task i on line i of `SLURM_HOSTFILE`, and the nodelist stays
sorted (measured on SLURM 22.05: hostfile `ci2 ci2 ci1 ci1` puts task 0 on ci2, `SLURM_NODEID=1`,
with `SLURM_STEP_NODELIST=ci[1-2]`), so the main address is the first host of the hostfile, read
through the `read_text` probe; if it cannot be read, the answer is an error, never the first node
of the list (nobody would listen there). srun reads the file line by line, skipping blank lines
and `#` comments; a line may hold several names separated by commas.

Ports (`MASTER_PORT` wins): step 0, and a process outside any step, take Lightning's
`15000 + last four digits of SLURM_JOB_ID`. Step s > 0 takes
`15000 + (last four digits of SLURM_JOB_ID + 7919 * s) mod 10000`: the same on every task of the
step, and, 7919 being prime to 10000, different for each of the first 10000 steps of a job, so two
`srun --exact` steps running at once on one node do not both try to bind one port. The range stays
Lightning's (15000-24999), below Linux's ephemeral ports.

Step scope: inside an allocation each srun step has `SLURM_STEP_NODELIST`,
`SLURM_STEP_NUM_TASKS`, `SLURM_STEP_TASKS_PER_NODE`, `SLURM_STEP_NUM_NODES`; the job's
variables describe the allocation, and steps inherit `SLURM_NTASKS_PER_NODE` even where it no
longer fits. The step's variables win wherever they exist.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

from resolver import environ as env
from resolver import hostlist
from resolver.errors import HostlistSyntaxError, InvalidSettings, InvalidVariable, ProbeFailed, count, shown
from resolver.origin import Origin
from resolver.sources import Builder, JobFacts, job_port, read_job_facts
from resolver.sources._kit import Detection
from resolver.sources._offers import DeviceBinding, Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "CANDIDATES",
    "DEFAULT_PORT",
    "HOSTFILE",
    "INTERACTIVE_NAMES",
    "JOB_VARIABLES",
    "MPIRUN_MARKERS",
    "NAME",
    "OFFERS",
    "PORT_SCHEMES",
    "STEP_STRIDE",
    "Slurm",
    "device_binding",
    "job_facts",
    "local_tasks",
    "parse_tasks_per_node",
]

NAME = "slurm"
CANDIDATES = entry(NAME).candidates  # SLURM_NTASKS: set inside every job
INTERACTIVE_NAMES = ("bash", "interactive")
DEFAULT_PORT = 12910
PORT_SCHEMES = ("lightning", "step")
# the variables only mpirun/mpiexec write (the markers of the MPI module's mpirun-only launchers; a
# test keeps the two equal)
MPIRUN_MARKERS = ("OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")
STEP_STRIDE = 7919  # prime to 10000: steps 0..9999 of one job get distinct ports
HOSTFILE = "SLURM_HOSTFILE"


_TASKS_ITEM = r"([0-9]{1,9})(?:\(x([0-9]{1,9})\))?"  # compiled by `re` when a task list is first read


def parse_tasks_per_node(variable: str, text: str) -> list[tuple[int, int]]:
    """`4(x2),2,1` -> [(4, 2), (2, 1), (1, 1)]: (tasks, number of nodes) groups, never expanded."""
    expected = "a SLURM tasks-per-node list such as 4(x2),2,1"
    groups = []
    for item in text.split(","):
        match = re.fullmatch(_TASKS_ITEM, item)
        if not match:
            raise InvalidVariable(variable, text, expected)
        tasks, repeat = int(match[1]), int(match[2] or 1)
        if tasks < 1 or repeat < 1:
            raise InvalidVariable(variable, text, expected + " with counts >= 1")
        groups.append((tasks, repeat))
    return groups


def local_tasks(groups: list[tuple[int, int]], node: int) -> int | None:
    """Tasks on node index `node`, or None when the list covers fewer nodes."""
    for tasks, repeat in groups:
        if node < repeat:
            return tasks
        node -= repeat
    return None


JOB_VARIABLES = (
    ("job_id", "SLURM_JOB_ID"),
    ("job_name", "SLURM_JOB_NAME"),
    ("step_id", "SLURM_STEP_ID"),
    ("array_job_id", "SLURM_ARRAY_JOB_ID"),
    ("array_task_id", "SLURM_ARRAY_TASK_ID"),
)


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The job's id, name, step, array ids and requeue count, for any process inside a SLURM job."""
    return read_job_facts(environ, JOB_VARIABLES, restart="SLURM_RESTART_COUNT")


def _started_by_mpirun(environ: Mapping[str, str]) -> str | None:
    """`resolver.sources.mpi.started_by_mpirun`, importing the MPI module only where an mpirun marker is set."""
    if not any(marker in environ for marker in MPIRUN_MARKERS):
        return None
    from resolver.sources.mpi import started_by_mpirun  # a source module only where needed (mpi: 1.8% of a resolve)

    return started_by_mpirun(environ)


def _arbitrary(environ: Mapping[str, str]) -> bool:
    """Whether srun placed the tasks by `SLURM_HOSTFILE` (`--distribution=arbitrary`)."""
    method = environ.get("SLURM_DISTRIBUTION", "")
    return method.split(",", 1)[0].split(":", 1)[0] == "arbitrary"


def _task0_host(environ: Mapping[str, str], probes: Probes) -> str:
    """The first host of `SLURM_HOSTFILE`: task 0's node under `--distribution=arbitrary`."""
    path = env.text(
        environ, HOSTFILE, source=NAME, expected="the hostfile that --distribution=arbitrary places tasks by"
    )
    try:
        content = probes.read_text(path)
    except ProbeFailed as exc:
        raise ProbeFailed(
            "read_text",
            f"{HOSTFILE}={path!r} cannot be read ({exc.reason}); under SLURM_DISTRIBUTION="
            f"{environ['SLURM_DISTRIBUTION']} task 0 runs on its first host, which no other variable names: "
            "make the file readable on every node or set MASTER_ADDR to task 0's host",
        ) from None
    first = _first_entry(content, path)
    try:
        return env.check_address(HOSTFILE, hostlist.first(first))
    except HostlistSyntaxError as exc:
        raise exc.for_variable(HOSTFILE) from None


def _first_entry(content: str, path: str) -> str:
    """The first entry of the hostfile: its first line's names, a hostlist expression srun expands."""
    for line in content.splitlines():
        entry = line.strip()
        if entry and not entry.startswith("#"):
            return entry
    raise InvalidVariable(HOSTFILE, path, "a file whose first line names task 0's host (it has no host)")


def device_binding(environ: Mapping[str, str]) -> DeviceBinding | None:
    """How srun bound GPUs to this task, from `SLURMD_TRES_BIND` (`gpu:per_task:2`, `gpu:closest`, ...).

    srun(1), `--gpu-bind` (https://slurm.schedmd.com/srun.html#OPT_gpu-bind): "GPU binding is
    ignored if there is only one task" (measured: a task alone on its node has no `SLURMD_TRES_BIND`).
    - `--gpus-per-task=N` gives `gpu:per_task:N` and narrows the GPU list of each task to its own N
      (measured): `own` is N.
    - `closest`: "Bind each task to the GPU(s) which are closest" (to its CPUs; from gres.conf's
      `Cores=`). Where the task sees every GPU the step has on its node (`SLURM_STEP_GPUS`, which
      SLURM narrows per task like `CUDA_VISIBLE_DEVICES`, lists `SLURM_GPUS_ON_NODE` of them, the
      step's count on the node, measured inside a job that has more), no task was narrowed and the
      tasks of the node share one list: `sets` is `(0,)`. Otherwise the tasks see different sets that
      the environment does not name: nothing to say.
    - `mask_gpu:M0,M1,...`: "The mapping is specified for a node and identical mapping is applied to
      the tasks on every node (i.e. the lowest task ID on each node is mapped to the first mask
      specified in the list, etc.)"; the list is reused when there are more tasks; `M*R` repeats
      a mask R times; masks are hexadecimal (measured on 22.05: `0x3`, and `3`, are read; `c` is
      rejected, so a mask of more than one digit must carry `0x` to be read the same by every
      version). `sets` is the masks in order. Nothing to say when two masks overlap (tasks of
      different masks see common GPUs), or when the masks name more GPUs than the step has on the
      node: slurmstepd binds a task whose mask names none of them to the step's first GPU instead,
      which another task also sees (measured: `--gres=gpu:2 --gpu-bind=mask_gpu:0x3,0xc`).
    - `none` (`gpu:none`) binds nothing; `verbose` only logs. `single:K` and `map_gpu:` give each
      task one GPU (the device rule needs no binding for that); several GPUs under them: nothing to say.
    """
    raw = environ.get("SLURMD_TRES_BIND")
    if raw is None:
        return None
    expected = "gpu:BINDING as srun writes it for --gpu-bind or --gpus-per-task (gpu:per_task:N with N >= 1)"
    options = [option for option in raw.removeprefix("gpu:").split(",") if option != "verbose"]
    if not raw.startswith("gpu:") or not options or not options[0]:
        raise InvalidVariable("SLURMD_TRES_BIND", raw, expected)
    if options[0] == "none":
        return None
    kind, _, count = options[0].partition(":")
    if kind == "closest":
        return _closest(environ)
    if kind == "mask_gpu":
        return _masks(environ, [count, *options[1:]])
    if kind != "per_task":
        return DeviceBinding("SLURMD_TRES_BIND", None)
    try:
        own = env.check_integer("SLURMD_TRES_BIND", count, 1)
    except InvalidVariable:
        raise InvalidVariable("SLURMD_TRES_BIND", raw, expected) from None
    return DeviceBinding("SLURMD_TRES_BIND", own)


def _step_gpus_on_node(environ: Mapping[str, str]) -> int | None:
    """`SLURM_GPUS_ON_NODE`: how many GPUs the step has on this node (never narrowed per task), or None."""
    raw = environ.get("SLURM_GPUS_ON_NODE")
    return None if raw is None else env.check_integer("SLURM_GPUS_ON_NODE", raw, 0)


def _closest(environ: Mapping[str, str]) -> DeviceBinding:
    """`--gpu-bind=closest`: the node's tasks share one list when this task sees every GPU of the step."""
    on_node = _step_gpus_on_node(environ)
    step_gpus = environ.get("SLURM_STEP_GPUS")
    if on_node is None or step_gpus is None:
        missing = "SLURM_GPUS_ON_NODE" if on_node is None else "SLURM_STEP_GPUS"
        note = f"{missing} is not set, so whether this task sees every GPU of its step is unknown"
        return DeviceBinding("SLURMD_TRES_BIND", None, note=note)
    seen = len(step_gpus.split(",")) if step_gpus else 0
    if seen != on_node:
        note = (
            f"SLURM_STEP_GPUS={step_gpus} lists {seen} of the {on_node} GPUs the step has on this node "
            "(SLURM_GPUS_ON_NODE), so closest gave the node's tasks different GPUs, which no variable names"
        )
        return DeviceBinding("SLURMD_TRES_BIND", None, note=note)
    return DeviceBinding("SLURMD_TRES_BIND", None, sets=(0,))


_MASK = re.compile(r"(0[xX][0-9a-fA-F]{1,16}|[0-9])(?:\*([1-9][0-9]{0,3}))?")
_MAX_MASKS = 4096  # masks after expanding M*R; far more than the tasks of any node


def _masks(environ: Mapping[str, str], entries: list[str]) -> DeviceBinding:
    """`--gpu-bind=mask_gpu:M0,M1,...`: each task's mask, in local-rank order, when they say who shares what."""
    raw = environ["SLURMD_TRES_BIND"]
    masks: list[int] = []
    for item in entries:
        if item == "verbose":
            continue
        match = _MASK.fullmatch(item)
        if match is None:
            if re.fullmatch(r"[0-9a-fA-F]+(\*[1-9][0-9]{0,3})?", item):  # no 0x: hex by the docs
                note = (
                    f"the mask {item} is read differently by SLURM versions (22.05 rejects `c` and binds the "
                    "task to the step's first GPU instead); write masks with 0x"
                )
                return DeviceBinding("SLURMD_TRES_BIND", None, note=note)
            expected = "gpu:mask_gpu:M,... with masks 0x1 to 0xffffffffffffffff, each optionally *R (R 1-9999)"
            raise InvalidVariable("SLURMD_TRES_BIND", raw, expected)
        mask, repeat = int(match[1], 16), int(match[2] or 1)
        if not mask:
            note = f"the mask {item} names no GPU"
            return DeviceBinding("SLURMD_TRES_BIND", None, note=note)
        masks.extend([mask] * repeat)
        if len(masks) > _MAX_MASKS:
            return DeviceBinding("SLURMD_TRES_BIND", None, note=f"more than {_MAX_MASKS} masks")
    if not masks:
        raise InvalidVariable("SLURMD_TRES_BIND", raw, "gpu:mask_gpu: followed by at least one mask")
    distinct = sorted(set(masks))
    for i, first in enumerate(distinct):
        for second in distinct[i + 1 :]:
            if first & second:
                note = f"the masks {first:#x} and {second:#x} share GPUs, so tasks of different masks see the same ones"
                return DeviceBinding("SLURMD_TRES_BIND", None, note=note)
    named = sum(bin(mask).count("1") for mask in distinct)
    on_node = _step_gpus_on_node(environ)
    if on_node is None or named > on_node:
        step = "SLURM_GPUS_ON_NODE is not set" if on_node is None else f"SLURM_GPUS_ON_NODE={on_node}"
        note = (
            f"the masks name {named} GPUs and {step}: a task whose mask names none of the step's GPUs is bound "
            "to the step's first GPU instead (slurmstepd logs an error), which another task also sees"
        )
        return DeviceBinding("SLURMD_TRES_BIND", None, note=note)
    return DeviceBinding("SLURMD_TRES_BIND", None, sets=tuple(masks))


def _workers_per_node(b: Builder) -> None:
    """For a task alone on its node (`srun --ntasks-per-node=1`, which then starts its node's workers,
    e.g. torchrun): how many the allocation gives each node, as `nproc_per_node` (`--format torchrun`
    prints it). The GPUs SLURM allocated on the node (`SLURM_GPUS_ON_NODE`) when there are any, else
    the tasks per node it was asked for (`SLURM_NTASKS_PER_NODE`, which srun overwrites with its own
    `--ntasks-per-node`: then it says 1, the task itself, and nothing is recorded)."""
    gpus = env.optional_integer(b.environ, "SLURM_GPUS_ON_NODE")
    if gpus:
        b.set("nproc_per_node", gpus, Origin.env("SLURM_GPUS_ON_NODE"))
        return
    tasks = env.optional_integer(b.environ, "SLURM_NTASKS_PER_NODE", minimum=1)
    if tasks is not None and tasks > 1:
        b.set("nproc_per_node", tasks, Origin.env("SLURM_NTASKS_PER_NODE"))


def _scoped(environ: Mapping[str, str], step: str, job: str) -> str:
    """The step's variable when it is set, else the job's."""
    return step if step in environ else job


class Slurm:
    """Lightning's SLURMEnvironment semantics, as a pure function, in step scope.

    `port_scheme="lightning"` (default): `15000 + last four digits of SLURM_JOB_ID` for step 0,
    offset by `7919 * SLURM_STEP_ID` (mod 10000) for later steps (see the module docstring).
    `port_scheme="step"`: `10000 + (SLURM_JOB_ID * 8191 + SLURM_STEP_ID) mod 50000`, deterministic
    for every task of a step, and different for the concurrent steps of one job and also for array
    tasks whose last four digits collide. `MASTER_PORT` wins over either.
    """

    name = NAME
    auto = True

    def __init__(self, *, port_scheme: Literal["lightning", "step"] = "lightning") -> None:
        if port_scheme not in PORT_SCHEMES:
            raise InvalidSettings(f"port_scheme={port_scheme!r} is invalid: expected one of {', '.join(PORT_SCHEMES)}")
        self.port_scheme = port_scheme

    def __repr__(self) -> str:
        return f"Slurm(port_scheme={self.port_scheme!r})"

    def detect(self, environ: Mapping[str, str]) -> Detection:
        if not CANDIDATES.met(environ):
            return Detection(False, "SLURM_NTASKS is not set: not inside a SLURM job")
        in_step = "SLURM_STEP_ID" in environ
        if not in_step and "SLURM_PROCID" not in environ:
            return Detection(False, "no SLURM_PROCID: the salloc shell, not an srun task", ("SLURM_NTASKS",))
        if not in_step and environ.get("ENVIRONMENT") == "BATCH":
            reason = (
                f"the SLURM batch script itself (ENVIRONMENT=BATCH, no SLURM_STEP_ID) is one process, not task 0 "
                f"of SLURM_NTASKS={environ['SLURM_NTASKS']}"
            )
            return Detection(
                False,
                reason,
                ("ENVIRONMENT", "SLURM_NTASKS", "SLURM_PROCID"),
                warning=f"{reason}: resolved as a single process; start the tasks with srun",
            )
        tasks_var = _scoped(environ, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
        tasks = environ[tasks_var]
        name = environ.get("SLURM_JOB_NAME")
        if name in INTERACTIVE_NAMES and tasks == "1":
            return Detection(
                False,
                f"SLURM_JOB_NAME={name} with one task: an interactive shell (srun --pty bash / salloc)",
                ("SLURM_JOB_NAME", tasks_var),
            )
        marker = _started_by_mpirun(environ)
        if marker is not None:
            return Detection(
                False,
                f"{marker}={environ[marker]}: started by mpirun/mpiexec inside the allocation (the SLURM variables "
                "describe its srun-started daemons, not this process), so MPI resolves it",
                (marker,),
            )
        found = env.present(environ, "SLURM_STEP_ID", "SLURM_PROCID", tasks_var)
        reason = "an srun task" + (" of a step" if in_step else "")
        components = environ.get("SLURM_HET_SIZE")
        if components is not None:
            # SLURM merges the step's components: global SLURM_PROCID, their total in SLURM_STEP_NUM_TASKS
            reason += (
                f" of a heterogeneous job (SLURM_HET_SIZE={components} components): the tasks of every component "
                f"the step runs form one world of {tasks_var}={tasks}"
            )
            found = (*found, "SLURM_HET_SIZE")
        return Detection(True, reason, found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        tasks_var = _scoped(environ, "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")
        world = b.integer("world_size", tasks_var, minimum=1)
        b.integer("global_rank", "SLURM_PROCID")
        b.integer("local_rank", "SLURM_LOCALID")
        node = b.integer("node_rank", "SLURM_NODEID")

        nodelist_var = _scoped(environ, "SLURM_STEP_NODELIST", "SLURM_NODELIST")
        if nodelist_var not in environ and "SLURM_JOB_NODELIST" in environ:
            nodelist_var = "SLURM_JOB_NODELIST"
        nodelist = env.text(environ, nodelist_var, source=NAME, expected="a SLURM hostlist such as ci[1-2]")
        try:
            hosts = hostlist.count(nodelist)
            head = hostlist.first(nodelist)
            if hosts <= hostlist.DEFAULT_LIMIT:  # node ids index the list, as srun numbers nodes
                b.formula("hostnames", tuple(hostlist.expand(nodelist)), f"hosts of {nodelist_var}", nodelist_var)
        except HostlistSyntaxError as exc:
            raise exc.for_variable(nodelist_var) from None
        nodes_var = _scoped(environ, "SLURM_STEP_NUM_NODES", "SLURM_NNODES")
        nodes = env.optional_integer(environ, nodes_var, minimum=1)
        if nodes is None:
            b.formula("num_nodes", hosts, f"count of hosts in {nodelist_var}", nodelist_var)
        elif nodes != hosts:
            raise InvalidVariable(
                nodes_var, str(nodes), f"the number of hosts in {nodelist_var}={shown(nodelist)} ({count(hosts)})"
            )
        else:
            b.set("num_nodes", nodes, Origin.env(nodes_var))

        per_node_var = _scoped(environ, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
        if per_node_var in environ:
            groups = parse_tasks_per_node(per_node_var, environ[per_node_var])
            covered = sum(repeat for _, repeat in groups)
            total = sum(tasks * repeat for tasks, repeat in groups)
            if covered != hosts or total != world:
                raise InvalidVariable(
                    per_node_var,
                    environ[per_node_var],
                    f"{count(hosts)} node(s) ({nodelist_var}) holding {world} task(s) ({tasks_var}); "
                    f"it describes {covered} node(s) holding {total}",
                )
            here = local_tasks(groups, node)
            if here is not None:  # None: node_rank beyond the nodes; the record refuses it below
                b.formula(
                    "local_world_size",
                    here,
                    f"entry {node} (SLURM_NODEID) of {per_node_var}",
                    per_node_var,
                    "SLURM_NODEID",
                )

        if b.values.get("local_world_size") == 1:
            _workers_per_node(b)

        if b.optional_address("MASTER_ADDR") is None:
            if _arbitrary(environ):
                origin = Origin.probe(
                    "read_text", f"first host of {HOSTFILE}", variables=(HOSTFILE, "SLURM_DISTRIBUTION")
                )
                b.set("main_address", _task0_host(environ, probes), origin)
            else:
                address = env.check_address(nodelist_var, head)
                b.formula("main_address", address, f"first host of {nodelist_var}", nodelist_var)
        self._port(b, environ)

        b.rule("creates_processes_externally", True, "slurm (srun starts every task)")
        b.facts(job_facts(environ))
        return b.build()

    def _port(self, b: Builder, environ: Mapping[str, str]) -> None:
        if b.optional_port("MASTER_PORT") is not None:
            return
        job = env.optional_integer(environ, "SLURM_JOB_ID")
        if job is None:
            b.default("main_port", DEFAULT_PORT, f"{DEFAULT_PORT} (no SLURM_JOB_ID)")
            return
        step = env.optional_integer(environ, "SLURM_STEP_ID") or 0
        variables = ("SLURM_JOB_ID", "SLURM_STEP_ID") if "SLURM_STEP_ID" in environ else ("SLURM_JOB_ID",)
        if self.port_scheme == "step":
            b.set(
                "main_port",
                *job_port(
                    job,
                    "SLURM_JOB_ID",
                    base=10000,
                    span=50000,
                    stride=8191,
                    offset=step,
                    offset_term="SLURM_STEP_ID",
                    variables=variables,
                ),
            )
        elif step == 0:
            b.set(
                "main_port",
                *job_port(job % 10000, "last four digits of SLURM_JOB_ID", base=15000, span=10000, variables=variables),
            )
        else:
            b.set(
                "main_port",
                *job_port(
                    job % 10000,
                    "last four digits of SLURM_JOB_ID",
                    base=15000,
                    span=10000,
                    offset=STEP_STRIDE * step,
                    offset_term=f"{STEP_STRIDE} * SLURM_STEP_ID",
                    variables=variables,
                ),
            )


OFFERS = Offers(job_facts=job_facts, device_binding=device_binding)
