"""TPU VMs without torch_xla: hosts of GKE TPU slices, one slice or several, as JAX numbers them."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, TopologyError

HOSTS = "job-slice-0-0.job,job-slice-0-1.job,job-slice-0-2.job,job-slice-0-3.job"


def host(worker: int, slice_id: int | None = None, **extra: str) -> dict[str, str]:
    """Worker `worker` of a v5e 4-host slice on GKE; with `slice_id`, one of 2 slices (JobSet multislice)."""
    env = {
        "TPU_WORKER_ID": str(worker),
        "TPU_WORKER_HOSTNAMES": HOSTS.replace("slice-0", f"slice-{slice_id or 0}"),
        "TPU_ACCELERATOR_TYPE": "v5litepod-16",
        "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1",
        "TPU_HOST_BOUNDS": "2,2,1",
    }
    if slice_id is not None:
        env |= {
            "MEGASCALE_COORDINATOR_ADDRESS": "job-slice-0-0.job:8080",
            "MEGASCALE_NUM_SLICES": "2",
            "MEGASCALE_SLICE_ID": str(slice_id),
            "MEGASCALE_PORT": "8080",
        }
    return {**env, **extra}


def test_one_slice() -> None:
    records = [resolver.resolve(host(w), probes.fake()) for w in range(4)]
    assert [t.node_rank for t in records] == [0, 1, 2, 3]
    assert {(t.source, t.num_nodes, t.main_address, t.main_port) for t in records} == {
        ("tpu_vm", 4, "job-slice-0-0.job", 29500)
    }


def test_multislice_numbers_hosts_slice_by_slice() -> None:
    records = [resolver.resolve(host(w, s), probes.fake()) for s in (0, 1) for w in range(4)]
    assert [t.node_rank for t in records] == list(range(8))
    assert {(t.num_nodes, t.main_address) for t in records} == {(8, "job-slice-0-0.job")}
    assert "MEGASCALE_SLICE_ID=1" in str(records[5].provenance["node_rank"])


def test_process_addresses_are_preferred_as_jax_does() -> None:
    environ = host(1, TPU_PROCESS_ADDRESSES="10.0.0.1:8476,10.0.0.2:8476,10.0.0.3:8476,10.0.0.4:8476")
    t = resolver.resolve(environ, probes.fake())
    assert (t.main_address, t.num_nodes, t.node_rank) == ("10.0.0.1", 4, 1)
    only = {"TPU_WORKER_ID": "0", "TPU_PROCESS_ADDRESSES": "[fd00::1]:8476,[fd00::2]:8476"}
    assert resolver.resolve(only, probes.fake()).main_address == "fd00::1"


def test_a_launcher_inside_the_host_wins() -> None:
    assert resolver.resolve(host(1, LOCAL_RANK="0"), probes.fake(free_port=1)).source == "lightning"


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        (host(4), "TPU_WORKER_ID"),
        (host(1, TPU_WORKER_ID="-1"), "TPU_WORKER_ID"),
        (host(1, TPU_WORKER_HOSTNAMES="a,,b"), "TPU_WORKER_HOSTNAMES"),
        (host(1, TPU_PROCESS_ADDRESSES="a:1,b c:2"), "TPU_PROCESS_ADDRESSES"),
        (host(1, 2), "MEGASCALE_SLICE_ID"),
        (host(1, 1, MEGASCALE_NUM_SLICES="0"), "MEGASCALE_NUM_SLICES"),
        (host(1, 1, MEGASCALE_NUM_SLICES="two"), "MEGASCALE_NUM_SLICES"),
        (host(1, 1, MEGASCALE_COORDINATOR_ADDRESS="a b"), "MEGASCALE_COORDINATOR_ADDRESS"),
        ({k: v for k, v in host(1, 1).items() if k != "MEGASCALE_SLICE_ID"}, "MEGASCALE_SLICE_ID"),
    ],
)
def test_errors_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(TopologyError) as info:
        resolver.resolve(environ, probes.fake())
    assert info.value.variable == variable
    assert isinstance(info.value, InvalidVariable) or variable == "MEGASCALE_SLICE_ID"


def test_hostnames_are_the_slice_s_workers_in_worker_order() -> None:
    from resolver.testing import tpu_vm_job

    for t in tpu_vm_job().resolve():
        assert t.hostnames is not None and t.num_nodes == len(t.hostnames)
        assert t.hostnames[0] == t.main_address
