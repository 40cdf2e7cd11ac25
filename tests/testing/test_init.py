"""resolver.testing's surface: typed builders, what it exports, what it imports, every capture checked."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest

from resolver import testing as rt
from resolver.sources._registry import ENTRIES
from resolver.testing._registry import MODULES
from tests.conftest import CAPTURES
from tests.testing import test_mpich, test_openmpi, test_slurm, test_torchrun

ROOT = Path(__file__).resolve().parents[2]


def test_every_capture_is_checked_against_a_builder() -> None:
    jobs = [*test_slurm.JOBS, *test_openmpi.JOBS, *test_mpich.JOBS, *test_torchrun.JOBS]
    covered = {name for files, _ in jobs for name in files} | {name for name, _ in test_slurm.SINGLE}
    present = {str(p.relative_to(CAPTURES)) for p in CAPTURES.glob("*/*/*.env")}
    assert present == covered, f"captures without a builder check: {sorted(present - covered)}"


PROCESS_KEYWORDS = {"procid", "node_rank", "local_rank", "rank", "vnode", "node"}  # which process an *_env builds


def signatures() -> list[tuple[Callable[..., object], type, set[str]]]:
    """Every builder of every builder module the registry names -> its launch class and the keywords
    it adds to the launch's fields (the process it describes)."""
    table = []
    for name in MODULES:
        module = importlib.import_module(name)
        (launch,) = [getattr(module, n) for n in module.__all__ if n.endswith("Launch")]
        for builder in (getattr(module, n) for n in module.__all__ if n.endswith(("_env", "_job"))):
            fields = {field.name for field in attrs.fields(launch)}
            table.append((builder, launch, set(inspect.signature(builder).parameters) - fields))
    return table


SIGNATURES = signatures()


@pytest.mark.parametrize(("build", "launch", "added"), SIGNATURES, ids=[b.__name__ for b, _, _ in SIGNATURES])
def test_a_builder_takes_exactly_its_launch_fields(build: Callable[..., object], launch: type, added: set[str]) -> None:
    parameters = inspect.signature(build).parameters
    assert set(parameters) == {field.name for field in attrs.fields(launch)} | added
    assert added <= PROCESS_KEYWORDS and (not added if build.__name__.endswith("_job") else True)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert inspect.signature(build).return_annotation == ("Job" if build.__name__.endswith("_job") else "Process")
    assert build.__module__ == launch.__module__ and build.__doc__


def test_mypy_refuses_a_keyword_no_launch_has(tmp_path: Path) -> None:
    use = tmp_path / "use_builders.py"
    use.write_text(
        "from resolver.testing.lsf import lsf_env\n"  # the typed import: the launcher's module
        "from resolver.testing.slurm import slurm_env\n"
        "slurm_env(procid=3, nodes=('ci1', 'ci2'), ntasks=4)\n"
        "slurm_env(procid=3, node=('a', 'b'))\n"
        "lsf_env(rank='4')\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", str(use), "--cache-dir", str(tmp_path / "cache")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, errors
    assert ':4: error: Unexpected keyword argument "node"' in errors[0]
    assert ':5: error: Argument "rank" has incompatible type "str"; expected "int"' in errors[1]
    with pytest.raises(TypeError, match="node"):
        rt.slurm_env(procid=3, node=("a", "b"))  # the package's lazy name: Any to mypy, the same function


def test_every_registry_entry_has_its_builder_modules_exported() -> None:
    modules = [f"resolver.testing.{name}" for entry in ENTRIES for name in entry.builders]
    assert tuple(modules) == MODULES  # the kit's list is the registry's, in its order
    assert {entry.name for entry in ENTRIES if not entry.builders} == {"lightning", "xla"}  # nothing to launch
    for name in modules:
        module = importlib.import_module(name)  # the registry names a module that exists
        builders = {n for n in module.__all__ if n.endswith(("_env", "_job"))}
        assert builders, name
        assert set(module.__all__) - {"LAUNCHER"} <= set(rt.__all__), name  # LAUNCHER: strategies' entry
        for builder in builders:
            assert getattr(rt, builder) is getattr(module, builder), builder
        assert module.LAUNCHER.name == name.rpartition(".")[2]
    assert tuple(launcher.name for launcher in rt.REGISTRY) == rt.LAUNCHERS
    assert set(rt.NONDETERMINISTIC) == set(rt.LAUNCHERS)


def test_every_builder_module_is_in_the_registry() -> None:
    found = {
        f"resolver.testing.{info.name}"
        for info in pkgutil.iter_modules(rt.__path__)
        if hasattr(importlib.import_module(f"resolver.testing.{info.name}"), "LAUNCHER")
    }
    assert found == set(MODULES), "a builder module no registry entry names"


def test_every_exported_builder_is_in_the_signature_table() -> None:
    """The registry's builder modules' builders are exactly what resolver.testing exports (docs/testing.md's
    table is held to them in tests/test_source_lists.py)."""
    exported = {name for name in rt.__all__ if name.endswith(("_env", "_job"))}
    assert exported == {b.__name__ for b, _, _ in SIGNATURES}
    for name in rt.__all__:
        assert hasattr(rt, name), name


def test_every_one_process_builder_gives_a_process_and_every_job_builder_a_job() -> None:
    for build, _, _ in SIGNATURES:
        # each builder with its defaults, which give a valid launch (MPI's process counts have none)
        needed = {"openmpi": {"np": 2}, "mpich": {"n": 2}}.get(build.__module__.rpartition(".")[2], {})
        built = build(**needed)
        if build.__name__.endswith("_job"):
            assert isinstance(built, rt.Job) and built.processes, build.__name__
            assert all(isinstance(p, rt.Process) for p in built), build.__name__
        else:
            assert isinstance(built, rt.Process), build.__name__
            assert dict(built) == built.environ and all(isinstance(v, str) for v in built.values())


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=ROOT
    )
    return done.stdout.strip()


def test_import_resolver_does_not_import_the_testing_module() -> None:
    assert run_python("import sys, resolver; print('resolver.testing' in sys.modules)") == "False"


def test_the_package_imports_a_launcher_s_module_only_when_a_name_is_asked_for() -> None:
    """The re-exports come from the registry's builder modules on first use (PEP 562), so a new
    launcher's module needs no edit to the package, and importing it costs no launcher's module."""
    code = (
        "import sys, resolver.testing as rt\n"
        "def kit():\n    return sorted(m for m in sys.modules if m.startswith('resolver.testing.'))\n"
        "print(kit())\n"
        "print(rt.slurm_env.__module__, 'resolver.testing.gcp_batch' in kit())\n"
        "print('gcp_batch_env' in dir(rt), 'gcp_batch_env' in rt.__all__, 'LAUNCHER' in rt.__all__)\n"
        "try:\n    rt.slurm_environment\nexcept AttributeError as e:\n    print(e)\n"
    )
    assert run_python(code).splitlines() == [
        "['resolver.testing.world']",
        "resolver.testing.slurm True",
        "True True False",
        "module 'resolver.testing' has no attribute 'slurm_environment'",
    ]


def test_the_builders_work_without_hypothesis() -> None:
    code = (
        "import sys; sys.modules['hypothesis'] = None\n"  # importing hypothesis now fails
        "import resolver.testing as rt\n"
        "loaded = sys.modules['hypothesis'] is not None\n"
        "print(len(rt.slurm_job(nodes=('a', 'b'), ntasks=3)), loaded)\n"
        "try:\n    rt.jobs()\nexcept ImportError:\n    print('strategies need hypothesis')\n"
    )
    assert run_python(code).splitlines() == ["3 False", "strategies need hypothesis"]
