"""The documentation site is a contract, like the README: every example on it runs as written.

- ```python blocks run, page by page, in a fresh interpreter, in order and in one namespace (a
  block may use what an earlier block of its page defined); a block that starts with `>>>` is a
  doctest, so what it shows printed is what prints; `test_*` functions a page defines are called.
- ```console blocks: each `$ command` runs in bash from the repository's root, and prints
  exactly the lines that follow it on the page.
- ```bash blocks are commands to type (install, build): each line is one CI runs (.ci/run) or
  one of the README's.
CI builds the site itself with warnings as errors (.ci/run), which checks links and references.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import IN_CI
from tests.integrations import require_module
from tests.test_exports import public_modules

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts)
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
AUTOMODULE = re.compile(r"^\.\. automodule:: (\S+)$", re.M)

# Runs a page's python blocks in one namespace: doctests checked, other blocks executed, then the
# test functions called. A failure exits non-zero with the doctest report or the traceback.
DRIVER = """
import doctest, json, sys
page, blocks = sys.argv[1], json.loads(sys.argv[2])
namespace = {"__name__": "__docs__"}
for index, block in enumerate(blocks):
    name = f"{page}, python block {index + 1}"
    if block.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block, namespace, name, page, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        if runner.run(test, clear_globs=False).failed:
            sys.exit(1)
        namespace.update(test.globs)
    else:
        exec(compile(block, name, "exec"), namespace)
for key, value in list(namespace.items()):
    if key.startswith("test_") and callable(value):
        value()
print("ran", len(blocks), "blocks")
"""


def blocks(page: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(page.read_text()) if lang == language]


def base_env() -> dict[str, str]:
    """A plain environment: no launcher's variables, the checkout first on the path."""
    keep = {key: os.environ[key] for key in ("PATH", "HOME", "LANG", "CI") if key in os.environ}
    return {**keep, "PYTHONPATH": str(ROOT)}


def page_id(page: Path) -> str:
    return page.relative_to(DOCS).as_posix()


def test_the_site_has_the_pages_the_issue_asks_for() -> None:
    names = {page_id(page) for page in PAGES}
    required = {"index.md", "quickstart.md", "testing.md", "cli.md", "devices.md", "guarantees.md"}
    assert required <= names
    assert {"launchers/torchelastic.md", "launchers/slurm.md", "launchers/mpi.md"} <= names
    assert any(name.startswith("reference/") for name in names)


PYTHON_PAGES = [page for page in PAGES if blocks(page, "python")]


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=page_id)
def test_the_python_examples_run(page: Path) -> None:
    code = blocks(page, "python")
    text = "\n".join(code)
    if re.search(r"^\s*(import|from) torch\b", text, re.M):
        require_module("torch", "torch")
    if re.search(r"^\s*(import|from) lightning\b", text, re.M):
        require_module("lightning", "lightning")
    if re.search(r"^\s*(import|from) jax\b", text, re.M):
        require_module("jax", "jax")
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, page_id(page), json.dumps(code)],
        cwd=ROOT,
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert out.stdout.splitlines()[-1] == f"ran {len(code)} blocks"


def commands(block: str) -> list[tuple[str, str]]:
    """The `$ command` lines of a console block, each with the output shown after it."""
    pairs: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            pairs.append((line[2:], []))
        else:
            assert pairs, f"output before any command: {line!r}"
            pairs[-1][1].append(line)
    return [(command, "\n".join(output)) for command, output in pairs]


CONSOLE = [
    pytest.param(command, shown, id=f"{page_id(page)}: {command[:60]}")
    for page in PAGES
    for block in blocks(page, "console")
    for command, shown in commands(block)
]


@pytest.mark.parametrize(("command", "shown"), CONSOLE)
def test_the_console_examples_print_what_the_page_shows(command: str, shown: str) -> None:
    out = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )
    printed = "\n".join(line.rstrip() for line in out.stdout.splitlines())
    assert printed == "\n".join(line.rstrip() for line in shown.splitlines())


def test_the_shell_commands_are_the_ones_ci_runs() -> None:
    known = (ROOT / ".ci" / "run").read_text() + (ROOT / "README.md").read_text()
    lines = [line for page in PAGES for block in blocks(page, "bash") for line in block.splitlines()]
    assert lines
    for line in lines:
        assert line in known, f"{line!r} is neither in .ci/run nor in the README"


def site_configuration() -> Any:
    """docs/conf.py as a module (it imports Sphinx only for type checking)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_documents_every_public_module() -> None:
    """A public module (no part of its path starts with `_`) gets a reference page; a private one does not."""
    expand = site_configuration().automodules
    pages = [expand(page.read_text()) for page in (DOCS / "reference").glob("*.md")]
    documented = [name for text in pages for name in AUTOMODULE.findall(text)]
    assert sorted(documented) == sorted(set(documented))  # each module once
    assert set(documented) == set(public_modules())


def test_a_reference_page_lists_a_package_s_modules_in_one_line() -> None:
    expand = site_configuration().automodules
    text = expand("intro\n<!-- automodules resolver.testing :no-index: -->\n")
    assert "<!-- automodules" not in text
    names = AUTOMODULE.findall(text)
    assert "resolver.testing.slurm" in names
    assert "resolver.testing.world" in names
    assert not [name for name in names if name.rpartition(".")[2].startswith("_")]
    assert text.count("   :no-index:\n") == len(names)
    assert expand("no marker here\n") == "no marker here\n"


def test_ci_builds_the_site_strictly_with_the_readmes_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "awk '/<!-- docs-command/" in ci
    command = readme.split("<!-- docs-command", 1)[1].splitlines()[2]
    assert command.startswith("pip install -e '.[docs]' && python -m sphinx -W ")
    assert command.endswith(" docs site")


def test_the_readmes_links_into_the_site_exist() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)", (ROOT / "README.md").read_text())
    assert len(links) > 10
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing


def test_the_device_page_names_every_variable_the_rule_reads() -> None:
    from resolver._devices import SCHEDULER_LISTS, VISIBILITY

    page = (DOCS / "devices.md").read_text()
    for name in (*VISIBILITY, *SCHEDULER_LISTS, "SLURMD_TRES_BIND", "NoDevFiles"):
        assert f"`{name}" in page, name


# -- one page per launcher and platform -------------------------------------------------------------

TITLE = re.compile(r"\A# (.+)$", re.M)


def registered_sources() -> list[str]:
    from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ON_REQUEST

    return [entry.name for entry in (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)]


def page_of(source: str) -> str:
    from resolver.sources._registry import entry

    return entry(source).docs_page


def title(page: Path) -> str:
    match = TITLE.search(page.read_text())
    assert match, f"{page_id(page)} has no title"
    return match[1]


@pytest.mark.parametrize("source", registered_sources())
def test_every_source_has_its_own_launcher_page(source: str) -> None:
    """docs/launchers/<page>.md (the entry's `page`, else its name), in the sidebar through the glob of the index."""
    page = DOCS / "launchers" / f"{page_of(source)}.md"
    assert page.is_file(), f"no page for source {source!r}: {page_id(page)}"
    assert f"`{source}`" in title(page) or source in title(page).lower()
    assert ":glob:" in (DOCS / "launchers" / "index.md").read_text()


def test_a_launcher_page_titles_one_platform() -> None:
    """Each page is one family: the sources its title names in backticks all have it as their page."""
    sources = set(registered_sources())
    for page in (DOCS / "launchers").glob("*.md"):
        named = set(re.findall(r"`(\w+)`", title(page))) & sources
        assert all(page_of(name) == page.stem for name in named), (page_id(page), named)
    assert "## Node-level platforms" in (DOCS / "launchers" / "index.md").read_text()


# -- the API reference ---------------------------------------------------------------------------------


def test_the_reference_documents_every_topology_field_and_the_json_round_trip() -> None:
    import attrs

    from resolver import Topology

    page = (DOCS / "reference" / "topology.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \|", page, re.M)
    assert rows == [field.name for field in attrs.fields(Topology)]
    for method in ("to_json", "from_json", "to_dict", "from_dict"):
        assert f"`{method}(" in page or f"`Topology.{method}(" in page, method
        assert getattr(Topology, method).__doc__, method  # autodoc shows only what has a docstring
    assert ".. automethod:: resolver.Topology.to_json" in page
    assert ".. automethod:: resolver.Topology.from_json" in page


PRIVATE_NAME = re.compile(
    r"\b(?:resolver|probes)(?:\.[a-z]\w*)*\._[a-z]\w*|\b(?:resolver|probes)/(?:\w+/)*_[a-z]\w*\.py"
)


def documented_texts() -> dict[str, str]:
    """What the reference shows of each public module: its docstring and its public members'."""
    import importlib
    import inspect

    texts: dict[str, str] = {}
    for name in public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an integration whose extra is not installed here (CI installs them all)
            continue
        texts[name] = module.__doc__ or ""
        for member in getattr(module, "__all__", ()):
            value = getattr(module, member, None)
            texts[f"{name}.{member}"] = inspect.getdoc(value) or "" if callable(value) else ""
            for attribute, inner in vars(value).items() if inspect.isclass(value) else ():
                if not attribute.startswith("_") and callable(inner):
                    texts[f"{name}.{member}.{attribute}"] = inspect.getdoc(inner) or ""
    return texts


def test_the_reference_names_no_private_module() -> None:
    texts = documented_texts()
    assert len(texts) > 100  # the walk really read the docstrings
    named = {where: PRIVATE_NAME.findall(text) for where, text in texts.items()}
    assert {where: found for where, found in named.items() if found} == {}
    for page in (DOCS / "reference").glob("*.md"):
        assert not PRIVATE_NAME.findall(page.read_text()), page_id(page)


def test_the_private_name_pattern_finds_what_it_must() -> None:
    text = "see resolver._apply, resolver.sources._node, probes._bundle.Comm and resolver/_devices.py"
    assert PRIVATE_NAME.findall(text) == [
        "resolver._apply",
        "resolver.sources._node",
        "probes._bundle",
        "resolver/_devices.py",
    ]
    assert not PRIVATE_NAME.findall("resolver.sources.slurm, probes.fake(), resolver.__version__, probes/live.py")


def test_the_built_reference_links_and_titles_no_private_module() -> None:
    """In the HTML (signatures' links and their titles too): CI builds the site before the tests."""
    site = ROOT / "site" / "reference"
    sources = [*DOCS.rglob("*.md"), DOCS / "conf.py", *ROOT.glob("resolver/**/*.py"), *ROOT.glob("probes/**/*.py")]
    if not site.is_dir() or min(p.stat().st_mtime for p in site.glob("*.html")) < max(
        p.stat().st_mtime for p in sources
    ):
        message = "site/ is missing or older than the sources: build it with the README's docs command"
        if IN_CI and (ROOT / ".git").exists():  # CI's checkout builds the site first; an unpacked sdist has none
            pytest.fail(message)
        pytest.skip(message)
    found = {page.name: sorted(set(PRIVATE_NAME.findall(page.read_text()))) for page in site.glob("*.html")}
    assert {name: names for name, names in found.items() if names} == {}
