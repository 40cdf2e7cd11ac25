"""resolver.hostlist: the SLURM hostlist grammar, checked case by case, by properties and against scontrol."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resolver.errors import HostlistSyntaxError, InvalidVariable
from resolver.hostlist import DEFAULT_LIMIT, compress, count, expand, first

# ----------------------------------------------------------------------------------------- literal cases

EXPANSIONS = [
    ("n1", ["n1"]),
    ("n01", ["n01"]),
    ("a,b", ["a", "b"]),
    ("n[1-3]", ["n1", "n2", "n3"]),
    ("n[5]", ["n5"]),
    ("n[2-2]", ["n2"]),
    ("n[00-00]", ["n00"]),
    ("n[01-10]", [f"n{i:02d}" for i in range(1, 11)]),
    ("n[1-010]", [f"n{i}" for i in range(1, 11)]),  # the start sets the width, as in scontrol
    ("n[01-1]", ["n01"]),
    ("n[1-01]", ["n1"]),
    ("n[8-010]", ["n8", "n9", "n10"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[09-11]", ["n09", "n10", "n11"]),
    ("n[099-101]", ["n099", "n100", "n101"]),
    ("n[1-3,5-6]", ["n1", "n2", "n3", "n5", "n6"]),
    ("n[1,1,2]", ["n1", "n1", "n2"]),  # duplicates kept
    ("n[1-3,2]", ["n1", "n2", "n3", "n2"]),
    ("n[3,2,1]", ["n3", "n2", "n1"]),  # no sorting
    ("n[1-3],n[2-4]", ["n1", "n2", "n3", "n2", "n3", "n4"]),
    ("10.1.2.[3-5]", ["10.1.2.3", "10.1.2.4", "10.1.2.5"]),
    ("[1-3]", ["1", "2", "3"]),
    ("n1[2-3]", ["n12", "n13"]),
    ("n[1-2]-ib", ["n1-ib", "n2-ib"]),  # suffix: SLURM >= 23.02.5
    ("gpu[1-2]-ib,n3", ["gpu1-ib", "gpu2-ib", "n3"]),
    ("n[1]2[3]", ["n123"]),
    ("n[1-2][3-4]", ["n13", "n14", "n23", "n24"]),
    ("n[1-2]x[3-4]", ["n1x3", "n1x4", "n2x3", "n2x4"]),
    (
        "rack[1-2]-node[01-03]",
        ["rack1-node01", "rack1-node02", "rack1-node03", "rack2-node01", "rack2-node02", "rack2-node03"],
    ),
    ("rack[1-2]-node[01-02]-ib", ["rack1-node01-ib", "rack1-node02-ib", "rack2-node01-ib", "rack2-node02-ib"]),
    # three groups or more: last fastest, then the first, ..., the second-to-last slowest (what scontrol does)
    ("a[1-2]b[3-4]c[5-6]", ["a1b3c5", "a1b3c6", "a2b3c5", "a2b3c6", "a1b4c5", "a1b4c6", "a2b4c5", "a2b4c6"]),
    (
        "a[1-3]b[1-3]c[1-2]",
        [f"a{a}b{b}c{c}" for b in (1, 2, 3) for a in (1, 2, 3) for c in (1, 2)],
    ),
    (
        "a[1-2]b[3-4]c[5-6]d[7-8]",
        [f"a{a}b{b}c{c}d{d}" for c in (5, 6) for b in (3, 4) for a in (1, 2) for d in (7, 8)],
    ),
    # separators: any run of ',', space, tab, newline
    ("a, b", ["a", "b"]),
    ("a ,b", ["a", "b"]),
    ("a b", ["a", "b"]),
    ("a\tb\nc", ["a", "b", "c"]),
    ("a,,b", ["a", "b"]),
    ("a,", ["a"]),
    (",a", ["a"]),
    (" a ", ["a"]),
    ("n[1-3]\n", ["n1", "n2", "n3"]),
    ("n[1-3] ,b", ["n1", "n2", "n3", "b"]),
    ("", []),
    (" , ", []),
    # names are anything but brackets, commas and whitespace
    ("a;b", ["a;b"]),
    ("n%d{0}[1-2]%s}", ["n%d{0}1%s}", "n%d{0}2%s}"]),
    ("n[1-3]x[1-2]y[7]z", ["n1x1y7z", "n2x1y7z", "n3x1y7z", "n1x2y7z", "n2x2y7z", "n3x2y7z"]),
    ("n99999999999999999999", ["n99999999999999999999"]),  # scontrol clamps this to n18446744073709551615
    ("n[18446744073709551615]", ["n18446744073709551615"]),
    ("n[00000000000000000000000001]", ["n00000000000000000000000001"]),
    ("ノード[1-2]", ["ノード1", "ノード2"]),
]


@pytest.mark.parametrize(("hostlist", "hosts"), EXPANSIONS)
def test_expand(hostlist: str, hosts: list[str]) -> None:
    assert list(expand(hostlist)) == hosts
    assert count(hostlist) == len(hosts)
    if hosts:
        assert first(hostlist) == hosts[0]


@pytest.mark.parametrize(
    ("hostlist", "start", "stop"),
    [
        ("n[0000001-1000000]", 1, 1_000_000),
        ("n[995-12345]", 995, 12_345),
        ("n[1-2999]", 1, 2_999),
        ("n[999-3001]", 999, 3_001),
        ("n[1000-3000]", 1_000, 3_000),
        ("n[001000-003999]", 1_000, 3_999),
        ("n[0-5000]", 0, 5_000),
        ("n[123456789-123459999]", 123_456_789, 123_459_999),
    ],
)
@pytest.mark.parametrize("suffix", ["", "-ib", "%d{}"])
def test_expand_long_ranges(hostlist: str, start: int, stop: int, suffix: str) -> None:
    """Long ranges are made in chunks of 1000; every name must still be exactly the formatted number."""
    width = len(hostlist[2:].split("-", maxsplit=1)[0])
    assert list(expand(hostlist + suffix)) == [f"n{i:0{width}d}{suffix}" for i in range(start, stop + 1)]


def test_expand_two_dimensional_million() -> None:
    hosts = list(expand("rack[1-1000]-node[0001-1000]"))
    assert len(hosts) == 1_000_000
    assert hosts[:2] == ["rack1-node0001", "rack1-node0002"]
    assert hosts[999:1001] == ["rack1-node1000", "rack2-node0001"]
    assert hosts[-1] == "rack1000-node1000"
    assert hosts == [f"rack{r}-node{n:04d}" for r in range(1, 1001) for n in range(1, 1001)]


def test_expand_large_last_group() -> None:
    """A last group above the reuse threshold is made per prefix, in chunks."""
    assert list(expand("a[1-2]b[0-4999]c")) == [f"a{a}b{b}c" for a in (1, 2) for b in range(5000)]
    assert list(expand("x[1-2]a[1-2]b[0-4999]", limit=20_000)) == [
        f"x{x}a{a}b{b}" for a in (1, 2) for x in (1, 2) for b in range(5000)
    ]


def test_expand_many_prefixes_small_last_group() -> None:
    assert list(expand("a[1-5000]b[1-2]")) == [f"a{a}b{b}" for a in range(1, 5001) for b in (1, 2)]


def test_first_reads_only_the_first_item() -> None:
    assert first("n[0000001-1000000],login1") == "n0000001"
    assert first("rack[1-1000]-node[0001-1000]") == "rack1-node0001"
    assert first(" ,a[7,1-3]b[09-12]c") == "a7b09c"
    assert first("n1,n[") == "n1"  # documented: a later item is not parsed
    with pytest.raises(HostlistSyntaxError, match="runs backwards"):
        first("n[3-1],n1")


@pytest.mark.parametrize("hostlist", ["", " ", ",,", "\n"])
def test_first_of_an_empty_hostlist(hostlist: str) -> None:
    with pytest.raises(HostlistSyntaxError, match="empty hostlist") as info:
        first(hostlist)
    assert info.value.position == 0


def test_hostlist_must_be_a_str() -> None:
    with pytest.raises(TypeError, match="bytes"):
        count(b"n[1-2]")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="bytes"):
        expand(b"n[1-2]")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        first(None)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------- errors

ERRORS = [
    # text, position of the fault, words of the reason
    ("n[3-1]", 2, "range 3-1 runs backwards"),
    ("a,n[1-2,10-09]", 8, "range 10-09 runs backwards"),
    ("n[]", 2, "empty brackets"),
    ("n[1,]", 4, "expected a number, found ']'"),
    ("n[,1]", 2, "expected a number, found ','"),
    ("n[1-]", 4, "expected a number after '-', found ']'"),
    ("n[-3]", 2, "expected a number, found '-'"),
    ("n[a-c]", 2, "expected a number, found 'a'"),
    ("n[+1-3]", 2, "expected a number, found '+'"),
    ("n[0x1-0x3]", 3, "expected ',' or ']', found 'x'"),
    ("n[1-3-5]", 5, "expected ',' or ']', found '-'"),
    ("n[1x3]", 3, "expected ',' or ']', found 'x'"),
    ("n[١-٣]", 2, "expected a number"),  # Arabic-Indic digits are not ASCII digits
    ("n[ 1-3]", 2, "whitespace ' ' inside brackets"),
    ("n[1, 3]", 4, "whitespace ' ' inside brackets"),
    ("n[1-3 ]", 5, "whitespace ' ' inside brackets"),
    ("n[1-3\n]", 5, "whitespace '\\n' inside brackets"),
    ("n[1-3", 1, "'[' is never closed"),
    ("n[", 1, "'[' is never closed"),
    ("a,b,n[1-2,", 5, "'[' is never closed"),
    ("n[[1-3]", 2, "brackets do not nest"),
    ("n[1-[2-3]]", 4, "brackets do not nest"),
    ("n1-2]", 4, "unmatched ']'"),
    ("n]1", 1, "unmatched ']'"),
    ("n[1-3]]", 6, "unmatched ']'"),
    ("]", 0, "unmatched ']'"),
    ("a\rb", 1, "whitespace '\\r' inside a name"),
    ("a\x0bb", 1, "whitespace '\\x0b' inside a name"),
    ("a\x0cb", 1, "whitespace '\\x0c' inside a name"),
    ("a\u00a0b", 1, "whitespace '\\xa0' inside a name"),
    ("a,b\u2003", 3, "whitespace '\\u2003' inside a name"),
    ("n[99999999999999999999]", 2, "larger than 2**64-1"),
    ("n[1-18446744073709551616]", 4, "larger than 2**64-1"),
    ("n[" + "9" * 100_000 + "]", 2, "larger than 2**64-1"),  # no int() of 10**5 digits
]


@pytest.mark.parametrize(("hostlist", "position", "reason"), ERRORS)
def test_syntax_error_points_at_the_fault(hostlist: str, position: int, reason: str) -> None:
    fault_in_first_item = not re.search(r"[, \t\n]", hostlist[:position].split("[", maxsplit=1)[0])
    if not fault_in_first_item:
        assert first(hostlist)  # documented: first() does not read past the first item
    for call in (count, expand, first) if fault_in_first_item else (count, expand):
        with pytest.raises(HostlistSyntaxError) as info:
            call(hostlist)
        error = info.value
        assert error.position == position
        assert reason in error.reason
        assert error.text == hostlist
        assert f"at column {position + 1}\n" in str(error)
        if len(hostlist) < 100 and hostlist.isprintable():  # short and printable: the caret is exact
            _, shown_text, caret = str(error).split("\n")
            assert shown_text == "    " + hostlist
            assert caret == " " * (4 + position) + "^"


def test_syntax_error_is_a_value_error_and_names_the_variable() -> None:
    with pytest.raises(ValueError, match="hostlist") as info:
        count("n[3-1]")
    assert isinstance(info.value, InvalidVariable)
    assert isinstance(info.value, HostlistSyntaxError)
    renamed = info.value.for_variable("SLURM_JOB_NODELIST")
    assert str(renamed).startswith("SLURM_JOB_NODELIST: range 3-1 runs backwards at column 3")


def test_long_hostlist_error_shows_a_window_with_the_caret_under_the_fault() -> None:
    hostlist = ",".join(f"n{i}" for i in range(1000)) + ",n[2-1]," + ",".join(f"m{i}" for i in range(1000))
    position = hostlist.index("[") + 1
    with pytest.raises(HostlistSyntaxError) as info:
        count(hostlist)
    assert info.value.position == position
    _, shown_text, caret = str(info.value).split("\n")
    assert shown_text[caret.index("^")] == "2"


# ----------------------------------------------------------------------------------------------- limit


def test_default_limit() -> None:
    assert DEFAULT_LIMIT == 1_000_000
    assert count("n[1-1000000]") == DEFAULT_LIMIT
    expand("n[1-1000000]")  # exactly at the limit: accepted
    with pytest.raises(HostlistSyntaxError, match="expands to 1000001 hosts, more than the limit of 1000000"):
        expand("n[0-1000000]")


def test_limit_is_checked_over_the_whole_list() -> None:
    assert list(expand("n[1-2],m[1-2]", limit=4)) == ["n1", "n2", "m1", "m2"]
    with pytest.raises(HostlistSyntaxError, match="expands to 5 hosts, more than the limit of 4") as info:
        expand("n[1-2],m[1-2],x", limit=4)
    assert info.value.position == 0
    assert list(expand("", limit=0)) == []
    with pytest.raises(HostlistSyntaxError, match="more than the limit of 0"):
        expand("a", limit=0)


@pytest.mark.parametrize("limit", [-1, 1.5, "10", True])
def test_limit_must_be_a_non_negative_int(limit: object) -> None:
    with pytest.raises(ValueError, match="limit"):
        expand("a", limit=limit)  # type: ignore[arg-type]


def test_limit_refused_up_front_without_spending_memory() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(HostlistSyntaxError) as info:
            expand("n[0-99999999999],m[1-10000000000]")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.position == 0
    assert "expands to 110000000000 hosts, more than the limit of 1000000" in info.value.reason
    assert peak < 100_000  # bytes: nothing was expanded


def test_limit_refused_before_anything_is_made_even_if_the_start_is_fine() -> None:
    """The refusal comes from the call itself: no name of the (valid) first items is ever produced."""
    with pytest.raises(HostlistSyntaxError, match="more than the limit"):
        expand("a,b,c,n[1-9999999]")
    with pytest.raises(HostlistSyntaxError, match="runs backwards"):
        expand("a,b,c,n[2-1]")


def test_astronomical_counts_stay_cheap() -> None:
    assert count("n[0-99999999999]") == 100_000_000_000
    assert count("n[0-18446744073709551615]") == 2**64
    assert count("n" + "[1-2]" * 20_000) == 2**20_000
    with pytest.raises(HostlistSyntaxError, match=r"expands to about 10\*\*6020 hosts"):
        expand("n" + "[1-2]" * 20_000)
    many_items = ",".join(f"n{i}" for i in range(100_000))
    assert count(many_items) == 100_000
    many_ranges = "n[" + ",".join(str(i) for i in range(100_000)) + "]"
    assert count(many_ranges) == 100_000
    assert first(many_ranges) == "n0"


@pytest.mark.parametrize("hostlist", ["n[" + "0" * 100_000 + "-100]", "n[0-100]" + "x" * 100_000])
def test_hostile_padding_or_suffix_costs_only_the_names_themselves(hostlist: str) -> None:
    """No cached 1000-entry table of 100 kB strings: memory stays near one name at a time."""
    tracemalloc.start()
    try:
        hosts = sum(1 for _ in expand(hostlist))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert hosts == 101
    assert peak < 5_000_000


def test_expand_is_lazy() -> None:
    hosts = expand("n[1-1000000]")
    assert next(hosts) == "n1"
    assert next(hosts) == "n2"
    assert list(itertools.islice(hosts, 3)) == ["n3", "n4", "n5"]


# -------------------------------------------------------------------------------------------- compress

COMPRESSIONS = [
    ([], ""),
    (["a"], "a"),
    (["n5"], "n5"),
    (["n1", "n2", "n3", "n4"], "n[1-4]"),
    (["ci1", "ci2", "ci3", "ci4"], "ci[1-4]"),
    (["n001", "n002", "n003", "n007"], "n[001-003,007]"),
    (["n001", "n002", "n003", "n007", "login", "n008"], "n[001-003,007],login,n008"),
    (["a1", "b2"], "a1,b2"),
    (["n1", "n1", "n2"], "n[1,1-2]"),  # as scontrol show hostlist
    (["n3", "n2", "n1"], "n[3,2,1]"),
    (["n9", "n10", "n11"], "n[9-11]"),
    (["n09", "n10"], "n[09-10]"),
    (["n009", "n10"], "n[009,10]"),
    (["n10", "n011"], "n[10,011]"),
    (["n1", "n2", "n3", "n5", "n01", "n02", "n4"], "n[1-3,5,01-02,4]"),
    (["123", "124"], "[123-124]"),
    (["10.1.2.3", "10.1.2.4"], "10.1.2.[3-4]"),
    (["a1b2", "a1b3", "a2b2", "a2b3"], "a1b[2-3],a2b[2-3]"),
    (["n1-ib", "n2-ib", "n3"], "n1-ib,n2-ib,n3"),
    (["a", "b", "a"], "a,b,a"),
    (["n1", "m1", "n2"], "n1,m1,n2"),
    (["n", "n1", "n2"], "n,n[1-2]"),
    (["n0", "n1"], "n[0-1]"),
    (["n00", "n01"], "n[00-01]"),
    (["n99999999999999999999", "n1"], "n99999999999999999999,n1"),  # above 2**64-1: kept as it is
    (["n18446744073709551614", "n18446744073709551615"], "n[18446744073709551614-18446744073709551615]"),
    (["n%d{}1", "n%d{}2"], "n%d{}[1-2]"),
]


@pytest.mark.parametrize(("hosts", "hostlist"), COMPRESSIONS)
def test_compress(hosts: list[str], hostlist: str) -> None:
    assert compress(hosts) == hostlist
    assert list(expand(hostlist)) == hosts
    assert compress(iter(hosts)) == hostlist  # any iterable


def test_compress_a_million() -> None:
    assert compress(f"n{i:07d}" for i in range(1, 1_000_001)) == "n[0000001-1000000]"
    assert compress(expand("rack[1-3]-node[0001-1000]")) == (
        "rack1-node[0001-1000],rack2-node[0001-1000],rack3-node[0001-1000]"
    )


@pytest.mark.parametrize("bad", ["", "a[1", "a]", "a,b", "a b", "a\tb", "a\n", " a", "a\u00a0"])
def test_compress_refuses_names_a_hostlist_cannot_hold(bad: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        compress(["ok1", "ok2", bad])


def test_compress_refuses_non_str() -> None:
    with pytest.raises(TypeError, match="int"):
        compress(["n1", 2])  # type: ignore[list-item]


# ------------------------------------------------------------------------------------------ properties
#
# A reference expander written straight from the grammar and the order rule, with no speed tricks,
# to check the chunked/batched generator against.


def reference_expand(hostlist: str) -> list[str]:
    hosts: list[str] = []
    for item in re.split(r"[, \t\n]+(?![^\[]*\])", hostlist):
        if not item:
            continue
        texts = re.split(r"\[[^\]]*\]", item)
        groups = []
        for body in re.findall(r"\[([^\]]*)\]", item):
            values = []
            for part in body.split(","):
                low, _, high = part.partition("-")
                values += [str(i).zfill(len(low)) for i in range(int(low), int(high or low) + 1)]
            groups.append(values)
        if not groups:
            hosts.append(item)
            continue
        # last group fastest, then the first, ..., the second-to-last slowest
        for outer in itertools.product(*reversed(groups[:-1])):
            chosen = list(reversed(outer))
            for value in groups[-1]:
                pieces = [texts[0]]
                for text, picked in zip(texts[1:], [*chosen, value], strict=True):
                    pieces += [picked, text]
                hosts.append("".join(pieces))
    return hosts


TEXT_ALPHABET = "abnxz-._0123456789"
texts = st.text(alphabet=TEXT_ALPHABET, max_size=4)
odd_texts = st.text(
    alphabet=st.characters(blacklist_categories=["Cs", "Zs", "Zl", "Zp", "Cc"], blacklist_characters="[],"),
    max_size=3,
)


@st.composite
def ranges(draw: st.DrawFn, max_length: int = 12, max_start: int = 1200) -> str:
    start = draw(st.one_of(st.integers(0, min(max_start, 1100)), st.integers(0, max_start)))
    width = draw(st.integers(1, 7))
    low = str(start).zfill(width)
    if draw(st.booleans()):
        return low
    high = start + draw(st.integers(0, max_length))
    return f"{low}-{str(high).zfill(draw(st.integers(1, 5)))}"


@st.composite
def items(draw: st.DrawFn, suffix: bool = True, text: st.SearchStrategy[str] = texts) -> str:
    groups = draw(st.integers(0, 3))
    pieces = [draw(text)]
    for index in range(groups):
        pieces.append("[" + ",".join(draw(st.lists(ranges(), min_size=1, max_size=3))) + "]")
        pieces.append(draw(text) if suffix or index < groups - 1 else "")
    item = "".join(pieces)
    return item or "h"


@st.composite
def hostlists(draw: st.DrawFn, suffix: bool = True, text: st.SearchStrategy[str] = texts, newline: bool = True) -> str:
    """Valid hostlist strings: 1-5 items, any separators, sometimes leading or trailing ones."""
    separators = [",", ",", ",", ", ", " ,", " ", ",,", "\t", *(["\n", ",\n"] if newline else [])]
    hostlist = draw(st.sampled_from(["", "", " ", ","]))
    for index in range(draw(st.integers(1, 5))):
        if index:
            hostlist += draw(st.sampled_from(separators))
        hostlist += draw(items(suffix, text))
    return hostlist + draw(st.sampled_from(["", "", ",", "\n" if newline else " "]))


@st.composite
def host_lists(draw: st.DrawFn, text: st.SearchStrategy[str] = texts) -> list[str]:
    """Lists of valid host names, with runs (the interesting case for compress) and odd names."""
    hosts: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["run", "run", "name", "repeat"]))
        if kind == "run":
            prefix, suffix = draw(text), draw(st.sampled_from(["", "", "-ib", "x1"]))
            start, width = draw(st.integers(0, 1100)), draw(st.integers(1, 4))
            step = draw(st.sampled_from([1, 1, 1, 2, -1]))
            length = draw(st.integers(1, 15))
            numbers = [start + step * i for i in range(length) if start + step * i >= 0]
            hosts += [f"{prefix}{str(n).zfill(width)}{suffix}" for n in numbers]
        elif kind == "repeat" and hosts:
            hosts.append(hosts[draw(st.integers(0, len(hosts) - 1))])
        else:
            hosts.append(draw(text) + draw(st.sampled_from(["", "7", "007", "99999999999999999999"])) or "h")
    return [host if host else "h" for host in hosts]


@given(host_lists())
def test_property_compress_round_trips(hosts: list[str]) -> None:
    assert list(expand(compress(hosts))) == hosts


@given(host_lists(text=odd_texts))
def test_property_compress_round_trips_odd_characters(hosts: list[str]) -> None:
    assert list(expand(compress(hosts))) == hosts


@given(hostlists())
def test_property_count_first_and_reference(hostlist: str) -> None:
    hosts = list(expand(hostlist))
    assert hosts == reference_expand(hostlist)
    assert count(hostlist) == len(hosts)
    assert first(hostlist) == next(expand(hostlist))


@given(hostlists(text=odd_texts))
def test_property_odd_characters(hostlist: str) -> None:
    hosts = list(expand(hostlist))
    assert count(hostlist) == len(hosts)
    assert first(hostlist) == hosts[0]


@given(hostlists())
def test_property_compress_of_expand_is_equivalent(hostlist: str) -> None:
    hosts = list(expand(hostlist))
    compact = compress(hosts)
    assert list(expand(compact)) == hosts
    assert count(compact) == len(hosts)


@given(st.lists(ranges(max_length=4000, max_start=1_000_000), min_size=1, max_size=2), texts, texts)
@settings(max_examples=150)
def test_property_long_ranges_match_the_reference(parts: list[str], before: str, after: str) -> None:
    hostlist = f"{before}[{','.join(parts)}]{after}"
    assert list(expand(hostlist)) == reference_expand(hostlist)


@given(st.text(alphabet="n1[]-, 0\t", max_size=12))
def test_property_garbage_either_parses_or_raises_a_syntax_error(hostlist: str) -> None:
    try:
        total = count(hostlist)
    except HostlistSyntaxError:
        with pytest.raises(HostlistSyntaxError) as info:
            expand(hostlist)
        assert 0 <= info.value.position <= len(hostlist)
    else:
        assert len(list(expand(hostlist))) == total


# ------------------------------------------------------------------------------------ real scontrol

SLURM_NEWLINE_VERSION = (23, 2, 0)  # "Treat newlines as a separator in string passed to hostlist_create()"
SLURM_SUFFIX_VERSION = (23, 2, 5)  # "Allow for a shared suffix to be used with the hostlist format"


class Scontrol:
    """``scontrol show hostnames`` without daemons: a two-line slurm.conf and a clean environment."""

    def __init__(self, path: str, conf: Path) -> None:
        self.path = path
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(conf)}
        output = self.run("--version").stdout  # e.g. "slurm-wlm 22.05.8" or "slurm 23.11.4"
        found = re.search(r"(\d+)\.(\d+)\.(\d+)", output)
        assert found, output
        self.version = tuple(int(part) for part in found.groups())

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.path, *args], env=self.env, capture_output=True, text=True, timeout=60, check=False)

    def hostnames(self, hostlist: str) -> list[str] | None:
        """The hosts, or None if scontrol calls the hostlist invalid."""
        result = self.run("--", "show", "hostnames", hostlist)  # "--": a hostlist may start with "-"
        if "Invalid hostlist" in result.stderr or "Invalid hostlist" in result.stdout:
            return None
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()

    @property
    def has_suffixes(self) -> bool:
        return self.version >= SLURM_SUFFIX_VERSION

    @property
    def newline_separates(self) -> bool:
        return self.version >= SLURM_NEWLINE_VERSION


@pytest.fixture(scope="module")
def scontrol(tmp_path_factory: pytest.TempPathFactory) -> Scontrol:
    path = shutil.which("scontrol")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("scontrol is not on PATH, and CI is set: the SLURM comparison must run in CI")
        pytest.skip("scontrol is not on PATH")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\n")
    return Scontrol(path, conf)


slurm_settings = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.slurm
@slurm_settings
@given(data=st.data())
def test_slurm_expand_count_first_match_scontrol(scontrol: Scontrol, data: st.DataObject) -> None:
    hostlist = data.draw(hostlists(suffix=scontrol.has_suffixes, newline=scontrol.newline_separates), label="hostlist")
    expected = scontrol.hostnames(hostlist)
    assert expected is not None, f"scontrol refused {hostlist!r}"
    assert list(expand(hostlist)) == expected
    assert count(hostlist) == len(expected)
    assert first(hostlist) == expected[0]


@pytest.mark.slurm
@slurm_settings
@given(data=st.data())
def test_slurm_compress_round_trips_through_scontrol(scontrol: Scontrol, data: st.DataObject) -> None:
    hosts = data.draw(host_lists().filter(bool).map(lambda h: [n for n in h if len(n) < 20] or ["h"]), label="hosts")
    assert scontrol.hostnames(compress(hosts)) == hosts


@pytest.mark.slurm
@pytest.mark.parametrize(
    "hostlist",
    ["n[3-1]", "n[]", "n[1,]", "n[,1]", "n[a-c]", "n[1-3-5]", "n[-3]", "n[1x3]", "n[1-[2-3]]", "n[1-3]]", "n[1-3 ]"],
)
def test_slurm_rejects_what_we_reject(scontrol: Scontrol, hostlist: str) -> None:
    assert scontrol.hostnames(hostlist) is None
    with pytest.raises(HostlistSyntaxError):
        count(hostlist)


def has_suffix(hostlist: str) -> bool:
    """Whether some item has text after its last group (SLURM >= 23.02.5 only)."""
    return re.search(r"\][^\[\],\s]+(?=$|[, \t\n])", hostlist) is not None


@pytest.mark.slurm
@pytest.mark.parametrize(("hostlist", "hosts"), EXPANSIONS)
def test_slurm_literal_cases(scontrol: Scontrol, hostlist: str, hosts: list[str]) -> None:
    """Every literal case above is what scontrol says, except the documented deviations."""
    got = scontrol.hostnames(hostlist)
    if hostlist == "n99999999999999999999":
        assert got == ["n18446744073709551615"]  # scontrol clamps; we keep the name
    elif not hostlist.strip(", \n\t"):
        pytest.skip("an empty argument makes scontrol read SLURM_JOB_NODELIST")
    elif "\n" in hostlist and not scontrol.newline_separates:
        pytest.skip("before SLURM 23.02 a newline is part of a name, not a separator")
    elif has_suffix(hostlist) and not scontrol.has_suffixes:
        assert got is None  # a suffix after the last bracket: too old a SLURM
    else:
        assert got == hosts


@pytest.mark.slurm
@pytest.mark.parametrize(("hosts", "hostlist"), [case for case in COMPRESSIONS if case[0]])
def test_slurm_compress_matches_scontrol_show_hostlist(scontrol: Scontrol, hosts: list[str], hostlist: str) -> None:
    if hostlist.endswith("18446744073709551615]"):
        pytest.skip("scontrol 22.05 crashes (SIGSEGV) expanding a range that ends at 2**64-1")
    result = scontrol.run("--", "show", "hostlist", ",".join(hosts))
    assert scontrol.hostnames(hostlist) == [
        "n18446744073709551615" if host == "n99999999999999999999" else host for host in hosts
    ]
    if "99999999999999999999" not in hostlist:
        assert result.stdout.strip() == hostlist


def test_reference_expander_agrees_on_the_literal_cases() -> None:
    for hostlist, hosts in EXPANSIONS:
        assert reference_expand(hostlist) == hosts, hostlist
