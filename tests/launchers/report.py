"""Run by each task of a real launch: its node, and `python -m resolver --format json`, as one JSON line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

out = subprocess.run(
    [sys.executable, "-m", "resolver", "--format", "json"], capture_output=True, text=True, check=False
)
print(
    json.dumps(
        {
            "node": os.environ.get("SLURMD_NODENAME"),
            "pmi": {k: v for k, v in os.environ.items() if k.startswith(("PMIX_", "PMI_"))},
            "gpus": {  # what SLURM gave the task: its own word, to check visible_devices/local_device against
                k: os.environ[k]
                for k in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURMD_TRES_BIND")
                if k in os.environ
            },
            "rc": out.returncode,
            "err": out.stderr,
            "topology": json.loads(out.stdout) if out.returncode == 0 else None,
        }
    ),
    flush=True,
)
