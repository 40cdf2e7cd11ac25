"""LSF with jsrun: rankfiles in temporary folders (the live file probe) and in the fake probes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
import resolver
from probes import Probes
from resolver import InvalidVariable, MissingVariable, Origin, ProbeFailed, TopologyError
from resolver import testing as rt
from resolver.sources import lsf

RANKFILE = "/var/lsf/job/1234.rankfile"
# a Summit-like job: the batch node, then 2 compute nodes with 3 slots each; task 4 runs on the second
JOB = {
    "LSB_JOBID": "123456",
    "LSB_JOBNAME": "train",
    "LSB_DJOB_RANKFILE": RANKFILE,
    "JSM_NAMESPACE_SIZE": "6",
    "JSM_NAMESPACE_RANK": "4",
    "JSM_NAMESPACE_LOCAL_RANK": "1",
    "JSM_NAMESPACE_LOCAL_SIZE": "3",
}
SUMMIT = "batch3\n" + "a01n01\n" * 3 + "a01n02\n" * 3


def fake(text: str = SUMMIT, hostname: str = "a01n02", **files: str) -> Probes:
    return probes.fake(hostname=hostname, files={RANKFILE: text, **files})


def live(hostname: str) -> Probes:
    """The live file probe, with this host's name made up."""
    return attrs.evolve(probes.system(), hostname=lambda: hostname)


def test_summit_like_job_from_a_real_file(tmp_path: Path) -> None:
    path = tmp_path / "rankfile"
    path.write_text(SUMMIT)
    t = resolver.resolve({**JOB, "LSB_DJOB_RANKFILE": str(path)}, live("a01n02"))
    assert t.source == "lsf"
    assert (t.world_size, t.global_rank, t.local_rank, t.local_world_size) == (6, 4, 1, 3)
    assert (t.node_rank, t.num_nodes) == (1, 2)
    assert (t.main_address, t.main_port) == ("a01n01", 123456 % 1000 + 10000)
    assert t.creates_processes_externally
    assert (t.job_id, t.job_name) == ("123456", "train")
    assert t.warnings == ()
    rankfile = ("LSB_DJOB_RANKFILE",)
    assert dict(t.provenance) == {
        "world_size": Origin.env("JSM_NAMESPACE_SIZE"),
        "global_rank": Origin.env("JSM_NAMESPACE_RANK"),
        "local_rank": Origin.env("JSM_NAMESPACE_LOCAL_RANK"),
        "local_world_size": Origin.env("JSM_NAMESPACE_LOCAL_SIZE"),
        "job_id": Origin.env("LSB_JOBID"),
        "job_name": Origin.env("LSB_JOBNAME"),
        "main_port": Origin.formula("10000 + LSB_JOBID mod 1000 (10000 + 123456 mod 1000)", variables=("LSB_JOBID",)),
        "creates_processes_externally": Origin.rule("lsf: jsrun starts every task"),
        "main_address": Origin.formula(f"first compute host of LSB_DJOB_RANKFILE ({path})", variables=rankfile),
        "num_nodes": Origin.formula(f"distinct compute hosts of LSB_DJOB_RANKFILE ({path})", variables=rankfile),
        "hostnames": Origin.formula(
            f"compute hosts of LSB_DJOB_RANKFILE ({path}), in order of first appearance", variables=rankfile
        ),
        "node_rank": Origin.formula(
            f"index of hostname 'a01n02' among compute hosts of LSB_DJOB_RANKFILE ({path})", variables=rankfile
        ),
    }
    resolver.validate(t, devices=3, num_nodes=2)
    env: dict[str, str] = {}
    with resolver.apply(t, env) as applied:
        assert env == {"MASTER_ADDR": "a01n01", "MASTER_PORT": "10456"} == applied.written
    assert env == {}


@pytest.mark.parametrize(
    ("text", "hostname", "node_rank", "num_nodes", "main"),
    [
        pytest.param(SUMMIT, "a01n01", 0, 2, "a01n01", id="first-node"),
        pytest.param("batch\n\n\na\n\nb\n\n", "b", 1, 2, "a", id="blank-lines"),
        pytest.param("  batch  \n a \t\n b   \n", "b", 1, 2, "a", id="surrounding-spaces"),
        pytest.param("batch\r\na\r\nb\r\n", "b", 1, 2, "a", id="crlf"),
        pytest.param("batch\na\na\na\na\nb", "b", 1, 2, "a", id="no-final-newline"),
        pytest.param("batch\n" + "n2\nn1\n" * 50, "n1", 1, 2, "n2", id="interleaved-first-appearance"),
        pytest.param("batch\n" + "only\n" * 1000, "only", 0, 1, "only", id="one-node-listed-1000-times"),
        pytest.param("\n\nbatch\na\nb\n", "a", 0, 2, "a", id="leading-blank-lines-before-launch-node"),
        pytest.param("batch\nbatch\na\n", "batch", 0, 2, "batch", id="launch-node-also-computes"),
        pytest.param("b\n10.0.0.1\n10.0.0.2\n", "10.0.0.2", 1, 2, "10.0.0.1", id="ip-addresses"),
    ],
)
def test_rankfile_layouts(text: str, hostname: str, node_rank: int, num_nodes: int, main: str) -> None:
    env = {**JOB, "JSM_NAMESPACE_LOCAL_SIZE": "1", "JSM_NAMESPACE_LOCAL_RANK": "0"}
    t = resolver.resolve(env, fake(text, hostname))
    assert (t.node_rank, t.num_nodes, t.main_address) == (node_rank, num_nodes, main)


@pytest.mark.parametrize(
    ("entries", "hostname", "node_rank", "how"),
    [
        pytest.param(["n1.cluster", "n2.cluster"], "n2.cluster", 1, "", id="exact-fqdn"),
        pytest.param(["n1.cluster", "n2.cluster"], "n2", 1, "n2.cluster", id="short-host-fqdn-file"),
        pytest.param(["n1", "n2"], "n2.cluster.org", 1, "n2", id="fqdn-host-short-file"),
        pytest.param(["N1.Cluster", "N2.Cluster"], "n2", 1, "N2.Cluster", id="case-insensitive"),
        pytest.param(["n1.a", "n1.b"], "n1.b", 1, "", id="exact-beats-ambiguous-short"),
    ],
)
def test_hostname_matching(entries: list[str], hostname: str, node_rank: int, how: str) -> None:
    env = {**JOB, "JSM_NAMESPACE_LOCAL_SIZE": "1", "JSM_NAMESPACE_LOCAL_RANK": "0"}
    t = resolver.resolve(env, fake("batch\n" + "\n".join(entries), hostname))
    assert t.node_rank == node_rank
    matched = f" (matched {how!r} by short name)" if how else ""
    assert str(t.provenance["node_rank"]) == (
        f"formula:index of hostname {hostname!r}{matched} among compute hosts of LSB_DJOB_RANKFILE ({RANKFILE})"
    )


def test_master_port_overrides_the_formula() -> None:
    t = resolver.resolve({**JOB, "MASTER_PORT": "29500"}, fake())
    assert (t.main_port, t.provenance["main_port"]) == (29500, Origin.env("MASTER_PORT"))


def test_master_addr_is_not_read_and_optional_variables() -> None:
    env = {k: v for k, v in JOB.items() if k not in ("JSM_NAMESPACE_LOCAL_SIZE", "LSB_JOBNAME")}
    t = resolver.resolve({**env, "MASTER_ADDR": "elsewhere"}, fake())
    assert (t.main_address, t.local_world_size, t.job_name) == ("a01n01", None, None)


def test_more_hosts_than_tasks_leaves_num_nodes_unknown() -> None:
    # jsrun -n2 in a 3-node allocation: the rankfile is the job's, not the step's
    env = {**JOB, "JSM_NAMESPACE_SIZE": "2", "JSM_NAMESPACE_RANK": "1", "JSM_NAMESPACE_LOCAL_SIZE": "1"}
    env["JSM_NAMESPACE_LOCAL_RANK"] = "0"
    t = resolver.resolve(env, fake("batch\na\nb\nc\n", "b"))
    assert (t.num_nodes, t.node_rank) == (None, 1)
    assert t.warnings == (
        "LSB_DJOB_RANKFILE lists 3 compute hosts but JSM_NAMESPACE_SIZE=2: jsrun runs on only part of the "
        "job's hosts, so num_nodes is unknown and node ranks follow the rankfile",
    )


# -- job arrays (LSB_JOBINDEX) -------------------------------------------------------------------


def test_an_array_element_records_its_index_and_takes_its_own_port() -> None:
    t = resolver.resolve({**JOB, "LSB_JOBINDEX": "7"}, fake())
    assert (t.job_id, t.array_job_id, t.array_task_id) == ("123456", "123456", "7")
    assert t.main_port == (123456 + 7) % 1000 + 10000 == 10463
    assert t.provenance["array_job_id"] == Origin.env("LSB_JOBID")
    assert t.provenance["array_task_id"] == Origin.env("LSB_JOBINDEX")
    formula = "formula:10000 + (LSB_JOBID + LSB_JOBINDEX) mod 1000 (10000 + (123456 + 7) mod 1000)"
    assert str(t.provenance["main_port"]) == formula
    assert t.provenance["main_port"].variables == ("LSB_JOBID", "LSB_JOBINDEX")


def test_index_zero_is_not_an_array_and_keeps_lightnings_port() -> None:
    # LSF sets LSB_JOBINDEX=0 for every job that is not an array element
    plain = resolver.resolve(JOB, fake())
    zero = resolver.resolve({**JOB, "LSB_JOBINDEX": "0"}, fake())
    assert zero == plain
    assert dict(zero.provenance) == dict(plain.provenance)
    assert (zero.array_job_id, zero.array_task_id, zero.main_port) == (None, None, 123456 % 1000 + 10000)


def test_master_port_still_wins_for_an_array_element() -> None:
    t = resolver.resolve({**JOB, "LSB_JOBINDEX": "3", "MASTER_PORT": "29500"}, fake())
    assert (t.main_port, t.provenance["main_port"], t.array_task_id) == (29500, Origin.env("MASTER_PORT"), "3")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 10**7), st.integers(1, 40))
def test_elements_of_one_array_on_one_node_get_distinct_ports(job_id: int, elements: int) -> None:
    # Lightning's LSB_JOBID % 1000 + 10000 gives every element of an array the same port
    tasks = [rt.lsf_env(job_id=job_id, job_index=index) for index in range(1, elements + 1)]
    ports = [resolver.resolve(task.environ, task.probes()).main_port for task in tasks]
    assert len(set(ports)) == elements
    assert all(10000 <= port <= 10999 for port in ports)  # type: ignore[operator]


# -- detection ---------------------------------------------------------------------------------


def test_detected_on_lightnings_four_variables() -> None:
    assert resolver.resolve(JOB, fake()).source == "lsf"
    explanation = resolver.explain(JOB)
    candidate = next(c for c in explanation.candidates if c.name == "lsf")
    assert candidate.auto and candidate.detection.matched
    assert candidate.detection.variables == lsf.DETECTION_VARIABLES
    assert explanation.chosen == "lsf"


@pytest.mark.parametrize("variable", lsf.DETECTION_VARIABLES)
def test_not_detected_without_one_of_them(variable: str) -> None:
    env = {k: v for k, v in JOB.items() if k != variable}
    assert resolver.resolve(env, probes.fake(free_port=4242)).source == "lightning"
    detection = lsf.Lsf().detect(env)
    assert not detection.matched and f"{variable} not set" in detection.reason


def test_torchelastic_comes_first() -> None:
    env = {**JOB, "TORCHELASTIC_RUN_ID": "r", "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0"}
    assert resolver.resolve(env, probes.fake()).source == "torchelastic"


# -- errors: each names its variable or path -----------------------------------------------------


def without(*names: str, **changes: str) -> dict[str, str]:
    return {**{k: v for k, v in JOB.items() if k not in names}, **changes}


@pytest.mark.parametrize(
    ("env", "variable", "words"),
    [
        pytest.param(without("LSB_DJOB_RANKFILE"), "LSB_DJOB_RANKFILE", "path of the job's rankfile", id="rankfile"),
        pytest.param(without("JSM_NAMESPACE_RANK"), "JSM_NAMESPACE_RANK", "start the program with jsrun", id="rank"),
        pytest.param(without("JSM_NAMESPACE_SIZE"), "JSM_NAMESPACE_SIZE", "set by jsrun", id="size"),
        pytest.param(without("JSM_NAMESPACE_LOCAL_RANK"), "JSM_NAMESPACE_LOCAL_RANK", "jsrun", id="local-rank"),
        pytest.param(without("LSB_JOBID"), "LSB_JOBID", "decimal integer", id="job-id"),
    ],
)
def test_missing_variables(env: dict[str, str], variable: str, words: str) -> None:
    with pytest.raises(MissingVariable) as info:
        resolver.resolve(env, fake(), source="lsf")
    assert info.value.variable == variable
    assert f"{variable} is not set (needed by source 'lsf')" in str(info.value)
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("changes", "variable", "words"),
    [
        ({"LSB_JOBID": "12a"}, "LSB_JOBID", "decimal integer"),
        ({"LSB_JOBID": "12a", "MASTER_PORT": "29500"}, "LSB_JOBID", "decimal integer"),
        ({"LSB_JOBID": "-5"}, "LSB_JOBID", "decimal integer"),
        ({"LSB_JOBINDEX": "x"}, "LSB_JOBINDEX", "decimal integer"),
        ({"LSB_JOBINDEX": "-1", "MASTER_PORT": "29500"}, "LSB_JOBINDEX", "decimal integer"),
        ({"LSB_JOBINDEX": ""}, "LSB_JOBINDEX", "decimal integer"),
        ({"LSB_DJOB_RANKFILE": ""}, "LSB_DJOB_RANKFILE", "not an empty string"),
        ({"JSM_NAMESPACE_RANK": "6"}, "JSM_NAMESPACE_RANK", "< world_size (6) (world_size from JSM_NAMESPACE_SIZE=6)"),
        ({"JSM_NAMESPACE_SIZE": "0"}, "JSM_NAMESPACE_SIZE", ">= 1"),
        ({"JSM_NAMESPACE_LOCAL_RANK": "3"}, "JSM_NAMESPACE_LOCAL_RANK", "< local_world_size (3)"),
        ({"JSM_NAMESPACE_LOCAL_SIZE": "7"}, "JSM_NAMESPACE_LOCAL_SIZE", "<= world_size (6)"),
        ({"JSM_NAMESPACE_LOCAL_SIZE": "x"}, "JSM_NAMESPACE_LOCAL_SIZE", "decimal integer"),
        ({"MASTER_PORT": "70000"}, "MASTER_PORT", "TCP port"),
    ],
)
def test_invalid_variables(changes: dict[str, str], variable: str, words: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**JOB, **changes}, fake())
    assert info.value.variable == variable
    assert str(info.value).startswith(f"{variable}=")
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("text", "hostname", "words"),
    [
        pytest.param("", "a", "it is empty", id="empty"),
        pytest.param("\n  \n\t\n", "a", "it is empty", id="only-blank-lines"),
        pytest.param("batch3\n", "batch3", "it lists only 'batch3'", id="launch-node-only"),
        pytest.param("batch\na\nrank 0=a slot=0\n", "a", "line 3 is 'rank 0=a slot=0'", id="not-a-host-name"),
        pytest.param("batch\na;rm -rf\n", "a", "line 2 is 'a;rm -rf'", id="shell-syntax"),
        pytest.param(SUMMIT, "c01n07", "this host 'c01n07' (probe:hostname)", id="host-not-listed"),
        pytest.param(SUMMIT, "c01n07", "it lists 'a01n01', 'a01n02'", id="host-not-listed-preview"),
        pytest.param("b\n" + "\n".join(f"h{i}" for i in range(9)), "x", "'h3', 'h4' and 4 more", id="preview-is-short"),
        pytest.param(SUMMIT, "batch3", "it is the launch node (the first line)", id="host-is-launch-node"),
        pytest.param("batch3.x\na\n", "batch3", "it is the launch node", id="host-is-launch-node-by-short-name"),
        pytest.param("b\nn1.a\nn1.b\n", "n1", "by short name 'n1' it matches ['n1.a', 'n1.b']", id="ambiguous"),
        pytest.param("b\n10.0.0.1\n10.0.0.2\n", "10.0.0.3", "this host '10.0.0.3'", id="ip-not-short-matched"),
    ],
)
def test_rankfile_errors_name_the_variable_and_path(text: str, hostname: str, words: str) -> None:
    with pytest.raises(InvalidVariable) as info:
        resolver.resolve({**JOB, "JSM_NAMESPACE_LOCAL_SIZE": "6"}, fake(text, hostname))
    assert info.value.variable == "LSB_DJOB_RANKFILE"
    assert str(info.value).startswith(f"LSB_DJOB_RANKFILE={RANKFILE!r} is invalid: expected ")
    assert words in str(info.value)


def test_unreadable_rankfiles_name_the_variable_and_path(tmp_path: Path) -> None:
    undecodable = tmp_path / "latin1"
    undecodable.write_bytes(b"batch\nn\xe9ud1\n")
    for path, words in (
        (tmp_path / "missing", "No such file"),
        (tmp_path, "Is a directory"),
        (undecodable, "utf-8"),
    ):
        with pytest.raises(ProbeFailed) as info:
            resolver.resolve({**JOB, "LSB_DJOB_RANKFILE": str(path)}, live("a01n02"))
        assert info.value.probe == "read_text"
        assert f"LSB_DJOB_RANKFILE={str(path)!r}" in str(info.value)
        assert words in str(info.value)


def test_fake_probe_without_the_file() -> None:
    with pytest.raises(ProbeFailed, match=r"LSB_DJOB_RANKFILE='/var/lsf/job/1234.rankfile': no such file"):
        resolver.resolve(JOB, probes.fake(hostname="a01n02", files={}))


@pytest.mark.parametrize("answer", ["", None, 7])
def test_bad_hostname_answer(answer: Any) -> None:
    bundle = attrs.evolve(fake(), hostname=lambda: answer)
    with pytest.raises(ProbeFailed, match=r"probe 'hostname' failed: answered .*expected a non-empty str"):
        resolver.resolve(JOB, bundle)


def test_bad_read_text_answer() -> None:
    answer: Any = b"batch\na\n"
    bundle = attrs.evolve(fake(), read_text=lambda path: answer)
    with pytest.raises(ProbeFailed, match=r"answered b'batch\\na\\n' for LSB_DJOB_RANKFILE="):
        resolver.resolve(JOB, bundle)


def test_environment_errors_come_before_any_probe() -> None:
    with pytest.raises(InvalidVariable, match="JSM_NAMESPACE_RANK"):
        resolver.resolve({**JOB, "JSM_NAMESPACE_RANK": "x"}, probes.fake())  # a probe question would fail


# -- cost: one read, one pass ---------------------------------------------------------------------


@attrs.define
class Counting:
    """Probes that count their questions."""

    text: str
    hostname: str
    asked: list[str] = attrs.field(factory=list)

    def probes(self) -> Probes:
        def read_text(path: str) -> str:
            self.asked.append(f"read_text {path}")
            return self.text

        def hostname() -> str:
            self.asked.append("hostname")
            return self.hostname

        return attrs.evolve(probes.fake(), read_text=read_text, hostname=hostname)


def big_rankfile(hosts: int, slots: int = 4) -> str:
    """A launch node, then `hosts` compute hosts with `slots` lines each, as LSF writes them."""
    return "batch1\n" + "".join(f"c{i // 100:03d}n{i % 100:02d}\n" * slots for i in range(hosts))


def last_host(hosts: int) -> str:
    return f"c{(hosts - 1) // 100:03d}n{(hosts - 1) % 100:02d}"


def big_job(hosts: int, slots: int = 4) -> dict[str, str]:
    return {**JOB, "JSM_NAMESPACE_SIZE": str(hosts * slots), "JSM_NAMESPACE_RANK": str(hosts * slots - 1)}


def test_ten_thousand_hosts_read_once() -> None:
    counting = Counting(big_rankfile(10_000), last_host(10_000))
    start = time.perf_counter()
    t = resolver.resolve(big_job(10_000), counting.probes())
    elapsed = time.perf_counter() - start
    print(f"10,000 hosts x 4 slots: {elapsed * 1e3:.1f} ms")  # a benchmark line (pytest -s), not an assert
    assert (t.node_rank, t.num_nodes, t.main_address) == (9999, 10_000, "c000n00")
    assert counting.asked == [f"read_text {RANKFILE}", "hostname"]


def test_ten_thousand_hosts_from_a_real_file(tmp_path: Path) -> None:
    path = tmp_path / "rankfile"
    path.write_text(big_rankfile(10_000, slots=42))  # Summit's 42 slots per node: 420,001 lines
    reads: list[str] = []
    system = probes.system()

    def read_text(name: str) -> str:
        reads.append(name)
        return system.read_text(name)

    bundle = attrs.evolve(system, read_text=read_text, hostname=lambda: "c050n00")
    start = time.perf_counter()
    t = resolver.resolve({**big_job(10_000, slots=42), "LSB_DJOB_RANKFILE": str(path)}, bundle)
    print(f"10,000 hosts x 42 slots from a file: {(time.perf_counter() - start) * 1e3:.1f} ms")
    assert (t.node_rank, t.num_nodes, reads) == (5000, 10_000, [str(path)])


def work(call: Callable[[], object]) -> int:
    """Python lines run plus C functions called inside resolver/sources/lsf.py during `call()`.

    A deterministic count of work (not a clock): it grows by the same amount for each added host
    exactly when the parse is one pass and the lookup does not scan (no `list.index`, no loop per host).
    """
    target = lsf.__file__
    count = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_filename == target else None

    def profiler(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        if event == "c_call" and frame.f_code.co_filename == target:
            count += 1

    old_trace, old_profile = sys.gettrace(), sys.getprofile()
    sys.settrace(tracer)
    sys.setprofile(profiler)
    try:
        call()
    finally:
        sys.settrace(old_trace)
        sys.setprofile(old_profile)
    return count


def test_work_is_linear_in_the_rankfile() -> None:
    def cost(hosts: int) -> int:
        bundle = fake(big_rankfile(hosts), last_host(hosts))
        return work(lambda: resolver.resolve(big_job(hosts), bundle))

    c1, c2, c3 = cost(10_000), cost(20_000), cost(30_000)
    assert c3 - c2 == c2 - c1 > 0  # exactly affine: each host costs the same, wherever it is
    assert (c2 - c1) / 10_000 < 40  # and a few steps per host (4 lines each), not a scan per host


def test_work_of_short_name_matching_is_linear_too() -> None:
    def cost(hosts: int) -> int:
        text = "batch\n" + "".join(f"n{i}.cluster.org\n" for i in range(hosts))
        bundle = fake(text, f"n{hosts - 1}")  # short name: one pass over the distinct hosts
        env = {**JOB, "JSM_NAMESPACE_SIZE": str(hosts), "JSM_NAMESPACE_RANK": "0"}
        return work(lambda: resolver.resolve(env, bundle))

    c1, c2, c3 = cost(1_000), cost(2_000), cost(3_000)
    assert c3 - c2 == c2 - c1 > 0


class Counted(str):
    """A str that counts the comparisons made with it and keeps its type through split and strip."""

    comparisons = 0

    def __eq__(self, other: object) -> bool:
        Counted.comparisons += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__

    def split(self, sep: str | None = None, maxsplit: int = -1) -> list[str]:  # type: ignore[override]
        return [Counted(part) for part in str.split(self, sep, maxsplit)]

    def strip(self, chars: str | None = None) -> str:
        return Counted(str.strip(self, chars))


def test_comparisons_per_line_are_constant() -> None:
    """A scan per line (`host in a_list`, `list.index`) would compare ~n*n/2 times; the dict does ~1 per line."""
    hosts, slots = 10_000, 4
    text = Counted(big_rankfile(hosts, slots))
    Counted.comparisons = 0
    t = resolver.resolve(big_job(hosts, slots), fake(text, Counted(last_host(hosts))))
    assert t.node_rank == hosts - 1
    assert 0 < Counted.comparisons <= 2 * (hosts * slots + 1)


# -- property: every rank of a job sees the same world -------------------------------------------

NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,6}[0-9]", fullmatch=True)


@st.composite
def jobs(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """(rankfile text, the rankfile's host of each rank, the hostname each rank's machine reports)."""
    hosts = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    domain = draw(st.sampled_from(["", ".cluster", ".a.example.org"]))
    fqdn_in_file = draw(st.booleans())  # which side is fully qualified, if any
    per_host = draw(st.lists(st.integers(1, 4), min_size=len(hosts), max_size=len(hosts)))
    slots = [h for h, n in zip(hosts, per_host, strict=True) for _ in range(n)]
    ranks = draw(st.permutations(slots))  # jsrun may place ranks in any order over the slots
    listed = [h + domain if fqdn_in_file else h for h in ranks]
    reported = [h if fqdn_in_file else h + domain for h in ranks]
    lines = ["login1", *listed]
    decorated = []
    for line in lines:
        pad = draw(st.sampled_from(["", " ", "\t", "  "]))
        decorated.append(draw(st.sampled_from(["", " "])) + line + pad)
        decorated.extend([""] * draw(st.integers(0, 2)))
    return "\n".join(decorated) + draw(st.sampled_from(["", "\n"])), listed, reported


@settings(deadline=None, max_examples=150)
@given(jobs(), st.integers(0, 999_999))
def test_every_rank_resolves_one_consistent_world(job: tuple[str, list[str], list[str]], job_id: int) -> None:
    text, listed, reported = job
    world = len(listed)
    tops = []
    for rank in range(world):
        on_node = [r for r in range(world) if listed[r] == listed[rank]]
        env = {
            "LSB_JOBID": str(job_id),
            "LSB_DJOB_RANKFILE": RANKFILE,
            "JSM_NAMESPACE_SIZE": str(world),
            "JSM_NAMESPACE_RANK": str(rank),
            "JSM_NAMESPACE_LOCAL_RANK": str(on_node.index(rank)),
            "JSM_NAMESPACE_LOCAL_SIZE": str(len(on_node)),
        }
        tops.append(resolver.resolve(env, fake(text, reported[rank])))
    assert {t.source for t in tops} == {"lsf"}
    assert [t.global_rank for t in tops] == list(range(world))
    assert {(t.world_size, t.main_address, t.main_port, t.num_nodes) for t in tops} == {
        (world, listed[0], job_id % 1000 + 10000, len(set(listed)))
    }
    first_seen = list(dict.fromkeys(listed))
    for t, host in zip(tops, listed, strict=True):
        assert t.node_rank == first_seen.index(host)
    assert tops[0].node_rank == 0  # rank 0 runs on the first compute host: the main address
    per_node = {(t.node_rank, t.local_rank) for t in tops}
    assert len(per_node) == world  # no two ranks share a node and a local rank


@given(st.text(max_size=300), st.text(max_size=30))
def test_any_rankfile_and_hostname_give_a_topology_or_a_topology_error(text: str, hostname: str) -> None:
    try:
        t = resolver.resolve(JOB, attrs.evolve(fake(text), hostname=lambda: hostname))
    except TopologyError:
        return
    assert t.source == "lsf"


def test_hostnames_are_the_rankfile_s_compute_hosts_in_node_rank_order() -> None:
    from resolver.testing import lsf_env

    task = lsf_env(rank=4, hosts=("a01n01", "a01n02"), tasks_per_host=3)
    t = resolver.resolve(task.environ, task.probes())
    assert t.hostnames == ("a01n01", "a01n02") and t.hostnames[t.node_rank] == "a01n02"
