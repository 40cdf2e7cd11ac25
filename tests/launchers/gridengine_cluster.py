"""A real, throw-away Grid Engine cell on this machine (Debian's Son of Grid Engine 8.1.9), for tests.

Module use::

    from tests.launchers import gridengine_cluster
    cell = gridengine_cluster.start()     # reuses a running, configured cell
    cell.qsub(["-pe", "mpi", "4", "job.sh"], env={...})   # waits for the job (qsub -sync y)
    cell.stop()                           # only what start() started

CLI use: ``python tests/launchers/gridengine_cluster.py start|status|stop``.

What it does (see shared/LAUNCHERS.md, "Grid Engine"): the packages' postinst built the cell
``default`` under /var/lib/gridengine but started nothing (no systemd). `start` maps this host's
name in the cell's ``host_aliases`` when it reverse-resolves to another name (else every client
gets "access denied"), starts ``sge_qmaster`` and ``sge_execd`` through their init scripts with a
clean environment (jobs inherit the execd's), makes this host a submit host, sets the scheduler
interval to 1 s (the default makes each job wait 15 s), and adds the parallel environment ``mpi``
(4 slots, ``$fill_up``, ``control_slaves TRUE``, ``job_is_first_task FALSE``) and the queue
``all.q`` (4 slots, batch and interactive, ``pe_list mpi``).

Jobs run as root: the cell's ``min_uid``/``min_gid`` (1000 by default, so root cannot submit) are
set to 0. An ordinary user cannot run the tests' interpreter here (it lives under /root, mode
0700), and the user changes only HOME, USER and LOGNAME in a job's environment (compare
tests/captures-hpc/gridengine, submitted by an ordinary user).

`stop` runs ``qconf -ke <host>`` and ``qconf -km`` (Grid Engine's own shutdown) and waits for the
two daemons' pids to end. Needs root. Plain stdlib only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SGE_ROOT = Path("/var/lib/gridengine")
CELL = "default"
PE = "mpi"
QUEUE = "all.q"
SLOTS = 4
QMASTER_PID = Path("/var/spool/gridengine/qmaster/qmaster.pid")
EXECD_PID = Path("/var/run/gridengine/execd.pid")
INIT = {"qmaster": Path("/etc/init.d/gridengine-master"), "execd": Path("/etc/init.d/gridengine-exec")}
TOOLS = ("qsub", "qconf", "qstat", "qmod", "qrsh", "sge_qmaster", "sge_execd")
START_TIMEOUT = 60.0
SYSTEM_PATH = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class CellError(RuntimeError):
    """The cell could not be started or configured (the message says which command failed)."""


def installed() -> bool:
    """True if the Grid Engine daemons, the client tools and the cell built by the packages are here."""
    tools = all(shutil.which(tool, path=SYSTEM_PATH) for tool in TOOLS)
    return tools and (SGE_ROOT / CELL / "common" / "act_qmaster").exists() and all(p.exists() for p in INIT.values())


def client_env() -> dict[str, str]:
    """What Grid Engine's client commands need, and nothing of an enclosing job."""
    return {"PATH": SYSTEM_PATH, "SGE_ROOT": str(SGE_ROOT), "SGE_CELL": CELL, "HOME": "/root", "LANG": "C.UTF-8"}


def _run(args: list[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(args, env=client_env(), capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CellError(f"{' '.join(args)} did not finish in {timeout} s") from exc
    if check and done.returncode != 0:
        raise CellError(f"{' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}".strip())
    return done


def _pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid if Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1] not in "ZX" else None


def _wait(what: str, ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise CellError(f"{what} not within {timeout:.0f} s")
        time.sleep(0.2)


def _host() -> str:
    return (SGE_ROOT / CELL / "common" / "act_qmaster").read_text().strip()


def _alias_host(host: str) -> None:
    """Name this host in host_aliases when its address resolves back to another name (vm -> localhost)."""
    try:
        back = socket.gethostbyaddr(socket.gethostbyname(host))[0]
    except OSError:
        return
    aliases = SGE_ROOT / CELL / "common" / "host_aliases"
    line = f"{host} {back}"
    if back != host and line not in (aliases.read_text().splitlines() if aliases.exists() else []):
        with aliases.open("a") as handle:
            handle.write(line + "\n")


def _configure(host: str) -> None:
    """This host submits; root may submit; a 1 s scheduler; the PE and the queue (added, or set again)."""
    if host not in _run(["qconf", "-ss"], check=False).stdout.split():
        _run(["qconf", "-as", host])
    with tempfile.TemporaryDirectory() as folder:
        conf = Path(folder) / "global"
        text = _run(["qconf", "-sconf"]).stdout
        lines = [line for line in text.splitlines() if not line.startswith(("min_uid", "min_gid", "#"))]
        conf.write_text("\n".join([*lines, "min_uid 0", "min_gid 0"]) + "\n")
        _run(["qconf", "-Mconf", str(conf)])
        sched = Path(folder) / "sched"
        text = _run(["qconf", "-ssconf"]).stdout
        lines = [line for line in text.splitlines() if not line.startswith("schedule_interval")]
        sched.write_text("\n".join([*lines, "schedule_interval 0:0:1"]) + "\n")
        _run(["qconf", "-Msconf", str(sched)])
        pe = Path(folder) / PE
        pe.write_text(
            f"pe_name {PE}\nslots {SLOTS}\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args NONE\n"
            "stop_proc_args NONE\nallocation_rule $fill_up\ncontrol_slaves TRUE\njob_is_first_task FALSE\n"
            "urgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n"
        )
        exists = _run(["qconf", "-sp", PE], check=False).returncode == 0
        _run(["qconf", "-Mp" if exists else "-Ap", str(pe)])
        queue = Path(folder) / QUEUE
        queue.write_text(_queue_conf(host))
        exists = _run(["qconf", "-sq", QUEUE], check=False).returncode == 0
        _run(["qconf", "-Mq" if exists else "-Aq", str(queue)])


def _queue_conf(host: str) -> str:
    fields = {
        "qname": QUEUE,
        "hostlist": host,
        "seq_no": "0",
        "load_thresholds": "NONE",
        "suspend_thresholds": "NONE",
        "nsuspend": "1",
        "suspend_interval": "00:05:00",
        "priority": "0",
        "min_cpu_interval": "00:05:00",
        "processors": "UNDEFINED",
        "qtype": "BATCH INTERACTIVE",
        "ckpt_list": "NONE",
        "pe_list": PE,
        "rerun": "FALSE",
        "slots": str(SLOTS),
        "tmpdir": "/tmp",
        "shell": "/bin/sh",
        "prolog": "NONE",
        "epilog": "NONE",
        "shell_start_mode": "posix_compliant",
        "starter_method": "NONE",
        "suspend_method": "NONE",
        "resume_method": "NONE",
        "terminate_method": "NONE",
        "notify": "00:00:60",
        "owner_list": "NONE",
        "user_lists": "NONE",
        "xuser_lists": "NONE",
        "subordinate_list": "NONE",
        "complex_values": "NONE",
        "projects": "NONE",
        "xprojects": "NONE",
        "calendar": "NONE",
        "initial_state": "default",
    }
    limits = ("rt", "cpu", "fsize", "data", "stack", "core", "rss", "vmem")
    fields |= {f"{kind}_{limit}": "INFINITY" for limit in limits for kind in ("s", "h")}
    return "".join(f"{key} {value}\n" for key, value in fields.items())


def _queue_ready(host: str) -> bool:
    """The queue instance on this host is known and not in state u(nknown), d(isabled) or E(rror)."""
    out = _run(["qstat", "-f", "-q", f"{QUEUE}@{host}"], check=False).stdout
    for line in out.splitlines():
        words = line.split()
        if words and words[0] == f"{QUEUE}@{host}":
            return len(words) < 6 or not set(words[5]) & set("udE")
    return False


def _start_daemon(name: str) -> None:
    done = subprocess.run(
        [str(INIT[name]), "start"], env={"PATH": SYSTEM_PATH}, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise CellError(f"{INIT[name]} start exited {done.returncode}: {done.stdout}{done.stderr}".strip())


@dataclass
class Cell:
    """A running cell: its host, and whether this process started its daemons (then `stop` stops them)."""

    host: str
    started: bool

    def env(self) -> dict[str, str]:
        return client_env()

    def qsub(self, args: list[str], *, timeout: float = 300) -> str:
        """Submit a job and wait for it (``qsub -sync y``); a non-zero exit of the job fails."""
        done = _run(["qsub", "-sync", "y", *args], timeout=timeout, check=False)
        if done.returncode != 0:
            raise CellError(f"qsub {' '.join(args)} exited {done.returncode}: {done.stdout}{done.stderr}".strip())
        return done.stdout

    def diagnose(self) -> str:
        """Why jobs do not run: queue states explained, and the qmaster's last messages."""
        states = _run(["qstat", "-f", "-explain", "aAcE", "-u", "*"], check=False).stdout
        messages = Path("/var/spool/gridengine/qmaster/messages")
        tail = messages.read_text(errors="replace").splitlines()[-15:] if messages.exists() else []
        return states + "\n".join(tail)

    def stop(self) -> None:
        if self.started:
            stop()


def running() -> bool:
    """Both daemons run and the qmaster answers."""
    if _pid(QMASTER_PID) is None or _pid(EXECD_PID) is None:
        return False
    return _run(["qconf", "-sh"], check=False, timeout=10).returncode == 0


def start(*, timeout: float = START_TIMEOUT) -> Cell:
    """Start (or reuse) the cell, configured for the tests; see the module docstring."""
    if os.geteuid() != 0:
        raise CellError("the Grid Engine cell needs root")
    if not installed():
        raise CellError("Grid Engine is not installed (apt-get install gridengine-master gridengine-exec ...)")
    host = _host()
    started = False
    if not running():
        _alias_host(host)
        if _pid(QMASTER_PID) is None:
            _start_daemon("qmaster")
            _wait("sge_qmaster answering", lambda: _run(["qconf", "-sh"], check=False).returncode == 0, timeout)
        started = True
    # before the execd starts: it reads min_uid/min_gid once, and a stale 1000 fails every root job
    _configure(host)
    if _pid(EXECD_PID) is None:
        _start_daemon("execd")
    _run(["qmod", "-cq", QUEUE], check=False)  # clear an error state a failed job left behind
    _wait(f"queue {QUEUE}@{host} ready", lambda: _queue_ready(host), timeout)
    return Cell(host=host, started=started)


def stop() -> None:
    """Shut the daemons down with Grid Engine's own commands and wait for their pids to end."""
    pids = [pid for pid in (_pid(QMASTER_PID), _pid(EXECD_PID)) if pid is not None]
    if not pids:
        return
    host = _host()
    _run(["qconf", "-ke", host], check=False)
    _run(["qconf", "-km"], check=False)
    _wait("the Grid Engine daemons ended", lambda: all(_pid(p) is None for p in (QMASTER_PID, EXECD_PID)), 30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("command", choices=("start", "status", "stop"))
    command = parser.parse_args(argv).command
    began = time.monotonic()
    if command == "start":
        cell = start()
        print(f"cell up on {cell.host} ({'started' if cell.started else 'reused'}) in {time.monotonic() - began:.1f} s")
    elif command == "stop":
        stop()
        print(f"stopped in {time.monotonic() - began:.1f} s")
    else:
        print("running" if running() else "not running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
