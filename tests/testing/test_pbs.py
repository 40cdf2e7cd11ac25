"""resolver.testing.pbs, built from the documentation (no PBS server runs here, so there is no capture):
qsub(1B)'s exported variables, one node file line per vnode with the mother superior first, pbsdsh's
task variables, and Torque's counts."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import resolver
from resolver import testing as rt
from resolver.testing.pbs import PbsLaunch, pbs_env

# OpenPBS qsub(1B), "ENVIRONMENT VARIABLES": exported to every job (TMPDIR too), and PBS_O_* from qsub
EXPORTED = {"PBS_ENVIRONMENT", "PBS_JOBDIR", "PBS_JOBID", "PBS_JOBNAME", "PBS_NODEFILE", "PBS_QUEUE", "TMPDIR"}


def test_the_job_script_has_what_qsub_documents() -> None:
    env = pbs_env().environ
    assert set(env) >= EXPORTED
    assert all(name in EXPORTED or name.startswith("PBS_O_") for name in env)
    assert env["PBS_ENVIRONMENT"] == "PBS_BATCH" and env["PBS_JOBID"] == "1234.pbsserver"


def test_the_node_file_has_a_line_per_vnode_mother_superior_first() -> None:
    script = pbs_env(hosts=("ms", "sister"), ncpus=(2, 3))
    assert script.files == {script.environ["PBS_NODEFILE"]: "ms\nms\nsister\nsister\nsister\n"}
    assert script.hostname == "ms"


def test_pbsdsh_tasks_follow_the_node_file() -> None:
    launch = PbsLaunch(hosts=("ms", "sister"), ncpus=2)
    tasks = [launch.process(vnode) for vnode in range(4)]
    assert [t.hostname for t in tasks] == ["ms", "ms", "sister", "sister"]
    assert [t.environ["PBS_NODENUM"] for t in tasks] == ["0", "0", "1", "1"]
    assert [t.environ["PBS_VNODENUM"] for t in tasks] == ["0", "1", "2", "3"]
    assert len({t.environ["PBS_TASKNUM"] for t in tasks}) == 4  # TM task ids: distinct, not ranks


def test_torque_and_arrays() -> None:
    torque = pbs_env(flavor="torque", hosts=("a", "b"), ncpus=4, array_index=3).environ
    assert (torque["PBS_NP"], torque["PBS_NUM_NODES"], torque["PBS_NUM_PPN"], torque["PBS_ARRAYID"]) == (
        "8",
        "2",
        "4",
        "3",
    )
    assert "PBS_ARRAY_INDEX" not in torque and "PBS_JOBDIR" not in torque
    pro = pbs_env(array_index=3).environ
    assert (pro["PBS_JOBID"], pro["PBS_ARRAY_ID"], pro["PBS_ARRAY_INDEX"]) == (
        "1234[3].pbsserver",
        "1234[].pbsserver",
        "3",
    )


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: pbs_env(vnode=2, ncpus=2), "vnodes 0..1"),
        (lambda: pbs_env(flavor="slurm"), "'openpbs' or 'torque'"),  # type: ignore[arg-type]
        (lambda: pbs_env(ncpus=0), "at least one vnode"),
        (lambda: pbs_env(hosts=("a", "b"), ncpus=(1,)), "capacity"),
    ],
)
def test_impossible_jobs_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises((ValueError, TypeError), match=re.escape(words)):
        make()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_generated_job_script_resolves_as_pbs(data: st.DataObject) -> None:
    job = data.draw(rt.jobs(launchers=["pbs"]))
    (t,) = job.resolve()
    rt.assert_consistent((t,), job)
    assert (t.source, t.job_id) == ("pbs", job.environs[0]["PBS_JOBID"])
    assert resolver.explain(job.environs[0]).chosen == "pbs"
