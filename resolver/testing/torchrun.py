"""torchrun (torch 2.x): every worker of `nnodes` agents, as measured in tests/captures/torchrun.

    torchrun_env(node_rank=1, local_rank=0, nnodes=2, nproc_per_node=4)  -> Process: one worker's environment
    torchrun_job(nnodes=2, nproc_per_node=4, rdzv="static")             -> Job: every worker

The keywords are the fields of `TorchrunLaunch` (plus `node_rank`, `local_rank` for `torchrun_env`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

import attrs

from resolver.testing import _launch as kit
from resolver.testing.world import Job, Launcher, Process

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["LAUNCHER", "TorchrunLaunch", "TorchrunWorker", "torchrun_env", "torchrun_job"]


@attrs.frozen(kw_only=True)
class TorchrunLaunch(kit.Launch):
    """One torchrun launch (torch 2.x): `nnodes` agents of `nproc_per_node` workers each.

    `hosts` are the agents' hosts (default node1, node2, ...). With ``rdzv="c10d"`` MASTER_ADDR is
    group rank 0's host and MASTER_PORT a free port there (the captures' agents ran on one machine:
    ``localhost``); with ``rdzv="static"`` they are ``--master-addr``/``--master-port`` (default
    127.0.0.1:29500). Group ranks follow the agents' order here (c10d orders them by arrival).
    `visible_devices`: the CUDA_VISIBLE_DEVICES of the launcher's environment, which every process
    inherits unchanged (None: unset).
    """

    launcher, source = "torchrun", "torchelastic"
    nnodes: int = attrs.field(default=1, validator=kit.positive)
    nproc_per_node: int = attrs.field(default=1, validator=kit.positive)
    rdzv: Literal["c10d", "static"] = "c10d"
    hosts: tuple[str, ...] | None = attrs.field(default=None, converter=kit.to_optional_hosts)
    master_addr: str | None = None
    master_port: int | None = attrs.field(default=None, validator=kit.positive)
    run_id: str = "none"
    restart_count: int = attrs.field(default=0, validator=kit.not_negative)
    max_restarts: int = attrs.field(default=0, validator=kit.not_negative)
    role: str = "default"
    visible_devices: tuple[str, ...] | None = attrs.field(default=None, converter=kit.to_optional_devices)

    def __attrs_post_init__(self) -> None:
        if self.rdzv not in ("c10d", "static"):
            raise ValueError(f"rdzv={self.rdzv!r}: expected 'c10d' or 'static'")
        if self.hosts is not None and len(self.hosts) != self.nnodes:
            raise ValueError(f"hosts={self.hosts!r}: one per node (nnodes={self.nnodes})")

    @property
    def agent_hosts(self) -> tuple[str, ...]:
        return self.hosts if self.hosts is not None else tuple(f"node{i + 1}" for i in range(self.nnodes))

    def endpoint(self) -> tuple[str, int]:
        if self.rdzv == "static":
            return self.master_addr or "127.0.0.1", self.master_port or 29500
        port = self.master_port or kit.ephemeral_port("torchrun", self.run_id, self.restart_count, self.agent_hosts)
        return self.master_addr or self.agent_hosts[0], port

    def process(self, node_rank: int, local_rank: int) -> Process:
        if not (0 <= node_rank < self.nnodes and 0 <= local_rank < self.nproc_per_node):
            raise ValueError(
                f"node_rank={node_rank}, local_rank={local_rank} outside {self.nnodes}x{self.nproc_per_node}"
            )
        world = self.nnodes * self.nproc_per_node
        rank = node_rank * self.nproc_per_node + local_rank
        address, port = self.endpoint()
        agent = (self.run_id, self.restart_count, node_rank, self.agent_hosts[node_rank])
        error_file = (
            f"/tmp/torchelastic_{kit.stable_token('agent', *agent)}/{self.run_id}_{kit.stable_token('run', *agent)}"  # noqa: S108 - torch's path
            f"/attempt_{self.restart_count}/{local_rank}/error.json"
        )
        env = {
            "GROUP_RANK": str(node_rank),
            "GROUP_WORLD_SIZE": str(self.nnodes),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(self.nproc_per_node),
            "MASTER_ADDR": address,
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "ROLE_NAME": self.role,
            "ROLE_RANK": str(rank),
            "ROLE_WORLD_SIZE": str(world),
            "TORCHELASTIC_ERROR_FILE": error_file,
            "TORCHELASTIC_MAX_RESTARTS": str(self.max_restarts),
            "TORCHELASTIC_RESTART_COUNT": str(self.restart_count),
            "TORCHELASTIC_RUN_ID": self.run_id,
            "TORCHELASTIC_SIGNALS_TO_HANDLE": "SIGTERM,SIGINT,SIGHUP,SIGQUIT",
            "TORCHELASTIC_USE_AGENT_STORE": "True",
            "WORLD_SIZE": str(world),
        }
        if self.nproc_per_node > 1:  # torchrun sets it when it starts several workers (unless already set)
            env["OMP_NUM_THREADS"] = "1"
        env |= kit.visibility(self.visible_devices)
        return Process(environ=dict(sorted(env.items())), hostname=self.agent_hosts[node_rank], node=node_rank)

    def processes(self) -> Iterator[Process]:
        return (self.process(node, local) for node in range(self.nnodes) for local in range(self.nproc_per_node))


@attrs.frozen(kw_only=True)
class TorchrunWorker(TorchrunLaunch):
    """Worker `local_rank` of agent `node_rank` of a `TorchrunLaunch`."""

    node_rank: int = attrs.field(default=0, validator=kit.not_negative)
    local_rank: int = attrs.field(default=0, validator=kit.not_negative)

    def one(self) -> Process:
        return self.process(self.node_rank, self.local_rank)


torchrun_job = kit.job_builder(
    TorchrunLaunch, doc="Every worker of one torchrun launch; the keywords are `TorchrunLaunch`'s."
)
torchrun_env = kit.env_builder(
    TorchrunWorker,
    doc="The environment of worker `local_rank` of agent `node_rank`; the other keywords are `TorchrunLaunch`'s.",
)


def _jobs(most: int) -> SearchStrategy[Job]:
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    def launch(draw: st.DrawFn, nnodes: int) -> TorchrunLaunch:
        rdzv: Literal["c10d", "static"] = draw(st.sampled_from(["c10d", "static"]))
        hosts = draw(kit.host_names(nnodes))
        return TorchrunLaunch(
            nnodes=nnodes,
            nproc_per_node=draw(st.integers(1, max(1, min(4, most // nnodes)))),
            rdzv=rdzv,
            hosts=hosts,
            # static across nodes needs --master-addr: torchrun's default, 127.0.0.1, hangs the job
            master_addr=hosts[0] if rdzv == "static" and nnodes > 1 else None,
            run_id=draw(st.sampled_from(["none", "42", "job-7"])),
            restart_count=draw(st.integers(0, 3)),
            max_restarts=3,
        )

    return kit.jobs_on_hosts(most, launch)


LAUNCHER = Launcher(
    name="torchrun",
    nondeterministic={
        "MASTER_PORT": r"[1-9][0-9]{0,4}",  # c10d only: a free port of group rank 0's host; static passes --master-port
        "TORCHELASTIC_ERROR_FILE": (
            r"/tmp/torchelastic_[a-z0-9_]{8}/[^/]+_[a-z0-9_]{8}"  # noqa: S108 - a pattern of torch's path
            r"/attempt_[0-9]+/[0-9]+/error\.json"
        ),
    },
    jobs=_jobs,
)
