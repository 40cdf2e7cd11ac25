from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import probes
import resolver
from probes import live, nonblocking
from probes.bounded import BoundedComm, bounded
from probes.fakes import FakeComm
from resolver import ProbeFailed


def test_live_probes_answer() -> None:
    p = probes.system()
    assert p.hostname()
    assert 1 <= p.free_port() <= 65535
    assert p.which("sh") is not None
    assert p.which("no-such-command-here") is None


def test_two_resolves_in_one_process_name_the_same_endpoint() -> None:
    """The record you log and the one init_process_group() resolves again must agree (issue 15)."""
    first, second = resolver.resolve({}), resolver.resolve({})
    assert str(first.provenance["main_port"]) == "probe:free_port"
    assert (first.main_address, first.main_port) == (second.main_address, second.main_port)
    assert probes.system().free_port() == probes.system(timeout=5).free_port() == first.main_port


def test_read_text_refuses_what_never_ends(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ProbeFailed, match="is not a regular file"):
        live.read_text(str(fifo))  # would block forever with a plain open()
    with pytest.raises(ProbeFailed, match="is not a regular file"):
        live.read_text("/dev/zero")
    with pytest.raises(ProbeFailed, match="cannot read"):
        live.read_text(str(tmp_path / "missing"))
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ProbeFailed, match="cannot read"):
        live.read_text(str(bad))


def test_read_text_caps_the_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big"
    big.write_text("h\n" * 100)
    monkeypatch.setattr(live, "MAX_FILE_BYTES", 50)
    with pytest.raises(ProbeFailed, match="larger than 50 bytes"):
        live.read_text(str(big))


def test_fake_answers_only_what_it_was_given() -> None:
    p = probes.fake(hostname="h", files={"/f": "x"}, which={"srun": "/bin/srun"})
    assert (p.hostname(), p.read_text("/f"), p.which("srun"), p.which("sbatch")) == ("h", "x", "/bin/srun", None)
    for ask in (p.free_port, p.comm, p.xla, lambda: p.read_text("/g"), lambda: probes.fake().which("srun")):
        with pytest.raises(ProbeFailed):
            ask()


def test_a_hanging_probe_becomes_probe_failed() -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(30)
        return "late"

    import attrs

    def hang_reading(path: str) -> str:
        return hang()

    slow = bounded(attrs.evolve(probes.fake(free_port=5), read_text=hang_reading, hostname=hang), 0.2)
    start = time.monotonic()
    with pytest.raises(ProbeFailed, match=r"probe 'read_text' failed: no answer within 0.2 s"):
        slow.read_text("/nfs/rankfile")
    assert time.monotonic() - start < 5
    assert slow.free_port() == 5
    with pytest.raises(ProbeFailed, match=r"probe 'hostname' failed: no answer within 0.2 s"):
        slow.hostname()  # a probe of the user's own may hang too
    release.set()
    with pytest.raises(ValueError, match="expected names among"):
        bounded(probes.fake(), 1, names=("xla",))


class HangingComm(FakeComm):
    def allgather(self, sendobj: object) -> list[object]:
        time.sleep(5)
        return []


def test_a_hanging_collective_becomes_probe_failed() -> None:
    comm = BoundedComm(HangingComm(rank=0, size=2), 0.2)
    with pytest.raises(ProbeFailed, match=r"comm\.allgather"):
        comm.allgather("x")
    assert comm.Get_size() == 2


def test_errors_inside_a_bounded_probe_pass_through() -> None:
    import attrs

    def boom(path: str) -> str:
        raise ProbeFailed("read_text", "permission denied")

    with pytest.raises(ProbeFailed, match="permission denied"):
        bounded(attrs.evolve(probes.fake(), read_text=boom), 1).read_text("/x")
    with pytest.raises(ValueError, match="seconds must be > 0"):
        bounded(probes.fake(), 0)


def test_resolve_asks_each_live_probe_with_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, float | None]] = []

    def probe(name: str, *, timeout: float | None = None) -> object:
        asked.append((name, timeout))
        answers = {"free_port": lambda: 29999, "device_count": lambda: 0, "which": lambda _: None}
        return answers[name]

    monkeypatch.setattr(live, "probe", probe)
    t = resolver.resolve({})
    assert (t.main_port, str(t.provenance["main_port"])) == (29999, "probe:free_port")
    assert asked and {timeout for _, timeout in asked} == {120.0}
    assert {name for name, _ in asked} <= {"free_port", "device_count", "which", "hostname"}


def test_a_live_probe_is_bounded_only_where_it_can_hang() -> None:
    assert live.probe("hostname", timeout=5) is live.hostname  # a kernel call: no thread
    assert live.probe("device_count", timeout=5) is live.device_count
    assert live.probe("read_text", timeout=5) is not live.read_text  # a hung NFS mount: a deadline
    assert live.probe("read_text") is live.read_text  # no timeout: the function itself
    with pytest.raises(ValueError, match="name='nope': expected one of hostname, comm"):
        live.probe("nope")
    with pytest.raises(ValueError, match=r"seconds must be > 0, not 0\.0"):
        live.probe("comm", timeout=0)


# -- probes.system(timeout=...) and the polled collectives ------------------------------------------


def test_system_refuses_a_timeout_that_is_not_seconds() -> None:
    with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None, not \[1\]"):
        probes.system(timeout=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not True"):
        probes.system(timeout=True)
    with pytest.raises(ValueError, match="seconds must be > 0, not 0"):
        probes.system(timeout=0)


class Request:
    """A nonblocking barrier that completes after `polls` calls of Test(), or never (None)."""

    def __init__(self, polls: int | None) -> None:
        self.polls = polls
        self.tests = 0

    def Test(self) -> bool:  # noqa: N802 - mpi4py's name
        self.tests += 1
        return self.polls is not None and self.tests > self.polls


class BarrierComm:
    """Just enough of an mpi4py communicator for `nonblocking.barrier`."""

    def __init__(self, polls: int | None) -> None:
        self.request = Request(polls)

    def Ibarrier(self) -> Request:  # noqa: N802 - mpi4py's name
        return self.request


def test_polling_returns_when_every_rank_reached_the_barrier() -> None:
    comm = BarrierComm(polls=50)
    nonblocking.barrier(comm, 30, "comm.bcast")
    assert comm.request.tests == 51


def test_polling_gives_up_at_the_deadline() -> None:
    start = time.monotonic()
    with pytest.raises(ProbeFailed, match=r"probe 'comm\.allgather' failed: no answer within 0\.2 s"):
        nonblocking.barrier(BarrierComm(polls=None), 0.2, "comm.allgather")
    elapsed = time.monotonic() - start
    assert 0.2 <= elapsed < 2


def test_a_fake_comm_is_not_polled() -> None:
    assert not nonblocking.supports(FakeComm(rank=0, size=2))
    assert not nonblocking.supports(object())


def test_device_count_reads_the_drivers_lists_not_device_nodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvidia, kfd = tmp_path / "nvidia-gpus", tmp_path / "kfd-nodes"
    monkeypatch.setattr(live, "NVIDIA_GPUS", str(nvidia))
    monkeypatch.setattr(live, "KFD_NODES", str(kfd))
    with pytest.raises(ProbeFailed, match="device_count"):
        live.device_count()  # no driver: no answer (the device fields stay None)
    for number, gpu_id in enumerate(["0", "43202", "", "17431"]):  # node 0 is the CPU; node 2 lost its file
        (kfd / str(number)).mkdir(parents=True)
        if gpu_id:
            (kfd / str(number) / "gpu_id").write_text(f"{gpu_id}\n")
    (kfd / "2" / "gpu_id").mkdir()  # unreadable as a file
    assert live.device_count() == 2
    for bus in ("0000:07:00.0", "0000:0b:00.0", "0000:48:00.0"):
        (nvidia / bus).mkdir(parents=True)
    assert live.device_count() == 3  # NVIDIA's list comes first
    assert probes.system().device_count is live.device_count  # kernel reads: not bounded by a thread
    assert probes.fake(devices=2).device_count() == 2
    with pytest.raises(ProbeFailed, match="device_count"):
        probes.fake().device_count()
