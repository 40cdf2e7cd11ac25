"""The MPI wheel venvs see the packages of the interpreter that made them, a venv's included.

tests/launchers/mpi_venvs.sh makes each venv with child_venv.py. Here a venv stands in for the one
CI may run in (`parent`, with a package of its own), and venvs are made from it: the one made by
child_venv.py imports the parent's package, one made with `--system-site-packages` (what
mpi_venvs.sh did before) does not, and a package installed into the child wins over the parent's.
Every venv is made without pip (a second or two each), in the test's own folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHILD_VENV = Path(__file__).resolve().with_name("child_venv.py")
MARK = "ct_parent_mark"  # a module only the parent venv has


def run(python: Path | str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], capture_output=True, text=True, timeout=120, check=False)


def site_packages(venv: Path) -> Path:
    done = run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))")
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def imported_from(venv: Path, module: str) -> str:
    """Where the venv's python imports `module` from ("" when it cannot)."""
    done = run(venv / "bin" / "python", "-c", f"import {module}; print({module}.__file__)")
    return done.stdout.strip() if done.returncode == 0 else ""


@pytest.fixture(scope="module")
def parent(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with a package of its own, as CI's venv has torch."""
    venv = tmp_path_factory.mktemp("parent") / "venv"
    done = run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    assert done.returncode == 0, done.stderr
    (site_packages(venv) / f"{MARK}.py").write_text("WHERE = 'parent'\n")
    return venv


def test_a_child_of_a_venv_sees_that_venvs_packages(parent: Path, tmp_path: Path) -> None:
    child = tmp_path / "child"
    done = run(parent / "bin" / "python", str(CHILD_VENV), str(child), "--without-pip")
    assert done.returncode == 0, done.stderr
    assert imported_from(child, MARK) == str(site_packages(parent) / f"{MARK}.py")
    pth = (site_packages(child) / "_cluster_topology_parent.pth").read_text()
    assert f"site.addsitedir({str(site_packages(parent))!r})" in pth, pth


def test_system_site_packages_from_a_venv_misses_them(parent: Path, tmp_path: Path) -> None:
    """The cause: --system-site-packages links the base installation, not the venv that runs it."""
    other = tmp_path / "system-site"
    done = run(parent / "bin" / "python", "-m", "venv", "--without-pip", "--system-site-packages", str(other))
    assert done.returncode == 0, done.stderr
    assert imported_from(other, MARK) == ""


def test_the_childs_own_packages_come_first(parent: Path, tmp_path: Path) -> None:
    child = tmp_path / "child"
    assert run(parent / "bin" / "python", str(CHILD_VENV), str(child), "--without-pip").returncode == 0
    own = site_packages(child) / f"{MARK}.py"
    own.write_text("WHERE = 'child'\n")  # as the MPI wheel's mpi4py shadows the parent's mpi4py
    assert imported_from(child, MARK) == str(own)


def test_check_tells_a_child_of_another_interpreter_apart(parent: Path, tmp_path: Path) -> None:
    child = tmp_path / "child"
    assert run(parent / "bin" / "python", str(CHILD_VENV), str(child), "--without-pip").returncode == 0
    assert run(parent / "bin" / "python", str(CHILD_VENV), "--check", str(child)).returncode == 0
    # made by the parent venv, so stale for this interpreter: mpi_venvs.sh makes such a venv again
    assert run(sys.executable, str(CHILD_VENV), "--check", str(child)).returncode == 1
    assert run(sys.executable, str(CHILD_VENV), "--check", str(tmp_path / "none")).returncode == 1


def test_a_child_of_this_interpreter_imports_its_test_packages(tmp_path: Path) -> None:
    child = tmp_path / "child"
    assert run(sys.executable, str(CHILD_VENV), str(child), "--without-pip").returncode == 0
    where = imported_from(child, "pytest")
    assert where and Path(where).is_relative_to(Path(pytest.__file__).parents[1]), where


def root_of(python: Path | str, base: Path) -> str:
    done = run(python, str(CHILD_VENV), "--root", str(base))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_each_interpreter_has_its_own_root(parent: Path, tmp_path: Path) -> None:
    """Children link to one interpreter: a venv's go beside the system's, never into the same folder."""
    base = tmp_path / "mpi"
    in_parent = root_of(parent / "bin" / "python", base)
    assert Path(in_parent).parent == tmp_path and Path(in_parent).name.startswith("mpi-venv-"), in_parent
    assert root_of(parent / "bin" / "python", base) == in_parent  # the same venv finds its folder again
    other = tmp_path / "other"
    assert run(sys.executable, "-m", "venv", "--without-pip", str(other)).returncode == 0
    assert root_of(other / "bin" / "python", base) not in (in_parent, str(base))
    base_python = run(parent / "bin" / "python", "-c", "import sys; print(sys._base_executable)").stdout.strip()
    assert root_of(base_python, base) == str(base)  # the interpreter that is not a venv keeps BASE
