"""Hosts emulated in network namespaces, each with its own address, interfaces, host name and /etc/hosts.

The network system tests (tests/launchers/test_network.py) run every process of a job on a host of
its own, as a cluster would, on one machine:

- a host is a network namespace (`ip netns add <prefix>-<host>`) with `lo` up and a data interface
  `dat-<host>` holding 10.9.0.<i>/24 (n1 10.9.0.1, n2 10.9.0.2, ...; `subnet` picks another private
  /24, as one whose addresses sort above 127.0.1.1: Gloo lets the larger address of a pair connect).
  Two hosts: one veth pair between them. Three or more (or `bridge=True`): each host's veth ends on
  a bridge `br0` in a namespace of its own (`<prefix>-sw`), which holds 10.9.0.254 where nothing
  listens (an address in the job's network that refuses every connection);
- with `mgmt=[host, ...]`, those hosts also get a management interface `mgt-<host>` holding
  10.8.0.<i>/24, the default route (via 10.8.0.254, the management bridge `<prefix>-mg`, which
  forwards nothing) and, in every hosts file, the host's name: the data interface still reaches rank 0;
- names: `ip netns exec NS` bind-mounts every file of `/etc/netns/NS/` over `/etc/`. Each host gets
  its own `hosts` (its name on 127.0.1.1 as Debian installs it with `loopback_names=True`, else its
  own address; the other hosts' names on their addresses; `write_hosts` rewrites it in place while a
  job runs, so a name can appear late) and a `resolv.conf` naming 127.0.0.1: a name that is not
  in the hosts file is asked of the host's own loopback, where nothing answers, so it fails at once
  and no query leaves the namespaces;
- a process runs as `ip netns exec NS unshare --uts sh -c 'hostname H && exec PROGRAM'`, so
  gethostname() is the host's name.

Every name carries the prefix and this process's pid (`ctnet<pid>-n1`): runs at the same time do not
meet, and `remove_stale` removes what a run that died left (its pid no longer lives). Nothing here
talks to an address outside loopback or these namespaces: the namespaces have no route out.

Command line (as root): `python tests/launchers/netns.py clean` removes every stale namespace and
/etc/netns folder of an earlier run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "ctnet"  # every namespace of these tests: ctnet<pid>-<host>, ctnet<pid>-sw, ctnet<pid>-mg
ETC_NETNS = Path("/etc/netns")
RUN_NETNS = Path("/run/netns")
DATA_NET = "10.9.0"  # the job's network: host i has DATA_NET.i
MGMT_NET = "10.8.0"  # the management network: host i has MGMT_NET.i
SWITCH = 254  # the bridges' own address (.254): nothing listens there
LOOPBACK_NAME = "127.0.1.1"  # where Debian and Ubuntu map the host's own name
_NAME = re.compile(rf"^{PREFIX}(\d+)[a-z]*-[a-z0-9]+$")
_MADE: set[str] = set()  # the namespaces this process made and has not removed yet


class NetnsError(RuntimeError):
    """A command building the emulated hosts failed: its words and the command."""


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {done.stderr.strip() or done.stdout.strip()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def namespaces() -> list[str]:
    """Every network namespace of these tests on this machine (any run's)."""
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    names = [line.split()[0] for line in done.stdout.splitlines() if line.strip()]
    return sorted(n for n in names if _NAME.match(n))


def etc_folders() -> list[str]:
    """Every /etc/netns/<ns> folder of these tests on this machine (any run's)."""
    if not ETC_NETNS.is_dir():
        return []
    return sorted(p.name for p in ETC_NETNS.iterdir() if _NAME.match(p.name))


def _remove_namespace(ns: str) -> None:
    """Kill what runs in `ns`, delete it (its veths go with it) and its /etc/netns folder."""
    _MADE.discard(ns)
    for _ in range(50):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
        alive = [int(p) for p in pids.stdout.split() if p.isdigit()]
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    subprocess.run(["ip", "netns", "delete", ns], capture_output=True, text=True, timeout=30)
    folder = ETC_NETNS / ns
    if folder.is_dir():
        for entry in folder.iterdir():
            entry.unlink()
        folder.rmdir()


def _forget_etc_netns() -> None:
    """/etc/netns itself when it is empty (no run of anything has a folder there any more)."""
    with contextlib.suppress(OSError):
        ETC_NETNS.rmdir()


def remove_stale(prefix: str = PREFIX) -> list[str]:
    """Remove the namespaces and /etc/netns folders of runs (of `prefix`) whose process is gone.

    Also those named after this process that it did not make: a run that died with the same pid (pids
    repeat, in a sandbox that starts its count anew more often still)."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)[a-z]*-[a-z0-9]+$")
    removed = []
    for ns in sorted(set(namespaces()) | set(etc_folders())):
        found = pattern.match(ns)
        if not found or ns in _MADE:
            continue
        pid = int(found.group(1))
        if pid == os.getpid() or not _alive(pid):
            _remove_namespace(ns)
            removed.append(ns)
    if removed:
        _forget_etc_netns()
    return removed


@dataclass(frozen=True)
class Host:
    """One emulated host: its name, namespace, data interface and address, and management ones."""

    name: str
    index: int  # 1-based: its addresses end in it
    ns: str
    iface: str  # the data interface, the one that reaches rank 0
    address: str
    mgmt_iface: str | None = None
    mgmt_address: str | None = None

    @property
    def named_at(self) -> str:
        """The address the other hosts' files map this host's name to."""
        return self.mgmt_address or self.address


@dataclass
class Result:
    """One process: its host, exit status (None: killed at the deadline), output and wall time."""

    host: str
    argv: list[str]
    returncode: int | None
    stdout: str
    stderr: str
    elapsed: float

    @property
    def killed(self) -> bool:
        return self.returncode is None


@dataclass
class Network:
    """Emulated hosts, made by `create`; `remove()` takes everything down."""

    prefix: str  # ctnet<pid>: every namespace's name starts with it
    hosts: dict[str, Host]
    loopback_names: bool
    subnet: str = DATA_NET  # the data network's first three octets
    extra_namespaces: list[str] = field(default_factory=list)  # the bridges'
    removed: bool = False

    @property
    def namespaces(self) -> list[str]:
        return [h.ns for h in self.hosts.values()] + self.extra_namespaces

    @property
    def switch_address(self) -> str | None:
        """The data bridge's own address (nothing listens there), when the hosts share a bridge."""
        return f"{self.subnet}.{SWITCH}" if f"{self.prefix}-sw" in self.extra_namespaces else None

    def hosts_file(self, host: str) -> Path:
        return ETC_NETNS / self.hosts[host].ns / "hosts"

    def hosts_text(self, host: str, names: Mapping[str, str | None] | None = None) -> str:
        """`host`'s /etc/hosts: localhost, its own name, the others'; `names` overrides (None: left out)."""
        own = self.hosts[host]
        table: dict[str, str | None] = {}
        for other in self.hosts.values():
            table[other.name] = other.named_at
        table[host] = LOOPBACK_NAME if self.loopback_names else own.named_at
        table.update(names or {})
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{address}\t{name}" for name, address in table.items() if address is not None]
        return "\n".join(lines) + "\n"

    def write_hosts(self, host: str, names: Mapping[str, str | None] | None = None) -> None:
        """Rewrite `host`'s hosts file in place (the bind mount holds the inode: no rename), also mid-job."""
        text = self.hosts_text(host, names).encode()
        fd = os.open(self.hosts_file(host), os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644)
        try:
            os.write(fd, text)
        finally:
            os.close(fd)

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """argv run on `host`: in its namespace, its own UTS namespace named after it."""
        ns = self.hosts[host].ns
        script = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", script, host, *argv]

    def run(
        self,
        jobs: Sequence[tuple[str, Sequence[str], Mapping[str, str]]],
        *,
        timeout: float,
        folder: Path,
    ) -> list[Result]:
        """Start every (host, argv, env) at once; wait for all until `timeout` s, then kill the rest."""
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        procs: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
        try:
            for k, (host, argv, env) in enumerate(jobs):
                out, err = folder / f"{k}-{host}.out", folder / f"{k}-{host}.err"
                with out.open("wb") as stdout, err.open("wb") as stderr:
                    proc = subprocess.Popen(
                        self.command(host, argv),
                        env=dict(env),
                        stdin=subprocess.DEVNULL,
                        stdout=stdout,
                        stderr=stderr,
                        start_new_session=True,  # its own group: a straggler is killed with its children
                    )
                procs.append((proc, out, err))
            ended: dict[int, float] = {}
            while len(ended) < len(procs) and time.monotonic() - started < timeout:
                for k, (proc, _, _) in enumerate(procs):
                    if k not in ended and proc.poll() is not None:
                        ended[k] = time.monotonic() - started
                time.sleep(0.05)
        finally:
            for proc, _, _ in procs:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        results = []
        for k, ((host, argv, _), (proc, out, err)) in enumerate(zip(jobs, procs, strict=True)):
            code = proc.returncode if k in ended else None
            results.append(
                Result(
                    host=host,
                    argv=list(argv),
                    returncode=code,
                    stdout=out.read_text(errors="replace"),
                    stderr=err.read_text(errors="replace"),
                    elapsed=ended.get(k, time.monotonic() - started),
                )
            )
        return results

    def remove(self) -> None:
        """Kill every process in the namespaces, delete them and their /etc/netns folders."""
        for ns in self.namespaces:
            _remove_namespace(ns)
        _forget_etc_netns()
        self.removed = True


def run_prefix() -> str:
    return f"{PREFIX}{os.getpid()}"


def create(
    names: Sequence[str],
    *,
    loopback_names: bool = False,
    mgmt: Sequence[str] = (),
    bridge: bool | None = None,
    subnet: str = DATA_NET,
    tag: str = "",
) -> Network:
    """Emulated hosts `names` (host i gets 10.9.0.i), made whole or not at all (removed on any error).

    `loopback_names`: each host's own name on 127.0.1.1 in its file (Debian's default).
    `mgmt`: hosts that get a management interface (10.8.0.i, default route, their name's address).
    `bridge`: the hosts share a bridge; default: two hosts are one veth pair, more share a bridge.
    `subnet`: the data network's first three octets (10.9.0; another private one, only inside the namespaces).
    `tag`: a few letters in the names, for more than one network in a run (`ctnet<pid><tag>-n1`).
    """
    if len(set(names)) != len(names) or not all(re.fullmatch(r"[a-z][a-z0-9]{0,8}", n) for n in names):
        raise ValueError(f"host names must be distinct, short and lower-case: {names!r}")
    if not re.fullmatch(r"10\.\d{1,3}\.\d{1,3}|192\.168\.\d{1,3}", subnet):
        raise ValueError(f"subnet must be a private /24's first three octets (10.x.y, 192.168.x): {subnet!r}")
    if not re.fullmatch(r"[a-z]{0,4}", tag):
        raise ValueError(f"tag must be a few lower-case letters: {tag!r}")
    remove_stale()
    prefix = run_prefix() + tag
    hosts = {}
    for i, name in enumerate(names, start=1):
        hosts[name] = Host(
            name=name,
            index=i,
            ns=f"{prefix}-{name}",
            iface=f"dat-{name}",
            address=f"{subnet}.{i}",
            mgmt_iface=f"mgt-{name}" if name in mgmt else None,
            mgmt_address=f"{MGMT_NET}.{i}" if name in mgmt else None,
        )
    shared = bridge if bridge is not None else len(names) > 2
    net = Network(prefix=prefix, hosts=hosts, loopback_names=loopback_names, subnet=subnet)
    try:
        for host in hosts.values():
            _ip("netns", "add", host.ns)
            _MADE.add(host.ns)
            _ip("-n", host.ns, "link", "set", "lo", "up")
        if shared:
            _switch(net, f"{prefix}-sw", [(h, h.iface, h.address) for h in hosts.values()], subnet)
        else:
            first, second = hosts.values()
            peer = ["peer", "name", second.iface, "netns", second.ns]
            _ip("-n", first.ns, "link", "add", first.iface, "type", "veth", *peer)
            for h in (first, second):
                _ip("-n", h.ns, "addr", "add", f"{h.address}/24", "dev", h.iface)
                _ip("-n", h.ns, "link", "set", h.iface, "up")
        managed = [h for h in hosts.values() if h.mgmt_iface and h.mgmt_address]
        if managed:
            _switch(net, f"{prefix}-mg", [(h, str(h.mgmt_iface), str(h.mgmt_address)) for h in managed], MGMT_NET)
            for h in managed:
                _ip("-n", h.ns, "route", "add", "default", "via", f"{MGMT_NET}.{SWITCH}", "dev", str(h.mgmt_iface))
        for host in hosts.values():
            folder = ETC_NETNS / host.ns
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "resolv.conf").write_text("nameserver 127.0.0.1\n")  # the host's own loopback: no answer
            net.write_hosts(host.name)
    except BaseException:
        net.remove()
        raise
    return net


def _switch(net: Network, ns: str, ports: Sequence[tuple[Host, str, str]], subnet: str) -> None:
    """A bridge in namespace `ns` holding subnet.254, with each (host, interface, address) on it."""
    _ip("netns", "add", ns)
    _MADE.add(ns)
    net.extra_namespaces.append(ns)
    _ip("-n", ns, "link", "set", "lo", "up")
    _ip("-n", ns, "link", "add", "br0", "type", "bridge")
    for host, iface, address in ports:
        port = f"p{host.index}-{iface}"[:15]
        _ip("-n", host.ns, "link", "add", iface, "type", "veth", "peer", "name", port, "netns", ns)
        _ip("-n", ns, "link", "set", port, "master", "br0")
        _ip("-n", ns, "link", "set", port, "up")
        _ip("-n", host.ns, "addr", "add", f"{address}/24", "dev", iface)
        _ip("-n", host.ns, "link", "set", iface, "up")
    _ip("-n", ns, "addr", "add", f"{subnet}.{SWITCH}/24", "dev", "br0")
    _ip("-n", ns, "link", "set", "br0", "up")


@contextlib.contextmanager
def network(
    names: Sequence[str],
    *,
    loopback_names: bool = False,
    mgmt: Sequence[str] = (),
    bridge: bool | None = None,
    subnet: str = DATA_NET,
) -> Iterator[Network]:
    """`create(names, ...)`, removed when the block ends however it ends."""
    net = create(names, loopback_names=loopback_names, mgmt=mgmt, bridge=bridge, subnet=subnet)
    try:
        yield net
    finally:
        net.remove()


def main(argv: Sequence[str]) -> int:
    if list(argv) != ["clean"]:
        print("usage: python tests/launchers/netns.py clean", file=sys.stderr)
        return 2
    removed = remove_stale()
    print(f"removed {len(removed)} stale namespace(s): {shlex.join(removed)}" if removed else "nothing stale")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
