"""Amazon SageMaker training: the training container on each instance, resolved as that node's agent.

SageMaker starts the training container once per instance. Its training toolkit gives the entry
point ``SM_HOSTS`` (a JSON list of the containers' host names, ``algo-1``, ``algo-2``, ...,
sorted), ``SM_CURRENT_HOST``, ``SM_NUM_GPUS``, ``SM_NUM_NEURONS``, ``SM_NUM_CPUS``,
``SM_NETWORK_INTERFACE_NAME`` and ``SM_TRAINING_ENV`` (JSON of all of it, with ``job_name``);
SageMaker itself writes ``/opt/ml/input/config/resourceconfig.json`` (``current_host``,
``hosts``, ...) and sets ``TRAINING_JOB_NAME`` and ``TRAINING_JOB_ARN``. A process with no launcher
around it is its instance's agent (the node-agent rule that the node-level platforms share):

- hosts and this host: ``SM_HOSTS``/``SM_CURRENT_HOST``; whichever is missing comes from the
  resource config file (``$SM_INPUT_CONFIG_DIR/resourceconfig.json``, through the file probe);
- node rank: this host's position in the hosts; main address: the first host (the toolkit's
  ``master_hostname``, where its own torchrun launcher puts node rank 0);
- ``nproc_per_node``: ``SM_NUM_GPUS`` when above 0, else ``SM_NUM_NEURONS`` when above 0 (the
  toolkit's processes per host); on a CPU instance torchrun's default (1) applies. ``SM_NUM_CPUS``
  counts cores, not workers, and is not read; nor is ``SM_NETWORK_INTERFACE_NAME`` (a NIC for
  NCCL, not a topology fact);
- port: ``MASTER_PORT``, else 7777, the port the toolkit's torchrun launcher passes;
- job facts: ``job_id`` = ``TRAINING_JOB_ARN``, ``job_name`` = ``TRAINING_JOB_NAME`` (else
  ``SM_TRAINING_ENV``'s ``job_name``), also for torchrun's workers inside, through `job_facts`.

Facts from https://github.com/aws/sagemaker-training-toolkit/blob/master/ENVIRONMENT_VARIABLES.md,
https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html
(the resource config file, ``TRAINING_JOB_NAME``, ``TRAINING_JOB_ARN``) and the toolkit's
torch_distributed.py (``MASTER_PORT = "7777"``, node rank = index of the current host).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from resolver import environ as env
from resolver.errors import InvalidVariable, shown
from resolver.origin import Origin
from resolver.sources import Builder, JobFacts, read_job_facts
from resolver.sources._node import NodeAgent, agent, per_node
from resolver.sources._offers import Offers
from resolver.sources._registry import entry
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "CANDIDATES",
    "CONFIG_DIR",
    "CONFIG_FILE",
    "DEFAULT_PORT",
    "NAME",
    "OFFERS",
    "SageMaker",
    "job_facts",
    "resource_config",
]

NAME = "sagemaker"
CONFIG_DIR = "/opt/ml/input/config"
CONFIG_FILE = "resourceconfig.json"
DEFAULT_PORT = 7777  # sagemaker-training-toolkit's torchrun launcher
CANDIDATES = entry(NAME).candidates  # SM_HOSTS or SM_CURRENT_HOST: the toolkit's, in every container
_T = TypeVar("_T")
_HOSTS = 'a JSON list of distinct host names such as ["algo-1", "algo-2"]'


def _json(variable: str, text: str, expected: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise InvalidVariable(variable, text, expected) from None


def job_facts(environ: Mapping[str, str]) -> JobFacts:
    """The training job's ARN and name, for any process inside a SageMaker training container."""
    facts = read_job_facts(environ, (("job_id", "TRAINING_JOB_ARN"), ("job_name", "TRAINING_JOB_NAME")))
    if "job_name" not in facts and "SM_TRAINING_ENV" in environ:
        training = _json("SM_TRAINING_ENV", environ["SM_TRAINING_ENV"], "the toolkit's JSON training environment")
        name = training.get("job_name") if isinstance(training, dict) else None
        if isinstance(name, str):
            facts["job_name"] = (name, Origin.formula("job_name of SM_TRAINING_ENV", variables=("SM_TRAINING_ENV",)))
    return facts


def _host_list(variable: str, value: object, raw: str) -> list[str]:
    if not (isinstance(value, list) and value and all(isinstance(h, str) for h in value)):
        raise InvalidVariable(variable, raw, _HOSTS)
    if len(set(value)) != len(value) or not all(env.is_address(h) for h in value):
        raise InvalidVariable(variable, raw, _HOSTS)
    return value


def resource_config(environ: Mapping[str, str], probes: Probes) -> tuple[str, dict[str, Any]]:
    """The resource config file's path and content (a JSON object), read through the file probe."""
    path = f"{environ.get('SM_INPUT_CONFIG_DIR', CONFIG_DIR).rstrip('/')}/{CONFIG_FILE}"
    text = probes.read_text(path)
    data = _json(path, text, "a JSON object with current_host and hosts")
    if not isinstance(data, dict):
        raise InvalidVariable(path, shown(text), "a JSON object with current_host and hosts")
    return path, data


class SageMaker(NodeAgent):
    """A SageMaker training container with no launcher around it: its instance's agent."""

    name = NAME
    candidates = CANDIDATES
    platform = "SageMaker"
    what = "a SageMaker training container"

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        b.facts(job_facts(environ))
        hosts, current = _hosts(environ, probes)
        if current.value not in hosts.value:
            raise InvalidVariable(current.name, current.value, f"one of the hosts {hosts.value} ({hosts.words})")
        if per_node(b, "SM_NUM_GPUS") is None:
            per_node(b, "SM_NUM_NEURONS")
        place = f"position of {current.value} ({current.words}) in {hosts.words}"
        b.formula("node_rank", hosts.value.index(current.value), place, *hosts.variables, *current.variables)
        b.formula("num_nodes", len(hosts.value), f"count of {hosts.words}", *hosts.variables)
        b.formula("main_address", hosts.value[0], f"first of {hosts.words}", *hosts.variables)
        b.formula("hostnames", tuple(hosts.value), hosts.words, *hosts.variables)  # node i is host i
        if b.optional_port("MASTER_PORT") is None:
            b.default("main_port", DEFAULT_PORT, f"{DEFAULT_PORT} (the SageMaker training toolkit's torchrun port)")
        return agent(b)


@attrs.frozen
class _Read(Generic[_T]):
    """A value of the hosts or this host, with where it came from: `name` for an error (the variable, or
    the file's field), `words` for a formula, and the variables it was read from."""

    value: _T
    name: str
    words: str
    variables: tuple[str, ...] = ()


def _hosts(environ: Mapping[str, str], probes: Probes) -> tuple[_Read[list[str]], _Read[str]]:
    """The hosts and this host: the variables, else the resource config file (read once)."""
    config: tuple[str, dict[str, Any]] | None = None
    if "SM_HOSTS" in environ:
        raw = environ["SM_HOSTS"]
        listed = _host_list("SM_HOSTS", _json("SM_HOSTS", raw, _HOSTS), raw)
        hosts = _Read(listed, "SM_HOSTS", "SM_HOSTS", ("SM_HOSTS",))
    else:
        config = resource_config(environ, probes)
        path, data = config
        listed = _host_list(path, data.get("hosts"), json.dumps(data.get("hosts")))
        hosts = _Read(listed, f"hosts of {path}", f"hosts of {path}")
    if "SM_CURRENT_HOST" in environ:
        name = env.address(environ, "SM_CURRENT_HOST", source=NAME)
        return hosts, _Read(name, "SM_CURRENT_HOST", str(Origin.env("SM_CURRENT_HOST")), ("SM_CURRENT_HOST",))
    path, data = config or resource_config(environ, probes)
    value = data.get("current_host")
    if not isinstance(value, str):
        raise InvalidVariable(path, shown(data), "a JSON object whose current_host is a host name")
    return hosts, _Read(value, f"current_host of {path}", f"current_host of {path}")


OFFERS = Offers(job_facts=job_facts)
