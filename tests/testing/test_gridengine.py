"""resolver.testing.gridengine against the Grid Engine captures (tests/captures-hpc/gridengine and
tests/captures-local/gridengine): the job script, a binary job, array tasks, qrsh, a qrsh -inherit task,
Open MPI and Hydra ranks inside a PE; and whole jobs across hosts resolving to one world."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import resolver
from resolver import testing as rt
from tests.conftest import CAPTURES_HPC, CAPTURES_LOCAL, read_capture
from tests.testing.captured import FAKE, assert_same_variables

HPC, LOCAL = CAPTURES_HPC / "gridengine", CAPTURES_LOCAL / "gridengine"
# what the captures' jobs had in common: user gejob submitting from vm, whose execd spools as localhost
GEJOB = rt.GridEngineLaunch(user="gejob", spool_host="localhost", submit_host="localhost", hosts=("vm",))
HPC_JOB = attrs.evolve(GEJOB, workdir="/scratch/gecap", pe="mpi", slots=4, output="/scratch/gecap/out/a_jobscript.log")
LOCAL_JOB = attrs.evolve(
    GEJOB,
    workdir="/tmp/gecap",
    cwd=True,
    login_shell="/bin/sh",
    submit_path="/root/.cargo/bin:/root/.cargo/bin:/root/.pyenv/plugins/pyenv-virtualenv/shims:/root/.pyenv/shims:"
    "/root/.pyenv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
)
LOCAL_PE = attrs.evolve(LOCAL_JOB, job_id=4, job_name="ge_pe", pe="mpi", slots=4, output="/tmp/gecap/out/pe.log")
DUMP = ("python3", "/tmp/gecap/dump.py")
OMPI_ARGS = ("/scratch/gecap/dump.py", "/scratch/gecap/out/b_openmpi", "rank{OMPI_COMM_WORLD_RANK}")
# added by the job's shell and Python 3's locale coercion (SHLVL, _, LC_CTYPE); set by MPICH's mpiexec for
# Fortran programs, and by the PSM libraries Open MPI loads: the builders model Grid Engine's variables and
# the MPI launchers' own (whose captures kept PMI_*/MPI_*, OMPI_*/PMIX_* only)
NOT_MODELLED = ("LC_CTYPE", "SHLVL", "_", "GFORTRAN_UNBUFFERED_PRECONNECTED", "HFI_NO_BACKTRACE", "IPATH_NO_BACKTRACE")


def modelled(path: Path) -> dict[str, str]:
    return {k: v for k, v in read_capture(path).items() if k not in NOT_MODELLED}


ONE: list[tuple[Path, Callable[[], rt.Process]]] = [
    (HPC / "a_qsub_pe/jobscript.env", lambda: attrs.evolve(HPC_JOB, job_id=3, job_name="ge_mpi").process()),
    (
        HPC / "a_qsub_pe/binary.env",
        lambda: attrs.evolve(
            HPC_JOB, job_id=2, job_name="ge_a_binary", how="binary", output="/scratch/gecap/out/a_binary.log"
        ).process(),
    ),
    (LOCAL / "pe/jobscript.env", LOCAL_PE.process),
    *(
        (
            LOCAL / f"array/task{task}.env",
            attrs.evolve(
                LOCAL_JOB,
                job_id=5,
                job_name="ge_array",
                array=range(2, 6, 3),
                task_id=task,
                output="/tmp/gecap/out/array.log",
            ).process,
        )
        for task in (2, 5)
    ),
    (
        LOCAL / "qrsh/qrsh.env",
        attrs.evolve(
            LOCAL_JOB, job_id=6, job_name="ge_qrsh", how="qrsh", command=(*DUMP, "/tmp/gecap/out/qrsh", "qrsh")
        ).process,
    ),
]


@pytest.mark.parametrize(("path", "make"), ONE, ids=[str(p.relative_to(p.parents[2])) for p, _ in ONE])
def test_one_process_reproduces_its_capture(path: Path, make: Callable[[], rt.Process]) -> None:
    process, real = make(), modelled(path)
    assert_same_variables(process.environ, real, "gridengine")
    if "PE_HOSTFILE" in real:
        captured_file = path.with_suffix(".pe_hostfile")
        assert process.files == {real["PE_HOSTFILE"]: captured_file.read_text()} or not captured_file.exists()
    probes = process.probes(free_port=4242, which={})
    assert resolver.resolve(process.environ, probes).to_dict() == resolver.resolve(real, FAKE).to_dict()


def test_the_qrsh_inherit_task_is_host_1_of_a_pe_job() -> None:
    # measured on the master host itself; as host 1 of a job on (vm, vm2) it differs only in its host
    launch = attrs.evolve(LOCAL_PE, hosts=("vm", "vm2"), slots=(4, 4))
    built, real = launch.environ(1), modelled(LOCAL / "pe/qrsh-inherit.env")
    assert sorted(built) == sorted(real)
    host_specific = {"HOSTNAME", "SGE_JOB_SPOOL_DIR", "QRSH_COMMAND", "QRSH_PORT", "NSLOTS"}
    assert {k for k, v in built.items() if v != real[k]} <= host_specific
    assert (built["HOSTNAME"], built["SGE_JOB_SPOOL_DIR"]) == (
        "vm2",
        "/var/spool/gridengine/execd/vm2/active_jobs/4.1/1.vm2",
    )
    assert "PE_HOSTFILE" not in built and built["JOB_NAME"] == "petask" and built["NSLOTS"] == "4"


@pytest.mark.parametrize(
    ("pattern", "make"),
    [
        (
            HPC / "b_openmpi/rank{}.env",
            attrs.evolve(
                HPC_JOB,
                job_id=3,
                job_name="ge_mpi",
                launch=rt.OpenMpiLaunch(
                    np=4,
                    hosts=("vm",),
                    slots=4,
                    cores=2,
                    uid=1001,
                    munge=True,
                    command="python3",
                    args=OMPI_ARGS,
                    wdir="/home/gejob",
                    mpirun_pid=9593,
                ),
            ).job,
        ),
        (
            LOCAL / "pe/hydra-rank{}.env",
            attrs.evolve(LOCAL_PE, launch=rt.MpichLaunch(n=4, hosts=("vm",), counts=4)).job,
        ),
    ],
    ids=["openmpi", "hydra"],
)
def test_mpi_ranks_in_a_pe_reproduce_their_captures(pattern: Path, make: Callable[[], rt.Job]) -> None:
    job = make()
    assert (job.launcher, job.source, len(job)) == ("gridengine", "mpi", 4)
    real = [modelled(Path(str(pattern).format(rank))) for rank in range(4)]
    for built, env in zip(job.environs, real, strict=True):
        shapes = {**rt.NONDETERMINISTIC["openmpi"], **rt.NONDETERMINISTIC["mpich"]}
        differ = {k: (built.get(k), env.get(k)) for k in set(built) | set(env) if built.get(k) != env.get(k)}
        assert set(differ) <= set(shapes), differ
        for key in differ:
            assert re.fullmatch(shapes[key], built[key]) and re.fullmatch(shapes[key], env[key]), key
    captured = attrs.evolve(job, processes=tuple(attrs.evolve(p, environ=e) for p, e in zip(job, real, strict=True)))
    built_records, captured_records = job.resolve(), captured.resolve()
    assert [t.to_dict() for t in built_records] == [t.to_dict() for t in captured_records]
    rt.assert_consistent(built_records, job)
    assert {(t.main_address, t.job_id) for t in built_records} == {("vm", job.environs[0]["JOB_ID"])}


def test_ranks_across_hosts_form_one_world_with_the_masters_address() -> None:
    job = rt.gridengine_job(
        job_id=77, pe="mpi", hosts=("n1", "n2"), slots=2, launch=rt.OpenMpiLaunch(np=4, hosts=("n1", "n2"), slots=2)
    )
    assert [bool(p.files) for p in job] == [True, True, False, False]  # PE_HOSTFILE: the master host only
    assert [p.environ["JOB_NAME"] for p in job] == ["job.sh", "job.sh", "petask", "petask"]
    found = job.resolve()
    rt.assert_consistent(found, job)
    assert {(t.main_address, t.main_port, t.job_id) for t in found} == {("n1", 20000 + 77 * 8191 % 10000, "77")}
    assert [t.job_name for t in found] == ["job.sh", "job.sh", None, None]


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: rt.gridengine_env(hosts=("a", "b")), "need a parallel environment"),
        (lambda: rt.gridengine_env(array=range(3)), "task ids >= 1"),
        (lambda: rt.gridengine_env(array=range(1, 3), task_id=5), "not a task of array"),
        (lambda: rt.gridengine_env(task_id=1), "not a task of array"),
        (lambda: rt.gridengine_job(launch=rt.MpichLaunch(n=2)), "needs pe=..."),
        (lambda: rt.gridengine_job(pe="mpi", launch=rt.MpichLaunch(n=2, hosts=("x",))), "not among the job's hosts"),
    ],
)
def test_impossible_jobs_are_refused(make: Callable[[], object], words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        make()


def test_builders_are_pure() -> None:
    assert rt.gridengine_env(job_id=9, how="qrsh") == rt.gridengine_env(job_id=9, how="qrsh")


@settings(max_examples=40, deadline=None)
@given(job=rt.jobs(launchers=["gridengine"], max_processes=8), data=st.data())
def test_generated_jobs_resolve_to_one_world(job: rt.Job, data: st.DataObject) -> None:
    rt.assert_consistent(job.resolve(), job)
