"""A real, throw-away SLURM cluster on this one machine, for integration tests.

Module use::

    from tests.launchers import slurm_cluster
    cluster = slurm_cluster.start(4)          # a new cluster in a new state folder, free ports
    cluster.run(["srun", "-N2", "-n4", "hostname"])
    env = {**os.environ, **cluster.env()}     # for your own subprocess calls
    cluster.stop()                            # everything it started, its /etc/hosts line, its folder

``start(4, state_dir=DIR)`` reuses a healthy cluster already running in DIR (fast path; the CLI
starts one there, and the tests' fixture takes it when ``CLUSTER_TOPOLOGY_SLURM_STATE_DIR=DIR``).

CLI use::

    python tests/launchers/slurm_cluster.py start [--nodes N] [--state-dir DIR]
    python tests/launchers/slurm_cluster.py status [--state-dir DIR]
    python tests/launchers/slurm_cluster.py stop [--state-dir DIR]

`start` prints ``export SLURM_CONF=...`` on stdout, so ``eval "$(... start)"`` works.

What it does: writes ``slurm.conf`` under ``state_dir`` (never touches /etc/slurm or
/etc/munge), with ports that were free when it started (two clusters on one machine do not
collide); starts a munged of its own as user ``munge`` (its key, socket, pid and log under
``state_dir/munge``; ``AuthInfo=socket=`` points SLURM at it), ``slurmctld -D`` and
one ``slurmd -D -N ciK`` per node (each under a small reaper process of this file,
see _reaper_main), each in its own session (setsid), maps ``ci1..ciN`` to 127.0.0.1
in /etc/hosts with one line of its own (stop() takes exactly that line out again, so the
file is byte for byte what it was), and waits until ``sinfo`` shows every node idle.  Every node has four GPUs
that are not there: ``Gres=gpu:4`` over ``/dev/nvidia[0-3]`` (character devices 195:K made
with mknod when absent, shared by the emulated nodes; stop() removes the ones it made when no
other slurmd runs), ``gres.conf`` beside ``slurm.conf``
with ``AutoDetect=off``; SLURM schedules and binds them like real ones (``--gpus-per-task``,
``--gres``, ``--gpu-bind``) and sets ``CUDA_VISIBLE_DEVICES`` and ``SLURM_STEP_GPUS``.
Pids (and start times), ports, the /etc/hosts line and the device nodes made go to
``state_dir/pids.json``; stop() ends exactly those, cancels jobs first and kills leftovers of
our jobs, with SIGINT and SIGTERM held back until it is done (a second Ctrl-C cannot leave
daemons behind).  Logs: ``state_dir/{slurmctld,slurmd.ciK}.log`` (+ ``.out`` for stderr),
``state_dir/munge/munged.log``.

Needs root (SLURM daemons, munged as munge, /etc/hosts, mknod).  Plain stdlib only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # as a script, too: python tests/launchers/<this>.py

from tests.launchers.launching import signals_held

DEFAULT_STATE_DIR = Path("/tmp/cluster-topology-slurm")  # the CLI's; start() without one makes a new folder
RUN_PREFIX = "cluster-topology-slurm-"  # start() without a state_dir: tempfile.mkdtemp(prefix=...)
HARNESS_VERSION = 4  # bump when start() changes: a running older cluster restarts
CLUSTER_NAME = "ci"
PARTITION = "debug"
NODE_PREFIX = "ci"
CPUS_PER_NODE = 4  # advertised, thanks to SlurmdParameters=config_overrides
GPUS_PER_NODE = 4  # /dev/nvidia0..3, made by mknod: SLURM schedules and binds them, nothing runs on them
NVIDIA_MAJOR = 195  # the character-device major number of /dev/nvidiaK
ADDR = "127.0.0.1"
CRED_EXPIRE = 5  # s; also the requeue delay (Slurm's default: 120)
START_TIMEOUT = 60.0  # seconds until every node must be idle
STOP_TIMEOUT = 20.0  # seconds of SIGTERM grace before SIGKILL
HOSTS_FILE = Path("/etc/hosts")
HOSTS_MARKER = "# cluster-topology-slurm"  # followed by the state folder of the cluster that wrote the line
HOSTS_LOCK = Path(tempfile.gettempdir()) / "cluster-topology-hosts.lock"  # edits of /etc/hosts take turns

# Popen objects of the daemons started by this process: kept so that they are not
# garbage collected while running (ResourceWarning) and so that exits get reaped.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class ClusterError(RuntimeError):
    """The cluster could not be started (message carries the daemon logs)."""


# --------------------------------------------------------------------------- helpers


def _node_names(nodes: int) -> list[str]:
    return [f"{NODE_PREFIX}{k}" for k in range(1, nodes + 1)]


def _short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def _which(name: str) -> str:
    for candidate in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/sbin/{name}"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise ClusterError(f"{name} not found (apt-get install slurm-wlm munge)")


def installed() -> bool:
    """True if the SLURM daemons and client tools are installed."""
    try:
        for name in ("slurmctld", "slurmd", "munged", "srun", "sinfo"):
            _which(name)
    except ClusterError:
        return False
    return True


def _clean_environ() -> dict[str, str]:
    """os.environ without variables of an enclosing SLURM job/launcher."""
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_", "SCONTROL_", "SLURMD_"))
    }


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, session id) of pid, or None if there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[0], int(fields[3])


def _starttime(pid: int) -> int | None:
    """Start time of pid in clock ticks since boot (tells a reused pid apart)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        return int(raw[raw.rfind(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            _CHILDREN.pop(pid, None)
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def _alive(pid: int | None, must_contain: tuple[str, ...] = ()) -> bool:
    """pid runs (not a zombie) and its command line contains every string given."""
    if not pid:
        return False
    _reap(pid)
    st = _proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    if must_contain:
        argv = _cmdline(pid)
        if not argv:
            return False
        joined = "\0".join(argv)
        if not all(s in joined for s in must_contain):
            return False
    return True


def _ours(info: dict[str, Any], pid: int | None, must_contain: tuple[str, ...]) -> bool:
    """pid runs and is the very process start() recorded (start time, else cmdline)."""
    if pid is None or not _alive(pid):
        return False
    ticks = info.get("ticks", {}).get(str(pid))
    if ticks is not None:
        return bool(_starttime(pid) == ticks)
    return _alive(pid, must_contain)


def _slurmd_marks(name: str) -> tuple[str, ...]:
    return ("slurmd", f"-N\0{name}\0")


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _wait_dead(pids: list[int], timeout: float) -> list[int]:
    """Wait until every pid is gone; return those still alive after timeout."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if _alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [p for p in left if _alive(p)]
    return left


def _processes_in_sessions(sids: set[int]) -> list[int]:
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == me:
            continue
        st = _proc_stat(pid)
        if st and st[1] in sids and st[0] not in ("Z", "X"):
            found.append(pid)
    return found


def _environ_has(pid: int, entry: str) -> bool:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return entry.encode() in raw.split(b"\0")


def _our_stepd_sessions(conf: Path) -> set[int]:
    """Session ids of slurmstepd's run by our slurmd's (they setsid themselves)."""
    sids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        argv = _cmdline(pid)
        if argv and argv[0].startswith("slurmstepd") and _environ_has(pid, f"SLURM_CONF={conf}"):
            st = _proc_stat(pid)
            if st:
                sids.add(st[1])
    return sids


def _ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
            pid = int(raw[raw.rfind(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def _job_processes(conf: Path) -> list[int]:
    """Processes that carry one of our jobs' environment (SLURM_JOB_ID + our
    SLURM_CONF): leftovers of jobs whose slurmstepd is gone."""
    mine = _ancestors()
    entry = f"SLURM_CONF={conf}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in mine:
            continue
        try:
            env = Path(d, "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if entry in env and any(e.startswith(b"SLURM_JOB_ID=") for e in env):
            st = _proc_stat(int(d.name))
            if st and st[0] not in ("Z", "X"):
                found.append(int(d.name))
    return found


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"    <cannot read {path}: {exc}>"
    return "\n".join("    " + line for line in text[-lines:]) or "    <empty>"


def _run(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 30, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a helper command; a timeout gives returncode 124 instead of raising."""
    try:
        return subprocess.run(args, env=env, timeout=timeout, input=input, text=True, capture_output=True)
    except subprocess.TimeoutExpired as exc:

        def text(x: bytes | str | None) -> str:
            return x.decode(errors="replace") if isinstance(x, bytes) else (x or "")

        return subprocess.CompletedProcess(args, 124, text(exc.stdout), text(exc.stderr) + "\n<timeout>")


def _reaper_main(argv: list[str]) -> int:
    """Run argv as our child while reaping every orphan re-parented to us.

    slurmd runs under this: its slurmstepd's double-fork and srun's helper child
    outlives srun, so orphans are re-parented to the nearest "child subreaper",
    else to PID 1.  A PID 1 that reaps late (the gVisor sandbox here reaps every ~2 s)
    leaves zombies in the job's process group, and proctrack/pgid then sleeps 1+2 s
    before it sees the group empty: +3 s for every batch step that ran srun.
    """
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    child = os.fork()
    if child == 0:
        try:
            os.execv(argv[0], argv)  # noqa: S606 - fixed argv built by start()
        finally:
            os._exit(127)

    def forward(sig: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 0
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            return code if code >= 0 else 128 - code


# --------------------------------------------------------------------------- config


def _free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports on ADDR that nothing listens on now (the kernel's choice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((ADDR, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _munge_socket(state_dir: Path) -> Path:
    return state_dir / "munge" / "munge.socket"


def _slurm_conf(state_dir: Path, nodes: int, ports: list[int]) -> str:
    """slurm.conf; ports[0] is slurmctld's, ports[k] node ciK's slurmd's."""
    host = _short_hostname()
    s = state_dir
    names = _node_names(nodes)
    if len(ports) != nodes + 1:
        raise ValueError(f"ports={ports}: expected {nodes + 1} (slurmctld, then one per node)")
    node_lines = "\n".join(
        f"NodeName={n} NodeHostname={host} NodeAddr={ADDR} Port={ports[k]} "
        f"CPUs={CPUS_PER_NODE} Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        for k, n in enumerate(names, start=1)
    )
    nodelist = f"{NODE_PREFIX}[1-{nodes}]" if nodes > 1 else names[0]
    return f"""\
# Written by tests/launchers/slurm_cluster.py (layout {HARNESS_VERSION}) -- a local
# test cluster, do not edit.
ClusterName={CLUSTER_NAME}
SlurmctldHost={host}({ADDR})
SlurmctldPort={ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire (default 120 s) is also how long a requeued job waits before it may
# start again (its BeginTime); the minimum Slurm accepts is 5. socket: this cluster's own
# munged (auth/munge and cred/munge both read it: https://slurm.schedmd.com/slurm.conf.html#OPT_AuthInfo).
AuthInfo=cred_expire={CRED_EXPIRE},socket={_munge_socket(s)}
CredType=cred/munge
StateSaveLocation={s}/ctld
SlurmdSpoolDir={s}/spool/%n
SlurmctldPidFile={s}/slurmctld.pid
SlurmdPidFile={s}/slurmd.%n.pid
SlurmctldLogFile={s}/slurmctld.log
SlurmdLogFile={s}/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={s}/plugstack.conf
# Per node: several slurmd's share this host, and `srun --mpi=pmix` makes
# <TmpFS>/spmix_appdir_<uid>_<job>.<step> on every node; with one shared /tmp the
# second node of a step fails ("Cannot create client cli tmpdir ... File exists").
TmpFS={s}/tmp/%n
# No cgroups here (containers, gVisor).  proctrack/pgid, not linuxproc: linuxproc loses
# children re-parented to init (`sleep 120 & wait` in a batch script that exits on a
# trapped signal leaves the sleep running); pgid kills the whole process group.
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# GPUs that are not there (gres.conf beside this file): scheduled and bound, never opened.
GresTypes=gpu
SchedulerType=sched/backfill
# A requeued job becomes eligible with no event to wake the scheduler: without short
# periodic passes (defaults 60 s main, 30 s backfill) it waits up to 30 s more.
SchedulerParameters=sched_interval=2,bf_interval=1
# Nodes advertise CPUs={CPUS_PER_NODE} whatever the hardware has.
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
# Requeue: allowed by default for batch jobs; `scontrol requeue` then works.
JobRequeue=1
# Jobs killed at their time limit get SIGKILL 5 s after SIGTERM (default 30).
KillWait=5
MinJobAge=300
InactiveLimit=0
MessageTimeout=10
SlurmdTimeout=300
{node_lines}
PartitionName={PARTITION} Nodes={nodelist} Default=YES MaxTime=INFINITE State=UP
"""


def _gres_conf(nodes: int) -> str:
    last = GPUS_PER_NODE - 1
    lines = "\n".join(f"NodeName={n} Name=gpu File=/dev/nvidia[0-{last}]" for n in _node_names(nodes))
    head = "# Written by tests/launchers/slurm_cluster.py: fake GPUs, see _ensure_gpu_devices"
    return f"{head}\nAutoDetect=off\n{lines}\n"


def _ensure_gpu_devices() -> list[str]:
    """/dev/nvidia0..3 as character devices (195, K): slurmd refuses a gres File that does not exist.

    Returns the ones it made. A device node that exists is left alone (a real GPU's, or another
    run's); nothing opens them. The resolver's device probe reads the driver's /proc list, never
    /dev, so these nodes do not make a machine look as if it had GPUs.
    """
    import stat

    made = []
    for k in range(GPUS_PER_NODE):
        path = Path(f"/dev/nvidia{k}")
        if path.exists():
            if not stat.S_ISCHR(path.stat().st_mode):
                raise ClusterError(f"{path} exists and is not a character device: cannot emulate GPUs")
            continue
        try:
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, k))
        except OSError as exc:
            raise ClusterError(f"cannot create {path} (mknod c {NVIDIA_MAJOR} {k}): {exc}") from exc
        made.append(str(path))
    return made


def _other_slurmd_running() -> bool:
    """Some slurmd runs on this machine (another run's cluster may use the device nodes)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = _cmdline(int(entry.name))
            if argv and Path(argv[0]).name == "slurmd" and _alive(int(entry.name)):
                return True
    return False


def _remove_gpu_devices(made: list[str]) -> None:
    """Remove the device nodes this cluster made, unless a slurmd (another cluster's) still runs."""
    if not made or _other_slurmd_running():
        return
    for path in made:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


# --------------------------------------------------------------------------- munge


def _munge_works(socket_path: Path) -> bool:
    try:
        munge, unmunge = _which("munge"), _which("unmunge")
    except ClusterError:
        return False
    cred = _run([munge, "-n", "-S", str(socket_path)], timeout=10)
    if cred.returncode != 0:
        return False
    return _run([unmunge, "-S", str(socket_path)], input=cred.stdout, timeout=10).returncode == 0


def _start_munged(state_dir: Path) -> int:
    """Start this cluster's own munged (user munge, a new key, everything under state_dir/munge)."""
    import grp
    import pwd

    try:
        uid = pwd.getpwnam("munge").pw_uid
        gid = grp.getgrnam("munge").gr_gid
    except KeyError as exc:
        raise ClusterError("user munge missing (apt-get install munge)") from exc
    folder = state_dir / "munge"
    folder.mkdir(mode=0o711, exist_ok=True)
    key = folder / "munge.key"
    res = _run([_which("mungekey"), "--create", "--keyfile", str(key)])
    if res.returncode != 0:
        raise ClusterError(f"mungekey --create --keyfile {key} exited {res.returncode}: {res.stderr}")
    for path, mode in ((folder, 0o711), (key, 0o600)):
        os.chown(path, uid, gid)
        os.chmod(path, mode)
    log = folder / "munged.log"
    socket_path = _munge_socket(state_dir)
    args = [_which("munged"), "--foreground", "--force", f"--socket={socket_path}", f"--key-file={key}"]
    args += [f"--pid-file={folder / 'munged.pid'}", f"--log-file={log}", f"--seed-file={folder / 'munged.seed'}"]
    with open(folder / "munged.out", "ab") as out:
        proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            user=uid,
            group=gid,
            extra_groups=[],
            start_new_session=True,
            cwd="/",
            env=_clean_environ(),
        )
    _CHILDREN[proc.pid] = proc
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ClusterError(f"munged exited with {proc.returncode}:\n{_tail(folder / 'munged.out')}\n{_tail(log)}")
        if _munge_works(socket_path):
            return proc.pid
        time.sleep(0.1)
    raise ClusterError(f"munged started but does not answer on {socket_path}:\n{_tail(log)}")


# --------------------------------------------------------------------------- hosts


@contextlib.contextmanager
def _hosts_lock() -> Iterator[None]:
    """Edits of /etc/hosts by harness runs take turns (two runs, or the CLI and a run)."""
    with open(HOSTS_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _hosts_line(state_dir: Path, names: list[str]) -> str:
    return f"{ADDR} {' '.join(names)} {HOSTS_MARKER} {state_dir}\n"


def _add_hosts(state_dir: Path, names: list[str]) -> str:
    """Map every name to ADDR in /etc/hosts with one line of this cluster's; return the text appended.

    A name that a line of somebody else's maps (not one of a harness run's, which leaves when that
    run stops) needs no line; one mapped elsewhere is an error. Appends in place (/etc/hosts may be
    a bind mount, which a rename would not replace), a newline first if the file lacks its last.
    """
    with _hosts_lock():
        raw = HOSTS_FILE.read_bytes()
        text = raw.decode("utf-8", "surrogateescape")
        mapped: dict[str, str] = {}
        for line in text.splitlines():
            if HOSTS_MARKER in line:
                continue
            fields = line.split("#", 1)[0].split()
            for name in fields[1:]:
                mapped.setdefault(name, fields[0])
        wrong = [f"{name} -> {mapped[name]}" for name in names if mapped.get(name, ADDR) != ADDR]
        if wrong:
            raise ClusterError(f"{HOSTS_FILE} maps node names elsewhere: {', '.join(wrong)} (expected {ADDR})")
        missing = [name for name in names if name not in mapped]
        added = ""
        if missing:
            added = ("\n" if raw and not raw.endswith(b"\n") else "") + _hosts_line(state_dir, missing)
            with open(HOSTS_FILE, "ab") as f:
                f.write(added.encode())
    for name in names:
        try:
            got = socket.gethostbyname(name)
        except OSError as exc:
            raise ClusterError(f"{name} does not resolve after editing {HOSTS_FILE}: {exc}") from exc
        if got != ADDR:
            raise ClusterError(f"{name} resolves to {got}, not {ADDR} (another line of {HOSTS_FILE} comes first?)")
    return added


def _remove_hosts(added: str) -> None:
    """Take out of /etc/hosts exactly the text _add_hosts appended (its last occurrence), in place."""
    if not added:
        return
    with _hosts_lock():
        data, ours = HOSTS_FILE.read_bytes(), added.encode()
        at = data.rfind(ours)
        if at < 0:  # someone appended behind the last line we completed: keep that newline
            ours = ours.lstrip(b"\n")
            at = data.rfind(ours)
            if at < 0:
                return  # already gone (edited by hand)
        with open(HOSTS_FILE, "r+b") as f:
            f.write(data[:at] + data[at + len(ours) :])
            f.truncate()


# --------------------------------------------------------------------------- cluster


@dataclass
class Cluster:
    state_dir: Path
    nodes: list[str]
    pids: dict[str, Any] = field(default_factory=dict, repr=False)
    reused: bool = False  # True: start() found it running (fast path), did not start it

    @property
    def conf(self) -> Path:
        return self.state_dir / "slurm.conf"

    @property
    def partition(self) -> str:
        return PARTITION

    @property
    def cluster_name(self) -> str:
        return CLUSTER_NAME

    def env(self) -> dict[str, str]:
        """Environment additions for srun/sbatch/salloc/scontrol/squeue/sinfo."""
        return {"SLURM_CONF": str(self.conf)}

    def full_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """os.environ minus any enclosing job's SLURM_* variables, plus env()."""
        env = _clean_environ()
        env.update(self.env())
        if extra:
            env.update(extra)
        return env

    def run(
        self,
        args: str | list[str],
        *,
        timeout: float = 120,
        env: dict[str, str] | None = None,
        check: bool = False,
        **kw: Any,
    ) -> subprocess.CompletedProcess[str]:
        """Run a command (list, or a str for bash -c) against this cluster.

        Captures text stdout/stderr unless told otherwise; `env` entries are added
        to full_env().  Raises subprocess.TimeoutExpired after `timeout` seconds.
        """
        if isinstance(args, str):
            args = ["bash", "-c", args]
        kw.setdefault("text", True)
        if "stdout" not in kw and "stderr" not in kw:
            kw.setdefault("capture_output", True)
        if "input" not in kw:
            kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(args, env=self.full_env(env), timeout=timeout, check=check, **kw)

    def node_states(self) -> dict[str, str]:
        return _node_states(self.state_dir)

    def healthy(self) -> bool:
        return _healthy(self.state_dir, len(self.nodes))

    def stop(self, *, remove: bool = False) -> None:
        """Stop the cluster (see stop()); `remove`: its state folder too."""
        stop(self.state_dir, remove=remove)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pids_file(state_dir: Path) -> Path:
    return state_dir / "pids.json"


def _load_pids(state_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_pids_file(state_dir).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def _lock(state_dir: Path) -> Iterator[None]:
    """Serialise start/stop on one state_dir (pytest-xdist workers, CLI + fixture)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    with open(state_dir / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _node_states(state_dir: Path) -> dict[str, str]:
    env = _clean_environ()
    env["SLURM_CONF"] = str(state_dir / "slurm.conf")
    res = _run([_which("sinfo"), "-h", "-N", "-o", "%N %T"], env=env, timeout=15)
    states = {}
    if res.returncode == 0:
        for line in res.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
    return states


def _daemons_alive(info: dict[str, Any]) -> list[str]:
    """Names of recorded daemons that are not running (empty list: all alive)."""
    dead = []
    if not _ours(info, info.get("slurmctld"), ("slurmctld",)):
        dead.append("slurmctld")
    for name, pid in info.get("slurmd", {}).items():
        if not _ours(info, pid, _slurmd_marks(name)):
            dead.append(f"slurmd {name}")
    if info.get("munged") and not _ours(info, info["munged"], ("munged",)):
        dead.append("munged")
    return dead


def _healthy(state_dir: Path, nodes: int, idle_wait: float = 0.0) -> bool:
    info = _load_pids(state_dir)
    if not info or info.get("nodes") != nodes:
        return False
    conf = state_dir / "slurm.conf"
    try:
        written = (conf.read_text(), (state_dir / "gres.conf").read_text())
        if written != (_slurm_conf(state_dir, nodes, info.get("ports", [])), _gres_conf(nodes)):
            return False
    except (OSError, ValueError):
        return False
    if _daemons_alive(info) or not _munge_works(_munge_socket(state_dir)):
        return False
    want = set(_node_names(nodes))
    deadline = time.monotonic() + idle_wait
    while True:
        states = _node_states(state_dir)
        if set(states) == want and all(s == "idle" for s in states.values()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def _stderr_extra(log: Path, out: Path, lines: int = 15) -> str:
    """Lines of a daemon's stderr capture that its log file does not have."""
    try:
        logged = log.read_text(errors="replace")
    except OSError:
        logged = ""
    try:
        extra = [ln for ln in out.read_text(errors="replace").splitlines() if ln.split(": ", 1)[-1] not in logged]
    except OSError:
        return ""
    return "\n".join("    " + ln for ln in extra[-lines:])


def _logs_report(state_dir: Path, names: list[str]) -> str:
    parts = []
    for daemon, n in [("slurmctld", 40)] + [(f"slurmd.{name}", 15) for name in names]:
        log, out = state_dir / f"{daemon}.log", state_dir / f"{daemon}.out"
        parts += [f"--- {log} (tail)", _tail(log, n)]
        extra = _stderr_extra(log, out)
        if extra:
            parts += [f"--- {out} (stderr lines not in the log)", extra]
    return "\n".join(parts)


def _spawn(args: list[str], out: Path, env: dict[str, str]) -> int:
    with open(out, "ab") as f:
        proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, cwd="/", env=env
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def _wipe(state_dir: Path) -> None:
    """Remove what a previous run of this harness left (only our own names)."""
    for name in ("ctld", "spool", "tmp", "munge"):
        shutil.rmtree(state_dir / name, ignore_errors=True)
    for pattern in (
        "*.log",
        "*.out",
        "*.pid",
        "pids.json",
        "slurm.conf",
        "gres.conf",
        "plugstack.conf",
        "mpi.conf",
        "cgroup.conf",
    ):
        for p in state_dir.glob(pattern):
            with contextlib.suppress(OSError):
                p.unlink()


def new_state_dir() -> Path:
    """A new folder for one cluster (mode 0711: munged, as user munge, must reach its own folder)."""
    state_dir = Path(tempfile.mkdtemp(prefix=RUN_PREFIX))
    state_dir.chmod(0o711)
    return state_dir


def start(
    nodes: int = 4, *, state_dir: Path | None = None, timeout: float = START_TIMEOUT, reuse: bool = True
) -> Cluster:
    """Start a local cluster of `nodes` nodes ci1..ciN; stop it with Cluster.stop().

    Without `state_dir`, a new folder (new_state_dir) and new ports: nothing is shared with
    another cluster on this machine. With one, a healthy cluster of that shape already running
    there is reused (`reused` is True) unless `reuse` is False; anything else there is stopped
    and started afresh. Whatever fails or interrupts it half-way (KeyboardInterrupt included)
    stops what it started before the exception leaves.
    """
    if nodes < 1:
        raise ValueError(f"nodes={nodes}: expected at least 1")
    if os.geteuid() != 0:
        raise ClusterError("the local SLURM cluster needs root")
    state_dir = new_state_dir() if state_dir is None else Path(state_dir).resolve()
    names = _node_names(nodes)
    with _lock(state_dir):
        # Fast path: a healthy cluster of the same shape is already running.
        if reuse and _healthy(state_dir, nodes, idle_wait=10.0 if _load_pids(state_dir) else 0.0):
            return Cluster(state_dir, names, _load_pids(state_dir) or {}, reused=True)
        _stop_locked(state_dir)
        _wipe(state_dir)
        slurmctld, slurmd = _which("slurmctld"), _which("slurmd")
        conf = state_dir / "slurm.conf"
        info: dict[str, Any] = {
            "nodes": nodes,
            "ports": _free_ports(nodes + 1),
            "hosts_added": "",
            "devices_made": [],
            "munged": None,
            "slurmctld": None,
            "slurmd": {},
            "ticks": {},
            "started": time.time(),
        }
        env = _clean_environ()
        env["SLURM_CONF"] = str(conf)

        def save() -> None:
            tmp = _pids_file(state_dir).with_suffix(".tmp")
            tmp.write_text(json.dumps(info, indent=1))
            os.replace(tmp, _pids_file(state_dir))

        def fail(msg: str) -> ClusterError:
            return ClusterError(f"{msg}\n{_logs_report(state_dir, names)}")

        try:
            save()  # from here on, _stop_locked undoes what is recorded, whatever happens next
            host = _short_hostname()
            info["hosts_added"] = _add_hosts(state_dir, names + ([] if _resolves(host) else [host]))
            save()
            (state_dir / "ctld").mkdir(parents=True, exist_ok=True)
            for name in names:
                (state_dir / "spool" / name).mkdir(parents=True, exist_ok=True)
                (state_dir / "tmp" / name).mkdir(parents=True, exist_ok=True)
            (state_dir / "plugstack.conf").write_text("# no SPANK plugins\n")
            info["devices_made"] = _ensure_gpu_devices()
            save()
            (state_dir / "gres.conf").write_text(_gres_conf(nodes))
            conf.write_text(_slurm_conf(state_dir, nodes, info["ports"]))
            info["munged"] = _start_munged(state_dir)
            info["ticks"][str(info["munged"])] = _starttime(info["munged"])
            save()
            busy = [port for port in info["ports"] if _port_in_use(port)]
            if busy:
                raise ClusterError(f"ports {busy} of {conf} were free a moment ago and are taken now; start again")
            info["slurmctld"] = _spawn([slurmctld, "-D", "-c", "-i", "-f", str(conf)], state_dir / "slurmctld.out", env)
            info["ticks"][str(info["slurmctld"])] = _starttime(info["slurmctld"])
            save()
            deadline = time.monotonic() + timeout
            # slurmctld first: slurmd's register at once instead of retrying later.
            while True:
                if not _alive(info["slurmctld"]):
                    raise fail("slurmctld exited during start-up")
                if _run([_which("scontrol"), "ping"], env=env, timeout=10).stdout.count("is UP"):
                    break
                if time.monotonic() > deadline:
                    raise fail(f"slurmctld did not answer within {timeout:.0f} s")
                time.sleep(0.2)
            for name in names:
                # Recorded pid: the reaper's (slurmd is its only child; the reaper's
                # command line holds slurmd's, and it forwards SIGTERM to slurmd).
                pid = _spawn(
                    [
                        sys.executable,
                        str(Path(__file__).resolve()),
                        "_reaper",
                        "--",
                        slurmd,
                        "-D",
                        "-c",
                        "-N",
                        name,
                        "-f",
                        str(conf),
                    ],
                    state_dir / f"slurmd.{name}.out",
                    env,
                )
                info["slurmd"][name] = pid
                info["ticks"][str(pid)] = _starttime(pid)
                save()
            want = set(names)
            states: dict[str, str] = {}
            while True:
                dead = _daemons_alive(info)
                if dead:
                    raise fail(f"daemon(s) exited during start-up: {', '.join(dead)}")
                states = _node_states(state_dir)
                if set(states) == want and all(s == "idle" for s in states.values()):
                    break
                if time.monotonic() > deadline:
                    raise fail(f"nodes not idle within {timeout:.0f} s: {states}")
                time.sleep(0.2)
        except BaseException:  # incl. KeyboardInterrupt: leave nothing running
            with signals_held():
                _stop_locked(state_dir)
            raise
        else:
            return Cluster(state_dir, names, info)


def _resolves(name: str) -> bool:
    try:
        socket.gethostbyname(name)
    except OSError:
        return False
    return True


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex((ADDR, port)) == 0


def stop(state_dir: Path = DEFAULT_STATE_DIR, *, remove: bool = False) -> None:
    """Stop what start() started in state_dir (by pid), take its /etc/hosts line out again and
    remove the device nodes it made (unless another slurmd runs); no-op if nothing runs.

    With `remove`, the state folder goes too (the folders start() makes by itself)."""
    state_dir = Path(state_dir).resolve()
    if not state_dir.exists():
        return
    with signals_held():
        with _lock(state_dir):
            _stop_locked(state_dir)
        if remove:
            shutil.rmtree(state_dir, ignore_errors=True)


def _stop_locked(state_dir: Path) -> None:
    info = _load_pids(state_dir)
    if not info:
        return
    ctld = info.get("slurmctld")
    slurmds = {n: p for n, p in info.get("slurmd", {}).items() if _ours(info, p, _slurmd_marks(n))}
    ctld_alive = _ours(info, ctld, ("slurmctld",))
    # Sessions of our daemons (start_new_session: sid == daemon pid).  A recorded pid
    # now running something else was reused: not ours, leave its session alone.
    sids = {ctld} if ctld and (ctld_alive or not _alive(ctld)) else set()
    for name, pid in info.get("slurmd", {}).items():
        if pid and (name in slurmds or not _alive(pid)):
            sids.add(pid)
    env = _clean_environ()
    env["SLURM_CONF"] = str(state_dir / "slurm.conf")

    # 1. Cancel jobs while the daemons still run, so slurmstepd's and tasks end cleanly.
    if ctld_alive and slurmds:
        jobs = _run([_which("squeue"), "-h", "-o", "%A"], env=env, timeout=15)
        ids = jobs.stdout.split() if jobs.returncode == 0 else []
        if ids:
            _run([_which("scancel"), *ids], env=env, timeout=15)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                left = _run([_which("squeue"), "-h", "-t", "all", "-o", "%A %T"], env=env, timeout=15).stdout
                if not any(w in left for w in ("RUNNING", "COMPLETING", "PENDING", "CONFIGURING", "SUSPENDED")):
                    break
                time.sleep(0.2)

    # 2. SIGTERM the SLURM daemons together, SIGKILL what is left after a grace period.
    pids = list(slurmds.values()) + ([ctld] if ctld_alive and ctld else [])
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    for pid in _wait_dead(pids, STOP_TIMEOUT):
        _signal(pid, signal.SIGKILL)
    _wait_dead(pids, 5)

    # 3. Anything still in the daemons' sessions or in the sessions of our slurmstepd's
    #    (batch scripts, job tasks; slurmstepd's setsid, hence the search), or carrying
    #    one of our jobs' environment: SIGKILL.
    conf = state_dir / "slurm.conf"
    for _ in range(3):
        sids |= _our_stepd_sessions(conf)
        sids.discard(os.getsid(0))
        found = set(_processes_in_sessions(sids)) | set(_job_processes(conf))
        strays = sorted(found - _ancestors())
        if not strays:
            break
        for pid in strays:
            _signal(pid, signal.SIGKILL)
        _wait_dead(strays, 3)

    # 4. munged only if we started it.
    munged = info.get("munged")
    if munged and _ours(info, munged, ("munged",)):
        _signal(munged, signal.SIGTERM)
        for pid in _wait_dead([munged], 10):
            _signal(pid, signal.SIGKILL)
        _wait_dead([munged], 5)
    for pid in list(_CHILDREN):
        _reap(pid)

    # 5. What start() changed outside its folder.
    _remove_hosts(info.get("hosts_added", ""))
    _remove_gpu_devices(info.get("devices_made", []))
    with contextlib.suppress(OSError):
        _pids_file(state_dir).unlink()


def status(state_dir: Path = DEFAULT_STATE_DIR) -> tuple[bool, str]:
    state_dir = Path(state_dir).resolve()
    info = _load_pids(state_dir)
    if not info:
        return False, f"no cluster recorded in {state_dir}"
    lines = [f"state_dir: {state_dir}", f"SLURM_CONF={state_dir / 'slurm.conf'}"]
    dead = _daemons_alive(info)
    answers = _munge_works(_munge_socket(state_dir))
    lines.append(f"munged: pid {info.get('munged')} ({'answers' if answers else 'NOT answering'})")
    lines.append(f"ports: {info.get('ports')}")
    lines.append(f"slurmctld pid {info.get('slurmctld')}")
    for n, p in info.get("slurmd", {}).items():
        lines.append(f"slurmd {n} pid {p}")
    if dead:
        lines.append(f"dead: {', '.join(dead)}")
    states = _node_states(state_dir)
    lines.append("nodes: " + (" ".join(f"{n}={s}" for n, s in states.items()) or "?"))
    ok = _healthy(state_dir, info.get("nodes", 0))
    lines.append("healthy" if ok else "NOT healthy")
    return ok, "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["_reaper", "--"]:  # internal: see _reaper_main
        return _reaper_main(argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=("start", "stop", "status"))
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    args = ap.parse_args(argv)
    if args.command == "start":
        t0 = time.monotonic()
        try:
            cluster = start(args.nodes, state_dir=args.state_dir)
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"cluster up: {' '.join(cluster.nodes)} in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        print(f"export SLURM_CONF={cluster.conf}")
        return 0
    if args.command == "stop":
        t0 = time.monotonic()
        stop(args.state_dir)
        print(f"stopped in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        return 0
    ok, text = status(args.state_dir)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
