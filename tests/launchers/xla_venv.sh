#!/usr/bin/env bash
# Build (idempotently) the venv in which the `xla` tests run: torch_xla 2.9.0 installs only
# beside torch 2.9.0, so it never goes into the main venv (see /work/shared/LAUNCHERS.md).
#
#   tests/launchers/xla_venv.sh [VENV]      default VENV=/opt/cluster-topology-xla-venv
#
# Prints the venv's python on its last line, for XLA_PYTHON. The repo is not installed
# into the venv: tests run it with PYTHONPATH=<repo>, so edits need no reinstall.
# Takes ~1.5 min and ~7 GiB the first time (torch 2.9.0 is a CUDA build; it runs on the CPU);
# a no-op when the venv already imports torch_xla 2.9.0.
set -euo pipefail

VENV="${1:-/opt/cluster-topology-xla-venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
TORCH_VERSION=2.9.0
XLA_VERSION=2.9.0

ready() {
    [ -x "$VENV/bin/python" ] && "$VENV/bin/python" - "$TORCH_VERSION" "$XLA_VERSION" <<'PY' >/dev/null 2>&1
import sys
from importlib.metadata import version
want_torch, want_xla = sys.argv[1:]
assert version("torch").split("+")[0] == want_torch, version("torch")
assert version("torch_xla").split("+")[0] == want_xla, version("torch_xla")
for name in ("attrs", "pytest", "hypothesis", "pytest_timeout"):
    __import__(name)
PY
}

if ready; then
    echo "xla venv ready at $VENV" >&2
else
    echo "building the xla venv at $VENV (~1.5 min, ~7 GiB)" >&2
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # /etc/xdg/pip/constraints.txt caps torch<=2.14.1 on this machine: 2.9.0 is within it
    "$VENV/bin/python" -m pip install --quiet "torch==$TORCH_VERSION" "torch-xla==$XLA_VERSION" \
        "attrs>=23.1" "pytest>=8" "hypothesis>=6.100" "pytest-timeout>=2.2"
    ready || { echo "xla venv at $VENV is incomplete after install" >&2; exit 1; }
fi
echo "$VENV/bin/python"
