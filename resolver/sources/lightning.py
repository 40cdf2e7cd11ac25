"""The default: a single machine, or a cluster whose processes were started by hand."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.sources import LOCAL_ADDRESS, Builder, Detection, Origin
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = ["NAME", "Lightning"]

NAME = "lightning"


class Lightning:
    """Lightning's LightningEnvironment, without its mutable world size and rank."""

    name = NAME
    auto = True

    def detect(self, environ: Mapping[str, str]) -> Detection:
        return Detection(True, "the default: always matches", ())

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        external = "LOCAL_RANK" in environ
        if external:
            b.set("creates_processes_externally", True, Origin.env("LOCAL_RANK"))
        else:
            b.default("creates_processes_externally", False, "False (LOCAL_RANK unset: this process spawns workers)")
        for field, variable, minimum, default in (
            ("world_size", "WORLD_SIZE", 1, 1),
            ("global_rank", "RANK", 0, 0),
            ("local_rank", "LOCAL_RANK", 0, 0),
        ):
            if b.optional_integer(field, variable, minimum=minimum) is None:
                b.default(field, default, str(default))
        if (
            b.optional_integer("node_rank", "NODE_RANK") is None
            and b.optional_integer("node_rank", "GROUP_RANK") is None
        ):
            b.default("node_rank", 0, "0")
        b.optional_integer("local_world_size", "LOCAL_WORLD_SIZE", minimum=1)
        b.optional_integer("num_nodes", "GROUP_WORLD_SIZE", minimum=1)

        if b.optional_address("MASTER_ADDR") is None:
            b.default("main_address", LOCAL_ADDRESS, LOCAL_ADDRESS)
        if b.optional_port("MASTER_PORT") is None and b.optional_port("STANDALONE_PORT") is None:
            b.set("main_port", probes.free_port(), Origin.probe("free_port"))
            if external:
                b.warn(
                    "LOCAL_RANK is set but MASTER_PORT is not: each process picked its own free port, "
                    "so they cannot meet; set MASTER_PORT to one port for all of them"
                )
        self._srun_unused(b)
        return b.build()

    @staticmethod
    def _srun_unused(b: Builder) -> None:
        """Inside a SLURM allocation, a process that srun did not start: say how to start the tasks.

        Only there (`SLURM_JOB_ID` set, no `SLURM_STEP_ID`: the salloc shell, a process started over ssh
        on an allocated node); the batch script gets the SLURM source's own note. Lightning warns whenever
        `srun` is on PATH, which on a login node is every call, and makes `--strict` fail for nothing.
        """
        environ = b.environ
        if "SLURM_JOB_ID" not in environ or "SLURM_STEP_ID" in environ or environ.get("ENVIRONMENT") == "BATCH":
            return
        b.warn(
            f"inside SLURM job {environ['SLURM_JOB_ID']} but not started by srun (no SLURM_STEP_ID): resolved as "
            "this process alone; to run the job's tasks, start them with srun (e.g. srun python train.py)"
        )
