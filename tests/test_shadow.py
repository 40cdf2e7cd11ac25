"""A user's own `probes.py` or `probes/` package shadows our top-level `probes`: the error names it.

The real case runs for real: Python started in a folder that holds the user's module, with the
checkout on PYTHONPATH after it (as `python -c` and `python -m` put the working directory first).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import resolver
from resolver import TopologyError
from resolver._shadow import ProbesShadowed

ROOT = Path(__file__).resolve().parents[1]
OURS = ROOT / "probes"


def python(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """`python ARGUMENTS` started in `folder`, finding the checkout's packages only after the folder."""
    return subprocess.run(
        [sys.executable, *arguments],
        cwd=folder,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def users_module(folder: Path, kind: str) -> Path:
    """The user's own `probes`, as a module file or a package; returns what they would rename."""
    if kind == "module":
        path = folder / "probes.py"
        path.write_text("def measure():\n    return 42\n")
        return path
    package = folder / "probes"
    package.mkdir()
    (package / "__init__.py").write_text("READINGS = []\n")
    return package


RESOLVE = """if True:
    import json, resolver
    try:
        resolver.resolve({})
    except Exception as exc:
        print(json.dumps({"type": type(exc).__name__, "bases": [c.__name__ for c in type(exc).__mro__],
                          "message": str(exc), "name": exc.name, "path": exc.path}))
    else:
        print(json.dumps(None))
"""


@pytest.mark.parametrize("kind", ["module", "package"])
def test_resolve_names_the_file_that_shadows_probes(tmp_path: Path, kind: str) -> None:
    shadow = users_module(tmp_path, kind)
    done = python(tmp_path, "-c", RESOLVE)
    assert done.returncode == 0, done.stderr
    error = json.loads(done.stdout)
    assert error is not None, "resolve did not fail although the user's probes shadows ours"
    assert error["type"] == "ProbesShadowed"
    assert {"TopologyError", "ImportError"} <= set(error["bases"])
    assert (error["name"], error["path"]) == ("probes", str(shadow))
    message = error["message"]
    assert f"the module 'probes' that Python imported is {shadow}," in message
    assert f"cluster-topology's probes package ({OURS})" in message
    assert f"HINT: rename {shadow}" in message
    assert "python -P" in message


@pytest.mark.parametrize("command", [[], ["check"]], ids=["resolve", "check"])
def test_the_command_line_says_it_in_one_line_and_exits_2(tmp_path: Path, command: list[str]) -> None:
    shadow = users_module(tmp_path, "module")
    done = python(tmp_path, "-m", "resolver", *command)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: the module 'probes' that Python imported is {shadow}, ")
    assert "HINT: rename" in line


def test_the_command_line_json_error_has_the_facts(tmp_path: Path) -> None:
    shadow = users_module(tmp_path, "module")
    done = python(tmp_path, "-m", "resolver", "--format", "json")
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert (error["type"], error["variable"], error["value"]) == ("ProbesShadowed", "probes", str(shadow))
    assert error["expected"] == f"cluster-topology's probes package ({OURS})"


def test_python_p_keeps_the_working_folder_off_the_path_as_the_hint_says(tmp_path: Path) -> None:
    if sys.version_info < (3, 11):
        pytest.skip("python -P is new in Python 3.11")
    users_module(tmp_path, "module")
    done = python(tmp_path, "-P", "-m", "resolver", "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["source"] == "lightning"


def test_a_folder_named_probes_without_init_does_not_shadow(tmp_path: Path) -> None:
    """A namespace folder loses to a regular package later on sys.path: nothing to report, it resolves."""
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "notes.txt").write_text("not a package\n")
    done = python(tmp_path, "-c", RESOLVE)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is None


def test_without_a_shadow_the_same_commands_resolve(tmp_path: Path) -> None:
    assert json.loads(python(tmp_path, "-c", RESOLVE).stdout) is None
    done = python(tmp_path, "-m", "resolver", "--format", "json")
    assert done.returncode == 0, done.stderr


def test_a_probes_imported_before_resolver_is_caught_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's module was imported first (it is in sys.modules): every probes import site checks it."""
    theirs = types.ModuleType("probes")
    theirs.__file__ = "/home/user/project/probes.py"
    monkeypatch.setitem(sys.modules, "probes", theirs)
    with pytest.raises(ProbesShadowed) as info:
        resolver.resolve({})
    assert isinstance(info.value, TopologyError) and isinstance(info.value, ImportError)
    assert info.value.path == "/home/user/project/probes.py"
    assert info.value.to_dict()["value"] == "/home/user/project/probes.py"
    from resolver.testing import torchrun_env

    with pytest.raises(ProbesShadowed, match=re.escape("/home/user/project/probes.py")):
        torchrun_env().probes()


def test_a_module_without_a_file_is_named_by_its_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "probes", types.ModuleType("probes"))
    with pytest.raises(ProbesShadowed, match=r"imported is <module 'probes'>"):
        resolver.resolve({})


def runtime_probes_imports(path: Path) -> list[tuple[int, bool]]:
    """(line, checked) of each import of `probes` in a module that runs (not under `if TYPE_CHECKING:`):
    checked when a function around it calls `require_probes()` on an earlier line (or is that check)."""
    tree = ast.parse(path.read_text())
    found: list[tuple[int, bool]] = []
    # a call at the module's top level runs when it is imported, before any of its functions can
    checked_from = min(
        (
            node.lineno
            for node in tree.body
            if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "require_probes"
        ),
        default=None,
    )

    def visit(node: ast.AST, functions: tuple[ast.AST, ...]) -> None:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [alias.name for alias in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        if any(name.split(".")[0] == "probes" for name in names):
            line = node.lineno  # type: ignore[attr-defined]
            checked = (
                (checked_from is not None and checked_from < line)
                or any(getattr(function, "name", None) == "require_probes" for function in functions)
                or any(
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Name)
                    and call.func.id == "require_probes"
                    and call.lineno < line
                    for function in functions
                    for call in ast.walk(function)
                )
            )
            found.append((line, checked))
        inner = (*functions, node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else functions
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, ())
    return found


def test_every_runtime_import_of_probes_in_resolver_is_checked_first() -> None:
    sites = {
        f"{path.relative_to(ROOT)}:{line}": checked
        for path in sorted((ROOT / "resolver").rglob("*.py"))
        for line, checked in runtime_probes_imports(path)
    }
    assert len(sites) >= 5  # the resolver really imports probes at run time: the walk found them
    assert [site for site, checked in sites.items() if not checked] == []


def test_the_walk_tells_a_checked_import_from_an_unchecked_one(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from probes import Probes\n"
        "def checked():\n    require_probes()\n    from probes import live\n"
        "def unchecked():\n    from probes.fakes import FakeComm\n"
        "def outer():\n    require_probes()\n    def inner():\n        import probes.tcp\n"
    )
    assert runtime_probes_imports(module) == [(6, True), (8, False), (12, True)]
    top = tmp_path / "top.py"
    top.write_text(
        "import os\nfrom probes import tcp\nrequire_probes()\nfrom probes import live\ndef f():\n    import probes\n"
    )
    assert runtime_probes_imports(top) == [(2, False), (4, True), (6, True)]
