"""PBS Professional / OpenPBS and Torque: the job script and ``pbsdsh`` tasks, from the documentation.

    pbs_env(hosts=("node1", "node2"), ncpus=2)           -> Process: the job script (.environ, .files)
    pbs_env(vnode=3, hosts=("node1", "node2"), ncpus=2)  -> Process: pbsdsh's task on vnode 3
    pbs_job(hosts=("node1", "node2"), ncpus=2)           -> Job: the job script, the one process PBS starts

The keywords are the fields of `PbsLaunch` (plus `vnode` for `pbs_env`). No PBS server can run here:
the variables are the ones qsub(1B) says PBS exports to every job (OpenPBS), with the array
variables of ``qsub -J`` (``PBS_ARRAY_INDEX``, ``PBS_ARRAY_ID``) or Torque's ``qsub -t``
(``PBS_ARRAYID``) and Torque's ``PBS_NP``/``PBS_NUM_NODES``/``PBS_NUM_PPN``; ``PBS_NODEFILE``
lists one line per vnode (slot), the mother superior first; pbsdsh(1B) tasks add ``PBS_TASKNUM``,
``PBS_NODENUM`` and ``PBS_VNODENUM``. MPI ranks inside a PBS job are an MPI launch whose ranks also
carry the job script's variables: add `PbsLaunch.script_variables()` to an ``openmpi_job`` or
``mpich_job`` environment.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "PbsLaunch", "PbsProcess", "pbs_env", "pbs_job"]


@attrs.frozen(kw_only=True)
class PbsLaunch(kit.Launch):
    """A PBS job on `hosts` (the mother superior first) with `ncpus` vnodes (slots) on each.

    ``flavor="openpbs"`` (PBS Professional, OpenPBS: ``qsub -l select=N:ncpus=C``, arrays with ``-J``)
    or ``"torque"`` (``qsub -l nodes=N:ppn=C``, arrays with ``-t``, plus ``PBS_NP``, ``PBS_NUM_NODES``
    and ``PBS_NUM_PPN``). `array_index` makes it a subjob of an array job. `interactive` is
    ``qsub -I`` (``PBS_ENVIRONMENT=PBS_INTERACTIVE``).
    """

    launcher = "pbs"
    hosts: tuple[str, ...] = attrs.field(default=("node1",), converter=kit.to_hosts, validator=kit.distinct_hosts)
    ncpus: int | tuple[int, ...] = 1
    sequence: int = attrs.field(default=1234, validator=kit.positive)
    server: str = "pbsserver"
    name: str = "job.sh"
    array_index: int | None = attrs.field(default=None, validator=kit.not_negative)
    flavor: Literal["openpbs", "torque"] = "openpbs"
    interactive: bool = False

    def __attrs_post_init__(self) -> None:
        if self.flavor not in ("openpbs", "torque"):
            raise ValueError(f"flavor={self.flavor!r}: expected 'openpbs' or 'torque'")
        self.slots()

    def slots(self) -> list[int]:
        slots = kit.capacities(self.ncpus, len(self.hosts))
        if min(slots) < 1:
            raise ValueError(f"ncpus={self.ncpus!r}: at least one vnode per host")
        return slots

    @property
    def job_id(self) -> str:
        index = "" if self.array_index is None else f"[{self.array_index}]"
        return f"{self.sequence}{index}.{self.server}"

    @property
    def nodefile_path(self) -> str:
        if self.flavor == "torque":
            return f"/var/spool/torque/aux/{self.job_id}"
        return f"/var/spool/pbs/aux/{self.job_id}"

    def vnodes(self) -> list[int]:
        """The host index of each line of the node file."""
        return [node for node, count in enumerate(self.slots()) for _ in range(count)]

    def nodefile(self) -> str:
        return "".join(f"{self.hosts[node]}\n" for node in self.vnodes())

    def script_variables(self) -> dict[str, str]:
        """What PBS exports to the job script (and every process the script starts inherits)."""
        env = {
            "PBS_ENVIRONMENT": "PBS_INTERACTIVE" if self.interactive else "PBS_BATCH",
            "PBS_JOBID": self.job_id,
            "PBS_JOBNAME": "STDIN" if self.interactive else self.name,
            "PBS_NODEFILE": self.nodefile_path,
            "PBS_O_HOME": "/home/user",
            "PBS_O_HOST": "login1",
            "PBS_O_LOGNAME": "user",
            "PBS_O_PATH": "/usr/local/bin:/usr/bin:/bin",
            "PBS_O_QUEUE": "workq",
            "PBS_O_SHELL": "/bin/bash",
            "PBS_O_SYSTEM": "Linux",
            "PBS_O_WORKDIR": "/home/user/run",
            "PBS_QUEUE": "workq",
            "TMPDIR": f"/var/tmp/pbs.{self.job_id}",  # noqa: S108 - PBS's scratch directory
        }
        if self.flavor == "openpbs":
            env["PBS_JOBDIR"] = "/home/user"
            if self.array_index is not None:
                env["PBS_ARRAY_INDEX"] = str(self.array_index)
                env["PBS_ARRAY_ID"] = f"{self.sequence}[].{self.server}"
        else:
            slots = self.slots()
            env["PBS_NP"] = str(sum(slots))
            env["PBS_NUM_NODES"] = str(len(self.hosts))
            env["PBS_NUM_PPN"] = str(slots[0])
            if self.array_index is not None:
                env["PBS_ARRAYID"] = str(self.array_index)
        return dict(sorted(env.items()))

    def task_variables(self, vnode: int) -> dict[str, str]:
        """A ``pbsdsh`` task on vnode `vnode` (a line of the node file): the script's variables and TM's."""
        vnodes = self.vnodes()
        if not 0 <= vnode < len(vnodes):
            raise ValueError(f"vnode={vnode}: the job has vnodes 0..{len(vnodes) - 1}")
        env = {
            **self.script_variables(),
            "PBS_NODENUM": str(vnodes[vnode]),
            "PBS_TASKNUM": str(2 + vnode),  # TM task ids: handed out by the MOMs, after the job shell's
            "PBS_VNODENUM": str(vnode),
        }
        return dict(sorted(env.items()))

    def process(self, vnode: int | None = None) -> Process:
        """The job script (`vnode` None), or pbsdsh's task on `vnode`; the node file is readable on the first host."""
        environ = self.script_variables() if vnode is None else self.task_variables(vnode)
        node = 0 if vnode is None else self.vnodes()[vnode]
        files = {self.nodefile_path: self.nodefile()} if node == 0 else {}
        return Process(environ=environ, hostname=self.hosts[node], node=node, files=files)

    def processes(self) -> Iterator[Process]:
        yield self.process()  # the one process PBS starts: the job script


@attrs.frozen(kw_only=True)
class PbsProcess(PbsLaunch):
    """The job script of a `PbsLaunch` (`vnode` None), or the pbsdsh task on vnode `vnode`."""

    vnode: int | None = attrs.field(default=None, validator=kit.not_negative)

    def one(self) -> Process:
        return self.process(self.vnode)


pbs_job = kit.job_builder(
    PbsLaunch, doc="The one process a PBS job starts (its job script); the keywords are `PbsLaunch`'s."
)
pbs_env = kit.env_builder(
    PbsProcess,
    doc="The job script (or, with `vnode`, a pbsdsh task), with ``.files`` (the node file); `PbsLaunch`'s keywords.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    @st.composite
    def build(draw: st.DrawFn) -> Job:
        count = draw(st.integers(1, 3))
        flavor: Literal["openpbs", "torque"] = draw(st.sampled_from(["openpbs", "torque"]))
        launch = PbsLaunch(
            hosts=draw(kit.host_names(count)),
            ncpus=tuple(draw(st.lists(st.integers(1, 4), min_size=count, max_size=count))),
            sequence=draw(st.integers(1, 10**7)),
            array_index=draw(st.none() | st.integers(0, 100)),
            flavor=flavor,
            interactive=draw(st.booleans()),
        )
        return launch.job()

    return build()


LAUNCHER = Launcher(name="pbs", nondeterministic={}, jobs=_jobs)
