"""One rank of a real launch: resolve, check against the launcher's own truth, form a gloo group.

Prints one JSON line: {"topology": Topology.to_dict(), "sum": all_reduce result, "truth": {...}}.
`--truth torchelastic|slurm|deepspeed` says which launcher variables are the truth to compare with.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import resolver


def truth(kind: str) -> dict[str, int]:
    env = os.environ
    if kind == "torchelastic":
        return {
            "world_size": int(env["WORLD_SIZE"]),
            "global_rank": int(env["RANK"]),
            "local_rank": int(env["LOCAL_RANK"]),
            "node_rank": int(env["GROUP_RANK"]),
        }
    if kind == "slurm":
        return {
            "world_size": int(env.get("SLURM_STEP_NUM_TASKS", env["SLURM_NTASKS"])),
            "global_rank": int(env["SLURM_PROCID"]),
            "local_rank": int(env["SLURM_LOCALID"]),
            "node_rank": int(env["SLURM_NODEID"]),
        }
    if kind == "deepspeed":
        return {
            "world_size": int(env["WORLD_SIZE"]),
            "global_rank": int(env["RANK"]),
            "local_rank": int(env["LOCAL_RANK"]),
            "local_world_size": int(env["LOCAL_SIZE"]),
            "node_rank": int(env["CROSS_RANK"]),
            "num_nodes": int(env["CROSS_SIZE"]),
        }
    raise SystemExit(f"unknown truth {kind!r}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--truth", required=True)
    parser.add_argument("--no-group", action="store_true", help="resolve only, no process group")
    parser.add_argument("--out", help="write DIR/<pid>.json instead of printing (workers sharing a pipe interleave)")
    parser.add_argument("--local_rank", type=int, help="what DeepSpeed's launcher adds to argv")
    args = parser.parse_args()
    topology = resolver.resolve(os.environ)
    out: dict[str, object] = {"topology": topology.to_dict(), "truth": truth(args.truth)}
    if args.local_rank is not None:
        out["argv_local_rank"] = args.local_rank
    if not args.no_group:
        import torch
        import torch.distributed as dist

        with resolver.apply(topology, ranks=True):
            dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
            value = torch.tensor([topology.global_rank + 1.0])
            dist.all_reduce(value)
            dist.destroy_process_group()
        out["sum"] = value.item()
    if args.out:
        path = os.path.join(args.out, f"{os.getpid()}.json")
        with open(path + ".tmp", "w") as handle:
            json.dump(out, handle)
        os.replace(path + ".tmp", path)  # whole files only: the reader never sees half of one
    else:
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
