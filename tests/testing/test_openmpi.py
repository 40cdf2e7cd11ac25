"""resolver.testing.openmpi against the Open MPI 4.1.4 captures; mapping by slot, remote daemons."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from resolver import testing as rt
from tests.testing.captured import assert_reproduces, case_id, ranks

JOBS: list[tuple[tuple[str, ...], Callable[[], rt.Job]]] = [
    (
        ranks("openmpi/n4/rank{}.env", 4),
        lambda: rt.openmpi_job(np=4, hosts=("vm",), slots=2, oversubscribe=True, command="bash"),
    ),
]


@pytest.mark.parametrize(("files", "make"), JOBS, ids=[case_id(files) for files, _ in JOBS])
def test_the_builder_reproduces_the_captures(files: tuple[str, ...], make: Callable[[], rt.Job]) -> None:
    assert_reproduces(files, "openmpi", make())


def test_open_mpi_maps_by_slot_and_marks_remote_daemons() -> None:
    job = rt.openmpi_job(np=3, hosts=("vm", "nodeB"), slots=2, mpirun_pid=30572)
    assert job.hosts == ("vm", "vm", "nodeB")
    local, remote = job.environs[0], job.environs[2]
    assert local["PMIX_NAMESPACE"] == remote["PMIX_NAMESPACE"] == "462553089"  # measured: mpirun pid 30572 on vm
    assert remote["OMPI_FILE_LOCATION"] == "/tmp/ompi.nodeB.0/jf.7058/0/1"
    assert remote["OMPI_MCA_orte_node_regex"] == "vm,nodeB@0(2)" and "OMPI_MCA_orte_node_regex" not in local
    assert remote["OMPI_MCA_mpi_oversubscribe"] == "0" and remote["OMPI_MCA_orte_bound_at_launch"] == "1"
    over = rt.openmpi_job(np=5, hosts=("a", "b"), slots=2, oversubscribe=True)
    assert over.hosts == ("a", "a", "a", "b", "b")


def test_builders_are_pure() -> None:
    assert rt.openmpi_env(np=2, rank=1) == rt.openmpi_env(np=2, rank=1)


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.openmpi_env(np=5, slots=2), "oversubscribe=True"),
    ],
)
def test_impossible_launches_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


def test_a_visibility_list_reaches_every_rank() -> None:
    job = rt.openmpi_job(np=4, slots=4, visible_devices=(0, 1, 2, 3))
    assert {e["CUDA_VISIBLE_DEVICES"] for e in job.environs} == {"0,1,2,3"}
    assert [t.local_device for t in job.resolve()] == [0, 1, 2, 3]
