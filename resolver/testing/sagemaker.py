"""Amazon SageMaker training: every instance's training container, as the training toolkit documents it.

    sagemaker_env(node=1, instances=2, gpus=8)   -> Process: algo-2's environment and resource config file
    sagemaker_job(instances=2, gpus=8)           -> Job: every instance's agent

The keywords are the fields of `SageMakerLaunch` (plus `node` for `sagemaker_env`). From
https://github.com/aws/sagemaker-training-toolkit/blob/master/ENVIRONMENT_VARIABLES.md and
https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html;
no capture of a real job exists here. ``with_variables=False`` leaves out the toolkit's ``SM_*``
variables but ``SM_CURRENT_HOST``, so the hosts come from the resource config file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "SageMakerInstance", "SageMakerLaunch", "sagemaker_env", "sagemaker_job"]

_CONFIG = "/opt/ml/input/config/resourceconfig.json"


@attrs.frozen(kw_only=True)
class SageMakerLaunch(kit.Launch):
    """A training job `name` on `instances` instances of `instance_type` with `gpus` GPUs each (0: CPU)."""

    launcher = "sagemaker"
    instances: int = attrs.field(default=2, validator=kit.positive)
    gpus: int = attrs.field(default=0, validator=kit.not_negative)
    cpus: int = attrs.field(default=8, validator=kit.positive)
    name: str = "pytorch-training-2026-12-03-10-00-00-000"
    instance_type: str = "ml.g5.12xlarge"
    with_variables: bool = True

    @property
    def hosts(self) -> list[str]:
        return [f"algo-{i + 1}" for i in range(self.instances)]

    def resource_config(self, node: int) -> str:
        group = {"instance_group_name": "homogeneousCluster", "instance_type": self.instance_type, "hosts": self.hosts}
        return json.dumps(
            {
                "current_host": self.hosts[node],
                "current_instance_type": self.instance_type,
                "current_group_name": "homogeneousCluster",
                "hosts": self.hosts,
                "instance_groups": [group],
                "network_interface_name": "eth0",
            }
        )

    def process(self, node: int) -> Process:
        kit.index_in("node", node, self.instances, "the job has instances")
        host = self.hosts[node]
        arn = f"arn:aws:sagemaker:us-east-1:123456789012:training-job/{self.name}"
        env = {"SM_CURRENT_HOST": host, "TRAINING_JOB_ARN": arn, "TRAINING_JOB_NAME": self.name}
        if self.with_variables:
            env |= {
                "SM_HOSTS": json.dumps(self.hosts),
                "SM_NUM_GPUS": str(self.gpus),
                "SM_NUM_CPUS": str(self.cpus),
                "SM_NETWORK_INTERFACE_NAME": "eth0",
                "SM_INPUT_CONFIG_DIR": "/opt/ml/input/config",
                "SM_TRAINING_ENV": json.dumps({"current_host": host, "hosts": self.hosts, "job_name": self.name}),
            }
        return Process(
            environ=dict(sorted(env.items())), hostname=host, node=node, files={_CONFIG: self.resource_config(node)}
        )

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.instances))


@attrs.frozen(kw_only=True)
class SageMakerInstance(SageMakerLaunch, kit.ByNode):
    """Instance `node` (host ``algo-{node + 1}``) of a `SageMakerLaunch`."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


sagemaker_job = kit.job_builder(
    SageMakerLaunch, doc="Every instance of one SageMaker training job; the keywords are `SageMakerLaunch`'s."
)
sagemaker_env = kit.env_builder(
    SageMakerInstance, doc="Instance `node`: a `Process` with its environment and its resource config file."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(
        SageMakerLaunch,
        instances=st.integers(1, min(4, most)),
        gpus=st.sampled_from([0, 1, 4, 8]),
        with_variables=st.booleans(),
    )
    return launches.map(SageMakerLaunch.job)


LAUNCHER = Launcher(name="sagemaker", nondeterministic={}, jobs=_jobs)
