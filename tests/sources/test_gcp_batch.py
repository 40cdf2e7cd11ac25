"""Google Cloud Batch: each task of a job with a hosts file as its VM's agent, from the documented variables."""

from __future__ import annotations

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, Origin

PATH = "/etc/hosts-of-the-job"
VMS = "train-group0-0\ntrain-group0-1\ntrain-group0-2\ntrain-group0-3\n"


def task(index: int, *, count: int = 4, retry: int = 0) -> dict[str, str]:
    """Task `index` as Batch sets it with requireHostsFile (the TaskGroup reference, the MPI page)."""
    return {
        "BATCH_TASK_INDEX": str(index),
        "BATCH_TASK_COUNT": str(count),
        "BATCH_TASK_RETRY_ATTEMPT": str(retry),
        "BATCH_HOSTS_FILE": PATH,
    }


def vm(index: int, text: str = VMS) -> probes.Probes:
    return probes.fake(hostname=f"train-group0-{index}", files={PATH: text})


def test_every_task_is_its_vm_s_agent_and_meets_at_the_first_vm() -> None:
    records = [resolver.resolve(task(i, retry=2), vm(i)) for i in range(4)]
    assert [t.node_rank for t in records] == [0, 1, 2, 3]
    assert {(t.source, t.world_size, t.num_nodes, t.local_world_size) for t in records} == {("gcp_batch", 4, 4, 1)}
    assert {(t.main_address, t.main_port, t.restart_count) for t in records} == {("train-group0-0", 29500, 2)}
    assert not any(t.creates_processes_externally for t in records)
    assert records[1].provenance["node_rank"] == Origin.env("BATCH_TASK_INDEX")
    assert records[1].provenance["main_address"].variables == ("BATCH_HOSTS_FILE",)


def test_the_user_s_master_addr_and_port_win() -> None:
    t = resolver.resolve({**task(2), "MASTER_ADDR": "10.128.0.7", "MASTER_PORT": "3389"}, vm(2))
    assert (t.main_address, t.main_port) == ("10.128.0.7", 3389)
    assert t.provenance["main_address"] == Origin.env("MASTER_ADDR")


def test_task_0_refuses_a_file_that_lists_another_vm_first() -> None:
    """Batch does not document the file's order: task 0 checks that it is the first VM."""
    swapped = "train-group0-1\ntrain-group0-0\ntrain-group0-2\ntrain-group0-3\n"
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(task(0), vm(0, swapped))
    assert info.value.variable == "BATCH_HOSTS_FILE" and "MASTER_ADDR" in str(info.value)
    assert resolver.resolve({**task(0), "MASTER_ADDR": "train-group0-0"}, vm(0, swapped)).node_rank == 0
    addresses = "10.128.0.2\n10.128.0.3\n10.128.0.4\n10.128.0.5\n"  # IP addresses: nothing to compare the name with
    assert resolver.resolve(task(0), vm(0, addresses)).main_address == "10.128.0.2"


def test_the_task_count_must_be_the_vms_of_the_file() -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve(task(1, count=8), vm(1))
    assert info.value.variable == "BATCH_TASK_COUNT" and "(4)" in str(info.value)


def test_a_task_that_cannot_read_the_file_needs_master_addr() -> None:
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(task(1), probes.fake(hostname="train-group0-1"))
    assert info.value.variable == "MASTER_ADDR"
    assert resolver.resolve({**task(1), "MASTER_ADDR": "10.0.0.2"}, probes.fake()).node_rank == 1


@pytest.mark.parametrize("missing", ["BATCH_HOSTS_FILE", "BATCH_TASK_COUNT", "BATCH_TASK_INDEX"])
def test_the_index_and_count_alone_are_any_batch_task(missing: str) -> None:
    env = {k: v for k, v in task(1).items() if k != missing}
    assert resolver.resolve(env, probes.fake(free_port=41000)).source == "lightning"


def test_torchrun_inside_a_vm_resolves_as_itself() -> None:
    worker = {**task(1), "TORCHELASTIC_RUN_ID": "none", "WORLD_SIZE": "8", "RANK": "3", "LOCAL_RANK": "1",
              "GROUP_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "train-group0-0"}  # fmt: skip
    assert resolver.resolve(worker, vm(1)).source == "torchelastic"
    assert resolver.explain({**task(1), "LOCAL_RANK": "0"}, vm(1)).chosen != "gcp_batch"


def test_an_index_beyond_the_count_names_it() -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**task(1), "BATCH_TASK_INDEX": "4"}, vm(1))
    assert info.value.variable == "BATCH_TASK_INDEX" and "BATCH_TASK_COUNT=4" in str(info.value)
