"""The built-in sources, in detection order: one entry each, with what it offers.

An entry names the source, the module it lives in (imported only when needed), its candidate
variables (`any_of`/`all_of`: declared here once; `resolve` asks a source only when they are met and
the source's `detect()` starts from them), whether it is auto-detected, and what else its module
offers any process, whichever source resolved it:

- `facts`: `job_facts(environ)`, the job's facts (id, name, array, restart count) for a process that
  another launcher started inside the job (mpirun inside sbatch); asked when these variables are met;
- `endpoint`: `main_endpoint(environ, probes, *, one_node)`, a main address and port for the MPI
  ranks inside its allocation, without a collective (Grid Engine, PBS, Azure ML);
- `devices`: `device_binding(environ)`, the launcher's binding of accelerators to the process.

Each entry also says the release the source arrived in (`since`: a version with its section in
CHANGELOG.md, or the next one while its change is under Unreleased) and, when it shares a family's
page, that page's name (`page`). The documentation's lists of sources (the launchers index, the
testing kit's builders, the sources by release) are generated from these entries when the site is built.

Order (first match wins; the nearest launcher comes first): the order of `ENTRIES` below, with
third-party sources (entry points) before the default; no list numbers it. Kubeflow and XLA are
chosen by name only. Every list the engine, the CLI, the testing kit and the docs need is a view of
`ENTRIES` or is held to it by a test (tests/test_source_lists.py, tests/test_registry.py).

To add a built-in source: its module under `resolver/sources/`, one entry below, its builder module
under `resolver/testing/` and its page under `docs/launchers/` (see "Adding a source" in CONTRIBUTING.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from resolver.sources._kit import Candidates, JobFacts, Source, all_of, any_of

if TYPE_CHECKING:
    from probes import Probes
    from resolver.sources._offers import BindingReader, EndpointReader, JobFactsReader, Offers

__all__ = [
    "DEFAULT",
    "DETECTION_ORDER",
    "DEVICE_BINDINGS",
    "ENDPOINTS",
    "ENTRIES",
    "ON_REQUEST",
    "SCHEDULERS",
    "Entry",
    "entry",
    "scheduler_endpoint",
]


class Entry(NamedTuple):
    """One built-in source: name, `module:Class`, candidate variables, and what its module offers.

    A NamedTuple: a row of a static table, compared by value (the table is built at every start-up,
    where an attrs class would cost 1% of a resolve to create).
    """

    name: str
    target: str
    candidates: Candidates = any_of()
    auto: bool = True
    facts: Candidates | None = None
    endpoint: Candidates | None = None
    devices: Candidates | None = None
    testing: tuple[str, ...] | None = None  # its builder modules in resolver.testing; None: the source's name
    since: str = ""  # the release it arrived in: a version of CHANGELOG.md (tests/test_source_lists.py)
    page: str | None = None  # its page, docs/launchers/<page>.md; None: the source's name

    @property
    def builders(self) -> tuple[str, ...]:
        """The names of the source's builder modules under `resolver.testing` (none for the default and XLA)."""
        return (self.name,) if self.testing is None else self.testing

    @property
    def docs_page(self) -> str:
        """The name of the source's page under `docs/launchers/` (its own, or its family's)."""
        return self.name if self.page is None else self.page

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def is_candidate(self, environ: Mapping[str, str]) -> bool:
        return self.candidates.met(environ)

    def load(self) -> Source:
        """A new instance of the source's class, importing its module on first use."""
        module, _, cls = self.target.partition(":")
        source: Source = getattr(importlib.import_module(module), cls)()
        return source

    def offers(self) -> Offers | None:
        """What the source's module offers besides the source (its `OFFERS`); None when it offers nothing."""
        offers: Offers | None = getattr(importlib.import_module(self.module), "OFFERS", None)
        return offers

    def job_facts(self) -> JobFactsReader:
        """The module's `job_facts`, which its entry declares with `facts=`."""
        offers = self.offers()
        return _offered(self, None if offers is None else offers.job_facts, "job_facts")

    def main_endpoint(self) -> EndpointReader:
        """The module's `main_endpoint`, which its entry declares with `endpoint=`."""
        offers = self.offers()
        return _offered(self, None if offers is None else offers.main_endpoint, "main_endpoint")

    def device_binding(self) -> BindingReader:
        """The module's `device_binding`, which its entry declares with `devices=`."""
        offers = self.offers()
        return _offered(self, None if offers is None else offers.device_binding, "device_binding")


_T = TypeVar("_T")


def _offered(entry: Entry, function: _T | None, capability: str) -> _T:
    if function is None:
        raise LookupError(f"{entry.module}.OFFERS has no {capability}, which the entry of {entry.name!r} declares")
    return function


_SOURCES = "resolver.sources"
_GRIDENGINE = all_of("JOB_ID", "SGE_TASK_ID")
_PBS = all_of("PBS_JOBID", "PBS_ENVIRONMENT")

ENTRIES: tuple[Entry, ...] = (
    Entry(
        "torchelastic",
        f"{_SOURCES}.torchelastic:TorchElastic",
        any_of("TORCHELASTIC_RUN_ID", "GROUP_RANK"),
        testing=("torchrun",),
        since="0.1.0",
    ),
    Entry("deepspeed", f"{_SOURCES}.deepspeed:DeepSpeed", all_of("CROSS_RANK", "CROSS_SIZE"), since="0.2.0"),
    Entry(
        "slurm",
        f"{_SOURCES}.slurm:Slurm",
        any_of("SLURM_NTASKS"),
        facts=any_of("SLURM_JOB_ID"),
        devices=any_of("SLURMD_TRES_BIND"),
        since="0.1.0",
    ),
    Entry(
        "lsf",
        f"{_SOURCES}.lsf:Lsf",
        all_of("LSB_JOBID", "LSB_DJOB_RANKFILE", "JSM_NAMESPACE_LOCAL_RANK", "JSM_NAMESPACE_SIZE"),
        facts=any_of("LSB_JOBID"),
        since="0.1.0",
    ),
    Entry(
        "flux",
        f"{_SOURCES}.flux:Flux",
        any_of("FLUX_TASK_RANK", "FLUX_URI"),
        facts=any_of("FLUX_JOB_ID"),
        since="0.2.0",
    ),
    Entry(
        "mpi",
        f"{_SOURCES}.mpi:Mpi",
        any_of(
            "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "PALS_RANKID", "PMI_SIZE", "PMIX_RANK"
        ),
        testing=("openmpi", "mpich"),
        since="0.1.0",
    ),
    # one process per job, whose variables every process of the job has, MPI ranks inside it too
    Entry(
        "gridengine",
        f"{_SOURCES}.gridengine:GridEngine",
        _GRIDENGINE,
        facts=_GRIDENGINE,
        endpoint=_GRIDENGINE,
        since="0.2.0",
    ),
    Entry("pbs", f"{_SOURCES}.pbs:Pbs", _PBS, facts=_PBS, endpoint=_PBS, since="0.2.0"),
    # node-level platforms: the process a platform started on a node, with no launcher around it
    Entry(
        "kubeflow_trainer",
        f"{_SOURCES}.kubeflow_trainer:KubeflowTrainer",
        any_of("PET_NNODES"),
        since="0.2.0",
        page="kubeflow",
    ),
    Entry(
        "aws_batch",
        f"{_SOURCES}.aws_batch:AwsBatch",
        all_of("AWS_BATCH_JOB_NODE_INDEX", "AWS_BATCH_JOB_NUM_NODES"),
        facts=any_of("AWS_BATCH_JOB_ID", "AWS_BATCH_JOB_ATTEMPT"),
        since="0.2.0",
    ),
    Entry(
        "sagemaker",
        f"{_SOURCES}.sagemaker:SageMaker",
        any_of("SM_HOSTS", "SM_CURRENT_HOST"),
        facts=any_of("TRAINING_JOB_ARN", "TRAINING_JOB_NAME", "SM_TRAINING_ENV"),
        since="0.2.0",
    ),
    Entry(
        "skypilot",
        f"{_SOURCES}.skypilot:SkyPilot",
        all_of("SKYPILOT_NODE_RANK", "SKYPILOT_NODE_IPS"),
        facts=any_of("SKYPILOT_TASK_ID"),
        since="0.2.0",
    ),
    Entry(
        "dstack",
        f"{_SOURCES}.dstack:Dstack",
        all_of("DSTACK_NODE_RANK", "DSTACK_NODES_NUM"),
        facts=any_of("DSTACK_RUN_NAME"),
        since="0.2.0",
    ),
    Entry("vertex", f"{_SOURCES}.vertex:Vertex", any_of("CLUSTER_SPEC", "TF_CONFIG"), since="0.2.0"),
    Entry(
        "volcano",
        f"{_SOURCES}.volcano:Volcano",
        any_of("VC_TASK_INDEX", "VK_TASK_INDEX", "VC_MASTER_HOSTS", "VC_WORKER_HOSTS"),
        since="0.2.0",
    ),
    Entry(
        "azureml",
        f"{_SOURCES}.azureml:AzureMl",
        any_of("AZUREML_RUN_ID"),
        facts=any_of("AZUREML_RUN_ID"),
        endpoint=any_of("AZ_BATCH_MASTER_NODE", "AZ_BATCHAI_MPI_MASTER_NODE"),
        since="0.2.0",
    ),
    Entry("tpu_vm", f"{_SOURCES}.tpu_vm:TpuVm", any_of("TPU_WORKER_ID"), since="0.2.0"),
    Entry(
        "lws",
        f"{_SOURCES}.lws:Lws",
        all_of("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"),
        facts=any_of("LWS_NAME"),  # the group index names a group only with the set's name
        since="0.2.0",
    ),
    Entry(
        "indexed_job",
        f"{_SOURCES}.indexed_job:IndexedJob",
        all_of("JOB_COMPLETION_INDEX", "NNODES", "MASTER_ADDR"),  # the index alone is any Indexed Job
        since="0.2.0",
    ),
    Entry(
        "gcp_batch",
        f"{_SOURCES}.gcp_batch:GcpBatch",
        all_of("BATCH_TASK_INDEX", "BATCH_TASK_COUNT", "BATCH_HOSTS_FILE"),  # the hosts file: VMs that talk
        since="0.2.0",
    ),
    # the default: always a candidate, last
    Entry("lightning", f"{_SOURCES}.lightning:Lightning", testing=(), since="0.1.0", page="default"),
    Entry("kubeflow", f"{_SOURCES}.kubeflow:Kubeflow", auto=False, since="0.1.0"),
    Entry("xla", f"{_SOURCES}.xla:Xla", auto=False, testing=(), since="0.1.0"),
)

# -- views ---------------------------------------------------------------------------------------------

DEFAULT: Entry = next(e for e in ENTRIES if e.name == "lightning")
DETECTION_ORDER: tuple[Entry, ...] = tuple(e for e in ENTRIES if e.auto and e is not DEFAULT)
ON_REQUEST: tuple[Entry, ...] = tuple(e for e in ENTRIES if not e.auto)
# nearest first, as in the detection order; SLURM before LSF before Flux before Grid Engine ...
SCHEDULERS: tuple[Entry, ...] = tuple(e for e in ENTRIES if e.facts is not None)
ENDPOINTS: tuple[Entry, ...] = tuple(e for e in ENTRIES if e.endpoint is not None)
DEVICE_BINDINGS: tuple[Entry, ...] = tuple(e for e in ENTRIES if e.devices is not None)


def entry(name: str) -> Entry:
    """The entry of the built-in source `name`; KeyError for any other name."""
    for found in ENTRIES:
        if found.name == name:
            return found
    raise KeyError(name)


def scheduler_endpoint(environ: Mapping[str, str], probes: Probes, *, one_node: bool) -> JobFacts:
    """The main address and port a scheduler gives the MPI ranks inside its allocation, with origins.

    Asks the entries that offer an `endpoint`, in order; the first one met that answers wins; {} if
    none does. `one_node` (every rank on this node) lets it read files that only some hosts have: then
    every rank sees the same file system, so all of them skip the MPI exchange, or none does.
    """
    for candidate in ENDPOINTS:
        if candidate.endpoint is not None and candidate.endpoint.met(environ):
            found = candidate.main_endpoint()(environ, probes, one_node=one_node)
            if found:
                return found
    return {}
