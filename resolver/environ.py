"""Typed readers over an environment mapping: the only way sources read variables.

Every reader names the variable in its error. Integers are ASCII digits only: `int()` would
accept signs, spaces, underscores and non-ASCII digits ("٣"), none of which a launcher writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from resolver.errors import InvalidVariable, MissingVariable

__all__ = [
    "ADDRESS_RE",
    "MAX_DIGITS",
    "Environ",
    "address",
    "check_address",
    "check_integer",
    "check_port",
    "integer",
    "optional_integer",
    "optional_text",
    "port",
    "present",
    "text",
]

Environ = Mapping[str, str]

MAX_DIGITS = 18  # any rank, size or job id fits; anything longer is garbage, refused before int()
_DIGITS = re.compile(f"[0-9]{{1,{MAX_DIGITS}}}")
# host names, IPv4, IPv6 (optionally bracketed, with a %zone): no spaces, quotes or shell syntax
ADDRESS_RE = re.compile(r"[A-Za-z0-9_.:%\[\]-]{1,255}")


def present(environ: Environ, *names: str) -> tuple[str, ...]:
    """The names among `names` that are set (to any value, even empty)."""
    return tuple(name for name in names if name in environ)


def text(environ: Environ, name: str, *, source: str | None = None, expected: str = "a value") -> str:
    """A required variable, as it is."""
    try:
        return environ[name]
    except KeyError:
        raise MissingVariable(name, expected, source=source) from None


def optional_text(environ: Environ, name: str) -> str | None:
    """A variable as it is, or None when it is not set."""
    return environ.get(name)


def check_integer(name: str, raw: str, minimum: int = 0, maximum: int | None = None, expected: str = "") -> int:
    """The value `raw` of variable `name` as a decimal integer in range, else InvalidVariable."""
    if not expected:
        expected = f"a decimal integer >= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
    if not _DIGITS.fullmatch(raw):
        raise InvalidVariable(name, raw, expected)
    value = int(raw)
    if value < minimum or (maximum is not None and value > maximum):
        raise InvalidVariable(name, raw, expected)
    return value


def integer(
    environ: Environ,
    name: str,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    source: str | None = None,
) -> int:
    """A required non-negative decimal integer."""
    raw = text(environ, name, source=source, expected=f"a decimal integer >= {minimum}")
    return check_integer(name, raw, minimum, maximum)


def optional_integer(environ: Environ, name: str, *, minimum: int = 0, maximum: int | None = None) -> int | None:
    """A decimal integer if the variable is set, else None. Set but malformed is an error."""
    raw = environ.get(name)
    if raw is None:
        return None
    return check_integer(name, raw, minimum, maximum)


def check_port(name: str, raw: str) -> int:
    """The value `raw` of variable `name` as a TCP port 1..65535, else InvalidVariable."""
    return check_integer(name, raw, 1, 65535, "a TCP port 1..65535")


def port(environ: Environ, name: str, *, source: str | None = None) -> int:
    """A required TCP port, 1..65535."""
    return check_port(name, text(environ, name, source=source, expected="a TCP port 1..65535"))


def check_address(name: str, raw: str) -> str:
    """The value `raw` of variable `name` if it is a host name or IP address, else InvalidVariable."""
    if not ADDRESS_RE.fullmatch(raw):
        raise InvalidVariable(name, raw, "a host name or IP address (letters, digits, '.', '-', '_', ':', '[]', '%')")
    return raw


def address(environ: Environ, name: str, *, source: str | None = None) -> str:
    """A required host name or IP address."""
    return check_address(name, text(environ, name, source=source, expected="a host name or IP address"))
