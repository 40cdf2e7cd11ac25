"""The network training will use: what each process finds out before the check, and what rank 0 judges.

One process per host gathers the host's network facts for a check (`facts`, through the probes, so
dict fixtures and fake probes can play any host): the host leader, once connected to rank 0, for its
batch; rank 0 and any process meeting rank 0 directly or in the launcher's store gather their own.
The facts: the addresses the main address resolves to here and how long that took, the interface and
local address the connection to rank 0 left from, what the host name resolves to, what
`GLOO_SOCKET_IFNAME` and `NCCL_SOCKET_IFNAME` select among the interfaces, and which proxy gRPC
would take to the main address. They travel as a record's ``net`` (JSON, a few hundred bytes), once
per batch. Rank 0 judges all of them at once (`judge`, pure): problems that will hang the job, and
warnings that may. The host's facts are judged once per host (`_views`: the lowest rank's that has
them); the interface and proxy variables as each process set them: every process sends its
`settings` in its record, and rank 0, reading a batch, applies a process's settings that differ from
its leader's to the interface names the leader found (`with_settings`), so the rules judge once per
host and setting.

The rules, and where the facts behind them come from:

- **Addresses, not text.** Processes agree on the main address when what it resolves to on their
  host reaches rank 0: one of rank 0's addresses, or on rank 0's own host a loopback one. A first
  address that is not rank 0's is a problem (clients try addresses in order: training's first
  connection goes elsewhere); a later one, or a name that resolves to different addresses of rank
  0 on different hosts, a warning.
- **Late names.** A process that waited `LATE` seconds or more for the name to resolve is named in a
  warning: training started at the same moment needs the same patience (Kubernetes publishes a
  pod's DNS record after the pod starts).
- **The host name.** Gloo's default device binds the first address of getaddrinfo(gethostname())
  (gloo/transport/tcp/device.cc, `lookupAddrForHostname`) and publishes it to the others; c10d
  advertises the host name too. In a job on several hosts, a host name that resolves to loopback
  (Debian and Ubuntu map it to 127.0.1.1) or to an address that is not on the interface reaching
  rank 0 is a problem while `GLOO_SOCKET_IFNAME` is unset, a warning once it is.
- **Interface variables.** `GLOO_SOCKET_IFNAME` is a comma-separated list of exact interface names
  (torch.distributed's docs, "Choosing the network interface to use"); `NCCL_SOCKET_IFNAME` a
  comma-separated list of prefixes, `=` before the list for exact names, `^` to exclude (both:
  `^=`) (NCCL's environment variables documentation). Selecting no interface on a host is a
  problem (NCCL and Gloo fail to start there); in a job on several hosts, not selecting the
  interface that reaches rank 0 is a problem too.
- **Proxies.** gRPC (JAX's coordinator) takes the first of `grpc_proxy`, `https_proxy`,
  `http_proxy` that has a value, unless the host is in the first of `no_grpc_proxy`, `no_proxy` that
  has one (gRPC's doc/environment_variables.md): a warning naming the variable, as torch and
  NCCL ignore proxies (resolver.integrations.jax refuses such a proxy by name).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from resolver._detect import require_probes
from resolver._problem import Problem, spans
from resolver.errors import InvalidSettings, ProbeFailed, TopologyError

require_probes()  # a user's own probes.py must not hide ours (resolver/_shadow.py)
from probes._backoff import Backoff  # noqa: E402
from probes.network import is_loopback  # noqa: E402

if TYPE_CHECKING:
    from probes import Probes

__all__ = [
    "GLOO",
    "IFNAME_VARIABLES",
    "LATE",
    "NCCL",
    "NO_PROXY_VARIABLES",
    "PROXY_VARIABLES",
    "chosen",
    "covered",
    "facts",
    "ifname_exports",
    "is_loopback",
    "judge",
    "proxy",
    "selected",
    "settings",
    "toward_main",
    "with_settings",
]

GLOO = "GLOO_SOCKET_IFNAME"
NCCL = "NCCL_SOCKET_IFNAME"
IFNAME_VARIABLES = (GLOO, NCCL)
PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "http_proxy")  # gRPC core's order: the first with a value
NO_PROXY_VARIABLES = ("no_grpc_proxy", "no_proxy")  # the same
LATE = 1.0  # seconds of waiting for the main address to resolve that a report mentions
WAIT_EVERY = 3.0  # seconds between two progress lines while the main address does not resolve
MOST_ADDRESSES = 64  # of a host's addresses (link-local ones left out) and interface names sent in its record


# -- the rules of the variables, pure --------------------------------------------------------------------


def selected(variable: str, value: str, names: Iterable[str]) -> tuple[str, ...]:
    """The interfaces among `names` that `variable=value` selects (GLOO_SOCKET_IFNAME: exact names;
    NCCL_SOCKET_IFNAME: prefixes, `=` exact, `^` exclude), in the order of `names`."""
    if variable == GLOO:
        wanted = {part.strip() for part in value.split(",") if part.strip()}
        return tuple(name for name in names if name in wanted)
    if variable != NCCL:
        raise ValueError(f"variable={variable!r}: expected {GLOO} or {NCCL}")
    rest = value.strip()
    exclude = rest.startswith("^")
    rest = rest[1:] if exclude else rest
    exact = rest.startswith("=")
    rest = rest[1:] if exact else rest
    parts = [part.strip() for part in rest.split(",") if part.strip()]

    def listed(name: str) -> bool:
        return any(name == part if exact else name.startswith(part) for part in parts)

    return tuple(name for name in names if listed(name) != exclude)


def covered(host: str, listed: str) -> bool:
    """Whether `host` (a name or an address) is in the no-proxy list `listed`: `*`, the host itself,
    a domain it ends in (`.example.com` or `example.com`), or a network holding the address (CIDR)."""
    host = host.strip("[]").lower()
    for raw in listed.split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*" or entry.strip("[]") == host:
            return True
        if "/" in entry:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
        elif host.endswith("." + entry.lstrip(".")):
            return True
    return False


def proxy(environ: Mapping[str, str], host: str) -> tuple[str, str] | None:
    """(variable, value) of the proxy gRPC would take to `host` under `environ`, or None: no proxy
    variable has a value, or the no-proxy list gRPC reads covers `host`."""
    chosen = next(((name, environ[name]) for name in PROXY_VARIABLES if environ.get(name)), None)
    if chosen is None:
        return None
    listed = next((environ[name] for name in NO_PROXY_VARIABLES if environ.get(name)), "")
    return None if covered(host, listed) else chosen


def ifname_exports(environ: Mapping[str, str], interface: str) -> dict[str, str]:
    """What `exec --ifname` sets: GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (NCCL's exact form, `=name`)
    naming `interface`, each unless the user set it (theirs wins; the check judges it)."""
    wanted = {GLOO: interface, NCCL: f"={interface}"}
    return {name: value for name, value in wanted.items() if name not in environ}


def toward_main(
    address: str | None,
    probes: Probes,
    *,
    timeout: float,
    spans_nodes: bool = False,
    on_wait: Callable[[str, float], None] | None = None,
) -> str:
    """The interface this host reaches the main `address` through (the `route` probe), waiting with backoff
    up to `timeout` seconds for a name that does not resolve yet; `ProbeFailed` naming it after that.

    On rank 0's host of a job that `spans_nodes`, a main address that resolves to loopback there (Debian
    maps the host's own name to 127.0.1.1) routes through `lo`, which no other node reaches: the answer
    is then the host's one interface with an address other nodes could use, and an `InvalidSettings`
    naming them when it has several (the check, `exec --check --ifname`, learns which one they reach)."""
    interface = _route(address, probes, timeout=timeout, on_wait=on_wait)
    if interface != "lo" or not spans_nodes:
        return interface
    table = probes.interfaces()
    usable = [name for name, addresses in table.items() if name != "lo" and any(_reachable(a) for a in addresses)]
    if len(usable) == 1:
        return usable[0]
    raise InvalidSettings(
        f"the main address {address} leads to loopback on this host, so the interface the other nodes reach "
        f"it through cannot be told from here among {_listed(usable)}: run `cluster-topology exec --check "
        f"--ifname` (the check learns it), or set {GLOO} and {NCCL} yourself",
        variable="--ifname",
        value=address,
        expected="one interface toward the main address",
    )


def _reachable(address: str) -> bool:
    """An address another host could connect to: not loopback, not IPv6 link-local."""
    return not is_loopback(address) and not _link_local(address)


def _link_local(address: str) -> bool:
    """IPv6 link-local (fe80::/10): no use to another host for reaching this one, and a container host has one
    per veth."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    return isinstance(parsed, ipaddress.IPv6Address) and parsed.is_link_local


def _route(
    address: str | None,
    probes: Probes,
    *,
    timeout: float,
    on_wait: Callable[[str, float], None] | None,
) -> str:
    if address is None:
        raise InvalidSettings(
            "--ifname names the interface toward the main address, and this topology has none",
            variable="--ifname",
            value=None,
            expected="a topology with a main address",
        )
    started = time.monotonic()
    backoff, told = Backoff(started + timeout, 1.0, first=0.05), started
    while True:
        try:
            return probes.route(address).interface
        except ProbeFailed as exc:
            now = time.monotonic()
            if exc.probe != "lookup":
                raise
            if now - started >= timeout:
                raise ProbeFailed(
                    "route",
                    f"the main address {address!r} did not resolve here within {timeout:g} s, so there is no "
                    f"interface toward it to name: {exc.reason}",
                ) from None
            if on_wait is not None and now - told >= WAIT_EVERY:
                on_wait(exc.reason, now - started)
                told = now
        backoff.pause()


# -- the facts, through the probes -----------------------------------------------------------------------


def _ask(question: Callable[[], Any]) -> tuple[Any, str | None]:
    """A probe's answer and None, or None and why it could not answer."""
    try:
        return question(), None
    except TopologyError as exc:  # ProbeFailed: the facts are what a host could find, never a failure
        return None, getattr(exc, "reason", str(exc))
    except OSError as exc:
        return None, exc.strerror or str(exc)


def facts(
    environ: Mapping[str, str],
    main: str,
    probes: Probes,
    *,
    resolved: Sequence[str] | None = None,
    local: str | None = None,
    peer: str | None = None,
    waited: float = 0.0,
    ifname: bool = False,
) -> dict[str, Any]:
    """This host's network facts (JSON-safe), the record's ``net``.

    `resolved` is what `main` resolved to, `local` and `peer` the addresses of the connection to rank 0,
    when this process connected; else they are asked of the probes (`lookup`, `route`): rank 0, and
    a process meeting through a launcher's store. `waited`: seconds the name took to resolve.
    `ifname`: `exec --ifname` will set the interface variables the user left unset.
    Only its `settings`, `ifnames` and `proxy` read this process's environment; the rest is the host's, so
    only a host's leader gathers them (probes/hostlocal.py): one set of name lookups per host, not per
    process. Its followers' own settings travel in their records.
    """
    table, table_error = _ask(probes.interfaces)
    table = {str(k): tuple(v) for k, v in (table or {}).items()}
    lookup_error = None
    if resolved is None:
        resolved, lookup_error = _ask(lambda: probes.lookup(main))
    interface = None
    if local is None:
        way, route_error = _ask(lambda: probes.route(main))
        if way is not None:
            interface, local = way.interface, way.address
    else:
        route_error = None
        interface = next((name for name, addresses in table.items() if local in addresses), None)
        if interface is None and is_loopback(local):
            interface = "lo"
    name, _ = _ask(probes.hostname)
    named, hostname_error = _ask(lambda: probes.lookup(name)) if name else (None, "no host name")
    own = settings(environ, main, ifname=ifname)
    names = sorted(table)
    addresses = [a for values in table.values() for a in values if not _link_local(a)]
    addresses = addresses[:MOST_ADDRESSES]
    return {
        "main": main,
        "resolved": None if resolved is None else list(resolved),
        "lookup_error": lookup_error,
        "waited": round(waited, 3),
        "interface": interface,
        "address": local,
        "peer": peer,
        "route_error": route_error,
        "interface_addresses": list(table.get(interface, ())) if interface else [],
        "interfaces": names[:MOST_ADDRESSES],
        "interfaces_left_out": max(0, len(table) - MOST_ADDRESSES),
        "interfaces_error": table_error,
        "addresses": addresses,
        "hostname": name,
        "hostname_addresses": None if named is None else list(named),
        "hostname_error": hostname_error,
        "settings": own,
        **chosen(own, None if table_error is not None else names, interface),
    }


def settings(environ: Mapping[str, str], main: str, *, ifname: bool = False) -> dict[str, Any] | None:
    """This process's own say in the network rules, or None when it has none: the values of the interface
    variables its environment sets, the proxy gRPC would take to `main` under it (`proxy`: the variable
    and its value, without the no-proxy lists, which can be long), and ``"ifname": True`` when `exec
    --ifname` fills in the interface variables it leaves unset. Every process sends it in its record:
    the processes of one host may set them differently (an interface per GPU)."""
    own: dict[str, Any] = {name: environ[name] for name in IFNAME_VARIABLES if name in environ}
    proxied = proxy(environ, main)
    if proxied is not None:
        own["proxy"] = {"variable": proxied[0], "value": proxied[1]}
    if ifname:
        own["ifname"] = True
    return own or None


def chosen(own: Mapping[str, Any] | None, names: Sequence[str] | None, interface: str | None) -> dict[str, Any]:
    """What one process's `settings` make of its host, pure: ``ifnames`` (each interface variable's value,
    where it came from, and the interfaces it selects among `names`, None when the host's interfaces are
    unknown) and ``proxy``. `interface` is the one toward rank 0, which `exec --ifname` names. A host
    leader's facts carry its own; rank 0 makes those of a process that sets them otherwise from the
    leader's `names` and `interface`."""
    own = own or {}
    ifnames: dict[str, dict[str, Any]] = {}
    for variable in IFNAME_VARIABLES:
        value, by = own.get(variable), "environment"
        if value is None and own.get("ifname") is True and interface is not None:
            value, by = ifname_exports({}, interface)[variable], "exec --ifname"
        if isinstance(value, str):
            picked = None if names is None else list(selected(variable, value, names))
            ifnames[variable] = {"value": value, "selected": picked, "by": by}
    proxied = own.get("proxy")
    return {"ifnames": ifnames, "proxy": dict(proxied) if isinstance(proxied, Mapping) else None}


# -- the verdict's network rules, pure ----------------------------------------------------------------


class Seen(Protocol):
    """A process as the network rules see it (resolver._check.Member fits)."""

    @property
    def rank(self) -> int | None: ...
    @property
    def host(self) -> str: ...
    @property
    def net(self) -> Mapping[str, Any] | None: ...


def _names(hosts: Sequence[str], most: int = 4) -> str:
    shown = " and ".join(hosts) if len(hosts) <= 2 else ", ".join(hosts[:most])
    return shown + (f" and {len(hosts) - most} more" if len(hosts) > most else "")


def _listed(values: Iterable[str]) -> str:
    return ", ".join(values) or "nothing"


class _View:
    """The processes of one host that share one set of facts (`net`, one object): a batch's, its leader's,
    or those of a process whose own settings differ from its leader's (`with_settings`)."""

    __slots__ = ("host", "net")

    def __init__(self, host: str, net: Mapping[str, Any]) -> None:
        self.host = host
        self.net = net


def _views(members: Sequence[Seen]) -> tuple[dict[str, Mapping[str, Any]], list[_View]]:
    """One record's facts per host (the lowest rank's that has them), hosts in sorted order; and a view per
    distinct facts object, in the same order: a batch's records share their leader's."""
    hosts: dict[str, Mapping[str, Any]] = {}
    views: dict[int, _View] = {}  # by id(): the members hold every net for the call
    for m in sorted(members, key=lambda m: (m.host, m.rank if m.rank is not None else -1)):
        net = m.net
        if id(net) in views or not isinstance(net, Mapping):
            continue
        hosts.setdefault(m.host, net)  # a host's first view is its lowest rank's
        views[id(net)] = _View(m.host, net)
    return hosts, list(views.values())


def with_settings(net: Mapping[str, Any], own: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A host's facts `net` (gathered under its gatherer's settings) as a process whose own `settings` are
    `own` sees them: rank 0 gives a batch's record that sets the variables otherwise than its leader
    these. Its interface variables select among the interface names `net` lists; when the host's
    interfaces are unknown (or more than `MOST_ADDRESSES`, so that not every name travelled), what they
    select is unknown too, and not judged."""
    if own == net.get("settings"):
        return net
    known = net.get("interfaces_error") is None and not net.get("interfaces_left_out")
    interface = net.get("interface")
    return {
        **net,
        "settings": own,
        **chosen(
            own, _strings(net.get("interfaces")) if known else None, interface if isinstance(interface, str) else None
        ),
    }


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


class _Findings:
    """The network rules' output: problems (the job will hang) and warnings (it may), each naming the ranks
    on the hosts it is about."""

    def __init__(self, members: Sequence[Seen]) -> None:
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self._members = members
        self._ranks: dict[str, list[int]] = {}
        self._by_net: dict[int, set[int]] | None = None  # id(net) -> its members' ranks, once a finding asks
        for m in members:
            if m.rank is not None:
                self._ranks.setdefault(m.host, []).append(m.rank)

    def _held(self, view: _View) -> set[int]:
        """The ranks of the processes that share `view`'s facts."""
        if self._by_net is None:
            self._by_net = {}
            for m in self._members:
                if m.rank is not None:
                    self._by_net.setdefault(id(m.net), set()).add(m.rank)
        return self._by_net.get(id(view.net), set())

    def add(
        self,
        hangs: bool,
        kind: str,
        on: Sequence[str],
        variable: str | None,
        message: str,
        *,
        ranks: Sequence[int] | None = None,
    ) -> None:
        """A finding about the hosts `on`: every rank there, or `ranks`."""
        if ranks is None:
            ranks = [r for h in on for r in self._ranks.get(h, ())]
        found = Problem(kind=kind, ranks=tuple(sorted(ranks)), hosts=tuple(on), variable=variable, message=message)
        (self.problems if hangs else self.warnings).append(found)

    def place(self, views: Sequence[_View]) -> tuple[list[str], list[int], str]:
        """The hosts, the ranks and the words for where `views` are: a host by its name when they hold every
        rank of it, else with the ranks they hold (`n2 (ranks 9,11)`)."""
        held: dict[str, set[int]] = {}
        for view in views:
            held.setdefault(view.host, set()).update(self._held(view))
        ranks: list[int] = []
        words = []
        for host in sorted(held):
            everyone = set(self._ranks.get(host, ()))
            if held[host] >= everyone:
                ranks += everyone
                words.append(host)
            else:
                ranks += held[host]
                words.append(f"{host} (rank{'s' if len(held[host]) > 1 else ''} {spans(held[host])})")
        return sorted(held), ranks, _names(words)


def judge(
    members: Sequence[Seen], *, variable: str | None = None, multi_node: bool
) -> tuple[list[Problem], list[Problem]]:
    """The network's problems and warnings among `members` (each with its ``net`` facts, or None).

    `variable` is the one the main address came from (named in its problems); `multi_node`: the job
    spans hosts, so interfaces and host names must reach the others.
    """
    out = _Findings(members)
    hosts, views = _views(members)
    zero = next((m for m in members if m.rank == 0 and isinstance(m.net, Mapping)), None)
    if zero is not None:
        _addresses(zero, hosts, variable, out)
    _late(hosts, variable, out)
    if multi_node:
        _hostnames(views, out)
    _ifnames(views, multi_node, out)
    _proxies(views, out)
    return out.problems, out.warnings


def _addresses(zero: Seen, hosts: Mapping[str, Mapping[str, Any]], variable: str | None, out: _Findings) -> None:
    """What the main address resolved to on each host, against rank 0's addresses."""
    known = zero.net or {}
    theirs = set(_strings(known.get("addresses")))
    if not theirs:
        return  # rank 0 could not list its addresses (no interfaces probe): nothing to hold the others against
    # what a process's connection reached is rank 0's by construction (also past the addresses it listed)
    theirs |= {str(net["peer"]) for net in hosts.values() if isinstance(net.get("peer"), str) and net["peer"]}
    shown = _listed(a for a in _strings(known.get("addresses")) if not is_loopback(a))

    def alongside(host: str, net: Mapping[str, Any]) -> bool:
        """On rank 0's machine: its host, its kernel host name, or a connection to it over loopback (which
        cannot leave the machine: nodes emulated on one host)."""
        peer = net.get("peer")
        same_name = net.get("hostname") is not None and net.get("hostname") == known.get("hostname")
        return host == zero.host or same_name or (isinstance(peer, str) and is_loopback(peer))

    def reaches(local: bool, address: str) -> bool:
        return address in theirs or (local and is_loopback(address))

    groups: dict[tuple[str, tuple[str, ...], bool], list[str]] = {}
    for host, net in hosts.items():
        resolved = tuple(_strings(net.get("resolved")))
        if resolved:
            groups.setdefault((str(net.get("main")), resolved, alongside(host, net)), []).append(host)
    healthy: dict[str, dict[tuple[str, ...], list[str]]] = {}
    for (main, resolved, local), on in sorted(groups.items()):
        wrong = [a for a in resolved if not reaches(local, a)]
        said = f"on {_names(on)}, {main} resolves to {_listed(resolved)}"
        rank0 = f"rank 0 on {zero.host} has {shown}"
        if wrong and wrong[0] == resolved[0]:
            out.add(
                True,
                "address",
                on,
                variable,
                f"{said}; {wrong[0]} is not rank 0's ({rank0}): training's connections to {main} from there go "
                f"elsewhere; fix the name's record on {_names(on)} (/etc/hosts, DNS) or give rank 0's address",
            )
            continue
        if wrong:
            out.add(
                False,
                "address",
                on,
                variable,
                f"{said}; {_listed(wrong)} {'is' if len(wrong) == 1 else 'are'} not rank 0's ({rank0}): "
                "a client that tries those first waits for them to time out",
            )
            continue
        outside = tuple(a for a in resolved if not is_loopback(a))
        if outside:  # rank 0's host resolving its own name to loopback: Debian's way, the host-name rule's business
            healthy.setdefault(main, {}).setdefault(outside, []).extend(on)
    for main, seen in sorted(healthy.items()):
        if len(seen) > 1:
            each = "; ".join(f"to {_listed(resolved)} on {_names(on)}" for resolved, on in sorted(seen.items()))
            on = sorted(h for hs in seen.values() for h in hs)
            out.add(
                False,
                "address",
                on,
                variable,
                f"{main} resolves differently on different hosts, {each}; all are rank 0's, "
                "but a host whose records change could go elsewhere",
            )


def _late(hosts: Mapping[str, Mapping[str, Any]], variable: str | None, out: _Findings) -> None:
    late = {h: net for h, net in hosts.items() if isinstance(net.get("waited"), (int, float)) and net["waited"] >= LATE}
    if not late:
        return
    on = sorted(late, key=lambda h: -float(late[h]["waited"]))
    most = late[on[0]]
    each = ", ".join(f"{float(late[h]['waited']):.1f} s on {h}" for h in on[:4]) + (" ..." if len(on) > 4 else "")
    out.add(
        False,
        "late_name",
        sorted(on),
        variable,
        f"{most.get('main')} did not resolve at first: it took {each}; the check waited for it, and training "
        "started at the same moment needs the same patience (a rendezvous timeout longer than that)",
    )


def _hostnames(views: Sequence[_View], out: _Findings) -> None:
    groups: dict[tuple[str, str, str, bool], list[_View]] = {}
    for view in views:
        net = view.net
        interface = net.get("interface")
        if not isinstance(interface, str) or interface == "lo" or not isinstance(net.get("hostname"), str):
            continue
        named = _strings(net.get("hostname_addresses"))
        if not named:
            why, address = "unresolved", str(net.get("hostname_error") or "no address")
        elif is_loopback(named[0]):
            why, address = "loopback", named[0]
        elif named[0] not in _strings(net.get("interface_addresses")):
            why, address = "elsewhere", named[0]
        else:
            continue
        groups.setdefault((why, address, interface, GLOO in (net.get("ifnames") or {})), []).append(view)
    for (why, address, interface, gloo_set), on in sorted(groups.items()):
        hosts, ranks, where = out.place(on)
        kernel = sorted({str(v.net.get("hostname")) for v in on})
        names = "" if kernel == hosts else f" ({_names(kernel)})"  # the kernel's names, where they differ
        said = {
            "unresolved": f"does not resolve there ({address})",
            "loopback": f"resolves to {address} there, a loopback address",
            "elsewhere": f"resolves to {address} there, which is not on {interface}, the interface that reaches rank 0",
        }[why]
        message = (
            f"the host name of {where}{names} {said}: Gloo (and anything that advertises the host name) "
            f"will publish an address the other nodes cannot reach; fix: {GLOO}={interface} there, or start "
            "the program with cluster-topology exec --ifname"
        )
        spared = f" ({GLOO} is set there: Gloo itself is spared)" if gloo_set else ""
        out.add(not gloo_set, "hostname", hosts, GLOO, message + spared, ranks=ranks)


def _ifnames(views: Sequence[_View], multi_node: bool, out: _Findings) -> None:
    groups: dict[tuple[str, str, str, tuple[str, ...], str, str], list[_View]] = {}
    for view in views:
        net = view.net
        interface = net.get("interface")
        for variable, given in sorted((net.get("ifnames") or {}).items()):
            if not isinstance(given, Mapping) or not isinstance(given.get("selected"), list):
                continue  # what it selects is unknown: the host's interfaces are
            chosen = tuple(_strings(given.get("selected")))
            value, by = str(given.get("value")), str(given.get("by", "environment"))
            if not chosen:
                there = _listed(_strings(net.get("interfaces")))
                groups.setdefault(("none", variable, value, chosen, by, there), []).append(view)
            elif multi_node and isinstance(interface, str) and interface != "lo" and interface not in chosen:
                groups.setdefault(("elsewhere", variable, value, chosen, by, interface), []).append(view)
            elif variable == GLOO and multi_node and len(chosen) > 1:
                groups.setdefault(("more", variable, value, chosen, by, str(interface)), []).append(view)
    for (why, variable, value, chosen, by, detail), on in sorted(groups.items()):
        hosts, ranks, where = out.place(on)
        given = f"{variable}={value}" + (" (from exec --ifname)" if by != "environment" else "")
        if why == "none":
            out.add(
                True,
                "ifname",
                hosts,
                variable,
                f"{given} selects no interface on {where}, which has {detail}: "
                f"{'Gloo' if variable == GLOO else 'NCCL'} cannot start there; name an interface of that host "
                "(or unset it, or use cluster-topology exec --ifname)",
                ranks=ranks,
            )
        elif why == "elsewhere":
            fix = detail if variable == GLOO else f"={detail}"
            out.add(
                True,
                "ifname",
                hosts,
                variable,
                f"{given} selects {_listed(chosen)} on {where}, but that host reaches rank 0 through "
                f"{detail}: the others will not reach it there; fix: {variable}={fix}",
                ranks=ranks,
            )
        else:
            out.add(
                False,
                "ifname",
                hosts,
                variable,
                f"{given} makes Gloo use {_listed(chosen)} on {where}; only {detail} is known to reach "
                "rank 0 (the check cannot tell whether the others do)",
                ranks=ranks,
            )


def _proxies(views: Sequence[_View], out: _Findings) -> None:
    groups: dict[tuple[str, str, str], list[_View]] = {}
    for view in views:
        given = view.net.get("proxy")
        if isinstance(given, Mapping):
            key = (str(given.get("variable")), str(given.get("value")), str(view.net.get("main")))
            groups.setdefault(key, []).append(view)
    for (variable, value, main), on in sorted(groups.items()):
        hosts, ranks, where = out.place(on)
        out.add(
            False,
            "proxy",
            hosts,
            variable,
            f"{variable}={value} on {where} would carry gRPC connections to {main} (JAX's coordinator "
            f"honours {', '.join(PROXY_VARIABLES)}), and {main} is not in {' or '.join(NO_PROXY_VARIABLES)}: "
            f"add {main} to no_proxy there, or unset {variable} (torch and NCCL do not use proxies)",
            ranks=ranks,
        )
