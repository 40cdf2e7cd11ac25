"""Coverage-guided fuzzing of the hostlist parser (atheris, libFuzzer).

    pip install atheris
    python fuzz/fuzz_hostlist.py -max_total_time=60        # any libFuzzer flags
    python fuzz/fuzz_hostlist.py -runs=2000                # a short run, as the tests do

Properties checked on every input: count/first/expand either agree or raise HostlistSyntaxError
(never another exception), expand refuses lists over its limit before producing a name, and
compress(expand(s)) expands back to the same names.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

with atheris.instrument_imports():
    from resolver import hostlist
    from resolver.errors import HostlistSyntaxError

LIMIT = 2000


def check(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(256)
    try:
        total = hostlist.count(text)
    except HostlistSyntaxError:
        return
    try:
        names = list(hostlist.expand(text, limit=LIMIT))
    except HostlistSyntaxError as exc:
        assert total > LIMIT, (text, exc)
        return
    assert len(names) == total, (text, total, len(names))
    if names:
        assert hostlist.first(text) == names[0], text
        try:
            packed = hostlist.compress(names)
        except ValueError:
            return  # a name compress cannot write (it holds a bracket, a comma or whitespace)
        assert list(hostlist.expand(packed, limit=LIMIT)) == names, (text, packed)


def main() -> None:
    atheris.Setup(sys.argv, check)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
