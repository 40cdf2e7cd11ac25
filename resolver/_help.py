"""What `cluster-topology --help` says of its commands, `exec` and `check`, and of the `--ifname` option.

Every parser lists them, while printing a topology never runs `exec`: its module (resolver/_exec.py, with
signal) loads only when `exec` or `--ifname` runs, so its words live here, with the check's beside them.
"""

from __future__ import annotations

__all__ = ["CHECK_HELP", "EXEC_HELP", "EXEC_USAGE", "IFNAME_HELP"]

EXEC_USAGE = "[options] -- PROGRAM [ARGS...]"
EXEC_HELP = f"""\
  exec {EXEC_USAGE}
        resolve, write the env:// variables (MASTER_ADDR MASTER_PORT WORLD_SIZE RANK
        LOCAL_RANK LOCAL_WORLD_SIZE NODE_RANK GROUP_RANK) and replace this process with
        PROGRAM: srun cluster-topology exec -- python train.py; with --bind-device the
        visibility variables name this process's device alone, so PROGRAM's cuda:0 is its own;
        with --ifname GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME name the interface toward the
        main address (those the user set stay theirs)
"""
CHECK_HELP = """\
  check [--timeout S] [--format text|json]
        preflight, run by every process: exit 0 healthy, 3 a problem found, 2 unreadable
"""
IFNAME_HELP = (
    "set GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME (=NAME, NCCL's exact form) to this host's interface toward the "
    "main address, unless already set (exec, --format env; see the Network page)"
)
