"""One process of a real launch for tests/launchers/test_integrations.py (not collected by pytest).

    python integration_worker.py torch DIRECTORY [--destroy handle|torch]
    python integration_worker.py fabric DIRECTORY
    python integration_worker.py trainer DIRECTORY

`torch`: `resolver.integrations.torch.init_process_group()` (it resolves os.environ), an
all_reduce, then destroy (through the handle, or by `torch.distributed.destroy_process_group()`
directly), and compare os.environ with its snapshot from before.
`fabric`: a 2-process CPU Fabric with `TopologyEnvironment()`, `fabric.launch(run)`, an all_reduce.
`trainer`: a 2-process CPU Trainer with `TopologyEnvironment()`: `fit` then `test` (two launches).
Each process writes its answer as JSON to DIRECTORY/<pid>.json (launchers interleave output).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

SHOWN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT")


def report(directory: Path, out: dict[str, Any]) -> None:
    part = directory / f"{os.getpid()}.part"
    part.write_text(json.dumps(out, sort_keys=True))
    part.rename(directory / f"{os.getpid()}.json")  # the test never reads a half-written answer


def changed(before: dict[str, str], after: dict[str, str]) -> dict[str, list[str | None]]:
    return {k: [before.get(k), after.get(k)] for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def run_torch(directory: Path, destroy: str) -> None:
    import torch
    import torch.distributed as dist

    from resolver.integrations.torch import init_process_group

    before = dict(os.environ)
    group = init_process_group(timeout=timedelta(seconds=60))
    during = {k: os.environ.get(k) for k in SHOWN}
    value = torch.tensor([float(group.topology.global_rank + 1)])
    dist.all_reduce(value)
    out: dict[str, Any] = {
        "topology": group.topology.to_dict(),
        "backend": group.backend,
        "dist": {"rank": dist.get_rank(), "world_size": dist.get_world_size()},
        "all_reduce": value.item(),
        "during": during,
        "env_before": {k: before.get(k) for k in SHOWN},
    }
    if destroy == "handle":
        group.destroy()
    else:
        dist.destroy_process_group()  # torch directly: the finalizer on the group restores the environment
    out["initialized_after"] = dist.is_initialized()
    out["active_after"] = group.active
    out["env_changed"] = changed(before, dict(os.environ))
    report(directory, out)


def _destroy_group() -> None:
    """Lightning leaves its gloo group alive; torch can abort at exit ("terminate called without an
    active exception", SIGABRT) when gloo's threads are torn down by the interpreter's exit."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def run_fabric(directory: Path) -> None:
    import torch
    from lightning.fabric import Fabric

    from resolver.integrations.lightning import TopologyEnvironment

    environment = TopologyEnvironment()
    first = environment.topology
    fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp", plugins=[environment])

    def run(fabric: Fabric) -> None:
        import torch.distributed as dist

        value = fabric.all_reduce(torch.tensor([float(fabric.global_rank + 1)]), reduce_op="sum")
        fabric.barrier()
        report(
            directory,
            {
                "first": first.to_dict(),
                "topology": environment.topology.to_dict(),
                "external": environment.creates_processes_externally,
                "fabric": {
                    "global_rank": fabric.global_rank,
                    "world_size": fabric.world_size,
                    "local_rank": fabric.local_rank,
                    "node_rank": fabric.node_rank,
                },
                "dist": {"rank": dist.get_rank(), "world_size": dist.get_world_size()},
                "all_reduce": float(value.item()),  # type: ignore[union-attr]
                "env": {k: os.environ.get(k) for k in SHOWN},
            },
        )

    fabric.launch(run)
    _destroy_group()


def run_trainer(directory: Path) -> None:
    import lightning
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from resolver.integrations.lightning import TopologyEnvironment

    class Model(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch: list[torch.Tensor], index: int) -> torch.Tensor:
            loss: torch.Tensor = self.layer(batch[0]).sum()
            return loss

        def test_step(self, batch: list[torch.Tensor], index: int) -> None:
            pass

        def on_test_epoch_end(self) -> None:  # once per rank, summed over the ranks
            self.log("ranks", float(self.global_rank + 1), reduce_fx="sum", sync_dist=True)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    environment = TopologyEnvironment()
    first = environment.topology
    data = DataLoader(TensorDataset(torch.ones(8, 2)), batch_size=2)
    trainer = lightning.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        plugins=[environment],
        max_steps=2,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Model(), data)
    external_after_fit = environment.creates_processes_externally
    trainer.test(Model(), data, verbose=False)  # a second launch: the workers exist, none are started again
    _destroy_group()
    report(
        directory,
        {
            "first": first.to_dict(),
            "topology": environment.topology.to_dict(),
            "external_after_fit": external_after_fit,
            "external": environment.creates_processes_externally,
            "trainer": {"global_rank": trainer.global_rank, "world_size": trainer.world_size},
            "ranks": float(trainer.callback_metrics["ranks"]),
        },
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("torch", "fabric", "trainer"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--destroy", choices=("handle", "torch"), default="handle")
    args = parser.parse_args()
    if args.mode == "torch":
        run_torch(args.directory, args.destroy)
    elif args.mode == "fabric":
        run_fabric(args.directory)
    else:
        run_trainer(args.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
