"""resolver.testing.tpu_vm: TPU hosts on GKE, one slice or several, as JAX reads them (no capture)."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import testing as rt


def test_the_documented_variables() -> None:
    host = rt.tpu_vm_env(node=5, hosts_per_slice=4, slices=2)
    assert (host["TPU_WORKER_ID"], host["MEGASCALE_SLICE_ID"], host["MEGASCALE_NUM_SLICES"]) == ("1", "1", "2")
    assert host["TPU_WORKER_HOSTNAMES"].split(",")[0] == "train-slice-job-1-0.train"
    t = resolver.resolve(host, probes.fake())
    assert (t.source, t.node_rank, t.num_nodes, t.main_address) == ("tpu_vm", 5, 8, "train-slice-job-0-0.train")
    assert "MEGASCALE_SLICE_ID" not in rt.tpu_vm_env(node=1)


@pytest.mark.parametrize(("per_slice", "slices"), [(1, 1), (4, 1), (2, 3)])
def test_a_job_is_one_world(per_slice: int, slices: int) -> None:
    job = rt.tpu_vm_job(hosts_per_slice=per_slice, slices=slices)
    rt.assert_consistent(job.resolve(), job)


def test_impossible_launches_are_refused() -> None:
    with pytest.raises(ValueError, match=r"hosts 0\.\.1"):
        rt.tpu_vm_env(node=2)
