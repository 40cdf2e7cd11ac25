"""The preflight's verdict (a pure function of every process's record) and `check()` meeting in threads."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import resolver
from resolver import Topology
from resolver._check import (
    AGREED,
    CheckReport,
    Member,
    _agreement,
    _disagreement,
    _origin,
    check,
    member,
    origin_of,
    record,
    verdict,
)
from resolver.origin import Origin
from resolver.testing import Job, jobs, slurm_job, torchrun_job


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def members(job: Job, topologies: Sequence[Topology]) -> list[Member]:
    """Each process's record as rank 0 receives it (through JSON), the job's host aliases applied."""
    out = []
    for process, topology in zip(job, topologies, strict=True):
        address = job.aliases.get(str(topology.main_address), topology.main_address)
        t = attrs.evolve(topology, main_address=address)
        out.append(member(json.loads(json.dumps(record(t, process.hostname)))))
    return out


# -- the verdict over resolver.testing worlds ----------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs(max_processes=8))
def test_every_world_the_kit_builds_checks_ok(job: Job) -> None:
    found = verdict(members(job, job.resolve()))
    assert found.problems == (), (job.call, found.problems)
    assert found.missing == ()
    assert found.world_size == len(job)
    assert sorted(r for node in found.nodes for r in node.ranks) == list(range(len(job)))


CORRUPTIONS = ("duplicate", "missing", "main_address", "main_port", "world_size", "job_id")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs(max_processes=8).filter(lambda j: len(j) >= 2), st.sampled_from(CORRUPTIONS), st.data())
def test_any_single_corruption_is_named(job: Job, corruption: str, data: st.DataObject) -> None:
    topologies = list(job.resolve())
    found = members(job, topologies)
    i = data.draw(st.integers(0, len(job) - 1), label="process")
    victim = found[i].topology
    assert victim is not None
    rank, host = victim.global_rank, found[i].host
    if corruption == "duplicate":
        other = data.draw(st.sampled_from([r for r in range(len(job)) if r != rank]), label="claims")
        changed = attrs.evolve(victim, global_rank=other)
        found[i] = attrs.evolve(found[i], rank=other, topology=changed)
        problems = verdict(found).problems
        named = [p for p in problems if p.kind == "duplicate"]
        assert named and named[0].ranks == (other,), problems
        assert host in named[0].hosts
        assert named[0].variable == origin_of(victim, "global_rank")[1]
        assert verdict(found).missing == (rank,)
        return
    if corruption == "missing":
        del found[i]
        result = verdict(found)
        assert result.missing == (rank,)
        assert any(p.kind == "missing" and p.ranks == (rank,) for p in result.problems)
        return
    field = corruption
    value = getattr(victim, field)
    bad: Any
    if field == "main_address":
        bad = "10.99.99.99" if value != "10.99.99.99" else "10.99.99.98"
    elif field == "main_port":
        bad = 1 + (value or 0) % 65000
    elif field == "world_size":
        bad = victim.world_size + 1
    else:
        bad = f"{value}-other"
    found[i] = attrs.evolve(found[i], topology=attrs.evolve(victim, **{field: bad}))
    agreements = [p for p in verdict(found).problems if p.kind == "agreement"]
    assert agreements, verdict(found)
    # with two processes either side may be the odd one out; the problem names both values
    odd = next(p for p in agreements if f"{field}=" in p.message)
    assert str(bad) in odd.message and (rank in odd.ranks or host in odd.message or len(job) == 2), odd
    if rank in odd.ranks:
        assert odd.hosts == (host,)
        words, variable = origin_of(victim, field)
        assert variable == odd.variable or variable is None
        if words is not None:
            assert words in odd.message


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs(max_processes=8), st.sampled_from((None, *AGREED)), st.data())
def test_agreement_in_one_pass_says_what_the_field_by_field_judgement_says(
    job: Job, field: str | None, data: st.DataObject
) -> None:
    """A job whose processes agree is judged in one pass over them (`_agreement`), any other field by
    field (`_disagreement`): both say the same of every job, one process's field changed or none."""
    found = members(job, job.resolve())
    if field is not None:
        i = data.draw(st.integers(0, len(found) - 1), label="process")
        victim = found[i]
        if field == "version":
            found[i] = attrs.evolve(victim, version=f"{victim.version}-other")
        else:
            assert victim.topology is not None
            value = getattr(victim.topology, field)
            if field == "world_size":
                bad: Any = len(job) + 1
            elif field == "num_nodes":
                assume(value is not None and value < len(job))
                bad = value + 1
            elif field == "main_port":
                bad = 1 + (value or 0) % 65000
            else:
                bad = f"{value}-other"
            found[i] = attrs.evolve(victim, topology=attrs.evolve(victim.topology, **{field: bad}))
    assert _agreement(found) == _disagreement(found)


def test_the_commonest_origin_is_counted_per_process_however_records_share_provenance() -> None:
    """`_origin` reads each provenance once (records rebuilt from one base share it), and still counts
    processes: two processes with one provenance outnumber one with another, whichever came first."""
    job = torchrun_job(nproc_per_node=3, master_addr="127.0.0.1", master_port=29500)
    first, second, third = (member(json.loads(json.dumps(record(t, "h")))) for t in job.resolve())
    assert first.topology is not None and second.topology is not None and third.topology is not None
    other = {**first.topology.provenance, "main_port": Origin.env("PET_MASTER_PORT")}
    odd = attrs.evolve(first, topology=attrs.evolve(first.topology, provenance=other))
    shared = second.topology.provenance
    twin = attrs.evolve(third, topology=attrs.evolve(third.topology, provenance=shared))
    assert origin_of(second.topology, "main_port")[1] == "MASTER_PORT"
    assert _origin([odd, second, twin], "main_port")[1] == "MASTER_PORT"
    assert _origin([odd, second], "main_port")[1] == "PET_MASTER_PORT"  # a tie: the first one's, as before


def test_the_message_names_rank_host_and_variable() -> None:
    """The issue's example: one task took MASTER_ADDR from its environment, the others the node list."""
    job = slurm_job(nodes=("ci1", "ci2"), ntasks=4)
    found = members(job, job.resolve(allow_loopback=True))
    bad = resolver.resolve({**job.processes[3].environ, "MASTER_ADDR": "ci2"}, job.processes[3].probes())
    found[3] = member(record(bad, "ci2"))
    (problem,) = verdict(found).problems
    assert problem.kind == "agreement" and problem.variable == "MASTER_ADDR"
    assert problem.ranks == (3,) and problem.hosts == ("ci2",)
    assert problem.message.startswith(
        "rank 3 on ci2 took main_address=ci2 from env:MASTER_ADDR; ranks 0-2 on ci1 use ci1"
    )
    assert "SLURM_STEP_NODELIST" in problem.message


def test_local_ranks_node_ranks_and_devices_per_host() -> None:
    job = slurm_job(nodes=("ci1", "ci2"), ntasks=4)
    found = members(job, job.resolve())
    t = found[1].topology
    assert t is not None
    found[1] = attrs.evolve(found[1], topology=attrs.evolve(t, local_rank=0))
    kinds = {p.kind: p for p in verdict(found).problems}
    assert kinds["local_rank"].hosts == ("ci1",) and kinds["local_rank"].variable == "SLURM_LOCALID"
    assert kinds["local_rank"].ranks == (0, 1)

    found = members(job, job.resolve())
    t = found[3].topology
    assert t is not None
    found[3] = attrs.evolve(found[3], topology=attrs.evolve(t, node_rank=0, local_rank=2, local_world_size=3))
    problems = [p for p in verdict(found).problems if p.kind == "node_rank"]
    assert any("node rank 0 is on 2 hosts" in p.message for p in problems), problems

    gpus = torchrun_job(nproc_per_node=2, visible_devices=("0", "1"))
    found = members(gpus, gpus.resolve())
    t = found[1].topology
    assert t is not None and t.local_device == 1
    found[1] = attrs.evolve(found[1], topology=attrs.evolve(t, local_device=0))
    (problem,) = (p for p in verdict(found).problems if p.kind == "device")
    assert problem.ranks == (0, 1) and "device 0" in problem.message


def test_a_process_that_cannot_resolve_is_reported_by_everyone() -> None:
    job = slurm_job(nodes=("ci1",), ntasks=2)
    found = members(job, job.resolve())
    try:
        resolver.resolve({**job.processes[1].environ, "SLURM_PROCID": "x"}, job.processes[1].probes())
    except resolver.TopologyError as exc:
        found[1] = member(record(None, "ci1", error=exc, rank=1))
    result = verdict(found)
    (problem,) = result.problems
    assert problem.kind == "unresolvable" and problem.variable == "SLURM_PROCID" and problem.ranks == (1,)
    assert result.missing == ()


def test_a_record_that_is_not_a_topology_is_the_senders_error() -> None:
    m = member({"rank": 1, "host": "h", "topology": {"world_size": "two"}})
    assert m.topology is None and m.error is not None and "not a topology" in m.error["message"]


# -- check() in threads, over real sockets -----------------------------------------------------------------


def world(
    size: int = 4, *, port: int | None = None, hosts: tuple[str, ...] = ("h1", "h2")
) -> tuple[Job, list[dict[str, str]]]:
    """A torchrun-shaped world meeting on loopback (rank 0 listens: no agent store)."""
    job = torchrun_job(
        nnodes=len(hosts),
        nproc_per_node=size // len(hosts),
        hosts=hosts,
        master_addr="127.0.0.1",
        master_port=port or free_port(),
    )
    envs = []
    for p in job:
        e = {**p.environ, "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"}
        e.pop("TORCHELASTIC_USE_AGENT_STORE", None)
        envs.append(e)
    return job, envs


def meet(
    job: Job,
    envs: Sequence[Mapping[str, str]],
    *,
    timeout: float = 10.0,
    skip: Sequence[int] = (),
    **answers: Any,
) -> list[CheckReport]:
    """`check` on every process of `job` (but `skip`), each a thread with its host's fake probes, plus `answers`."""
    reports: list[Any] = [None] * len(envs)

    def run(i: int) -> None:
        reports[i] = check(envs[i], job.processes[i].probes(**answers), timeout=timeout)

    threads = [threading.Thread(target=run, args=(i,)) for i in reversed(range(len(envs))) if i not in skip]
    for t in threads:  # rank 0 starts last: the others retry until it listens
        t.start()
    for t in threads:
        t.join(timeout + 15)
    return [r for i, r in enumerate(reports) if i not in skip]


def test_a_healthy_world_agrees_and_frees_the_port() -> None:
    job, envs = world()
    port = int(envs[0]["MASTER_PORT"])
    reports = meet(job, envs)
    assert all(r.ok for r in reports), [r.problems for r in reports]
    assert reports[0].nodes is not None and [n.host for n in reports[0].nodes] == ["h1", "h2"]
    assert all(r.nodes is None for r in reports[1:])
    assert {r.summary for r in reports} == {
        f"4 processes on 2 nodes agree: torchelastic job none, main 127.0.0.1:{port}"
    }
    with socket.socket() as program:  # no SO_REUSEADDR: nothing of the check is left on the port
        program.bind(("", port))
        program.listen()
    data = reports[1].to_dict()
    assert {"ok", "world_size", "missing", "problems", "elapsed_s", "nodes"} <= set(data)
    assert data["ok"] is True and data["world_size"] == 4 and data["missing"] == []


def test_a_missing_process_is_named_by_every_other_within_the_timeout() -> None:
    job, envs = world()
    started = time.monotonic()
    reports = meet(job, envs, timeout=2.0, skip=(2,))
    assert time.monotonic() - started < 2.0 + 6
    for r in reports:
        assert not r.ok and r.missing == (2,)
        assert any(p.kind == "missing" and p.ranks == (2,) for p in r.problems)


def test_a_duplicate_rank_is_named_with_its_hosts_and_variable() -> None:
    job, envs = world()
    envs[3]["RANK"] = "2"
    reports = meet(job, envs, timeout=5.0)
    for r in reports:
        (dup,) = (p for p in r.problems if p.kind == "duplicate")
        assert dup.ranks == (2,) and dup.hosts == ("h2",) and dup.variable == "RANK"
        assert r.missing == (3,)


@pytest.mark.parametrize("rank", [2, 3])
def test_one_process_of_a_host_setting_a_wrong_interface_is_named_whoever_leads_the_host(rank: int) -> None:
    """Real sockets and host leaders: h2's two processes meet rank 0 through one leader (whichever binds first),
    and only the one that sets NCCL_SOCKET_IFNAME to an interface its host lacks is named, by everyone."""
    job, envs = world()
    envs[rank]["NCCL_SOCKET_IFNAME"] = "nosuch0"
    reports = meet(job, envs, interfaces={"lo": ("127.0.0.1",)})
    for r in reports:
        (problem,) = r.problems
        assert problem.kind == "ifname" and problem.ranks == (rank,) and problem.hosts == ("h2",), problem
        assert f"NCCL_SOCKET_IFNAME=nosuch0 selects no interface on h2 (rank {rank}), which has lo" in problem.message


def test_a_squatter_on_the_port_is_named_by_rank_0_and_by_the_others() -> None:
    job, envs = world(2, hosts=("h1",))
    port = int(envs[0]["MASTER_PORT"])
    with socket.create_server(("", port)):  # accepts (in the kernel's backlog) and never speaks
        reports = meet(job, envs, timeout=2.0)
    zero, one = reports
    (held,) = zero.problems
    assert held.kind == "endpoint" and held.variable == "MASTER_PORT" and f"port {port} on h1 is held" in held.message
    (foreign,) = one.problems
    assert foreign.kind == "endpoint" and "never sent the check's greeting" in foreign.message


def test_nobody_listening_names_the_address_and_its_origin() -> None:
    job, envs = world(2, hosts=("h1",))
    (report,) = meet(job, envs, timeout=1.0, skip=(0,))
    (problem,) = report.problems
    assert problem.kind == "endpoint" and problem.variable == "MASTER_ADDR"
    assert "rank 0 never answered at 127.0.0.1" in problem.message and report.missing == (0,)


def test_a_process_that_cannot_resolve_still_joins() -> None:
    job, envs = world()
    envs[1]["LOCAL_RANK"] = "many"
    reports = meet(job, envs, timeout=5.0)
    for r in reports:
        (problem,) = r.problems
        assert problem.kind == "unresolvable" and problem.variable == "LOCAL_RANK" and problem.ranks == (1,)
    assert reports[1].topology is None


def test_no_endpoint_at_all_raises_the_processes_own_error() -> None:
    with pytest.raises(resolver.InvalidVariable, match="SLURM_PROCID"):
        check({"SLURM_JOB_ID": "1", "SLURM_NTASKS": "2", "SLURM_PROCID": "", "SLURM_NODELIST": "ci1"}, timeout=1)


def test_progress_goes_to_the_resolver_logger(caplog: pytest.LogCaptureFixture) -> None:
    import resolver._check as engine

    job, envs = world(2, hosts=("h1",))
    caplog.set_level(logging.INFO, logger="resolver")
    old, engine.PROGRESS_EVERY = engine.PROGRESS_EVERY, 0.2
    try:
        meet(job, envs, timeout=1.0, skip=(1,))
    finally:
        engine.PROGRESS_EVERY = old
    lines = [r.getMessage() for r in caplog.records if r.name == "resolver"]
    assert any("1 of 2 processes" in line and "waiting for ranks 1" in line for line in lines), lines


def test_a_process_of_another_job_is_turned_away_and_named() -> None:
    job, envs = world(2, hosts=("h1",))
    envs[1]["TORCHELASTIC_RUN_ID"] = "other"
    reports = meet(job, envs, timeout=1.5)
    assert any(p.kind == "stranger" and "job other" in p.message for p in reports[0].problems), reports[0].problems
    assert reports[0].missing == (1,)
    (turned,) = reports[1].problems
    assert turned.kind == "endpoint" and "turned this process away" in turned.message


def test_text_lines() -> None:
    job, envs = world(2, hosts=("h1",))
    ok = meet(job, envs)
    assert ok[0].lines()[0].startswith("2 processes on 1 node agree: torchelastic job none, main 127.0.0.1:")
    assert ok[0].lines()[1] == "h1  node 0  ranks 0-1"
    assert len(ok[1].lines()) == 1


def _threads(count: int, work: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


def placed(job: Job, index: int, **changes: Any) -> list[Member]:
    """The job's records with process `index`'s topology changed by `changes`."""
    found = members(job, job.resolve())
    t = found[index].topology
    assert t is not None
    found[index] = attrs.evolve(found[index], topology=attrs.evolve(t, **changes))
    return found


def said(found: Sequence[Member]) -> list[tuple[str, tuple[int, ...], tuple[str, ...], str | None, str]]:
    return [(p.kind, p.ranks, p.hosts, p.variable, p.message) for p in verdict(found).problems]


def test_each_placement_problem_names_its_ranks_hosts_variable_and_origin() -> None:
    """Every placement message in full: what the processes said, where it came from, what was expected."""
    job = slurm_job(nodes=("ci1", "ci2"), ntasks=4)
    assert said(placed(job, 1, local_rank=0)) == [
        (
            "local_rank",
            (0, 1),
            ("ci1",),
            "SLURM_LOCALID",
            "local rank 0 on ci1 is claimed by ranks 0-1 (from env:SLURM_LOCALID)",
        )
    ]
    tasks = "formula:entry 1 (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE"
    assert said(placed(job, 3, node_rank=0, local_rank=2, local_world_size=3)) == [
        (
            "local_rank",
            (3,),
            ("ci2",),
            "SLURM_LOCALID",
            "ci2 runs local ranks 2 (from env:SLURM_LOCALID): expected 0..0",
        ),
        (
            "local_rank",
            (3,),
            ("ci2",),
            "SLURM_STEP_TASKS_PER_NODE",
            f"rank 3 on ci2 say local_world_size=3 (from {tasks}), but 1 process run there",
        ),
        (
            "node_rank",
            (0, 1, 2, 3),
            ("ci1", "ci2"),
            "SLURM_NODEID",
            "node rank 0 is on 2 hosts, ci1 and ci2 (from env:SLURM_NODEID): one node rank, one host",
        ),
        ("node_rank", (), ("ci1", "ci2"), "SLURM_NODEID", "node ranks 0 (from env:SLURM_NODEID) for num_nodes=2"),
    ]
    assert said(placed(job, 1, node_rank=1)) == [
        (
            "node_rank",
            (0, 1, 2),
            ("ci1",),
            "SLURM_NODEID",
            "ci1 holds node ranks 0-1 (from env:SLURM_NODEID): one host, one node rank",
        ),
        (
            "node_rank",
            (1, 3),
            ("ci1", "ci2"),
            "SLURM_NODEID",
            "node rank 1 is on 2 hosts, ci1 and ci2 (from env:SLURM_NODEID): one node rank, one host",
        ),
    ]
    gpus = torchrun_job(nproc_per_node=2, visible_devices=("0", "1"))
    assert said(placed(gpus, 1, local_device=0)) == [
        (
            "device",
            (0, 1),
            ("node1",),
            "CUDA_VISIBLE_DEVICES",
            "ranks 0-1 on node1 are all bound to device 0 (from env:CUDA_VISIBLE_DEVICES)",
        )
    ]


def test_a_rank_claimed_twice_or_outside_the_world_names_its_hosts_and_variable() -> None:
    job = slurm_job(nodes=("ci1", "ci2"), ntasks=4)
    found = members(job, job.resolve())
    found[2] = attrs.evolve(found[2], rank=1)
    found[3] = attrs.evolve(found[3], rank=7)
    assert said(found) == [
        (
            "duplicate",
            (1,),
            ("ci1",),
            "SLURM_PROCID",
            "rank 1 is claimed by 2 processes, on ci1, ci1 (from env:SLURM_PROCID)",
        ),
        ("ranks", (7,), ("ci2",), "SLURM_PROCID", "rank 7 on ci2 claims rank 7, outside 0..3 of a world of 4"),
        ("missing", (2, 3), (), None, "ranks 2-3 of 4 never joined the check: no process claims it"),
    ]
