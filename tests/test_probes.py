from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


@pytest.fixture(scope="module")
def command_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Folders holding `tool` in every shape: executable, not executable, a folder, links, none."""
    root = tmp_path_factory.mktemp("which")
    shapes: dict[str, str] = {}
    for kind in ("exec", "plain", "folder", "link", "broken", "empty", "execdir"):
        folder = root / kind
        folder.mkdir()
        shapes[kind] = str(folder)
    (root / "exec" / "tool").write_text("#!/bin/sh\n")
    (root / "exec" / "tool").chmod(0o755)
    (root / "plain" / "tool").write_text("data\n")
    (root / "plain" / "tool").chmod(0o644)
    (root / "folder" / "tool").mkdir()
    (root / "link" / "tool").symlink_to(root / "exec" / "tool")
    (root / "broken" / "tool").symlink_to(root / "nowhere")
    (root / "execdir" / "tool").mkdir(mode=0o755)
    shapes["missing"] = str(root / "missing")
    shapes["file"] = str(root / "exec" / "tool")  # a PATH entry that is a file, not a folder
    return shapes


@given(
    st.lists(
        st.sampled_from(["exec", "plain", "folder", "link", "broken", "empty", "execdir", "missing", "file", ""])
        | st.sampled_from(["exec", "link"]).map(lambda k: k + "/"),
        max_size=6,
    ),
    st.sampled_from(["tool", "sh", "no-such-tool", "", "./tool", "exec/tool"]),
)
def test_live_which_answers_what_shutil_which_does(command_dirs: dict[str, str], kinds: list[str], name: str) -> None:
    import shutil

    # an empty entry is the current directory; a trailing "/" must not double the separator
    entries = [command_dirs[k.rstrip("/")] + ("/" if k.endswith("/") else "") if k else "" for k in kinds]
    before, cwd = os.environ.get("PATH"), os.getcwd()
    try:
        os.environ["PATH"] = os.pathsep.join(entries)
        os.chdir(str(Path(command_dirs["exec"]).parent))  # "./tool" and "exec/tool" resolve from here
        assert live.which(name) == shutil.which(name)
    finally:
        os.chdir(cwd)
        if before is None:
            os.environ.pop("PATH", None)
        else:
            os.environ["PATH"] = before


def test_live_which_with_path_unset_uses_the_system_default(monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    monkeypatch.delenv("PATH")
    assert live.which("sh") == shutil.which("sh") is not None


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


def test_resolve_uses_bounded_live_probes() -> None:
    t = resolver.resolve({})
    assert t.provenance["main_port"] == "probe:free_port"


# -- probes.system(timeout=...) and the polled collectives ------------------------------------------


def test_system_with_a_timeout_is_one_bundle_per_timeout() -> None:
    assert probes.system(timeout=120) is probes.system(timeout=120.0)  # built once: resolve calls it each time
    assert probes.system(timeout=5) is not probes.system(timeout=120)
    with pytest.raises(TypeError, match=r"timeout must be a number of seconds or None, not \[1\]"):
        probes.system(timeout=[1])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not True"):
        probes.system(timeout=True)
    with pytest.raises(ValueError, match="seconds must be > 0, not 0"):
        probes.system(timeout=0)


@given(st.one_of(st.text(), st.binary(), st.integers(), st.none(), st.tuples(st.text(), st.integers())))
def test_nonblocking_encoding_round_trips(obj: object) -> None:
    assert nonblocking.decode(nonblocking.encode(obj)) == obj


def test_nonblocking_sends_a_str_as_its_utf8() -> None:
    assert nonblocking.encode("node01") == b"snode01"  # a hostname costs its length plus one byte
    assert nonblocking.decode(memoryview(b"s\xed\xb3\xbf")) == "\udcff"  # surrogates from os.environ survive
    with pytest.raises(ValueError, match="not an encoded object"):
        nonblocking.decode(b"\x00garbage")


@given(st.integers(min_value=1, max_value=2**40))
def test_allgather_slots_bound_the_receive_buffer(size: int) -> None:
    width = nonblocking.slot(size)
    assert width % 4 == 0
    assert nonblocking.MIN_SLOT <= width <= nonblocking.MAX_SLOT
    assert width * size <= nonblocking.ALLGATHER_BUDGET or width == nonblocking.MIN_SLOT


class Request:
    """A nonblocking operation that completes after `polls` calls of Test(), or never (None)."""

    def __init__(self, polls: int | None) -> None:
        self.polls = polls
        self.tests = 0

    def Test(self) -> bool:  # noqa: N802 - mpi4py's name
        self.tests += 1
        return self.polls is not None and self.tests > self.polls


def test_polling_returns_when_the_operation_completes() -> None:
    request = Request(polls=50)
    nonblocking._wait(request, time.monotonic() + 30, 30, "comm.bcast", ())
    assert request.tests == 51


def test_polling_gives_up_at_the_deadline_and_keeps_the_buffers_alive() -> None:
    buffer = bytearray(8)
    start = time.monotonic()
    with pytest.raises(ProbeFailed, match=r"probe 'comm\.allgather' failed: no answer within 0\.2 s"):
        nonblocking._wait(Request(polls=None), start + 0.2, 0.2, "comm.allgather", (buffer,))
    elapsed = time.monotonic() - start
    assert 0.2 <= elapsed < 2
    assert nonblocking.ABANDONED[-1][1] is buffer  # MPI may still write into it
    nonblocking.ABANDONED.pop()


def test_a_fake_comm_is_not_polled() -> None:
    assert not nonblocking.supports(FakeComm(rank=0, size=2))
    assert not nonblocking.supports(object())
