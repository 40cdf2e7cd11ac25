"""SLURM hostlists: ``n[001-003,007],gpu[1-2]-ib`` <-> ``n001, n002, n003, n007, gpu1-ib, gpu2-ib``.

The grammar is the one ``scontrol show hostnames`` accepts, as checked against slurm-wlm 22.05.8 and
the SchedMD history for the two later changes (newline as a separator since 23.02.0, a suffix after
the last bracket since 23.02.5), written down so that every refusal can point at a column::

    hostlist  = SEP* [ item { SEP+ item } SEP* ]
    item      = part { part }                     (* at least one part *)
    part      = TEXT | group
    group     = "[" range { "," range } "]"
    range     = NUMBER [ "-" NUMBER ]             (* start <= end *)
    SEP       = "," | " " | TAB | LF
    TEXT      = any characters except "[", "]", "," and whitespace, one or more
    NUMBER    = ASCII digits "0"-"9", one or more (* value at most 2**64 - 1 *)

Meaning:

- An item without a group is one host, spelled exactly as written (``n01`` stays ``n01``).
- A range ``lo-hi`` stands for the numbers lo..hi; a single number for itself. Commas inside
  brackets separate ranges, commas outside separate items. Ranges and items keep their order and
  their duplicates (``n[1-3,2]`` is n1 n2 n3 n2): nothing is sorted or made unique.
- Zero padding: the *start* of a range sets the width and every number is zero-padded to it; a
  number that needs more digits simply gets them. So ``n[01-10]`` is n01..n10, ``n[001-1000]`` is
  n001..n999, n1000, and ``n[1-010]`` is n1..n10 (the end's zeros are ignored), as in scontrol.
- Text may stand before, between and after groups: ``10.1.2.[3-5]``, ``rack[1-2]-node[01-04]``,
  ``n[1-2]-ib``. Several groups in one item form a cartesian product in SLURM's order, which is
  not the odometer order: the *last* group varies fastest, then the first, the second, ... and the
  second-to-last slowest. ``a[1-2]b[3-4]c[5-6]`` is a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6
  a2b4c5 a2b4c6 (SLURM expands the prefix's brackets from the right, recursively). With one or two
  groups this is the usual order: ``rack[1-2]-node[01-02]`` is rack1-node01 rack1-node02
  rack2-node01 rack2-node02.
- A run of separators is one separator, so ``a, b``, ``a ,b``, ``a b``, ``a,,b``, a leading or
  trailing comma and a trailing newline are all fine; an empty hostlist is zero hosts.

Where this module and scontrol 22.05.8 part ways, on purpose (scontrol's answer, then ours):

- ``n[1-2]-ib``: "Invalid hostlist" (SLURM >= 23.02.5: n1-ib n2-ib). Here: n1-ib n2-ib.
- ``a<LF>b``: one name containing the newline (SLURM >= 23.02.0: a b). Here: a b.
- ``n[1-]``: n1. ``n[+1-3]``, ``n[ 1-3]``: n01 n02 n03 (the sign or space counts toward the width).
  ``n[1, 3]``: n1 n03. ``n[1-3``: "n]". ``n[[1-3]``: n[1 n[2 n[3. Here: all syntax errors.
- ``n1-2]``, ``n]1``: the names as written. Here: syntax error (unmatched "]").
- ``a<CR>b``, ``a<VT>b``, ``a<FF>b``, other Unicode whitespace: one name containing it. Here: syntax
  error, since only ",", space, tab and newline separate.
- ``n99999999999999999999`` (a name whose number exceeds 2**64-1): n18446744073709551615. Here:
  the name as written. Inside brackets such a number is clamped too; here it is a syntax error.
- ``n[1-100000]``: "Too many hosts in range" (one range holds at most 65536 hosts). Here: any
  size, up to ``limit`` hosts in total for :func:`expand` and unbounded for :func:`count`.
- ``n[18446744073709551614-18446744073709551615]``: scontrol crashes (SIGSEGV). Here: two hosts.
- Where scontrol says "Invalid hostlist" (``n[3-1]``, ``n[]``, ``n[1,]``, ``n[a-c]``,
  ``n[1-3-5]``, ``n[-3]``, ``n[1x3]``, ``n[1-3]]``, ``n[1-3 ]``), so do we, with the caret at the
  fault.

Hostlist functions (``{...}``, expanded by slurmctld in recent SLURM) are not supported: braces are
ordinary characters of a name here.

Counting is arithmetic (sums and products of range lengths), so :func:`count` and the limit check
of :func:`expand` cost time linear in the length of the string, never in the number of hosts.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

from resolver.errors import HostlistSyntaxError, shown
from resolver.errors import count as count_text

__all__ = ["DEFAULT_LIMIT", "compress", "count", "expand", "first"]

DEFAULT_LIMIT = 1_000_000
"""Most hosts :func:`expand` hands out unless told otherwise: larger lists are refused up front."""

_MAX_NUMBER = 2**64 - 1  # SLURM keeps range bounds in an unsigned long
_MAX_NUMBER_DIGITS = len(str(_MAX_NUMBER))
_DIGITS = "0123456789"
_SEPARATORS = ", \t\n"

_SEPARATOR_RUN = re.compile(r"[, \t\n]+")
_TEXT = re.compile(r"[^\[\],\s]+")  # \s on str patterns is exactly str.isspace()
_NUMBER = re.compile(r"[0-9]+")
_NOT_A_NAME = r"[\[\],\s]"  # compress() only: compiled by `re` when first searched

# A number range is one (start, end, width) triple; a group is the ranges between one pair of brackets.
_Range = tuple[int, int, int]
_Group = tuple[_Range, ...]


class _Item:
    """One top-level item: ``texts[0] group[0] texts[1] ... group[-1] texts[-1]``.

    A plain slotted class: the parser's private value needs no tuple behaviour, and a NamedTuple
    builds its class with `exec` at import (SLURM's resolve imports this module).
    """

    __slots__ = ("groups", "size", "sizes", "texts")

    def __init__(self, texts: tuple[str, ...], groups: tuple[_Group, ...], sizes: tuple[int, ...], size: int) -> None:
        self.texts = texts  # always one more than groups; pieces may be ""
        self.groups = groups
        self.sizes = sizes  # number of values in each group
        self.size = size  # number of hosts: the product of sizes


# --------------------------------------------------------------------------------------------- parser


class _Parser:
    """Recursive descent over the grammar in the module docstring; one method per rule."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"a hostlist is a str, not {type(text).__name__}")
        self.text = text
        self.pos = 0

    def error(self, reason: str, position: int | None = None) -> HostlistSyntaxError:
        return HostlistSyntaxError(self.text, self.pos if position is None else position, reason)

    def skip_separators(self) -> bool:
        """Skip SEP*; true if an item follows."""
        run = _SEPARATOR_RUN.match(self.text, self.pos)
        if run:
            self.pos = run.end()
        return self.pos < len(self.text)

    def items(self) -> Iterator[_Item]:
        """hostlist = SEP* [ item { SEP+ item } SEP* ]"""
        while self.skip_separators():
            yield self.item()

    def item(self) -> _Item:
        """item = part { part }, up to the next SEP or the end."""
        text, end = self.text, len(self.text)
        texts: list[str] = []
        groups: list[_Group] = []
        sizes: list[int] = []
        piece = ""
        while self.pos < end:
            match = _TEXT.match(text, self.pos)
            if match:
                piece = match.group()
                self.pos = match.end()
                if self.pos == end:
                    break
            char = text[self.pos]
            if char == "[":
                texts.append(piece)
                piece = ""
                group, size = self.group()
                groups.append(group)
                sizes.append(size)
            elif char in _SEPARATORS:
                break
            elif char == "]":
                raise self.error("unmatched ']'")
            else:
                raise self.error(f"whitespace {char!r} inside a name (only ',', space, tab and newline separate)")
        texts.append(piece)
        return _Item(tuple(texts), tuple(groups), tuple(sizes), _product(sizes))

    def group(self) -> tuple[_Group, int]:
        """group = "[" range { "," range } "]"; self.pos is at the "["."""
        opened = self.pos
        self.pos += 1
        ranges: list[_Range] = []
        size = 0
        while True:
            start, end, width = self.range(opened)
            ranges.append((start, end, width))
            size += end - start + 1
            char = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if char == "]":
                return tuple(ranges), size
            if char != ",":
                self.pos -= 1
                raise self.unexpected(opened, "',' or ']'")

    def range(self, opened: int) -> _Range:
        """range = NUMBER [ "-" NUMBER ]"""
        begin = self.pos
        start, width = self.number(opened)
        end = start
        if self.text.startswith("-", self.pos):
            self.pos += 1
            end, _ = self.number(opened, after="'-'")
            if end < start:
                raise self.error(f"range {self.text[begin : self.pos]} runs backwards", begin)
        return start, end, width

    def number(self, opened: int, after: str = "") -> tuple[int, int]:
        """NUMBER, as (value, width)."""
        match = _NUMBER.match(self.text, self.pos)
        if not match:
            raise self.unexpected(opened, f"a number after {after}" if after else "a number")
        digits = match.group()
        significant = digits.lstrip("0")
        # compare lengths first: int() of a 10**5-digit string would cost (and is refused by) Python
        if len(significant) > _MAX_NUMBER_DIGITS or int(significant or "0") > _MAX_NUMBER:
            raise self.error(f"number {shown(digits)} is larger than 2**64-1")
        self.pos = match.end()
        return int(significant or "0"), len(digits)

    def unexpected(self, opened: int, expected: str) -> HostlistSyntaxError:
        """The error for a character inside brackets that is not what the grammar allows."""
        char = self.text[self.pos : self.pos + 1]
        if not char:
            return self.error("'[' is never closed", opened)
        if char == "[":
            return self.error("brackets do not nest")
        if char.isspace():
            return self.error(f"whitespace {char!r} inside brackets")
        if char == "]" and self.pos == opened + 1:
            return self.error("empty brackets")
        return self.error(f"expected {expected}, found {char!r}")


def _product(sizes: Sequence[int]) -> int:
    """Product of the group sizes; pairwise, so that 10**5 groups stay fast (no quadratic bignum work)."""
    if len(sizes) <= 8:
        return math.prod(sizes)
    values = list(sizes)
    while len(values) > 1:
        paired = [a * b for a, b in zip(values[::2], values[1::2], strict=False)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
    return values[0]


# ------------------------------------------------------------------------------------------ public API


def count(hostlist: str) -> int:
    """How many hosts ``hostlist`` names, without expanding it (time and memory linear in its length).

    >>> count("rack[1-1000]-node[0001-1000]")
    1000000

    Raises HostlistSyntaxError if any part of the string breaks the grammar.
    """
    return sum(item.size for item in _Parser(hostlist).items())


def first(hostlist: str) -> str:
    """The first host of ``hostlist``, reading only its first item.

    >>> first("n[0000001-1000000],login1")
    'n0000001'

    Only the first item is parsed: a syntax error in a later item is *not* reported (``expand`` or
    ``count`` would report it). Raises HostlistSyntaxError if the first item is malformed or if
    the hostlist names no host at all.
    """
    parser = _Parser(hostlist)
    if not parser.skip_separators():
        raise parser.error("empty hostlist: it names no host", 0)
    item = parser.item()
    pieces = [item.texts[0]]
    for group, text in zip(item.groups, item.texts[1:], strict=True):
        start, _, width = group[0]
        pieces += (str(start).zfill(width), text)
    return "".join(pieces)


def expand(hostlist: str, *, limit: int = DEFAULT_LIMIT) -> Iterator[str]:
    """The host names of ``hostlist``, lazily, in SLURM's order (duplicates kept).

    >>> list(expand("n[01-02],10.1.2.[3-4],gpu[1-2]-ib"))
    ['n01', 'n02', '10.1.2.3', '10.1.2.4', 'gpu1-ib', 'gpu2-ib']

    The whole string is parsed and its hosts counted when ``expand`` is called, before the iterator
    is returned: a syntax error anywhere, or more than ``limit`` hosts, raises HostlistSyntaxError
    right away and no name is ever produced. The names themselves are made as they are consumed.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ValueError(f"limit must be a non-negative int, not {limit!r}")
    items = list(_Parser(hostlist).items())
    total = sum(item.size for item in items)
    if total > limit:
        raise HostlistSyntaxError(hostlist, 0, f"expands to {count_text(total)} hosts, more than the limit of {limit}")
    return itertools.chain.from_iterable(_pieces(items))


def compress(hosts: Iterable[str]) -> str:
    """The compact hostlist of ``hosts``, in the style of ``scontrol show hostlist``.

    >>> compress(["n001", "n002", "n003", "n007", "login", "n008"])
    'n[001-003,007],login,n008'

    Order and duplicates are kept, so ``list(expand(compress(hosts))) == list(hosts)``: only
    neighbouring names that share the text before their trailing number go into one bracket, and
    only numbers that follow each other with the same zero padding become one range. Names with a
    text after the number (``n1-ib``) are written out one by one, since SLURM before 23.02.5 cannot
    read ``n[1-2]-ib``. Linear time.

    Raises ValueError for an empty name or one containing "[", "]", "," or whitespace, and
    TypeError for something that is not a str.
    """
    out: list[str] = []
    is_open = False  # whether a bracket is open: prefix[ranges..., start-last
    prefix = ""  # text before the numbers of the open bracket
    ranges: list[str] = []  # finished ranges of the open bracket
    start = ""  # digits of the open range's first number; its length is the range's width
    last = 0  # value of the open range's last number
    expected: str | None = None  # the one name that would extend the open range
    for name in hosts:
        if name == expected and type(name) is str:  # the common case, kept cheap
            last += 1
            expected = prefix + str(last + 1).zfill(len(start)) if last < _MAX_NUMBER else None
            continue
        stem, digits, value = _split(name)
        if is_open:
            ranges.append(_range_text(start, last))
            if stem != prefix or value is None:
                out.append(_bracket_text(prefix, ranges))
                ranges = []
                is_open = False
        if value is None:  # no number, or one SLURM could not read: the name as it is
            out.append(name)
            expected = None
            continue
        is_open, prefix, start, last = True, stem, digits, value
        expected = prefix + str(last + 1).zfill(len(start)) if last < _MAX_NUMBER else None
    if is_open:
        ranges.append(_range_text(start, last))
        out.append(_bracket_text(prefix, ranges))
    return ",".join(out)


def _split(name: str) -> tuple[str, str, int | None]:
    """A host name as (text before its trailing number, the number's digits, their value or None)."""
    if not isinstance(name, str):
        raise TypeError(f"host names are str, not {type(name).__name__}: {shown(name)}")
    if not name or re.search(_NOT_A_NAME, name):
        raise ValueError(
            f"host name {shown(name)} cannot be written in a hostlist: "
            "it must be non-empty, without '[', ']', ',' or whitespace"
        )
    stem = name.rstrip(_DIGITS)
    digits = name[len(stem) :]
    if not digits or len(digits) > _MAX_NUMBER_DIGITS or int(digits) > _MAX_NUMBER:
        return stem, digits, None
    return stem, digits, int(digits)


def _range_text(start: str, last: int) -> str:
    if int(start) == last:
        return start
    return f"{start}-{str(last).zfill(len(start))}"


def _bracket_text(prefix: str, ranges: list[str]) -> str:
    if len(ranges) == 1 and "-" not in ranges[0]:
        return prefix + ranges[0]  # a single host needs no brackets
    return f"{prefix}[{','.join(ranges)}]"


# --------------------------------------------------------------------------------------- generation
#
# Names are made by C-level iterators (map/starmap over operator functions) chained together; Python
# code runs once per range, per prefix or per thousand names, never per name. A range is cut at the
# multiples of 1000: within such a chunk every name is one head ("n0001") plus one of 1000 tails
# ("000-ib".."999-ib") that are formatted once and cached, and joining two strings is much cheaper
# than formatting a number.

_CHUNK = 1000
_TABLE_FROM = 64  # shorter ranges are formatted number by number (no table for an odd suffix)
_TABLE_MAX_SUFFIX = 64  # tables are cached: none for a hostile 100 kB suffix or zero padding
_SMALL_LAST_GROUP = 4096  # a last group this small is formatted once and reused for every prefix
_BATCH = 4096  # names made per step from a batch of prefixes times a small last group
_concat = cast("Callable[[str, str], str]", operator.concat)  # typeshed types it for sequences only


@functools.lru_cache(maxsize=32)
def _table(width: int, suffix: str) -> tuple[str, ...]:
    """``"%0{width}d{suffix}" % low`` for low in 0..999."""
    return tuple(map(operator.mod, itertools.repeat(f"%0{width}d{_escape(suffix)}"), range(_CHUNK)))


def _escape(text: str) -> str:
    """``text`` inside a %-format."""
    return text.replace("%", "%%")


def _escape_braces(text: str) -> str:
    """``text`` inside a str.format template."""
    return text.replace("{", "{{").replace("}", "}}")


def _pieces(items: Iterable[_Item]) -> Iterator[Iterable[str]]:
    """Iterables whose concatenation is the hosts of ``items``."""
    literals: list[str] = []  # neighbouring single names travel together
    for item in items:
        if not item.groups:
            literals.append(item.texts[0])
            continue
        if literals:
            yield literals
            literals = []
        if len(item.groups) == 1:
            head, suffix = item.texts
            for start, end, width in item.groups[0]:
                yield from _range_pieces(head, start, end, width, suffix)
        else:
            yield from _product_pieces(item)
    if literals:
        yield literals


def _heads(item: _Item) -> Iterator[str]:
    """Everything before the last group, for each combination of the other groups, in SLURM's order."""
    texts, groups = item.texts, item.groups
    if len(groups) == 2:
        return _group_names(texts[0], groups[0], texts[1])
    # SLURM's order: groups[0] fastest, groups[-2] slowest. itertools.product varies its last argument
    # fastest, so it gets groups[-2], ..., groups[0], and groups[i] is combination[last - i].
    outer = [list(_group_names("", group, "")) for group in reversed(groups[:-1])]
    last = len(outer) - 1
    template = _escape_braces(texts[0])
    for index, text in enumerate(texts[1:-1]):
        template += f"{{{last - index}}}{_escape_braces(text)}"
    return itertools.starmap(template.format, itertools.product(*outer))


def _product_pieces(item: _Item) -> Iterator[Iterable[str]]:
    """An item with several groups: each head, followed by each value of the last group (fastest)."""
    suffix, last = item.texts[-1], item.groups[-1]
    heads = _heads(item)
    if item.sizes[-1] > _SMALL_LAST_GROUP:
        for head in heads:
            for start, end, width in last:
                yield from _range_pieces(head, start, end, width, suffix)
        return
    tails = list(_group_names("", last, suffix))
    batch = max(1, _BATCH // len(tails))
    while chunk := list(itertools.islice(heads, batch)):
        yield itertools.starmap(_concat, itertools.product(chunk, tails))


def _group_names(head: str, group: _Group, suffix: str) -> Iterator[str]:
    """``head + number + suffix`` for each number of a group, zero-padded, in order."""
    return itertools.chain.from_iterable(
        itertools.chain.from_iterable(_range_pieces(head, start, end, width, suffix) for start, end, width in group)
    )


def _range_pieces(head: str, start: int, end: int, width: int, suffix: str) -> Iterator[Iterable[str]]:
    """``head + number + suffix`` for number in start..end, zero-padded to ``width``."""
    if end - start < _TABLE_FROM or width > _MAX_NUMBER_DIGITS or len(suffix) > _TABLE_MAX_SUFFIX:
        template = f"{_escape(head)}%0{width}d{_escape(suffix)}"
        yield map(operator.mod, itertools.repeat(template), range(start, end + 1))
        return
    high, low = divmod(start, _CHUNK)
    last_high, last_low = divmod(end, _CHUNK)
    if high == 0:  # numbers below 1000: head + one of the table's entries, for any width
        table = _table(width, suffix)
        yield map(_concat, itertools.repeat(head), table[low : last_low + 1 if last_high == 0 else _CHUNK])
        high, low = 1, 0
    tails = _table(3, suffix)
    high_width = width - 3  # high * 1000 + low is written str(high).zfill(width - 3) + "%03d" % low
    for current in range(high, last_high + 1):
        stop = last_low + 1 if current == last_high else _CHUNK
        part = tails if low == 0 and stop == _CHUNK else tails[low:stop]
        yield map(_concat, itertools.repeat(head + str(current).zfill(high_width)), part)
        low = 0
