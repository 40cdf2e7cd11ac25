"""Sphinx configuration of the documentation site: Markdown pages (MyST), the Furo theme, and the
API reference generated from the docstrings (autodoc).

Build it strictly (warnings are errors), as CI does:
    pip install -e '.[docs]' && python -m sphinx -W --keep-going -q -b html -d build/doctrees docs site
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import resolver

if TYPE_CHECKING:
    from docutils import nodes
    from sphinx.application import Sphinx

project = "cluster-topology"
author = "The cluster-topology maintainers"
project_copyright = "2026, The cluster-topology maintainers"
version = release = resolver.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
myst_heading_anchors = 3  # [text](page.md#a-heading) links, checked by the build
default_role = "code"  # docstrings write `name` for code, as Markdown does

# The integrations import their optional dependencies at import time; the reference documents
# them without installing torch, Lightning, mpi4py or torch_xla.
autodoc_mock_imports = ["torch", "lightning", "mpi4py", "torch_xla"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"

html_theme = "furo"
html_title = f"cluster-topology {release}"
html_copy_source = False  # the pages' Markdown is in the repository; the site needs only the HTML


# The docstrings are written as plain text that reads well in help() and as Markdown: a list may
# follow its paragraph's last line, an example is a block indented by four spaces, and a code span
# may take a suffix (`InvalidVariable`s). reStructuredText, which autodoc parses, wants a blank
# line before a list, `::` before a literal block and an escape after a span; this adds them.
CODE_SPAN_WITH_SUFFIX = re.compile(r"(`[^`\s][^`]*`)(?=\w)")


def markdown_docstring_to_rst(  # noqa: PLR0917 - the positional signature of Sphinx's event
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """The `autodoc-process-docstring` handler: changes the docstring's `lines` in place."""
    out: list[str] = []
    for line in lines:
        previous = out[-1] if out else ""
        if line.startswith("- ") and previous.strip() and not previous.startswith(("- ", "  ")):
            out.append("")
        if line.startswith("    ") and not previous.strip():
            last_text = next((earlier for earlier in reversed(out) if earlier.strip()), "")
            if last_text and not last_text.startswith(" ") and not last_text.endswith("::"):
                out.extend(["::", ""])
        out.append(CODE_SPAN_WITH_SUFFIX.sub(r"\1\\ ", line))
    lines[:] = out


# A reference page lists a package's modules with one line, `<!-- automodules PACKAGE [:option: ...] -->`:
# a new source or builder module is documented without an edit to its page.
AUTOMODULES = re.compile(r"^<!-- automodules ([\w.]+)((?: :[a-z-]+:)*) -->$", re.M)


def automodules(text: str) -> str:
    """`text` with each `automodules` line replaced by an automodule block per public module of its package."""

    def blocks(match: re.Match[str]) -> str:
        package = importlib.import_module(match[1])
        names = [
            info.name
            for info in pkgutil.iter_modules(package.__path__, f"{match[1]}.")
            if not info.name.rpartition(".")[2].startswith("_")
        ]
        options = "".join(f"   {option}\n" for option in match[2].split())
        return "\n".join(f"```{{eval-rst}}\n.. automodule:: {name}\n   :members:\n{options}```\n" for name in names)

    return AUTOMODULES.sub(blocks, text)


def expand_automodules(app: Sphinx, docname: str, source: list[str]) -> None:
    """The `source-read` handler: expands a page's `automodules` and `sources` lines before it is parsed."""
    source[0] = source_lists(automodules(source[0]))


# The lists of sources are generated from the source registry (resolver/sources/_registry.py) when
# the site is built, one line each: `<!-- sources detection-order -->` (the launchers index),
# `<!-- sources builders -->` (the testing page), `<!-- sources by-release -->` (the changelog).
# What a row says comes from the entry, the source's module docstring, its page's title and its
# testing module, so a new source is listed by its entry alone (tests/test_source_lists.py).
DOCS = Path(__file__).resolve().parent
SOURCE_LISTS = re.compile(r"^<!-- sources ([a-z-]+) -->$", re.M)
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", re.M)


def summary(docstring: str | None) -> str:
    """The first sentence of a docstring, on one line, with reStructuredText's ``code`` as Markdown's."""
    paragraph = " ".join((docstring or "").strip().split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(?:\s|$)", paragraph)
    return (match[1] if match else paragraph).replace("``", "`")


def page_title(entry: Any) -> str:
    """The title of the source's page, docs/launchers/<page>.md (its first line, `# Title`)."""
    first = (DOCS / "launchers" / f"{entry.docs_page}.md").read_text().partition("\n")[0]
    return first.removeprefix("# ")


def detected_by(entry: Any) -> str:
    """When `resolve` asks the source, from its entry's candidate variables."""
    if not entry.auto:
        return f'never: `source="{entry.name}"`'
    if not entry.candidates.names:
        return "always: the default, last"
    names = [f"`{name}`" for name in entry.candidates.names]
    last = names.pop()
    return ", ".join(names) + (" and " if entry.candidates.every else " or ") + last if names else last


def detection_order(base: str = "") -> str:
    """The launchers index's table: every source in the order `resolve` tries them (the registry's,
    with third-party sources before the default), when each is a candidate, its page and what it resolves."""
    from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ON_REQUEST

    def row(entry: Any) -> str:
        module = importlib.import_module(entry.module)
        builders = ", ".join(f"`resolver.testing.{name}`" for name in entry.builders) or "none"
        page = f"[{page_title(entry)}]({base}{entry.docs_page}.md)"
        return f"| `{entry.name}` | {detected_by(entry)} | {summary(module.__doc__)} | {page} | {builders} |"

    plugins = (
        "| third-party sources | their `detect` | the `resolver.sources` entry points "
        "| [your own launcher](#your-own-launcher) | their own |"
    )
    return "\n".join(
        [
            "| source | detected by | what it resolves | page | builders (`resolver.testing`) |",
            "| --- | --- | --- | --- | --- |",
            *map(row, DETECTION_ORDER),
            plugins,
            row(DEFAULT),
            *map(row, ON_REQUEST),
        ]
    )


def launch_fields(launch: type) -> str:
    """A launch class's fields, the keywords of its builders; a field with fixed choices shows them."""
    import attrs

    hints = typing.get_type_hints(launch)
    shown = []
    for field in attrs.fields(launch):
        choices = typing.get_args(hints[field.name]) if typing.get_origin(hints[field.name]) is typing.Literal else ()
        values = "\\|".join(json.dumps(choice) for choice in choices)
        shown.append(f"`{field.name}={values}`" if choices else f"`{field.name}`")
    return ", ".join(shown)


def builders_table() -> str:
    """The testing page's table: each builder module the registry names (in its order), with its
    builders (an `*_env`'s process keyword shown), its launch class's fields and what it builds."""
    import attrs

    from resolver.testing._registry import MODULES

    rows = [
        "| builders (`*_env`: one process, `*_job`: every process) | keywords: the fields of | what it builds |",
        "| --- | --- | --- |",
    ]
    for name in MODULES:
        module = importlib.import_module(name)
        (launch,) = [getattr(module, n) for n in module.__all__ if n.endswith("Launch")]
        fields = {field.name for field in attrs.fields(launch)}
        builders = []
        for builder in (n for n in module.__all__ if n.endswith(("_env", "_job"))):
            process = [p for p in inspect.signature(getattr(module, builder)).parameters if p not in fields]
            builders.append(f"`{builder}({process[0]}=...)`" if process else f"`{builder}`")
        what = summary(module.__doc__)
        rows.append(f"| {', '.join(builders)} | `{launch.__name__}`: {launch_fields(launch)} | {what} |")
    return "\n".join(rows)


def released(changelog: str) -> list[str]:
    """The versions CHANGELOG.md has released (`## [x.y.z] - date`), newest first."""
    return RELEASE.findall(changelog)


def sources_by_release(changelog: str, base: str = "launchers/") -> str:
    """The changelog page's list: the sources each release brought (each entry's `since`), newest first;
    a version newer than every released one is the release being prepared (under Unreleased)."""
    from resolver.sources._registry import ENTRIES

    done = released(changelog)
    versions = sorted({entry.since for entry in ENTRIES}, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    lines = []
    for version in versions:
        named = [f"[`{e.name}`]({base}{e.docs_page}.md)" for e in ENTRIES if e.since == version]
        lines.append(f"- {version}{'' if version in done else ' (unreleased)'}: {', '.join(named)}")
    return "\n".join(lines)


def source_lists(text: str) -> str:
    """`text` with each `<!-- sources KIND -->` line replaced by the list it names."""
    changelog = (DOCS.parent / "CHANGELOG.md").read_text()
    make = {
        "detection-order": detection_order,
        "builders": builders_table,
        "by-release": lambda: sources_by_release(changelog),
    }
    return SOURCE_LISTS.sub(lambda match: make[match[1]](), text)


# A default that has no source form (a function: attrs' `__init__` of `probes.Probes` has one) is
# written `<function name at 0x...>`, which is not Python: Sphinx then cannot parse the signature and
# prints it raw, private names and all. It is shown as `...`, the usual mark of "a default".
FUNCTION_REPR = re.compile(r"<function [^<>]*>")


def plain_defaults(  # noqa: PLR0917 - the positional signature of Sphinx's event
    app: Sphinx, what: str, name: str, obj: object, options: object, signature: str | None, annotation: str | None
) -> tuple[str | None, str | None]:
    """The `autodoc-process-signature` handler: defaults without a source form become `...`."""
    return (FUNCTION_REPR.sub("...", signature) if signature else signature), annotation


# A type in a signature links to where the object is documented (`resolver.Applied`), but Sphinx
# titles the link with the module that defines it (`resolver._apply.Applied`, the canonical name
# autodoc records). The reference names no private module: the title becomes the documented name.
PRIVATE = re.compile(r"(?:^|\.)_[a-z]")


def public_titles(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """The `doctree-resolved` handler: a link titled with a private path takes its target's name."""
    from docutils import nodes  # Sphinx's own dependency: imported where Sphinx runs, not by the tests

    for reference in doctree.findall(nodes.reference):
        title = reference.get("reftitle", "")
        target = (reference.get("refuri", "") or "").rpartition("#")[2] or reference.get("refid", "")
        if PRIVATE.search(title) and target and not PRIVATE.search(target):
            reference["reftitle"] = target


def regenerated(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """The `env-get-outdated` handler: a page with a generated list is read again at every build, as the
    registry it comes from is no page Sphinx watches (else a new source would miss an incremental build)."""
    return [name for name in env.found_docs if SOURCE_LISTS.search(Path(env.doc2path(name)).read_text())]


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", markdown_docstring_to_rst)
    app.connect("autodoc-process-signature", plain_defaults)
    app.connect("source-read", expand_automodules)
    app.connect("env-get-outdated", regenerated)
    app.connect("doctree-resolved", public_titles)
