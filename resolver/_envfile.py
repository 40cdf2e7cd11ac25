"""`--env-file`: a captured environment read back into a mapping, for resolving it offline."""

from __future__ import annotations

import shlex

from resolver.errors import InvalidVariable, TopologyError

__all__ = ["parse_env_file"]

LIMIT = 64 * 1024 * 1024  # bytes: far above any real environment, well below what would exhaust memory


def parse_env_file(path: str) -> dict[str, str]:
    """A captured environment: NUL-separated `KEY=VALUE` entries (/proc/PID/environ), or lines:
    `KEY=VALUE` (`env` output), with blank lines, `#` comments, an `export ` prefix, and values
    quoted as `--format env` writes them (a quoted value may span lines)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(LIMIT + 1)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError(f"--env-file {path!r} cannot be read: {exc}") from None
    if len(data) > LIMIT:
        raise InvalidVariable("--env-file", path, "a captured environment of at most 64 MiB")
    if "\0" in text:
        return _parse_nul(path, text)
    return _parse_lines(path, text)


def _valid_key(key: str) -> bool:
    return bool(key) and key.isascii() and key.replace("_", "a").isalnum() and not key[0].isdigit()


def _parse_nul(path: str, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for number, entry in enumerate(text.split("\0"), 1):
        if not entry:
            continue
        key, sep, value = entry.partition("=")
        if not sep or not key or "\n" in key:
            raise InvalidVariable(f"{path}: entry {number}", entry, "a NUL-separated KEY=VALUE entry")
        out[key] = value
    return out


def _parse_lines(path: str, text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = text.split("\n")
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[7:].lstrip()
        key, sep, value = stripped.partition("=")
        if not sep or not _valid_key(key):
            raise InvalidVariable(f"{path}:{number}", line, "a KEY=VALUE line")
        if value[:1] in ("'", '"'):  # quoted as a shell word (--format env): it may go on over lines
            first = number
            while True:
                try:
                    words = shlex.split(value)
                except ValueError:  # an unterminated quote: the value continues on the next line
                    if number >= len(lines):
                        raise InvalidVariable(f"{path}:{first}", line, "a closing quote") from None
                    value += "\n" + lines[number]
                    number += 1
                    continue
                break
            if len(words) != 1:
                raise InvalidVariable(f"{path}:{first}", line, "one shell word after '=', as --format env writes")
            value = words[0]
        out[key] = value
    return out
