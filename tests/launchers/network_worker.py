"""A plain torch program for the network system tests: `init_process_group("gloo")` (env://) and one all_reduce.

`python network_worker.py [TIMEOUT_S]`: prints one JSON line on success (rank, world size, the
all_reduce of rank+1 over every rank, this host's name and the interface variables it saw) and exits
0; a failure is torch's own traceback on stderr and a non-zero exit. TIMEOUT_S (default 10) bounds
Gloo's connects and the collective, so a run that cannot form the group ends by itself.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time


def main() -> int:
    timeout = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    import torch
    import torch.distributed as dist

    started = time.monotonic()
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=timeout))
    value = torch.tensor([dist.get_rank() + 1.0])
    dist.all_reduce(value)
    row = {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "all_reduce": value.item(),
        "hostname": socket.gethostname(),
        "seconds": round(time.monotonic() - started, 2),
        "GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME"),
        "NCCL_SOCKET_IFNAME": os.environ.get("NCCL_SOCKET_IFNAME"),
    }
    dist.destroy_process_group()
    print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
