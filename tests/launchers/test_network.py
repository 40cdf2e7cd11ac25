"""The network faults that hang a job, on hosts emulated in network namespaces (issue 33, "Tested for real").

Every host is a network namespace of tests/launchers/netns.py: its own data interface `dat-<host>`
(10.9.0.<i>), host name and /etc/hosts. One process per host, each with a static torch-style
environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
TORCHELASTIC_RUN_ID: the `torchelastic` source, multi-node, without TORCHELASTIC_USE_AGENT_STORE, so
the check meets on the main port itself). Each case runs `python -m resolver check --format json`
on every host, asserts every process's exit status and the problem or warning that names the fault,
and prints those lines (`pytest -s` shows them); the plain torch Gloo program
(tests/launchers/network_worker.py) shows where training fails or works.

Run (as root): CLUSTER_TOPOLOGY_SYSTEM_TESTS=1 python -m pytest -s tests/launchers/test_network.py
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SYSTEM_TESTS, require_system_tests, require_tool, terminate_interrupts
from tests.launchers import netns
from tests.launchers.netns import Network, Result

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
WORKER = Path(__file__).resolve().parent / "network_worker.py"
PORT = 29511  # the namespaces are this run's alone: no other process holds a port there
CHECK_TIMEOUT = 20.0
GLOO_TIMEOUT = 10.0  # init_process_group's timeout in the worker: a group that cannot form ends by itself
KILL_AFTER = 20.0  # every process of a launch is killed by then (the check's or Gloo's timeout, plus start-up)
FAILING = 12.0  # ... of a Gloo launch that cannot form its group (rank 0 would wait 75 s, past its timeout)
KEPT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")  # of this process's environment; nothing else leaks in


@dataclass
class Process:
    """One process of a launch: its rank, its result and (for the check) its report."""

    rank: int
    result: Result
    report: dict[str, Any] | None

    @property
    def host(self) -> str:
        return self.result.host

    @property
    def rc(self) -> int | None:
        return self.result.returncode


class Hosts:
    """The `emulated_hosts` fixture: `emulated_hosts(["n1", "n2"], ...)` makes a network (netns.create)."""

    def __init__(self) -> None:
        self.made: list[Network] = []

    def __call__(
        self,
        names: Sequence[str],
        *,
        loopback_names: bool = False,
        mgmt: Sequence[str] = (),
        bridge: bool | None = None,
        subnet: str = netns.DATA_NET,
    ) -> Network:
        tag = "abcd"[len(self.made)] if self.made else ""
        net = netns.create(names, loopback_names=loopback_names, mgmt=mgmt, bridge=bridge, subnet=subnet, tag=tag)
        self.made.append(net)
        return net

    def remove(self) -> None:
        for net in self.made:
            net.remove()


@pytest.fixture
def emulated_hosts() -> Iterator[Hosts]:
    """Makes emulated hosts (network namespaces, veths, /etc/netns/<ns>/); all removed at the end.

    A system test (tests/conftest.py): runs only with CLUSTER_TOPOLOGY_SYSTEM_TESTS=1, as root.
    Everything is removed when the test ends, fails or is interrupted (Ctrl-C, SIGTERM, SIGHUP), and
    what a run that died left is removed before anything is made.
    """
    require_system_tests("creates network namespaces, veth pairs and /etc/netns/<host>/hosts")
    require_tool("ip", "unshare", "hostname")
    with terminate_interrupts():
        hosts = Hosts()
        try:
            yield hosts
        finally:
            hosts.remove()


@pytest.fixture(autouse=True)
def _own_line() -> None:
    print(flush=True)  # with -s, a test's first printed line starts on a line of its own, not after a dot


# -- launching ------------------------------------------------------------------------------------------


def job_env(
    net: Network,
    host: str,
    *,
    main: str,
    port: int,
    run_id: str,
    extra: Mapping[str, str | None],
    per_host: int = 1,
    local: int = 0,
) -> dict[str, str]:
    """The static torch-style environment of `host`'s process `local` of `per_host` (rank: the host's index - 1
    times `per_host`, plus `local`), then `extra` (None: unset)."""
    node = net.hosts[host].index - 1
    env = {k: os.environ[k] for k in KEPT if k in os.environ}
    env.update(
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS="1",
        MASTER_ADDR=main,
        MASTER_PORT=str(port),
        WORLD_SIZE=str(len(net.hosts) * per_host),
        RANK=str(node * per_host + local),
        LOCAL_RANK=str(local),
        LOCAL_WORLD_SIZE=str(per_host),
        GROUP_RANK=str(node),
        TORCHELASTIC_RUN_ID=f"{net.prefix}{run_id}",
    )
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


Env = Mapping[str, "str | None"]


def launch(
    net: Network,
    argv: Sequence[str],
    folder: Path,
    *,
    timeout: float = KILL_AFTER,
    main: str = "n1",
    port: int = PORT,
    run_id: str = "",
    env: Env | None = None,
    per_host: Mapping[str, Env] | None = None,
) -> dict[str, Process]:
    """`argv` on every host at once, each with its job environment plus `env`, plus its `per_host`; by host."""
    jobs = []
    for host in net.hosts:
        extra = {**(env or {}), **(per_host or {}).get(host, {})}
        jobs.append((host, argv, job_env(net, host, main=main, port=port, run_id=run_id, extra=extra)))
    results = net.run(jobs, timeout=timeout, folder=folder)
    processes = {}
    for host, result in zip(net.hosts, results, strict=True):
        report = reported(result) if list(argv[:4]) == [PY, "-m", "resolver", "check"] else None
        processes[host] = Process(rank=net.hosts[host].index - 1, result=result, report=report)
    return processes


def reported(result: Result) -> dict[str, Any] | None:
    """The report `check --format json` printed: one JSON object and nothing else; None without output."""
    if not result.stdout.strip():
        return None
    assert result.stdout.count("\n") == 1, result.stdout
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def check(
    net: Network,
    folder: Path,
    *,
    timeout: float = CHECK_TIMEOUT,
    port: int = PORT,
    env: Env | None = None,
    per_host: Mapping[str, Env] | None = None,
) -> dict[str, Process]:
    """`cluster-topology check --format json` on every host."""
    argv = [PY, "-m", "resolver", "check", "--format", "json", "--timeout", str(timeout)]
    return launch(net, argv, folder, timeout=timeout + 15, port=port, run_id="check", env=env, per_host=per_host)


def gloo(
    net: Network,
    folder: Path,
    *,
    ifname: bool = False,
    checked: bool = False,
    port: int = PORT,
    kill_after: float = KILL_AFTER,
) -> dict[str, Process]:
    """The plain Gloo program on every host; under `cluster-topology exec --ifname` with `ifname`, and
    `exec --check --ifname` (the check first, on the same port) with `checked` too."""
    argv = [PY, str(WORKER), str(GLOO_TIMEOUT)]
    if ifname:
        check = ["--check", "--check-timeout", str(CHECK_TIMEOUT)] if checked else []
        argv = [PY, "-m", "resolver", "exec", *check, "--ifname", "--", *argv]
    run_id = ("checked" if checked else "ifname") if ifname else "plain"
    return launch(net, argv, folder, timeout=kill_after, port=port, run_id=run_id)


def dump(processes: Mapping[str, Process]) -> str:
    """Every process's exit status and output, for an assertion's message."""
    return "\n".join(
        f"--- {p.host} rank {p.rank} exit {p.rc} ({p.result.elapsed:.1f} s)\n"
        f"stdout: {p.result.stdout[-3000:]}\nstderr: {p.result.stderr[-3000:]}"
        for p in processes.values()
    )


def entries(report: Mapping[str, Any] | None, key: str, kind: str) -> list[dict[str, Any]]:
    """The problems (key "problems") or warnings ("warnings") of `kind` in a report."""
    if report is None:
        return []
    return [p for p in report.get(key) or [] if p.get("kind") == kind]


def show_check(case: str, processes: Mapping[str, Process]) -> None:
    """Print every process's exit status and the lines that name the faults (the figures the issue asks for)."""
    for p in processes.values():
        report = p.report or {}
        lines = [f"{e['kind']}: {e['message']}" for e in report.get("problems") or []]
        lines += [f"warning {e['kind']}: {e['message']}" for e in report.get("warnings") or []]
        if not report:
            lines = [f"no report; stderr: {p.result.stderr.strip()[-400:]}"]
        if not lines:
            lines = [str(report.get("summary"))]
        print(f"[{case}] check on {p.host} (rank {p.rank}): exit {p.rc} in {p.result.elapsed:.1f} s", flush=True)
        for line in lines:
            print(f"[{case}]     {line}", flush=True)


def show_gloo(case: str, processes: Mapping[str, Process]) -> None:
    for p in processes.values():
        if p.rc == 0:
            line = p.result.stdout.strip().splitlines()[-1] if p.result.stdout.strip() else "(no output)"
        else:
            line = fault_line(p.result.stderr)
        status = "killed" if p.rc is None else f"exit {p.rc}"
        print(f"[{case}] gloo on {p.host} (rank {p.rank}): {status} in {p.result.elapsed:.1f} s: {line}", flush=True)
        for said in (line for line in p.result.stderr.splitlines() if line.startswith("check")):
            print(f"[{case}]     {said[:400]}", flush=True)  # exec --check's own lines


def fault_line(stderr: str) -> str:
    """The line of torch's error that names the fault: the last one naming an address, else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    named = [line for line in lines if re.search(r"\d+\.\d+\.\d+\.\d+|Connection|refused|unreachable", line)]
    return (named or lines or ["(no stderr)"])[-1][:400]


def gloo_ok(processes: Mapping[str, Process], world: int) -> None:
    """Every process formed the group: exit 0 and the all_reduce of rank+1 over `world` ranks."""
    for p in processes.values():
        assert p.rc == 0, dump(processes)
        row = json.loads(p.result.stdout.strip().splitlines()[-1])
        assert row["all_reduce"] == world * (world + 1) / 2 and row["hostname"] == p.host, row


# -- the harness itself -----------------------------------------------------------------------------------


def test_emulated_hosts_have_their_own_names_addresses_and_no_way_out(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2", "n3"], loopback_names=True, mgmt=["n3"])
    probe = (
        "import json, socket, errno\n"
        "def where(name):\n"
        "    try: return socket.gethostbyname(name)\n"
        "    except OSError as e: return str(e)\n"
        "def out(address):\n"
        "    s = socket.socket(); s.settimeout(3)\n"
        "    try: s.connect((address, 53)); return 'connected'\n"
        "    except OSError as e: return errno.errorcode.get(e.errno or 0, str(e))\n"
        "    finally: s.close()\n"
        "print(json.dumps({'host': socket.gethostname(), 'names': {n: where(n) for n in ('n1', 'n2', 'n3', 'nosuch')},"
        " 'ifaces': sorted(n for _, n in socket.if_nameindex()), 'out': out('10.255.255.53'),"
        " 'switch': out('10.9.0.254')}))\n"
    )
    found = launch(net, [PY, "-c", probe], tmp_path / "probe", timeout=15)
    rows = {p.host: json.loads(p.result.stdout) for p in found.values() if p.rc == 0}
    assert sorted(rows) == ["n1", "n2", "n3"], dump(found)
    for host, row in rows.items():
        print(f"[harness] {host}: {row}", flush=True)
        assert row["host"] == host
        assert row["names"][host] == "127.0.1.1"  # its own name, as Debian maps it
        assert row["names"]["nosuch"].startswith("[Errno")  # not in its file: fails (no DNS answers)
        assert "lo" in row["ifaces"] and f"dat-{host}" in row["ifaces"]
        assert row["switch"] == "ECONNREFUSED"  # the bridge's address: in the namespaces, nothing listens
    assert rows["n1"]["names"] | {"n1": "-"} == {"n1": "-", "n2": "10.9.0.2", "n3": "10.8.0.3"} | {
        "nosuch": rows["n1"]["names"]["nosuch"]
    }
    assert rows["n1"]["out"] == "ENETUNREACH"  # no route out of the namespaces
    assert sorted(rows["n3"]["ifaces"]) == ["dat-n3", "lo", "mgt-n3"]
    assert rows["n3"]["out"] in ("ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "timed out")  # dropped at the gateway


def test_a_name_can_appear_while_the_job_runs(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2"])
    net.write_hosts("n2", {"n1": None})
    probe = (
        "import socket, time\nt = time.monotonic()\n"
        "while True:\n"
        "    try: print(socket.gethostbyname('n1'), round(time.monotonic() - t, 1)); break\n"
        "    except OSError: time.sleep(0.1)\n"
    )
    timer = threading.Timer(2.0, net.write_hosts, args=("n2",))
    timer.start()
    try:
        proc = launch(net, [PY, "-c", probe], tmp_path / "late", timeout=15)["n2"]
    finally:
        timer.cancel()
    address, waited = proc.result.stdout.split()
    assert proc.rc == 0 and address == "10.9.0.1" and 1.0 < float(waited) < 5.0, proc.result


# -- case 1: hosts whose own names map to 127.0.1.1 ------------------------------------------------------------
#
# Gloo lets the side of a pair with the larger address (bytes, then port) connect, to the address the other
# published (gloo/transport/tcp/pair.cc). On 10.9.0.0/24 a host published at 127.0.1.1 dials out itself, so
# one such host among 10.9.0.x ones goes unnoticed; two fail (the dialling one reaches its own loopback). On a
# network whose addresses sort above 127 (192.168.x), one is enough: the others dial 127.0.1.1.


@pytest.mark.parametrize(
    ("subnet", "on_loopback"),
    [("10.9.0", ("n1", "n2")), ("192.168.209", ("n1",))],
    ids=["both-on-10.9.0", "rank0-host-on-192.168.209"],
)
def test_hosts_naming_themselves_on_loopback(
    emulated_hosts: Hosts, tmp_path: Path, subnet: str, on_loopback: tuple[str, ...]
) -> None:
    net = emulated_hosts(["n1", "n2"], loopback_names=True, subnet=subnet)
    for host in net.hosts.values():
        if host.name not in on_loopback:
            net.write_hosts(host.name, {host.name: host.address})
    case = f"1 {'+'.join(on_loopback)} on 127.0.1.1, {subnet}.0/24"
    with ThreadPoolExecutor(1) as pool:  # the failing run waits to be killed: meanwhile, the others
        plain_run = pool.submit(gloo, net, tmp_path / "plain", kill_after=FAILING)
        found = check(net, tmp_path / "check", port=PORT + 1)
        fixed = gloo(net, tmp_path / "ifname", ifname=True, port=PORT + 2)
        checked = gloo(net, tmp_path / "checked", ifname=True, checked=True, port=PORT + 3)
        plain = plain_run.result()
    show_gloo(f"{case}, plain gloo", plain)
    show_check(f"{case}, check", found)
    show_gloo(f"{case}, gloo under exec --ifname", fixed)
    show_gloo(f"{case}, gloo under exec --check --ifname", checked)

    assert all(p.rc != 0 for p in plain.values()), dump(plain)  # failed (or killed): never formed the group
    assert any("remote=[127.0.1.1]" in p.result.stderr for p in plain.values()), dump(plain)
    for p in found.values():
        assert p.rc == 3, dump(found)
        for host in net.hosts.values():
            named = [e for e in entries(p.report, "problems", "hostname") if host.name in e["hosts"]]
            if host.name not in on_loopback:
                assert not named, named
                continue
            assert named, f"no hostname problem names {host.name}:\n{dump(found)}"
            message = " ".join(e["message"] for e in named)
            assert host.name in message and "127.0.1.1" in message, message
            assert f"GLOO_SOCKET_IFNAME={host.iface}" in message, message
    nodes = found["n1"].report["nodes"] if found["n1"].report else None
    assert nodes is not None and [n["interface"] for n in nodes] == ["dat-n1", "dat-n2"], nodes
    for run in (fixed, checked):  # the check, told exec sets the variables, lets the program start
        gloo_ok(run, 2)
        for p in run.values():
            row = json.loads(p.result.stdout.strip().splitlines()[-1])
            iface = net.hosts[p.host].iface
            assert row["GLOO_SOCKET_IFNAME"] == iface and row["NCCL_SOCKET_IFNAME"] == f"={iface}", row


# -- case 2: three hosts on a bridge, names on their real addresses ---------------------------------------------


def test_three_hosts_on_a_bridge(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2", "n3"])
    plain = gloo(net, tmp_path / "plain")
    show_gloo("2 three hosts, plain gloo", plain)
    gloo_ok(plain, 3)  # names on real addresses: training itself works across the bridge

    found = check(net, tmp_path / "check", port=PORT + 1)
    show_check("2 three hosts, check", found)
    assert all(p.rc == 0 for p in found.values()), dump(found)
    nodes = found["n1"].report["nodes"] if found["n1"].report else None
    print(f"[2 three hosts] rank 0's nodes: {nodes}", flush=True)
    assert nodes is not None
    assert [(n["host"], n["node_rank"], n["ranks"]) for n in nodes] == [("n1", 0, [0]), ("n2", 1, [1]), ("n3", 2, [2])]
    assert [n["interface"] for n in nodes] == ["dat-n1", "dat-n2", "dat-n3"]
    assert [n["address"] for n in nodes] == ["10.9.0.1", "10.9.0.2", "10.9.0.3"]
    for p in found.values():
        assert p.report is not None and p.report["problems"] == [] and p.report["warnings"] == [], dump(found)


# -- case 3: a host with a management interface (default route, its name) beside the data one ----------------------


def test_a_host_whose_name_is_on_its_management_interface(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2"], mgmt=["n2"])
    with ThreadPoolExecutor(1) as pool:  # the failing run waits to be killed: meanwhile, the others
        plain_run = pool.submit(gloo, net, tmp_path / "plain", kill_after=FAILING)
        found = check(net, tmp_path / "check", port=PORT + 1)
        exports = launch(net, [PY, "-m", "resolver", "--format", "env", "--ifname"], tmp_path / "env", timeout=20)
        fixed = gloo(net, tmp_path / "ifname", ifname=True, port=PORT + 2)
        plain = plain_run.result()
    show_gloo("3 management interface, plain gloo", plain)
    show_check("3 management interface, check", found)
    for p in exports.values():
        lines = [line for line in p.result.stdout.splitlines() if "SOCKET_IFNAME" in line]
        print(f"[3 management interface] --format env --ifname on {p.host}: exit {p.rc}: {lines}", flush=True)
    show_gloo("3 management interface, gloo under exec --ifname", fixed)

    assert all(p.rc != 0 for p in plain.values()), dump(plain)  # n2 published 10.8.0.2: n1 has no way there
    for p in found.values():
        assert p.rc == 3, dump(found)
        (problem,) = entries(p.report, "problems", "hostname")
        assert problem["hosts"] == ["n2"], problem
        assert "n2" in problem["message"] and "10.8.0.2" in problem["message"], problem
        assert "GLOO_SOCKET_IFNAME=dat-n2" in problem["message"], problem
    for p in exports.values():
        iface = net.hosts[p.host].iface
        assert p.rc == 0, p.result
        assert f"export GLOO_SOCKET_IFNAME={iface}" in p.result.stdout.splitlines(), p.result.stdout
        assert f"export NCCL_SOCKET_IFNAME=={iface}" in p.result.stdout.splitlines(), p.result.stdout
    gloo_ok(fixed, 2)
    row = json.loads(fixed["n2"].result.stdout.strip().splitlines()[-1])
    assert row["GLOO_SOCKET_IFNAME"] == "dat-n2" and row["NCCL_SOCKET_IFNAME"] == "=dat-n2", row


# -- case 4: MASTER_ADDR by name on one node, by address on the other -------------------------------------------


def test_main_address_by_name_and_by_address(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2"])
    found = check(net, tmp_path / "check", per_host={"n2": {"MASTER_ADDR": "10.9.0.1"}})
    show_check("4 MASTER_ADDR n1 and 10.9.0.1", found)
    for p in found.values():
        assert p.rc == 0, dump(found)
        assert p.report is not None and p.report["problems"] == [], dump(found)


# -- case 5: a host that resolves the main name elsewhere -------------------------------------------------------


def test_a_host_resolving_the_main_name_elsewhere(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2"], bridge=True)
    elsewhere = net.switch_address  # in the namespaces, nothing listens there
    assert elsewhere is not None
    net.write_hosts("n2", {"n1": elsewhere})
    found = check(net, tmp_path / "check", timeout=6)
    show_check("5 n2 resolves n1 elsewhere", found)
    n1, n2 = found["n1"], found["n2"]
    assert n2.rc == 3, dump(found)
    (problem,) = entries(n2.report, "problems", "endpoint")
    assert "n1" in problem["message"] and elsewhere in problem["message"], problem
    assert n1.rc == 3, dump(found)
    assert n1.report is not None and n1.report["missing"] == [1], dump(found)
    assert any(1 in p["ranks"] for p in n1.report["problems"]), n1.report


# -- case 6: NCCL_SOCKET_IFNAME on one host ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ok"),
    [("nosuch0", False), ("dat", True), ("=dat-n2", True), ("^dat-n2", False)],
    ids=["missing", "prefix", "exact", "excluded"],
)
def test_nccl_socket_ifname_on_one_host(emulated_hosts: Hosts, tmp_path: Path, value: str, ok: bool) -> None:
    net = emulated_hosts(["n1", "n2"])
    found = check(net, tmp_path / "check", per_host={"n2": {"NCCL_SOCKET_IFNAME": value}})
    show_check(f"6 NCCL_SOCKET_IFNAME={value} on n2", found)
    for p in found.values():
        if ok:
            assert p.rc == 0 and p.report is not None and p.report["problems"] == [], dump(found)
            continue
        assert p.rc == 3, dump(found)
        (problem,) = entries(p.report, "problems", "ifname")
        assert problem["variable"] == "NCCL_SOCKET_IFNAME" and problem["hosts"] == ["n2"], problem
        assert "NCCL_SOCKET_IFNAME" in problem["message"] and value in problem["message"], problem
        assert "n2" in problem["message"], problem


# -- case 6b: two processes per host, one of them with its own NCCL_SOCKET_IFNAME -------------------------------


@pytest.mark.parametrize("local", [0, 1])
def test_one_process_of_a_host_with_its_own_nccl_socket_ifname(
    emulated_hosts: Hosts, tmp_path: Path, local: int
) -> None:
    """Two processes on each host meet rank 0 through their host's leader (whichever binds first); the one on
    n2 that sets NCCL_SOCKET_IFNAME to an interface n2 lacks is named alone, by rank, in every report."""
    net = emulated_hosts(["n1", "n2"])
    argv = [PY, "-m", "resolver", "check", "--format", "json", "--timeout", str(CHECK_TIMEOUT)]
    jobs, ranks = [], []
    for host in net.hosts:
        for i in range(2):
            bad = {"NCCL_SOCKET_IFNAME": "nosuch0"} if (host, i) == ("n2", local) else {}
            env = job_env(net, host, main="n1", port=PORT, run_id="pair", extra=bad, per_host=2, local=i)
            jobs.append((host, argv, env))
            ranks.append(int(env["RANK"]))
    results = net.run(jobs, timeout=CHECK_TIMEOUT + 15, folder=tmp_path / "check")
    found = {
        f"{r.host}/{rank}": Process(rank=rank, result=r, report=reported(r))
        for rank, r in zip(ranks, results, strict=True)
    }
    show_check(f"6b NCCL_SOCKET_IFNAME=nosuch0 on rank {2 + local} of n2's two", found)
    for p in found.values():
        assert p.rc == 3, dump(found)
        (problem,) = entries(p.report, "problems", "ifname")
        assert problem["ranks"] == [2 + local] and problem["hosts"] == ["n2"], problem
        assert f"NCCL_SOCKET_IFNAME=nosuch0 selects no interface on n2 (rank {2 + local})" in problem["message"], (
            problem
        )
        assert p.report is not None and p.report["problems"] == [problem], dump(found)


# -- case 7: the main name appears 4 s after the job starts -------------------------------------------------------


def test_the_main_name_appears_late(emulated_hosts: Hosts, tmp_path: Path) -> None:
    net = emulated_hosts(["n1", "n2"])
    net.write_hosts("n2", {"n1": None})
    timer = threading.Timer(4.0, net.write_hosts, args=("n2",))
    timer.start()
    try:
        found = check(net, tmp_path / "check")
    finally:
        timer.cancel()
    show_check("7 n1 resolves on n2 after 4 s", found)
    assert all(p.rc == 0 for p in found.values()), dump(found)
    (late,) = entries(found["n2"].report, "warnings", "late_name")
    assert "n1" in late["message"], late
    waited = re.search(r"(\d+(?:\.\d+)?) ?s\b", late["message"])
    assert waited is not None and 2.0 <= float(waited.group(1)) <= CHECK_TIMEOUT, late


# -- case 8: a proxy variable without no_proxy ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variables", "taken"),
    [(("http_proxy",), "http_proxy"), (("grpc_proxy", "http_proxy"), "grpc_proxy")],
    ids=["http_proxy", "grpc_proxy-first"],
)
def test_a_proxy_variable_without_no_proxy(
    emulated_hosts: Hosts, tmp_path: Path, variables: tuple[str, ...], taken: str
) -> None:
    """gRPC takes the first of grpc_proxy, https_proxy, http_proxy: the warning names that one."""
    net = emulated_hosts(["n1", "n2"])
    proxies: dict[str, str | None] = dict.fromkeys(variables, "http://127.0.0.1:9")
    proxies.update(no_proxy=None, no_grpc_proxy=None)
    found = check(net, tmp_path / "check", env=proxies)
    show_check(f"8 {' and '.join(variables)}, no no_proxy", found)
    for p in found.values():
        assert p.rc == 0, dump(found)
        (warned,) = entries(p.report, "warnings", "proxy")
        assert warned["variable"] == taken and f"{taken}=http://127.0.0.1:9" in warned["message"], warned
        assert p.report is not None and p.report["problems"] == [], dump(found)


# -- everything is removed, also on interrupt ---------------------------------------------------------------------

CHILD_TESTS = """\
import json
import os
import signal
import time
from pathlib import Path

# SIGINT as a terminal's Ctrl-C finds it (a background run inherits it ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)


def test_holds_the_hosts(emulated_hosts):
    net = emulated_hosts(["n1", "n2", "n3"], mgmt=["n2"])
    Path(os.environ["CT_READY"]).write_text(json.dumps(net.namespaces))
    time.sleep(600)  # until the signal
"""


def ours(pid: int) -> tuple[list[str], list[str]]:
    """The namespaces and /etc/netns folders a run (pytest process `pid`) has now."""
    prefix = f"{netns.PREFIX}{pid}"
    mine = re.compile(rf"^{prefix}[a-z]*-")
    return [n for n in netns.namespaces() if mine.match(n)], [n for n in netns.etc_folders() if mine.match(n)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_removes_the_hosts(emulated_hosts: Hosts, tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "test_child.py").write_text(CHILD_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    ready = tmp_path / "ready.json"
    env = {**os.environ, SYSTEM_TESTS: "1", "CT_READY": str(ready), "PYTHONPATH": str(ROOT)}
    args = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.launchers.test_network", "-q", "test_child.py"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        assert ready.exists(), proc.communicate(timeout=5)[0] if proc.poll() is not None else "not ready in 60 s"
        made = json.loads(ready.read_text())
        assert ours(proc.pid)[0] == sorted(made) and len(ours(proc.pid)[1]) == 3  # hosts' folders, not bridges'
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    print(f"[cleanup] {sig.name}: child exit {proc.returncode}; it had {made}", flush=True)
    assert proc.returncode != 0, output
    assert ours(proc.pid) == ([], []), output


def test_a_crashed_runs_leftovers_are_removed(emulated_hosts: Hosts) -> None:
    """A dead run's namespaces (its pid is free), and ones named after this very pid that this process did
    not make (a run that died with the same pid: pids repeat), are removed before anything is made."""
    corpse = subprocess.Popen(["true"])
    corpse.wait()  # its pid is free: a run of that pid is dead
    stale = [f"{netns.PREFIX}{corpse.pid}-n1", f"{netns.PREFIX}{os.getpid()}z-n1"]
    sleepers = []
    try:
        for ns in stale:
            subprocess.run(["ip", "netns", "add", ns], check=True)
            (netns.ETC_NETNS / ns).mkdir(parents=True)
            (netns.ETC_NETNS / ns / "hosts").write_text("127.0.0.1 localhost\n")
            sleepers.append(subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"]))
        net = emulated_hosts(["n1", "n2"])  # removes what the dead runs left first
        for ns in stale:
            assert ns not in netns.namespaces() and ns not in netns.etc_folders(), ns
        for sleeper in sleepers:
            assert sleeper.wait(timeout=10) == -signal.SIGKILL  # what still ran there was killed
        assert all(ns in netns.namespaces() for ns in net.namespaces)
    finally:
        for sleeper in sleepers:
            if sleeper.poll() is None:
                sleeper.kill()
                sleeper.wait()
        for ns in stale:
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True, check=False)
            if (netns.ETC_NETNS / ns).exists():
                for entry in (netns.ETC_NETNS / ns).iterdir():
                    entry.unlink()
                (netns.ETC_NETNS / ns).rmdir()
