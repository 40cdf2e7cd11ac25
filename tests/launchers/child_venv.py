"""Make a venv that sees the packages of the interpreter that made it, itself a venv or not.

    python tests/launchers/child_venv.py VENV [--without-pip]   make VENV (or fix its link)
    python tests/launchers/child_venv.py --check VENV            exit 0 when VENV links to this python
    python tests/launchers/child_venv.py --root BASE             print where this python's venvs go

`python -m venv --system-site-packages` links a new venv to the *base* installation of the
interpreter that runs it: run from inside a venv, the new venv sees the system's packages, not
that venv's (torch installed into the venv is missing). Here the venv is made without system
site-packages and gets one `.pth` file instead, whose lines call ``site.addsitedir`` on every
site-packages folder of the parent interpreter (``site.getsitepackages()``: a venv's own, plus
its base's when it has system site-packages). Those folders come after the venv's own in
``sys.path`` (a ``.pth`` appends), so a package installed into the child (the MPI wheel, its
mpi4py) wins over the parent's, and ``addsitedir`` also runs the parent's own ``.pth`` files
(editable installs). See https://docs.python.org/3/library/site.html for how ``.pth`` files are
read. Plain stdlib only.

Because a child links to one interpreter, the children of two interpreters cannot share a folder:
each would find the other's stale and make it again (removing it under a test run that uses it).
``--root BASE`` names this interpreter's folder: BASE itself for an interpreter that is not a venv
(CI on the system interpreter, as before), ``BASE-venv-<hash of sys.prefix>`` for a venv.
"""

from __future__ import annotations

import argparse
import hashlib
import site
import subprocess
import sys
from pathlib import Path

PTH_NAME = "_cluster_topology_parent.pth"


def parent_sites() -> list[str]:
    """This interpreter's site-packages folders, in its own sys.path order."""
    return [folder for folder in site.getsitepackages() if Path(folder).is_dir()]


def pth_text() -> str:
    head = f"# Written by tests/launchers/child_venv.py: the packages of {sys.executable}\n"
    return head + "".join(f"import site; site.addsitedir({folder!r})\n" for folder in parent_sites())


def root(base: Path) -> Path:
    """Where this interpreter's children go under `base` (see the module docstring)."""
    if sys.prefix == sys.base_prefix:
        return base
    digest = hashlib.sha256(str(Path(sys.prefix).resolve()).encode()).hexdigest()[:10]
    return base.with_name(f"{base.name}-venv-{digest}")


def child_site(venv: Path) -> Path:
    """The child's own site-packages (asked of its python: the folder name carries its version)."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{venv}/bin/python cannot say its site-packages: {done.stderr.strip()}")
    return Path(done.stdout.strip())


def linked(venv: Path) -> bool:
    """VENV's python runs and its link file names exactly this interpreter's folders."""
    if not (venv / "bin" / "python").exists():
        return False
    try:
        return (child_site(venv) / PTH_NAME).read_text() == pth_text()
    except (OSError, SystemExit):
        return False


def make(venv: Path, *, with_pip: bool) -> None:
    if not (venv / "bin" / "python").exists():
        command = [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(venv)]
        subprocess.run(command, check=True, timeout=600)
    (child_site(venv) / PTH_NAME).write_text(pth_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("venv", type=Path, help="the venv (with --root: the base folder)")
    parser.add_argument("--check", action="store_true", help="only check the link; exit 1 when it is missing or stale")
    parser.add_argument("--root", action="store_true", help="print the folder for this interpreter's venvs under VENV")
    parser.add_argument("--without-pip", action="store_true", help="make the venv without pip (faster)")
    args = parser.parse_args(argv)
    venv = args.venv.absolute()
    if args.root:
        print(root(venv))
        return 0
    if args.check:
        return 0 if linked(venv) else 1
    make(venv, with_pip=not args.without_pip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
