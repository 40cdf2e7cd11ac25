"""The built-in sources, in detection order: one line each, as data.

A line names the source, where its class lives (`module:Class`, imported only when needed) and the
variables whose presence makes it a *candidate*. `resolve` imports and asks a source only when one
of those variables is set, so a torchrun worker never imports the SLURM or MPI modules. The
variables are a sound filter, not the rule: the source's own `detect()` decides, and
`tests/test_registry.py` checks that no environment a source would match is filtered out.

Order (first match wins; the nearest launcher comes first): TorchElastic > DeepSpeed > SLURM > LSF > Flux > MPI >
Grid Engine > PBS > the node-level platforms (Kubeflow Trainer, AWS Batch, SageMaker, SkyPilot, dstack, Vertex AI,
Volcano, Azure ML, TPU VM) > third-party sources (entry points) > the default.
Kubeflow and XLA are chosen by name only.
`SCHEDULERS` lists, the same way, the modules whose `job_facts(environ)` give the job's facts to a
process that another launcher started (mpirun inside sbatch), and `ENDPOINTS` those whose
`main_endpoint` gives MPI ranks inside their allocation a main address and port (Grid Engine).

To add a built-in source: its module under `resolver/sources/`, one line below, its builder module
under `resolver/testing/`, its tests (see "Adding a source" in the README).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from resolver.sources import Source

__all__ = ["DEFAULT", "DETECTION_ORDER", "DEVICE_BINDINGS", "ENDPOINTS", "ON_REQUEST", "SCHEDULERS", "Entry"]


class Entry:
    """One built-in source: its name, `module:Class`, and the variables that make it a candidate."""

    __slots__ = ("auto", "candidates", "name", "target")

    def __init__(self, name: str, target: str, candidates: tuple[str, ...] = (), *, auto: bool = True) -> None:
        self.name = name
        self.target = target
        self.candidates = candidates  # empty: always a candidate (the default)
        self.auto = auto

    def __repr__(self) -> str:
        return f"Entry({self.name!r}, {self.target!r}, {self.candidates!r}, auto={self.auto!r})"

    def is_candidate(self, environ: Mapping[str, str]) -> bool:
        return not self.candidates or any(name in environ for name in self.candidates)

    def load(self) -> Source:
        """A new instance of the source's class, importing its module on first use."""
        source: Source = self.attribute()()
        return source

    def attribute(self) -> Any:
        """What `target` names, importing its module on first use."""
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


DETECTION_ORDER: tuple[Entry, ...] = (
    Entry("torchelastic", "resolver.sources.torchelastic:TorchElastic", ("TORCHELASTIC_RUN_ID", "GROUP_RANK")),
    Entry("deepspeed", "resolver.sources.deepspeed:DeepSpeed", ("CROSS_RANK",)),
    Entry("slurm", "resolver.sources.slurm:Slurm", ("SLURM_NTASKS",)),
    Entry("lsf", "resolver.sources.lsf:Lsf", ("JSM_NAMESPACE_SIZE",)),
    Entry("flux", "resolver.sources.flux:Flux", ("FLUX_TASK_RANK", "FLUX_URI")),
    Entry(
        "mpi",
        "resolver.sources.mpi:Mpi",
        ("OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PALS_RANKID", "PMI_SIZE", "PMIX_RANK"),
    ),
    Entry("gridengine", "resolver.sources.gridengine:GridEngine", ("SGE_TASK_ID",)),
    Entry("pbs", "resolver.sources.pbs:Pbs", ("PBS_JOBID",)),
    # node-level platforms: the process a platform started on a node, with no launcher around it
    Entry("kubeflow_trainer", "resolver.sources.kubeflow_trainer:KubeflowTrainer", ("PET_NNODES",)),
    Entry("aws_batch", "resolver.sources.aws_batch:AwsBatch", ("AWS_BATCH_JOB_NUM_NODES",)),
    Entry("sagemaker", "resolver.sources.sagemaker:SageMaker", ("SM_HOSTS", "SM_CURRENT_HOST")),
    Entry("skypilot", "resolver.sources.skypilot:SkyPilot", ("SKYPILOT_NODE_IPS",)),
    Entry("dstack", "resolver.sources.dstack:Dstack", ("DSTACK_NODES_NUM",)),
    Entry("vertex", "resolver.sources.vertex:Vertex", ("CLUSTER_SPEC", "TF_CONFIG")),
    Entry(
        "volcano",
        "resolver.sources.volcano:Volcano",
        ("VC_TASK_INDEX", "VK_TASK_INDEX", "VC_MASTER_HOSTS", "VC_WORKER_HOSTS"),
    ),
    Entry("azureml", "resolver.sources.azureml:AzureMl", ("AZUREML_RUN_ID",)),
    Entry("tpu_vm", "resolver.sources.tpu_vm:TpuVm", ("TPU_WORKER_ID",)),
)
DEFAULT = Entry("lightning", "resolver.sources.lightning:Lightning")
# Schedulers whose job facts (job id, array index, restart count) are laid over whatever launcher
# started the process: `module:job_facts` functions, nearest first; the first candidate that gives
# facts wins. The chosen source's own facts are not asked twice.
SCHEDULERS: tuple[Entry, ...] = (
    Entry("slurm", "resolver.sources.slurm:job_facts", ("SLURM_JOB_ID",)),
    Entry("lsf", "resolver.sources.lsf:job_facts", ("LSB_JOBID",)),
    Entry("flux", "resolver.sources.flux:job_facts", ("FLUX_JOB_ID",)),
    Entry("gridengine", "resolver.sources.gridengine:job_facts", ("SGE_TASK_ID",)),
    Entry("pbs", "resolver.sources.pbs:job_facts", ("PBS_JOBID",)),
    Entry("azureml", "resolver.sources.azureml:job_facts", ("AZUREML_RUN_ID",)),
    Entry("aws_batch", "resolver.sources.aws_batch:job_facts", ("AWS_BATCH_JOB_ID", "AWS_BATCH_JOB_ATTEMPT")),
    Entry(
        "sagemaker",
        "resolver.sources.sagemaker:job_facts",
        ("TRAINING_JOB_ARN", "TRAINING_JOB_NAME", "SM_TRAINING_ENV"),
    ),
    Entry("skypilot", "resolver.sources.skypilot:job_facts", ("SKYPILOT_TASK_ID",)),
    Entry("dstack", "resolver.sources.dstack:job_facts", ("DSTACK_RUN_NAME",)),
)
# Schedulers that give the MPI ranks inside their allocation a main endpoint without a collective:
# `module:main_endpoint(environ, probes, *, one_node)` functions, nearest first; the first candidate
# that answers wins (see `resolver.sources.scheduler_endpoint`).
ENDPOINTS: tuple[Entry, ...] = (
    Entry("gridengine", "resolver.sources.gridengine:main_endpoint", ("SGE_TASK_ID",)),
    Entry("pbs", "resolver.sources.pbs:main_endpoint", ("PBS_JOBID",)),
    Entry("azureml", "resolver.sources.azureml:main_endpoint", ("AZ_BATCH_MASTER_NODE", "AZ_BATCHAI_MPI_MASTER_NODE")),
)
# Launchers that bind accelerators to a process: `module:device_binding` functions giving a
# `DeviceBinding`, consulted by the device rule (resolver/_devices.py) whatever source resolved.
DEVICE_BINDINGS: tuple[Entry, ...] = (Entry("slurm", "resolver.sources.slurm:device_binding", ("SLURMD_TRES_BIND",)),)
ON_REQUEST: tuple[Entry, ...] = (
    Entry("kubeflow", "resolver.sources.kubeflow:Kubeflow", auto=False),
    Entry("xla", "resolver.sources.xla:Xla", auto=False),
)
