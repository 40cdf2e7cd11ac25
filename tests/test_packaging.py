"""The distributions as a user gets them: built, checked, unpacked, installed and type-checked.

`python -m build` makes the sdist and, from it, the wheel. The wheel holds the two packages with
their `py.typed` markers and the JSON Schema, and nothing else; the sdist holds every file of the
repository, and its own test suite runs from it; after the README's `pip install -e .` (and after
installing the wheel) mypy --strict and pyright see the package's types from a user's script; the
extras a user or contributor installs come as wheels for every platform we name, so no compiler
is needed. These tests build and install for real, so they carry the `build` marker.
"""

from __future__ import annotations

import email.message
import email.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import pytest

import resolver
from tests.conftest import IN_CI, require_tool

RUN_TIMEOUT = 900  # seconds one command (a build, an install, a test run) may take in `run`
# pytest-timeout's 600 s (pyproject.toml) would stop a test before `run`'s own timeout could say which
# command hung; a test here runs a few commands, so it gets room for two of them at their limit
pytestmark = [pytest.mark.build, pytest.mark.timeout(2 * RUN_TIMEOUT)]

ROOT = Path(__file__).resolve().parents[1]
# The unit tests: what the sdist's suite runs without real launchers (or building itself again), nor
# valgrind (40 s a run, which the suite run from the repository covers)
UNIT = "not slurm and not mpi and not torchrun and not xla and not build and not valgrind"


class Dists(NamedTuple):
    sdist: Path
    wheel: Path

    def metadata(self) -> email.message.Message:
        """The wheel's METADATA: what an index shows and what pip installs from."""
        with zipfile.ZipFile(self.wheel) as wheel:
            (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            return email.parser.Parser().parsestr(wheel.read(name).decode())

    def requirements(self, extra: str) -> list[str]:
        """What `pip install 'cluster-topology[EXTRA]'` asks for: the dependencies and the extra's."""
        out = []
        for line in self.metadata().get_all("Requires-Dist") or []:
            requirement, _, marker = (part.strip() for part in line.partition(";"))
            if not marker or marker == f'extra == "{extra}"':
                out.append(requirement)
        return out


def require_module(name: str) -> None:
    """Skip (locally) or fail (in CI, which installs the dev extra) unless `name` is importable."""
    if importlib.util.find_spec(name) is None:
        message = f"needs {name} (pip install -e '.[dev]')"
        if IN_CI:
            pytest.fail(f"{message}; CI must install it")
        pytest.skip(message)


def run(args: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run a command to success and return its output; a failure shows the output's tail."""
    out = subprocess.run(
        [str(arg) for arg in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    if out.returncode != 0:
        pytest.fail(f"{args} exited {out.returncode}:\n{(out.stdout + out.stderr)[-4000:]}")
    return out.stdout


def clean_env() -> dict[str, str]:
    """This process's environment without PYTHONPATH, which would show the checkout to everything."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def tracked() -> set[str]:
    """The repository's files, as git knows them."""
    return set(run(["git", "ls-files"], cwd=ROOT).splitlines())


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    require_module("build")
    out = tmp_path_factory.mktemp("dist")
    run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=ROOT)  # sdist, then the wheel from it
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dists(sdist, wheel)


def test_the_wheel_holds_the_two_packages_and_nothing_else(dists: Dists) -> None:
    with zipfile.ZipFile(dists.wheel) as wheel:
        names = set(wheel.namelist())
    metadata = dists.metadata()
    files = {name for name in names if ".dist-info/" not in name}
    assert files == {name for name in tracked() if name.startswith(("resolver/", "probes/"))}
    assert {"resolver/py.typed", "probes/py.typed", "resolver/topology.schema.json"} <= files
    assert not any(name.startswith(("tests/", "benchmarks/", "fuzz/", "docs/")) for name in names)
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert metadata["Version"] == resolver.__version__  # one source of truth, read by the build
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Typing :: Typed" in (metadata.get_all("Classifier") or [])
    # no Project-URL (nor the older Home-page) until the project has a public home: an index shows each
    # as a link, and a link to nowhere is worse than none
    assert metadata.get_all("Project-URL") is None
    assert metadata.get_all("Home-page") is None


def test_the_sdist_holds_every_file_of_the_repository(dists: Dists) -> None:
    with tarfile.open(dists.sdist) as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert tracked() - {".gitignore"} <= names
    assert {"PKG-INFO", "LICENSE", "CHANGELOG.md", "tests/conftest.py"} <= names


def test_twine_accepts_both(dists: Dists) -> None:
    require_module("twine")
    out = run([sys.executable, "-m", "twine", "check", "--strict", dists.sdist, dists.wheel], cwd=ROOT)
    assert out.count("PASSED") == 2


def unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as archive:
        archive.extractall(into, filter="data")
    (unpacked,) = into.iterdir()
    return unpacked


def run_unit_tests(python: Path | str, unpacked: Path, env: dict[str, str], *ignore: str) -> None:
    """The unpacked sdist's unit tests, its own code first on the path; tests/launchers starts real
    launchers, which CI's own run covers."""
    env = {**env, "PYTHONPATH": str(unpacked)}
    code = "import resolver, probes; print(resolver.__file__, probes.__file__)"
    where = run([python, "-c", code], cwd=unpacked, env=env)
    assert all(Path(path).is_relative_to(unpacked) for path in where.split())
    ignored = [f"--ignore={path}" for path in ("tests/launchers", *ignore)]
    out = run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", UNIT, *ignored], cwd=unpacked, env=env)
    assert " passed" in out.splitlines()[-1] and " failed" not in out.splitlines()[-1]


THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
CLASSIFIED = re.findall(r'"Programming Language :: Python :: (3\.\d+)"', (ROOT / "pyproject.toml").read_text())
OTHER_PYTHONS = [version for version in CLASSIFIED if version != THIS_PYTHON]
SUITES_AT_ONCE = 2  # a suite keeps one core busy; CI has two


def find_python(version: str) -> Path:
    """An interpreter of that version that runs: pyenv's, else `pythonX.Y` on PATH (a pyenv shim may not run)."""
    candidates = sorted((Path.home() / ".pyenv" / "versions").glob(f"{version}.*/bin/python"))
    found = shutil.which(f"python{version}")
    candidates += [Path(found)] if found else []
    for python in candidates:
        if subprocess.run([python, "-c", "pass"], capture_output=True, check=False).returncode == 0:
            return python
    message = f"no Python {version} here (the classifiers name it)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def sdist_suite(version: str, dists: Dists, tmp: Path) -> None:
    """The unpacked sdist's unit tests under Python `version`: this interpreter as it is, another in a
    venv with the wheel, `test` and `dev`, where only what those extras install is there (tests needing
    torch, Lightning or atheris skip: CI is not set for that run; CI's own run on this Python needs them)."""
    if version == THIS_PYTHON:
        run_unit_tests(sys.executable, unpack(dists.sdist, tmp), clean_env())
        return
    venv = tmp / "venv"
    run([find_python(version), "-m", "venv", venv], cwd=tmp, env=clean_env())
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", f"{dists.wheel}[test,dev]"], cwd=tmp, env=clean_env())
    env = {key: value for key, value in clean_env().items() if key != "CI"}
    run_unit_tests(python, unpack(dists.sdist, tmp / "sdist"), env, "tests/integrations")


def _suite_of(item: pytest.Item) -> str | None:
    """The Python whose sdist suite `item` waits for; None for any other test."""
    if item.path.resolve() != Path(__file__).resolve():
        return None
    name = getattr(item, "originalname", item.name)
    if name == "test_the_sdist_test_suite_runs_from_the_unpacked_sdist":
        return THIS_PYTHON
    callspec = getattr(item, "callspec", None)
    if name == "test_the_sdist_test_suite_runs_on_every_python_the_classifiers_name" and callspec is not None:
        return str(callspec.params["version"])
    return None


@pytest.fixture(scope="module")
def suites(
    request: pytest.FixtureRequest, dists: Dists, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[None]]]:
    """The sdist's suite under every Python the selected tests ask for, started at once, `SUITES_AT_ONCE`
    at a time: each takes two to three minutes of one core, and one after another they took 10 of CI's
    27 minutes of tests. Each test waits for its own; a failure or skip in one reaches its test."""
    wanted = dict.fromkeys(v for v in map(_suite_of, request.session.items) if v is not None)
    with ThreadPoolExecutor(SUITES_AT_ONCE) as pool:
        futures = {v: pool.submit(sdist_suite, v, dists, tmp_path_factory.mktemp(f"sdist-{v}")) for v in wanted}
        yield futures
        for future in futures.values():
            future.cancel()  # the ones not started, when the run stopped early


def test_the_sdist_test_suite_runs_from_the_unpacked_sdist(suites: dict[str, Future[None]]) -> None:
    suites[THIS_PYTHON].result()


@pytest.mark.parametrize("version", OTHER_PYTHONS)
def test_the_sdist_test_suite_runs_on_every_python_the_classifiers_name(
    version: str, dists: Dists, suites: dict[str, Future[None]]
) -> None:
    """The unit tests under each other classified Python (`sdist_suite`)."""
    assert f"Programming Language :: Python :: {version}" in (dists.metadata().get_all("Classifier") or [])
    suites[version].result()


USER_SCRIPT = """\
# pyright: strict
import probes
import resolver
from resolver.testing import torchrun_env

topology: resolver.Topology = resolver.resolve(torchrun_env(node_rank=0, local_rank=1), probes.fake())
rank: int = topology.global_rank
"""

# The control: a script with one type error, which only a checker that sees our types reports.
WRONG_SCRIPT = """\
import resolver

rank: str = resolver.resolve({}).global_rank
"""


@pytest.mark.parametrize("install", ["editable", "wheel"])
def test_a_users_script_type_checks_against_the_installed_package(install: str, dists: Dists, tmp_path: Path) -> None:
    require_module("mypy")
    require_tool("pyright")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    if install == "editable":
        run([python, "-m", "pip", "install", "-q", "-e", "."], cwd=ROOT, env=clean_env())  # the README's command
    else:
        run([python, "-m", "pip", "install", "-q", dists.wheel], cwd=tmp_path, env=clean_env())
    project = tmp_path / "user"  # away from the checkout: the checkers must find the package installed
    project.mkdir()
    (project / "train.py").write_text(USER_SCRIPT)
    (project / "wrong.py").write_text(WRONG_SCRIPT)
    mypy: list[str | Path] = [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--no-incremental",
        "--python-executable",
        python,
    ]
    pyright: list[str | Path] = ["pyright", "--pythonpath", python]
    assert "Success: no issues found" in run([*mypy, "train.py"], cwd=project, env=clean_env())
    assert "0 errors" in run([*pyright, "train.py"], cwd=project, env=clean_env())
    for checker, error in ((mypy, 'expression has type "int", variable has type "str"'), (pyright, '"int" is not')):
        wrong = subprocess.run([*map(str, checker), "wrong.py"], cwd=project, env=clean_env(), capture_output=True)
        assert wrong.returncode == 1 and error in wrong.stdout.decode(), wrong.stdout.decode()


PLATFORMS = {
    "Linux x86_64": "manylinux_2_17_x86_64",
    "Linux aarch64": "manylinux_2_17_aarch64",
    "macOS arm64": "macosx_11_0_arm64",
    "macOS x86_64": "macosx_10_13_x86_64",
}


@pytest.mark.parametrize("python_version", ["3.10", "3.13"])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_testing_and_test_extras_install_from_wheels_alone(
    platform: str, python_version: str, dists: Dists, tmp_path: Path
) -> None:
    """`pip install 'cluster-topology[testing]'` and `[test]` need no compiler: every requirement has a wheel there."""
    extras = [dists.requirements(extra) for extra in ("testing", "test")]
    assert all(len(requirements) > 1 for requirements in extras)  # the dependencies and the extra's own
    requirements = sorted({requirement for each in extras for requirement in each})
    run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--target", tmp_path / "target",
            "--only-binary=:all:", "--platform", PLATFORMS[platform], "--implementation", "cp",
            "--python-version", python_version, *requirements,
        ],
        cwd=tmp_path,
    )  # fmt: skip


def test_a_test_here_outlasts_the_commands_it_runs() -> None:
    (mark,) = [m for m in pytestmark if m.name == "timeout"]
    assert mark.args[0] > RUN_TIMEOUT
