"""probes/census.py: every rank's place among the hosts, tallied once, and the same on the wire."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
import resolver
from probes.census import HOSTNAMES_MOST, Place, Seat, Tally, batch_answer, narrow, place_of
from probes.fakes import FakeComm
from resolver import ProbeFailed
from resolver.sources import mpi

layouts = st.lists(st.sampled_from(["n1", "n2", "n10", "gpu-a", "b", "10.0.0.7"]), min_size=1, max_size=40)


def naive(hosts: list[str], rank: int) -> Seat:
    """The definition, as the MPI source wrote it before the census: an index into the sorted distinct hosts."""
    distinct = sorted(set(hosts))
    on_host = [r for r, h in enumerate(hosts) if h == hosts[rank]]
    return Seat(distinct.index(hosts[rank]), len(distinct), on_host.index(rank), len(on_host))


@settings(max_examples=200, deadline=None)
@given(hosts=layouts, data=st.data())
def test_the_tally_and_the_wire_give_every_rank_its_place_by_the_definition(
    hosts: list[str], data: st.DataObject
) -> None:
    answers = [(h, "10.0.0.1" if r == 0 else None, 29500 if r == 0 else None, None) for r, h in enumerate(hosts)]
    tally = Tally(answers)
    # any partition of the ranks into batches, as host leaders (or ranks meeting rank 0 alone) bring them
    batch_of = data.draw(st.lists(st.integers(0, 3), min_size=len(hosts), max_size=len(hosts)))
    for rank in range(len(hosts)):
        want = Place(rank0=answers[0], seat=naive(hosts, rank), hostnames=tuple(sorted(set(hosts))))
        assert tally.place(rank) == want
        batch = [r for r in range(len(hosts)) if batch_of[r] == batch_of[rank]]
        whole = batch_answer(tally, batch)
        assert len(whole["seats"]) == len(batch)  # a seat per rank of the batch, never every rank's
        relayed = narrow(whole, rank)
        assert list(relayed["seats"]) == [str(rank)]  # what the leader hands this rank: its own seat
        assert place_of(relayed, rank) == want


def test_the_first_error_in_rank_order_is_every_ranks_failure() -> None:
    answers = [("a", "a", 1, None), ("b", None, None, None), (None, None, None, "two"), (None, None, None, "three")]
    tally = Tally(answers)
    assert tally.place(1) == Place(rank0=answers[0], failed=(2, "two"))
    assert place_of(narrow(batch_answer(tally, [1, 3]), 1), 1) == Place(rank0=answers[0], failed=(2, "two"))
    with pytest.raises(ValueError, match="rank 1 sent no host name"):
        Tally([("a", "a", 1, None), (None, None, None, None)])


def test_an_answer_that_is_no_place_is_none() -> None:
    tally = Tally([("a", "a", 1, None), ("b", None, None, None)])
    assert place_of(batch_answer(tally, [1]), 0) is None  # rank 0's seat is not in rank 1's batch
    assert (
        place_of({"rank0": ["a", "a", 1, None], "failed": None, "hostnames": None, "seats": {"0": [0, 1]}}, 0) is None
    )
    assert place_of("ok", 0) is None and narrow("ok", 0) == "ok"


def test_above_the_bound_the_host_names_are_not_carried_and_the_record_says_why() -> None:
    assert mpi.HOSTNAMES_MOST == HOSTNAMES_MOST  # the MPI source's own count keeps the census's bound
    hosts = [f"n{i}" for i in range(HOSTNAMES_MOST + 1)]
    tally = Tally([(h, None, None, None) for h in hosts])
    assert tally.hostnames is None and tally.num_nodes == HOSTNAMES_MOST + 1
    assert batch_answer(tally, [5])["hostnames"] is None
    env = {"PMIX_RANK": "5", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    sent = [(h, "10.0.0.1" if r == 0 else None, 29500 if r == 0 else None, None) for r, h in enumerate(hosts)]
    comm = FakeComm(rank=5, size=len(hosts), gathered=sent)  # through allgather: the same bound, one record
    t = resolver.resolve(env, probes.fake(hostname=hosts[5], comm=comm))
    assert (t.node_rank, t.num_nodes, t.hostnames) == (sorted(hosts).index("n5"), HOSTNAMES_MOST + 1, None)
    why = t.provenance["hostnames"]
    assert why.name == "comm.allgather" and why.note is not None and "not recorded: 1025 nodes" in why.note
    at_bound = FakeComm(rank=5, size=HOSTNAMES_MOST, gathered=sent[:HOSTNAMES_MOST])
    t = resolver.resolve(env, probes.fake(hostname=hosts[5], comm=at_bound))
    assert t.hostnames == tuple(sorted(hosts[:HOSTNAMES_MOST]))


def test_a_census_that_is_no_place_is_probe_failed() -> None:
    class Odd(FakeComm):
        def census(self, answer: object) -> object:
            return "ok"

    env = {"PMIX_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    with pytest.raises(ProbeFailed, match=r"census returned 'ok': expected this rank's place"):
        resolver.resolve(env, probes.fake(hostname="h", comm=Odd(rank=1, size=2)))
    assert isinstance(Odd(rank=1, size=2), probes.HostCensus)
    assert not isinstance(FakeComm(rank=1, size=2), probes.HostCensus)  # the fakes go through allgather
