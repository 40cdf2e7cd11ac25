"""Kubernetes LeaderWorkerSet: every pod of one leader-worker group, as LWS's pod webhook sets them.

    lws_env(node=1, size=4, name="vllm")  -> Process: worker pod 1's environment
    lws_job(size=4, group=1)              -> Job: every pod of group 1

The keywords are the fields of `LwsLaunch` (plus `node`, the pod's worker index, for `lws_env`).
LWS sets ``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE`` and ``LWS_WORKER_INDEX`` on every pod;
``LWS_NAME`` and ``LWS_GROUP_INDEX`` are the set's name and group index labels passed through the
Downward API, as pod templates do (`downward_api=False` leaves them out). From
https://lws.sigs.k8s.io/docs/reference/labels-annotations-and-environment-variables and
kubernetes-sigs/lws's webhook (pkg/utils/pod/pod_utils.go: ``<lws>-<group>.<subdomain>.<namespace>``);
no capture exists here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "LwsLaunch", "LwsPod", "lws_env", "lws_job"]

_POLICIES = ("Shared", "UniquePerReplica")


def _policy(instance: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in _POLICIES:
        raise ValueError(f"{attribute.name}={value!r}: expected one of {', '.join(_POLICIES)}")


@attrs.frozen(kw_only=True)
class LwsLaunch(kit.Launch):
    """Group `group` of the LeaderWorkerSet `name` in `namespace`, of `size` pods (a leader and `size - 1` workers).

    The leader pod is ``{name}-{group}``, worker i is ``{name}-{group}-{i}``; the headless service's
    subdomain is `name` (`subdomain_policy` ``Shared``) or the leader's name (``UniquePerReplica``).
    """

    launcher = "lws"
    name: str = "vllm"
    size: int = attrs.field(default=2, validator=kit.positive)
    group: int = attrs.field(default=0, validator=kit.not_negative)
    namespace: str = "default"
    subdomain_policy: str = attrs.field(default="Shared", validator=_policy)
    downward_api: bool = True

    def pod(self, index: int) -> str:
        leader = f"{self.name}-{self.group}"
        return leader if index == 0 else f"{leader}-{index}"

    def process(self, index: int) -> Process:
        kit.index_in("node", index, self.size, "the group has pods")
        subdomain = self.name if self.subdomain_policy == "Shared" else self.pod(0)
        env = {
            "LWS_LEADER_ADDRESS": f"{self.pod(0)}.{subdomain}.{self.namespace}",
            "LWS_GROUP_SIZE": str(self.size),
            "LWS_WORKER_INDEX": str(index),
        }
        if self.downward_api:
            env |= {"LWS_NAME": self.name, "LWS_GROUP_INDEX": str(self.group)}
        return Process(environ=env, hostname=self.pod(index), node=index)

    def processes(self) -> Iterator[Process]:
        return map(self.process, range(self.size))


@attrs.frozen(kw_only=True)
class LwsPod(LwsLaunch, kit.ByNode):
    """Pod `node` (its worker index; 0 is the leader) of an `LwsLaunch` group."""

    node: int = attrs.field(default=0, validator=kit.not_negative)


lws_job = kit.job_builder(LwsLaunch, doc="Every pod of one LeaderWorkerSet group; the keywords are `LwsLaunch`'s.")
lws_env = kit.env_builder(
    LwsPod, doc="Pod `node`'s environment (its worker index); the other keywords are `LwsLaunch`'s."
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    launches = st.builds(
        LwsLaunch,
        size=st.integers(1, min(4, most)),
        group=st.integers(0, 3),
        subdomain_policy=st.sampled_from(_POLICIES),
        downward_api=st.booleans(),
    )
    return launches.map(LwsLaunch.job)


LAUNCHER = Launcher(name="lws", nondeterministic={}, jobs=_jobs)
