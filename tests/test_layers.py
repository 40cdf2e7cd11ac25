"""The layers are visible in the imports: each module imports only its own layer or the ones below,
and no import circle exists (issue 25, point 1; the layers are drawn in DESIGN.md).

Every import statement counts, at module level or inside a function, except those under
`if TYPE_CHECKING:` (annotations only). `from package import name` targets `package.name` when
that is a module, else the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("resolver", "probes")

# lowest first; a module's layer is that of the longest prefix listed
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("resolver.errors",)),  # the shared vocabulary: the probes raise ProbeFailed too
    ("probes", ("probes",)),
    ("core", ("resolver.topology", "resolver.environ", "resolver.hostlist", "resolver.origin")),
    ("kit", ("resolver.sources", "resolver.sources._kit", "resolver.sources._rules")),
    ("registry", ("resolver.sources._registry",)),
    ("sources", ("resolver.sources.",)),
    ("engine", ("resolver._", "resolver.requeue", "resolver.schema")),
    ("facade", ("resolver", "resolver.__main__", "resolver.integrations", "resolver.testing")),
)
ORDER = [name for name, _ in LAYERS]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def layer(module: str) -> str:
    best, found = -1, None
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            partial = prefix.endswith((".", "_"))  # `resolver._`: every private module of the package
            matches = module == prefix or module.startswith(prefix if partial else prefix + ".")
            if matches and len(prefix) > best:
                best, found = len(prefix), name
    assert found is not None, f"{module} belongs to no layer: add it to LAYERS"
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str) -> set[str]:
    """The modules of ours that `module` imports, anywhere in its code but TYPE_CHECKING blocks."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for branch in node.orelse:
                visit(branch)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in MODULES else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name.split(".")[0] in PACKAGES and name in MODULES and name != module}


GRAPH = {module: imports(module) for module in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_a_layer_above_its_own(module: str) -> None:
    mine = ORDER.index(layer(module))
    upward = sorted(target for target in GRAPH[module] if ORDER.index(layer(target)) > mine)
    assert not upward, f"{module} ({layer(module)}) imports {[(t, layer(t)) for t in upward]}"


def test_the_kit_never_imports_the_engine() -> None:
    kit = [m for m in MODULES if layer(m) in ("kit", "registry")]
    assert {"resolver.sources", "resolver.sources._kit", "resolver.sources._registry"} <= set(kit)
    for module in kit:
        assert not {t for t in GRAPH[module] if layer(t) in ("engine", "facade")}, module


def test_there_is_no_import_circle() -> None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(GRAPH[module]):
            if state.get(target) == 1:
                circle = [*path[path.index(target) :], target]
                pytest.fail(f"import circle: {' -> '.join(circle)}")
            if target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in sorted(MODULES):
        if module not in state:
            walk(module)


def test_the_walker_sees_an_upward_import_and_a_circle() -> None:
    """The rules above can fail: a made-up kit module importing the engine breaks both."""
    GRAPH["resolver.sources._kit"] = {*GRAPH["resolver.sources._kit"], "resolver._detect"}
    try:
        with pytest.raises(AssertionError):
            test_no_module_imports_a_layer_above_its_own("resolver.sources._kit")
        with pytest.raises(pytest.fail.Exception):
            test_there_is_no_import_circle()
    finally:
        GRAPH["resolver.sources._kit"] = imports("resolver.sources._kit")
