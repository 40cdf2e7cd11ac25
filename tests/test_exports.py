"""The public surface, both ways: `__all__` of every public module equals its public names, each documented.

A public module is one whose dotted path has no part starting with `_`. Its public names are the
top-level functions, classes and assignments whose names do not start with `_`; a name it imports
is public only where `__all__` says so (the facades re-export). Every public function and class
has a docstring, and no public function or attribute of a package hides a submodule of the same name.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import GenericAlias, ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL = {  # modules that need an extra: tested where it is installed (CI installs them all)
    "resolver.integrations.torch": "torch",
    "resolver.integrations.lightning": "lightning",
}


def public_modules() -> list[str]:
    names = []
    for package in ("resolver", "probes"):
        names.append(package)
        module = importlib.import_module(package)
        names.extend(
            info.name
            for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}.")
            if not any(part.startswith("_") for part in info.name.split("."))
        )
    return sorted(names)


def top_level(path: Path) -> tuple[set[str], set[str]]:
    """(names defined at top level, names imported at top level) of a module's source."""
    defined: set[str] = set()
    imported: set[str] = set()
    body = ast.parse(path.read_text()).body
    # a facade imports lazily: the names it imports under `if TYPE_CHECKING:` are its too
    nodes = [*body, *(inner for node in body if isinstance(node, ast.If) for inner in node.body)]
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            defined.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and [alias.name for alias in node.names] == ["*"]:
            imported.update(importlib.import_module(node.module or "").__all__)  # what a star import brings
        elif isinstance(node, ast.ImportFrom):
            imported.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return defined, imported


def load(name: str) -> ModuleType:
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name])
    return importlib.import_module(name)


def lazily_exported(package: ModuleType) -> set[str]:
    """What a package serves from its submodules through `__getattr__`: names each of them exports."""
    modules = pkgutil.iter_modules(package.__path__, f"{package.__name__}.")
    return {n for info in modules for n in getattr(importlib.import_module(info.name), "__all__", ())}


@pytest.mark.parametrize("name", public_modules())
def test_all_equals_the_public_names(name: str) -> None:
    module = load(name)
    assert module.__file__ is not None
    defined, imported = top_level(Path(module.__file__))
    exported = set(getattr(module, "__all__", ()))
    public = {n for n in defined if not n.startswith("_")} - {"__all__"}
    assert public <= exported, f"{name}: public but not in __all__: {sorted(public - exported)}"
    unknown = exported - defined - imported
    if "__getattr__" in defined and hasattr(module, "__path__"):  # a lazy facade (resolver.testing's PEP 562)
        unknown -= lazily_exported(module)
    assert not unknown, f"{name}: in __all__ but neither defined nor imported: {sorted(unknown)}"
    for export in exported:
        assert hasattr(module, export), f"{name}.{export}"


@pytest.mark.parametrize("name", public_modules())
def test_every_public_function_and_class_is_documented(name: str) -> None:
    module = load(name)
    for export in getattr(module, "__all__", ()):
        value = getattr(module, export)
        # a type alias such as Callable[..., int] is no class, although Python 3.10's isclass says so
        if inspect.isfunction(value) or (inspect.isclass(value) and not isinstance(value, GenericAlias)):
            assert inspect.getdoc(value), f"{name}.{export} has no docstring"


@pytest.mark.parametrize("name", [n for n in public_modules() if "." in n])
def test_no_public_attribute_hides_a_submodule(name: str) -> None:
    parent, _, child = name.rpartition(".")
    module = load(name)
    assert getattr(importlib.import_module(parent), child) is module


NEEDS_AN_EXTRA = ("resolver.integrations.",)  # imported by name, after installing the extra


def test_every_public_submodule_is_an_attribute_of_its_package() -> None:
    """`import resolver; resolver.testing` works without importing the module first.

    The source modules (`resolver.sources.slurm`) and the testing builders are imported by name, as
    any package's modules: the kit has no module `__getattr__` (issue 25, point 7).
    """
    import subprocess
    import sys

    names = [n for n in public_modules() if n.count(".") == 1 and not n.startswith(NEEDS_AN_EXTRA)]
    code = (
        "import importlib, sys\n"
        "lazily = 0\n"
        f"for name in {names!r}:\n"
        "    parent, _, child = name.rpartition('.')\n"
        "    package = importlib.import_module(parent)\n"
        "    lazily += name not in sys.modules\n"
        "    assert getattr(package, child) is sys.modules[name], name\n"
        "    assert child in dir(package), name\n"
        "print(lazily)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 1  # some came through the package's __getattr__, imported on first use
