"""Typed readers over an environment mapping: the only way sources read variables.

Every reader names the variable in its error. Integers are ASCII digits only: `int()` would
accept signs, spaces, underscores and non-ASCII digits ("٣"), none of which a launcher writes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from resolver.errors import InvalidVariable, MissingVariable

__all__ = [
    "MAX_DIGITS",
    "Environ",
    "address",
    "check_address",
    "check_environ",
    "check_integer",
    "check_port",
    "integer",
    "is_address",
    "is_loopback",
    "optional_integer",
    "optional_text",
    "port",
    "present",
    "text",
]

Environ = Mapping[str, str]

MAX_DIGITS = 18  # any rank, size or job id fits; anything longer is garbage, refused before int()

# The patterns are compiled by `re` when first matched (its cache keeps them), so a process pays only
# for the kinds of value it checks: a torchrun worker given an IPv4 MASTER_ADDR compiles no host name.
#
# An address is a host name (RFC 1123: dot-separated labels of letters, digits and inner hyphens,
# each 1..63 characters, 253 in all), an IPv4 address in dotted-quad form, or an IPv6 address.
# A name whose labels are all digits is an IPv4 address or nothing ("1.2.3" and "999.1.1.1" are
# refused). IPv6 may come in brackets, as in a URL: check_address returns it without them. A zone
# id ("%eth0") is kept, and only on a link-local address (fe80::/10), the only kind that needs one.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = rf"{_OCTET}(?:\.{_OCTET}){{3}}"
_ZONE = r"[A-Za-z0-9_.-]{1,64}"
_ADDRESS_EXPECTED = (
    "a host name (RFC 1123 labels: letters, digits, inner '-', joined by '.'), an IPv4 address, "
    "or an IPv6 address (brackets allowed; a %zone only on a link-local fe80::/10 address)"
)


def check_environ(environ: object) -> None:
    """`TypeError` unless `environ` is a mapping; `InvalidVariable` naming the first entry that is not
    str -> str (a dict fixture's `{"WORLD_SIZE": 8}`): environment values are strings, as in os.environ."""
    if not isinstance(environ, Mapping):
        raise TypeError(f"environ must be a Mapping[str, str], got {type(environ).__name__}")
    for name, value in environ.items():
        if not isinstance(name, str):
            raise InvalidVariable(
                repr(name), value, f"a str name: environment names are strings, not {type(name).__name__}"
            )
        if not isinstance(value, str):
            hint = (
                f"; write {name}={str(value)!r}"
                if isinstance(value, (int, float)) and not isinstance(value, bool)
                else ""
            )
            raise InvalidVariable(
                name,
                value,
                f"a str, not {type(value).__name__}: environment values are strings, as in os.environ{hint}",
            )


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
    digits = raw.isascii() and raw.isdigit()  # an ASCII string's digits are exactly 0-9
    if not digits or len(raw) > MAX_DIGITS:
        if digits:  # digits, but more than any launcher writes
            expected = f"{expected}, at most {MAX_DIGITS} digits"
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
    expected: str | None = None,
) -> int:
    """A required non-negative decimal integer; `expected` says what a missing one would have held."""
    raw = text(environ, name, source=source, expected=expected or f"a decimal integer >= {minimum}")
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


def port(environ: Environ, name: str, *, source: str | None = None, expected: str | None = None) -> int:
    """A required TCP port, 1..65535; `expected` says what a missing one would have held."""
    return check_port(name, text(environ, name, source=source, expected=expected or "a TCP port 1..65535"))


def _ipv6(text: str) -> bool:
    import ipaddress  # for IPv6 alone: at the top it cost 2.4% of a resolve (callgrind, lean venv: 5.9 M)

    address, sep, zone = text.partition("%")
    try:
        parsed = ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return not sep or (parsed.is_link_local and re.fullmatch(_ZONE, zone) is not None)


def is_address(text: object) -> bool:
    """Whether `text` is an address as a Topology stores it: a host name, IPv4 or IPv6 (no brackets)."""
    if not isinstance(text, str):
        return False
    if ":" in text:
        return text.isascii() and _ipv6(text)
    if _is_numeric(text):
        return re.fullmatch(_IPV4, text) is not None
    return len(text) <= 253 and all(re.fullmatch(_LABEL, label) for label in text.split("."))


def _is_numeric(text: str) -> bool:
    """Digits and dots only: an IPv4 address, or no address at all."""
    return text.isascii() and text.replace(".", "").isdigit()


def check_address(name: str, raw: str) -> str:
    """The value `raw` of variable `name` as an address (a host name, IPv4, or IPv6 returned without
    its brackets), else InvalidVariable."""
    value = raw[1:-1] if raw.startswith("[") and raw.endswith("]") and ":" in raw else raw
    if not is_address(value):
        raise InvalidVariable(name, raw, _ADDRESS_EXPECTED)
    return value


def is_loopback(address: str) -> bool:
    """Whether `address` reaches only this host: 127.0.0.0/8, ::1, `localhost` (and `*.localhost`,
    RFC 6761), or an unspecified address (0.0.0.0, ::), which connects to this host too."""
    lowered = address.lower().rstrip(".")
    if lowered == "localhost" or lowered.endswith(".localhost"):
        return True
    if ":" not in address:  # IPv4: 127.0.0.0/8 or 0.0.0.0; a name other than localhost is not known here
        if not (_is_numeric(address) and re.fullmatch(_IPV4, address)):
            return False
        octets = address.split(".")
        return int(octets[0]) == 127 or all(int(octet) == 0 for octet in octets)
    import ipaddress  # as in _ipv6

    try:
        parsed = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return parsed.is_loopback or parsed.is_unspecified


def address(environ: Environ, name: str, *, source: str | None = None, expected: str | None = None) -> str:
    """A required host name or IP address; `expected` says what a missing one would have held."""
    return check_address(name, text(environ, name, source=source, expected=expected or "a host name or IP address"))
