"""Environments shaped exactly like real launchers', for testing code that resolves a topology.

Builders (no dependency beyond this library): each describes one launch with keywords and gives
what the launcher puts in each process's environment, variable for variable, as measured in the
captures under ``tests/captures`` (SLURM 22.05, Open MPI 4.1.4, MPICH 4.0.2, torchrun):

    slurm_env(procid=3, nodes=("ci1", "ci2"), ntasks=4)   -> Process: one srun task
    slurm_job(nodes=("ci1", "ci2"), ntasks=4)             -> Job: every task of that launch

Every launcher has such a pair, ``<launcher>_env`` and ``<launcher>_job``; docs/testing.md lists
them with their keywords. Every ``*_env`` gives a `Process`: a read-only mapping of the process's
environment (``resolver.resolve(process, ...)``, ``process["SLURM_PROCID"]``, ``{**process, ...}``)
that also knows its ``.hostname``, the ``.files`` it can read (LSF's rankfile, PBS's node file,
SageMaker's resource config) and gives fake ``.probes()`` answering both. The keywords of each pair
are the fields of its launch class (`SlurmLaunch`, `TorchrunLaunch`, ...), and the builders'
signatures are those classes' (mypy refuses ``slurm_env(node=...)``). Values a launcher picks at
random (ports, pids, temporary directories) are plausible and derived from the keywords, so a
builder is a pure function; `NONDETERMINISTIC` lists them with the shape of their values.

The world harness (`resolver.testing.world`): a `Job` holds every process of one launch with the
host it runs on; ``job.resolve()`` resolves each with its own fake probes and `assert_consistent`
checks that the answers form one world. Strategies (`resolver.testing.strategies`): `jobs()` and
`topologies()` return Hypothesis strategies; hypothesis is imported only when one is called.
Nothing here is imported by ``import resolver``.

One module per launcher, named by the source registry (a private module of `resolver.sources`: each entry's
``builders``, usually the source's name). A new launcher adds:

1. ``resolver/testing/<launcher>.py``: an ``@attrs.frozen(kw_only=True)`` subclass of
   `_launch.Launch` whose fields are the launcher's options (defaults written once there), with its
   ``launcher`` name, ``process(index)`` giving one `Process` and ``processes()`` all of them; a
   subclass adding the process index (``node: int = 0``) whose ``one()`` is that process (mixing in
   `_launch.ByNode` or `ByRank` gives that ``one()``); the two
   builders from ``_launch.job_builder``/``env_builder`` (typed by the classes' fields); a ``_jobs(most)``
   Hypothesis strategy; and ``LAUNCHER = Launcher(name=..., nondeterministic=..., jobs=_jobs)``.
2. here: its builders in the imports and in `__all__`; in docs/testing.md, its row of the builders'
   table (tests/testing/test_init.py fails until both are there). `REGISTRY`, `LAUNCHERS` and
   `NONDETERMINISTIC` are derived from the source registry (in a private module): ``jobs()``
   draws from every launcher there.
3. its tests in tests/testing/test_<launcher>.py, against captures of the real launcher where one
   exists (tests/testing/captured.py compares variable for variable), else against its
   documentation (say which in the module docstring); and its builders in the SIGNATURES table of
   tests/testing/test_init.py, which checks each takes exactly its launch class's keywords.
"""

from __future__ import annotations

from resolver.schema import topology_schema
from resolver.testing._registry import LAUNCHERS, NONDETERMINISTIC, REGISTRY
from resolver.testing.aws_batch import AwsBatchLaunch, AwsBatchNode, aws_batch_env, aws_batch_job
from resolver.testing.azureml import AzureMlLaunch, AzureMlNode, azureml_env, azureml_job
from resolver.testing.deepspeed import DeepSpeedLaunch, DeepSpeedWorker, deepspeed_env, deepspeed_job
from resolver.testing.dstack import DstackLaunch, DstackNode, dstack_env, dstack_job
from resolver.testing.flux import FluxLaunch, FluxTask, flux_env, flux_job
from resolver.testing.gridengine import GridEngineLaunch, gridengine_env, gridengine_job
from resolver.testing.indexed_job import IndexedJobLaunch, IndexedJobPod, indexed_job_env, indexed_job_job
from resolver.testing.kubeflow import KubeflowLaunch, KubeflowPod, kubeflow_env, kubeflow_job
from resolver.testing.kubeflow_trainer import (
    KubeflowTrainerLaunch,
    KubeflowTrainerNode,
    kubeflow_trainer_env,
    kubeflow_trainer_job,
)
from resolver.testing.lsf import LsfLaunch, LsfTask, lsf_env, lsf_job
from resolver.testing.lws import LwsLaunch, LwsPod, lws_env, lws_job
from resolver.testing.mpich import MpichLaunch, MpichRank, mpich_env, mpich_job
from resolver.testing.openmpi import OpenMpiLaunch, OpenMpiRank, openmpi_env, openmpi_job
from resolver.testing.pbs import PbsLaunch, PbsProcess, pbs_env, pbs_job
from resolver.testing.sagemaker import SageMakerInstance, SageMakerLaunch, sagemaker_env, sagemaker_job
from resolver.testing.skypilot import SkyPilotLaunch, SkyPilotNode, skypilot_env, skypilot_job
from resolver.testing.slurm import (
    Allocation,
    SlurmBatchScript,
    SlurmLaunch,
    SlurmSallocShell,
    SlurmTask,
    slurm_batch_env,
    slurm_env,
    slurm_job,
    slurm_salloc_env,
    slurm_tasks_per_node,
)
from resolver.testing.strategies import jobs, topologies
from resolver.testing.torchrun import TorchrunLaunch, TorchrunWorker, torchrun_env, torchrun_job
from resolver.testing.tpu_vm import TpuVmHost, TpuVmLaunch, tpu_vm_env, tpu_vm_job
from resolver.testing.vertex import VertexLaunch, VertexReplica, vertex_env, vertex_job
from resolver.testing.volcano import VolcanoLaunch, VolcanoPod, volcano_env, volcano_job
from resolver.testing.world import Job, Launcher, Process, assert_consistent

__all__ = [
    "LAUNCHERS",
    "NONDETERMINISTIC",
    "REGISTRY",
    "Allocation",
    "AwsBatchLaunch",
    "AwsBatchNode",
    "AzureMlLaunch",
    "AzureMlNode",
    "DeepSpeedLaunch",
    "DeepSpeedWorker",
    "DstackLaunch",
    "DstackNode",
    "FluxLaunch",
    "FluxTask",
    "GridEngineLaunch",
    "IndexedJobLaunch",
    "IndexedJobPod",
    "Job",
    "KubeflowLaunch",
    "KubeflowPod",
    "KubeflowTrainerLaunch",
    "KubeflowTrainerNode",
    "Launcher",
    "LsfLaunch",
    "LsfTask",
    "LwsLaunch",
    "LwsPod",
    "MpichLaunch",
    "MpichRank",
    "OpenMpiLaunch",
    "OpenMpiRank",
    "PbsLaunch",
    "PbsProcess",
    "Process",
    "SageMakerInstance",
    "SageMakerLaunch",
    "SkyPilotLaunch",
    "SkyPilotNode",
    "SlurmBatchScript",
    "SlurmLaunch",
    "SlurmSallocShell",
    "SlurmTask",
    "TorchrunLaunch",
    "TorchrunWorker",
    "TpuVmHost",
    "TpuVmLaunch",
    "VertexLaunch",
    "VertexReplica",
    "VolcanoLaunch",
    "VolcanoPod",
    "assert_consistent",
    "aws_batch_env",
    "aws_batch_job",
    "azureml_env",
    "azureml_job",
    "deepspeed_env",
    "deepspeed_job",
    "dstack_env",
    "dstack_job",
    "flux_env",
    "flux_job",
    "gridengine_env",
    "gridengine_job",
    "indexed_job_env",
    "indexed_job_job",
    "jobs",
    "kubeflow_env",
    "kubeflow_job",
    "kubeflow_trainer_env",
    "kubeflow_trainer_job",
    "lsf_env",
    "lsf_job",
    "lws_env",
    "lws_job",
    "mpich_env",
    "mpich_job",
    "openmpi_env",
    "openmpi_job",
    "pbs_env",
    "pbs_job",
    "sagemaker_env",
    "sagemaker_job",
    "skypilot_env",
    "skypilot_job",
    "slurm_batch_env",
    "slurm_env",
    "slurm_job",
    "slurm_salloc_env",
    "slurm_tasks_per_node",
    "topologies",
    "topology_schema",
    "torchrun_env",
    "torchrun_job",
    "tpu_vm_env",
    "tpu_vm_job",
    "vertex_env",
    "vertex_job",
    "volcano_env",
    "volcano_job",
]
