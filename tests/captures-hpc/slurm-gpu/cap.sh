#!/bin/bash
# each task: its launcher variables, sorted, one KEY=value a line, to $CAP_OUT/task$SLURM_PROCID.env
env | grep -E '^(SLURM[A-Z_]*|SLURMD_[A-Z_]*|CUDA_VISIBLE_DEVICES|HIP_VISIBLE_DEVICES|ROCR_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|ZE_AFFINITY_MASK)=' | LC_ALL=C sort > "$CAP_OUT/task$SLURM_PROCID.env"
