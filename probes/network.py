"""The live network probes: this host's interfaces, a name's addresses, and the way to an address.

Three questions the preflight and `exec --ifname` ask, never `resolve` (it makes no network calls):

- `interfaces()`: every interface of this host and its addresses, as the kernel lists them
  (getifaddrs(3), through ctypes: the standard library has the names, `socket.if_nameindex()`,
  but not the addresses, and psutil would be a compiled dependency for one call);
- `lookup(name)`: the addresses `name` resolves to here, in getaddrinfo(3)'s order (the order a
  client tries them in), or `ProbeFailed` with the resolver's own words;
- `route(address)`: the interface and local address this host's traffic to `address` leaves
  from. An address of this host is reached on the interface that holds it (the one Gloo or NCCL
  must use there for the others to reach it), not through `lo`. Anything else: the kernel's route,
  read from a UDP socket `connect`ed to it (no packet is sent), then the interface holding the
  source address it chose.

Linux first: getifaddrs is in glibc and musl (and the BSDs and macOS, whose `sockaddr` layout
differs: there `interfaces()` raises `ProbeFailed`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import ipaddress
import socket
import sys
from collections.abc import Mapping

import attrs

from resolver.errors import ProbeFailed

__all__ = ["Route", "holder", "interfaces", "is_loopback", "lookup", "route"]


@attrs.frozen
class Route:
    """The way to an address: the `interface` traffic leaves from and its `address` there."""

    interface: str
    address: str


class _Sockaddr(ctypes.Structure):
    _fields_ = (("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14))


class _Sockaddr4(ctypes.Structure):
    _fields_ = (("family", ctypes.c_ushort), ("port", ctypes.c_ushort), ("addr", ctypes.c_ubyte * 4))


class _Sockaddr6(ctypes.Structure):
    _fields_ = (
        ("family", ctypes.c_ushort),
        ("port", ctypes.c_ushort),
        ("flowinfo", ctypes.c_uint32),
        ("addr", ctypes.c_ubyte * 16),
        ("scope_id", ctypes.c_uint32),
    )


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = (  # getifaddrs(3): struct ifaddrs
    ("next", ctypes.POINTER(_Ifaddrs)),
    ("name", ctypes.c_char_p),
    ("flags", ctypes.c_uint),
    ("addr", ctypes.POINTER(_Sockaddr)),
    ("netmask", ctypes.POINTER(_Sockaddr)),
    ("ifu", ctypes.POINTER(_Sockaddr)),
    ("data", ctypes.c_void_p),
)


def _address(pointer: ctypes._Pointer[_Sockaddr]) -> str | None:
    if not pointer:
        return None
    family = pointer.contents.family
    if family == socket.AF_INET:
        v4 = ctypes.cast(pointer, ctypes.POINTER(_Sockaddr4)).contents
        return socket.inet_ntop(socket.AF_INET, bytes(v4.addr))
    if family == socket.AF_INET6:
        v6 = ctypes.cast(pointer, ctypes.POINTER(_Sockaddr6)).contents
        return socket.inet_ntop(socket.AF_INET6, bytes(v6.addr))
    return None  # AF_PACKET and the like: the link layer, not an address a process connects to


@functools.cache
def _libc() -> ctypes.CDLL:
    """This process's own symbols, libc's among them (no ldconfig run, as find_library would)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.getifaddrs.argtypes = (ctypes.POINTER(ctypes.POINTER(_Ifaddrs)),)
    libc.freeifaddrs.argtypes = (ctypes.POINTER(_Ifaddrs),)
    libc.freeifaddrs.restype = None
    return libc


def interfaces() -> dict[str, tuple[str, ...]]:
    """Every interface of this host (up or down) and its IPv4 and IPv6 addresses, in the kernel's order."""
    if not sys.platform.startswith("linux"):
        raise ProbeFailed("interfaces", f"reading interfaces is implemented for Linux, not {sys.platform}")
    libc = _libc()
    head = ctypes.POINTER(_Ifaddrs)()
    if libc.getifaddrs(ctypes.byref(head)) != 0:
        code = ctypes.get_errno()
        raise ProbeFailed("interfaces", f"getifaddrs failed: {errno.errorcode.get(code, code)}")
    found: dict[str, list[str]] = {}
    try:
        entry = head
        while entry:
            name = (entry.contents.name or b"?").decode(errors="replace")
            addresses = found.setdefault(name, [])
            address = _address(entry.contents.addr)
            if address is not None and address not in addresses:
                addresses.append(address)
            entry = entry.contents.next
    finally:
        libc.freeifaddrs(head)
    return {name: tuple(addresses) for name, addresses in found.items()}


def lookup(name: str) -> tuple[str, ...]:
    """The addresses `name` resolves to on this host (an address stands for itself), in getaddrinfo's
    order, each once; `ProbeFailed` with the resolver's words when it does not resolve."""
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        reason = exc.strerror if isinstance(exc, socket.gaierror) and exc.strerror else str(exc)
        raise ProbeFailed("lookup", f"{name!r} does not resolve: {reason}") from None
    out: list[str] = []
    for *_, sockaddr in found:
        address = str(sockaddr[0]).split("%", 1)[0]  # an IPv6 zone (fe80::1%eth0) names the interface, not the address
        if address not in out:
            out.append(address)
    return tuple(out)


def is_loopback(address: str) -> bool:
    """Whether `address` (an address, not a name) is a loopback one: 127.0.0.0/8, ::1 or ::ffff:127.x."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped.is_loopback
    return parsed.is_loopback


def holder(address: str, table: Mapping[str, tuple[str, ...]]) -> str | None:
    """The interface of `table` (interface -> addresses) holding `address`; `lo` for any loopback address."""
    for name, addresses in table.items():
        if address in addresses:
            return name
    if is_loopback(address):  # 127.0.1.1 is nobody's listed address, yet lo carries all of 127.0.0.0/8
        return next((name for name in table if name == "lo"), "lo")
    return None


def route(destination: str) -> Route:
    """The interface and local address this host reaches `destination` (a name or an address) from."""
    address = lookup(destination)[0]
    table = interfaces()
    local = holder(address, table)
    if local is not None and not is_loopback(address):
        return Route(local, address)  # our own address: others reach us on the interface that holds it
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((address, 9))  # UDP: the kernel picks the route and the source address, sends nothing
            source = str(sock.getsockname()[0]).split("%", 1)[0]
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise ProbeFailed("route", f"no route from this host to {destination} ({address}): {why}") from None
    interface = holder(source, table)
    if interface is None:
        raise ProbeFailed(
            "route", f"the route to {destination} ({address}) leaves from {source}, which no interface holds"
        )
    return Route(interface, source)
