"""A real, throw-away Grid Engine cell on this machine (Debian's Son of Grid Engine 8.1.9), for tests.

Module use::

    from tests.launchers import gridengine_cluster
    cell = gridengine_cluster.start()     # starts the cell's daemons, or uses them if they run
    cell.qsub(["-pe", "mpi", "4", "job.sh"], env={...})   # waits for the job (qsub -sync y)
    cell.stop()                           # the last user stops what a harness run started

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

One cell per machine (its ports are the cell's, 6444 and 6445 in /etc/services), so runs share it:
each Cell holds a shared lock on USERS_LOCK while it lives, and ``Cell.stop`` stops the daemons only
when no other run holds it and a harness run started them (recorded in STATE_FILE); daemons that
were running before any harness run are never stopped. Starting and stopping take turns under
SETUP_LOCK. The ``host_aliases`` line a run wrote is taken out again, byte for byte, with the
daemons. The cell's configuration keeps what ``_configure`` set (the queue, the PE, the 1 s
scheduler, ``min_uid 0``): it lives in the cell's spool, which the packages made for these tests.

`stop` runs ``qconf -ke <host>`` and ``qconf -km`` (Grid Engine's own shutdown) and waits for the
two daemons' pids to end, with SIGINT, SIGTERM and SIGHUP held back until it is done. Needs root.
Plain stdlib only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # as a script, too: python tests/launchers/<this>.py

from tests.launchers.launching import signals_held

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
RUNTIME = Path(tempfile.gettempdir())
SETUP_LOCK = RUNTIME / "cluster-topology-gridengine.setup.lock"  # start and stop take turns
USERS_LOCK = RUNTIME / "cluster-topology-gridengine.users.lock"  # shared by every live Cell
STATE_FILE = RUNTIME / "cluster-topology-gridengine.json"  # what a harness run started and wrote


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


def _aliases() -> Path:
    return SGE_ROOT / CELL / "common" / "host_aliases"


def _alias_host(host: str) -> str:
    """Name this host in host_aliases when its address resolves back to another name (vm -> localhost).

    Returns the text appended ("" when nothing was), for _unalias_host; records in STATE_FILE
    whether the file was there before, so that _unalias_host leaves it as it was.
    """
    try:
        back = socket.gethostbyaddr(socket.gethostbyname(host))[0]
    except OSError:
        return ""
    aliases = _aliases()
    line = f"{host} {back}"
    raw = aliases.read_bytes() if aliases.exists() else b""
    if back == host or line in raw.decode(errors="replace").splitlines():
        return ""
    added = ("\n" if raw and not raw.endswith(b"\n") else "") + line + "\n"
    _save_state({**_load_state(), "aliases_added": added, "aliases_created": not aliases.exists()})
    with aliases.open("ab") as handle:
        handle.write(added.encode())
    return added


def _unalias_host(added: str, *, created: bool) -> None:
    """Take exactly what _alias_host appended out of host_aliases again (the file too if it made it)."""
    aliases = _aliases()
    if not added or not aliases.exists():
        return
    data = aliases.read_bytes()
    at = data.rfind(added.encode())
    if at < 0:
        return
    rest = data[:at] + data[at + len(added.encode()) :]
    if rest or not created:
        with aliases.open("r+b") as handle:  # in place: owner and mode stay
            handle.write(rest)
            handle.truncate()
    else:
        aliases.unlink()


def _load_state() -> dict[str, Any]:
    try:
        data = json.loads(STATE_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_state(state: dict[str, Any]) -> None:
    tmp = STATE_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, STATE_FILE)


@contextlib.contextmanager
def _setup_lock() -> Iterator[None]:
    with open(SETUP_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


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
    """A cell in use by this run: its host, and the shared lock that says so (see the module docstring)."""

    host: str
    started: bool  # this run started the daemons (the last run to stop stops them, whoever started them)
    _user: IO[str] | None = field(default=None, repr=False)

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
        """Stop using the cell; the last user stops the daemons if a harness run started them."""
        with signals_held(), _setup_lock():
            if self._user is None:
                return
            self._user.close()  # releases this run's shared lock
            self._user = None
            with open(USERS_LOCK, "a") as probe:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another run still uses the cell: it stops it
                if _load_state().get("started"):
                    _stop_locked()


def running() -> bool:
    """Both daemons run and the qmaster answers."""
    if _pid(QMASTER_PID) is None or _pid(EXECD_PID) is None:
        return False
    return _run(["qconf", "-sh"], check=False, timeout=10).returncode == 0


def start(*, timeout: float = START_TIMEOUT) -> Cell:
    """Start (or use) the cell, configured for the tests; see the module docstring.

    A failure or an interrupt (KeyboardInterrupt) half-way stops what this call started.
    """
    if os.geteuid() != 0:
        raise CellError("the Grid Engine cell needs root")
    if not installed():
        raise CellError("Grid Engine is not installed (apt-get install gridengine-master gridengine-exec ...)")
    host = _host()
    with _setup_lock():
        user = open(USERS_LOCK, "a")  # noqa: SIM115 - held for the Cell's life, closed by Cell.stop
        fcntl.flock(user, fcntl.LOCK_SH)
        cell = Cell(host=host, started=False, _user=user)

        def starting(daemon: str) -> None:  # recorded before the daemon starts: an interrupt then stops it
            _save_state({**_load_state(), "started": True})
            cell.started = True
            _start_daemon(daemon)

        try:
            if not running():
                _alias_host(host)
                if _pid(QMASTER_PID) is None:
                    starting("qmaster")
                    _wait("sge_qmaster answering", lambda: _run(["qconf", "-sh"], check=False).returncode == 0, timeout)
            # before the execd starts: it reads min_uid/min_gid once, and a stale 1000 fails every root job
            _configure(host)
            if _pid(EXECD_PID) is None:
                starting("execd")
            _run(["qmod", "-cq", QUEUE], check=False)  # clear an error state a failed job left behind
            _wait(f"queue {QUEUE}@{host} ready", lambda: _queue_ready(host), timeout)
        except BaseException:
            with signals_held():
                user.close()
                cell._user = None
                if cell.started:
                    _stop_locked()
            raise
    return cell


def _stop_locked() -> None:
    """Shut the daemons down with Grid Engine's own commands, wait for their pids, undo host_aliases."""
    pids = [pid for pid in (_pid(QMASTER_PID), _pid(EXECD_PID)) if pid is not None]
    if pids:
        host = _host()
        _run(["qconf", "-ke", host], check=False)
        _run(["qconf", "-km"], check=False)
        _wait("the Grid Engine daemons ended", lambda: all(_pid(p) is None for p in (QMASTER_PID, EXECD_PID)), 30)
    state = _load_state()
    _unalias_host(state.get("aliases_added", ""), created=bool(state.get("aliases_created")))
    with contextlib.suppress(FileNotFoundError):
        STATE_FILE.unlink()


def stop() -> None:
    """Stop the daemons whoever started them, and undo what a harness run wrote (the CLI's `stop`)."""
    with signals_held(), _setup_lock():
        _stop_locked()


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
