"""Sphinx configuration of the documentation site: Markdown pages (MyST), the Furo theme, and the
API reference generated from the docstrings (autodoc).

Build it strictly (warnings are errors), as CI does:
    pip install -e '.[docs]' && python -m sphinx -W --keep-going -q -b html -d build/doctrees docs site
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from typing import TYPE_CHECKING

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
    """The `source-read` handler: expands a page's `automodules` lines before it is parsed."""
    source[0] = automodules(source[0])


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


def setup(app: Sphinx) -> None:
    app.connect("autodoc-process-docstring", markdown_docstring_to_rst)
    app.connect("autodoc-process-signature", plain_defaults)
    app.connect("source-read", expand_automodules)
    app.connect("doctree-resolved", public_titles)
