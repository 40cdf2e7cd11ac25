"""Grid Engine (Son of Grid Engine 8.1.9): the processes of one job, as measured in
tests/captures-hpc/gridengine and tests/captures-local/gridengine.

    gridengine_env(job_id=7, array=range(1, 11), task_id=3)   -> Process: the job script of array task 3
    gridengine_job(job_id=7, pe="mpi", hosts=("n1", "n2"), slots=4,
                   launch=OpenMpiLaunch(np=8, hosts=("n1", "n2"), slots=4))  -> Job: every rank

A job is one process (the script, the ``qsub -b y`` binary, a ``qrsh`` command) unless `launch` (an
`OpenMpiLaunch` or `MpichLaunch`) describes the ``mpirun``/``mpiexec`` its script runs: then the job's
processes are that launch's ranks, each with Grid Engine's variables beneath the launcher's. Ranks on
the master host (the first of `hosts`) carry the job script's environment and can read
``PE_HOSTFILE``; ranks on the other hosts run under a ``qrsh -inherit`` task (``JOB_NAME=petask``,
``JOB_SCRIPT=QRSH``, no ``PE_HOSTFILE``, that host's own ``NSLOTS``/``NHOSTS``). That task's variables
were measured on one host (tests/captures-local/gridengine/pe/qrsh-inherit.env); on a second host
they are inferred from it and from the slot counts LAUNCHERS.md reports, not captured.

Not modelled: the variables the job's shell or Python add (``SHLVL``, ``_``, ``LC_CTYPE``).
The keywords are the fields of `GridEngineLaunch`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs

from resolver.testing import _launch as kit
from resolver.testing.mpich import MpichLaunch
from resolver.testing.openmpi import OpenMpiLaunch
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "GridEngineLaunch", "gridengine_env", "gridengine_job"]

_How = Literal["script", "binary", "qrsh"]
_SPOOL = "/var/spool/gridengine/execd"
_BATCH_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/games:/usr/games"  # PATH of a batch job (Debian's build)
_UNDEFINED = "undefined"


@attrs.frozen(kw_only=True)
class GridEngineLaunch(kit.Launch):
    """One Grid Engine job (``qsub``, or ``qrsh`` with `how="qrsh"`), optionally an array task or a parallel job.

    `array` is ``qsub -t``'s range (``range(2, 6, 3)`` for ``-t 2-5:3``) and `task_id` the task this
    process belongs to (default: the first). `pe` requests a parallel environment over `hosts` (master
    first) with `slots` on each (an int for all, or one per host). `login_shell`: the user's (SHELL,
    SGE_O_SHELL). `cwd`: ``qsub -cwd`` (the job starts in `workdir`, else in `home`). `output`: ``-o
    PATH -j y`` (default: ``NAME.oID``/``NAME.eID`` in `home`). `spool_host`: the name the execd gives
    its spool directory (the host's own, unless it reverse-resolves to another name: ``localhost`` in
    the captures). `launch`: the ``mpirun``/``mpiexec`` the job script runs (see the module docstring).
    """

    launcher = "gridengine"
    job_id: int = attrs.field(default=1, validator=kit.positive)
    job_name: str = "job.sh"
    how: _How = "script"
    command: tuple[str, ...] = attrs.field(default=("/usr/bin/python3",), converter=kit.to_strings)
    array: range | None = None
    task_id: int | None = None
    pe: str | None = None
    hosts: tuple[str, ...] = attrs.field(default=("node1",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    slots: int | tuple[int, ...] = 1
    queue: str = "all.q"
    user: str = "user"
    home: str | None = None
    login_shell: str = "/bin/bash"
    submit_host: str = "login1"
    submit_path: str = _BATCH_PATH
    workdir: str | None = None
    cwd: bool = False
    output: str | None = None
    restarted: Literal[0, 1, 2] = 0
    spool_host: str | None = None
    launch: OpenMpiLaunch | MpichLaunch | None = None

    def __attrs_post_init__(self) -> None:
        if self.array is not None and (not self.array or self.array.start < 1 or self.array.step < 1):
            raise ValueError(f"array={self.array!r}: qsub -t takes task ids >= 1, first to last by a step >= 1")
        if self.task_id is not None and (self.array is None or self.task_id not in self.array):
            raise ValueError(f"task_id={self.task_id}: not a task of array={self.array!r}")
        if self.pe is None and (len(self.hosts) > 1 or self.host_slots != (1,)):
            raise ValueError("hosts and slots beyond one slot of one host need a parallel environment (pe=...)")
        if self.launch is not None:
            if self.pe is None or self.how == "qrsh":
                raise ValueError("launch= (mpirun/mpiexec in the job script) needs pe=... and a batch job")
            outside = set(self.launch.hosts) - set(self.hosts)
            if outside:
                raise ValueError(f"launch runs on {sorted(outside)}, which are not among the job's hosts")

    @property
    def host_slots(self) -> tuple[int, ...]:
        if isinstance(self.slots, int):
            return (self.slots,) * len(self.hosts)
        if len(self.slots) != len(self.hosts):
            raise ValueError(f"slots={self.slots!r} for {len(self.hosts)} hosts")
        return tuple(self.slots)

    @property
    def task(self) -> int | None:
        if self.array is None:
            return None
        return self.array.start if self.task_id is None else self.task_id

    @property
    def tmpdir(self) -> str:
        """The job's TMPDIR: a directory per job and task under the queue's tmpdir (/tmp here)."""
        return f"/tmp/{self.job_id}.{self.task or 1}.{self.queue}"  # noqa: S108 - Grid Engine's path

    @property
    def pe_hostfile(self) -> str:
        return f"{_SPOOL}/{self.spool_host or self.hosts[0]}/active_jobs/{self.job_id}.{self.task or 1}/pe_hostfile"

    def files(self) -> dict[str, str]:
        """What the master host can read: PE_HOSTFILE, one ``host slots queue@host UNDEFINED`` line per host."""
        if self.pe is None:
            return {}
        lines = (
            f"{host} {n} {self.queue}@{host} UNDEFINED\n" for host, n in zip(self.hosts, self.host_slots, strict=True)
        )
        return {self.pe_hostfile: "".join(lines)}

    def environ(self, host_index: int = 0) -> dict[str, str]:
        """The environment Grid Engine gives the master task (0) or the qrsh -inherit task on host `host_index`."""
        home = self.home or f"/home/{self.user}"
        workdir = self.workdir or home
        task, host = self.task, self.hosts[host_index]
        spool = (self.spool_host or self.hosts[0]) if host_index == 0 else host
        run = f"{self.job_id}.{task or 1}"
        tmpdir = self.tmpdir
        pe_task = host_index > 0
        qrsh = self.how == "qrsh" or pe_task
        name = "petask" if pe_task else self.job_name
        array = {"ID": str(task), "FIRST": "", "LAST": "", "STEPSIZE": ""}
        if self.array is not None:
            last = self.array[-1]
            array |= {"FIRST": str(self.array.start), "LAST": str(last), "STEPSIZE": str(self.array.step)}
        out = self.output or f"{home}/{self.job_name}.o{self.job_id}"
        err = self.output or f"{home}/{self.job_name}.e{self.job_id}"
        if self.how == "qrsh":
            out = err = "/dev/null"
        env = {
            "ARC": "lx-amd64",
            "ENVIRONMENT": "BATCH",
            "HOME": home,
            "HOSTNAME": host,
            "JOB_ID": str(self.job_id),
            "JOB_NAME": name,
            "JOB_SCRIPT": "QRSH" if qrsh else self._script(spool),
            "LOGNAME": self.user,
            "NHOSTS": str(1 if pe_task else len(self.hosts)),
            "NQUEUES": str(1 if pe_task else len(self.hosts)),
            "NSLOTS": str(self.host_slots[host_index] if pe_task else sum(self.host_slots)),
            "PATH": f"{tmpdir}:/usr/local/bin:/bin:/usr/bin" if qrsh else _BATCH_PATH,
            "PWD": workdir if self.cwd else home,
            "QUEUE": self.queue,
            "REQNAME": name,
            "REQUEST": name,
            "RESTARTED": str(self.restarted),
            "SGE_ACCOUNT": "sge",
            "SGE_ARCH": "lx-amd64",
            "SGE_BINARY_PATH": "/usr/sbin/lx-amd64",
            "SGE_CELL": "default",
            "SGE_CWD_PATH": workdir if self.cwd else home,
            "SGE_EXECD_PIDFILE": "/var/run/gridengine/execd.pid",
            "SGE_JOB_SPOOL_DIR": f"{_SPOOL}/{spool}/active_jobs/{run}" + (f"/1.{spool}" if pe_task else ""),
            "SGE_O_HOME": home,
            "SGE_O_HOST": (self.spool_host or self.hosts[0]) if pe_task else self.submit_host,
            "SGE_O_LOGNAME": self.user,
            "SGE_O_MAIL": f"/var/mail/{self.user}",
            "SGE_O_PATH": _BATCH_PATH if pe_task else self.submit_path,  # a task's submitter is the job script
            "SGE_O_SHELL": self.login_shell,
            "SGE_O_WORKDIR": workdir,
            "SGE_ROOT": "/var/lib/gridengine",
            "SGE_STDERR_PATH": err,
            "SGE_STDIN_PATH": "/dev/null",
            "SGE_STDOUT_PATH": out,
            **{f"SGE_TASK_{key}": value if task is not None else _UNDEFINED for key, value in array.items()},
            "SHELL": self.login_shell,
            "TERM": "xterm" if self.how == "qrsh" else "",
            "TMP": tmpdir,
            "TMPDIR": tmpdir,
            "USER": self.user,
        }
        if self.pe is not None:
            env |= {"PE": self.pe, "SGE_RSH_COMMAND": "builtin"}
            if not pe_task:
                env["PE_HOSTFILE"] = self.pe_hostfile
        if qrsh:
            env["QRSH_COMMAND"] = "\\xff".join(self.command)  # Grid Engine separates the words with byte 0xff
            env["QRSH_PORT"] = f"{self.submit_host if self.how == 'qrsh' else self.hosts[0]}:{self._qrsh_port()}"
        return dict(sorted(env.items()))

    def _script(self, spool: str) -> str:
        if self.how == "binary":
            return self.command[0]
        return f"{_SPOOL}/{spool}/job_scripts/{self.job_id}"

    def _qrsh_port(self) -> int:
        return kit.ephemeral_port("qrsh", self.job_id, self.task)

    def process(self) -> Process:
        """The one process Grid Engine starts: the job script, binary or qrsh command, on the master host."""
        return Process(environ=self.environ(), hostname=self.hosts[0], files=self.files())

    one = process

    def processes(self) -> Iterator[Process]:
        if self.launch is None:
            yield self.process()
            return
        launch = self.launch
        if isinstance(launch, OpenMpiLaunch):
            launch = attrs.evolve(launch, tmpdir=self.tmpdir)
        for rank in launch.processes():
            index = self.hosts.index(rank.hostname)
            files = self.files() if index == 0 else {}
            yield attrs.evolve(rank, environ={**self.environ(index), **rank.environ}, files=files)

    def job_options(self) -> Mapping[str, Any]:
        return {} if self.launch is None else {"source": "mpi", "mpi": True}


gridengine_job = kit.job_builder(
    GridEngineLaunch,
    doc="The processes of one Grid Engine job (the job script, or the ranks of `launch`); the keywords are "
    "`GridEngineLaunch`'s.",
)
gridengine_env = kit.env_builder(
    GridEngineLaunch,
    doc="The one process Grid Engine starts (job script, binary, qrsh), with ``.files`` (PE_HOSTFILE); the keywords "
    "are `GridEngineLaunch`'s.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        job_id = draw(st.integers(1, 10**7))
        if most < 2 or draw(st.booleans()):
            first = draw(st.integers(1, 50))
            array = draw(st.none() | st.builds(range, st.just(first), st.integers(first + 1, first + 20)))
            return GridEngineLaunch(job_id=job_id, array=array, how=draw(st.sampled_from(["script", "qrsh"]))).job()
        count = draw(st.integers(1, min(3, most // 2)))
        hosts = draw(kit.host_names(count))
        slots = draw(st.integers(1, max(1, min(4, most // count))))
        np = draw(st.integers(2, max(2, min(most, slots * count))))
        launch: OpenMpiLaunch | MpichLaunch
        if draw(st.booleans()):
            launch = OpenMpiLaunch(np=np, hosts=hosts, slots=slots, oversubscribe=np > slots * count)
        else:
            launch = MpichLaunch(n=np, hosts=hosts, counts=slots)
        return GridEngineLaunch(job_id=job_id, pe="mpi", hosts=hosts, slots=slots, launch=launch).job()

    return build()


LAUNCHER = Launcher(
    name="gridengine",
    nondeterministic={"QRSH_PORT": r"[^:]+:[1-9][0-9]{0,4}"},
    jobs=_jobs,
)
