"""Every list of sources is made from the registry or held to it, both ways: a row missing or extra fails.

The registry (`resolver/sources/_registry.py`) is the one table. The documentation's lists are made
from it when the site is built (docs/conf.py: the launchers index's detection order, the testing page's
builders, the changelog's sources by release); here each generator is called and its output checked
against the registry, and each page is checked to ask for its list. The README names no source and
points to the generated table; the adversarial table is checked here, the CLI's `--help` in
tests/test_cli.py, the testing kit's exports in tests/testing/test_init.py, the declarations against
the behaviour in tests/test_registry.py. Precedence is the registry's order: no list numbers it.

The deliberate mistakes issue 35 lists, each failing a test: a source's docs page deleted (the
generators here, and tests/test_docs.py), an entry without its `since`, a page without its generated
list, a source's rows deleted from tests/test_adversarial.py, a builder module the registry does not
name (tests/testing/test_init.py), a misspelt `facts=` variable (tests/test_registry.py).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import attrs
import pytest

import resolver
from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ENTRIES, ON_REQUEST, Entry, entry
from resolver.testing._registry import MODULES
from tests.test_adversarial import SOURCES
from tests.test_docs import site_configuration

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
EXPLAINED = (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)  # explain's order
SITE = site_configuration()
ROW = re.compile(r"^\| (`\w+`|third-party sources) \| (.*?) \| (.*?) \| (.*?) \| (.*?) \|$", re.M)


def detection_rows() -> list[tuple[str, ...]]:
    """The generated detection-order table's rows: (source, detected by, what, page, builders)."""
    return [(name.strip("`"), *cells) for name, *cells in ROW.findall(SITE.detection_order())]


# -- the launchers index: the detection order ---------------------------------------------------------


def test_the_detection_order_table_has_every_source_in_the_registry_s_order() -> None:
    rows = [name for name, *_ in detection_rows()]
    after = [e.name for e in (DEFAULT, *ON_REQUEST)]  # entry points: after the built-in sources, before the default
    assert rows == [*(e.name for e in DETECTION_ORDER), "third-party sources", *after]


def test_each_detection_row_names_its_variables_links_its_page_and_names_its_builders() -> None:
    rows = {name: cells for name, *cells in detection_rows()}
    for found in EXPLAINED:
        detected_by, what, page, builders = rows[found.name]
        missing = [name for name in found.candidates.names if f"`{name}`" not in detected_by]
        assert not missing, f"{found.name}: 'detected by' lacks {missing}"
        assert (DOCS / "launchers" / f"{found.docs_page}.md").is_file(), found.name
        assert page.endswith(f"]({found.docs_page}.md)"), (found.name, page)
        assert what, found.name
        assert re.findall(r"`resolver\.testing\.(\w+)`", builders) == list(found.builders), found.name
        if not found.auto:
            assert detected_by == f'never: `source="{found.name}"`'


def test_a_source_without_its_page_fails_the_table() -> None:
    """Deleting a source's page (or naming one that is not there) stops the table, and the site's build."""
    import resolver.sources._registry as registry

    lost = entry("lws")._replace(page="no_such_page")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "DETECTION_ORDER", (*DETECTION_ORDER[:-1], lost))
        with pytest.raises(FileNotFoundError, match="no_such_page"):
            SITE.detection_order()


def uses_the_node_agent(found: Entry) -> bool:
    source = Path(importlib.import_module(found.module).__file__ or "").read_text()
    return bool(re.search(r"\b(named_)?agent\(b", source))


def test_the_node_level_sentence_names_the_rows_it_means() -> None:
    text = (DOCS / "launchers" / "index.md").read_text()
    assert "The rows after `pbs`, up to the third-party sources, are the [node-level platforms]" in text
    after = list(DETECTION_ORDER[DETECTION_ORDER.index(entry("pbs")) + 1 :])
    assert after and all(uses_the_node_agent(e) for e in after), [e.name for e in after if not uses_the_node_agent(e)]
    assert not [e.name for e in DETECTION_ORDER[: DETECTION_ORDER.index(entry("pbs")) + 1] if uses_the_node_agent(e)]


@pytest.mark.parametrize(
    ("page", "kind"),
    [("launchers/index.md", "detection-order"), ("testing.md", "builders"), ("changelog.md", "by-release")],
)
def test_each_page_asks_for_its_generated_list_and_the_build_fills_it(page: str, kind: str) -> None:
    text = (DOCS / page).read_text()
    assert text.count(f"<!-- sources {kind} -->\n") == 1, f"{page} lost its generated list"
    expanded = SITE.source_lists(text)
    assert "<!-- sources" not in expanded
    named = (
        [f"`{m.rpartition('.')[2]}_job`" for m in MODULES] if kind == "builders" else [f"`{e.name}`" for e in ENTRIES]
    )
    assert [name for name in named if name not in expanded] == []


def test_no_hand_kept_list_of_sources_is_left() -> None:
    """The lists the issue found kept by hand are gone: the README's table, the index's links."""
    names = {e.name for e in ENTRIES}
    assert not [row for row in re.findall(r"^\| `(\w+)` \|", README, re.M) if row in names]
    assert "(docs/launchers/index.md)" in README and "`python -m resolver --help`" in README
    index = (DOCS / "launchers" / "index.md").read_text()
    prose = index[: index.index("<!-- sources detection-order -->")]
    assert not re.findall(r"\]\((\w+)\.md\)", prose)  # no link list of the detection order besides the table


# -- the testing page: the builders ---------------------------------------------------------------------

BUILDERS_ROW = re.compile(r"^\| (`[a-z][a-z0-9_]*_(?:env|job)\b.*?) \| `(\w+Launch)`: (.*?) \| (.*?) \|$", re.M)
BUILDER = re.compile(r"`([a-z][a-z0-9_]*_(?:env|job))[(`]")


def test_the_builders_table_has_a_row_per_builder_module_in_the_registry_s_order() -> None:
    rows = BUILDERS_ROW.findall(SITE.builders_table())
    assert len(rows) == len(MODULES)
    for (first, launch, keywords, what), name in zip(rows, MODULES, strict=True):
        module = importlib.import_module(name)
        builders = [n for n in module.__all__ if n.endswith(("_env", "_job"))]
        assert BUILDER.findall(first) == builders, name
        assert getattr(module, launch).__module__ == name
        fields = [field.name for field in attrs.fields(getattr(module, launch))]
        assert re.findall(r"`(\w+)[`=]", keywords) == fields, name
        assert what, name


def test_a_field_with_fixed_choices_shows_them() -> None:
    table = SITE.builders_table()
    assert '`allocation="srun"\\|"sbatch"\\|"salloc"`' in table
    assert "`slurm_env(procid=...)`" in table and "`torchrun_env(node_rank=...)`" in table


# -- the changelog: sources by release --------------------------------------------------------------------


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def since_problems(entries: tuple[Entry, ...], changelog: str) -> list[str]:
    """Entries whose `since` is not a release of CHANGELOG.md (at most the package's version) or,
    while CHANGELOG has an Unreleased section, the one release newer than every released one."""
    released = SITE.released(changelog)
    newest = max(map(version, released), default=(0, 0, 0))
    problems = []
    for found in entries:
        if not re.fullmatch(r"\d+\.\d+\.\d+", found.since):
            problems.append(f"{found.name}: since={found.since!r} is no version")
        elif found.since in released:
            if version(found.since) > version(resolver.__version__):
                problems.append(f"{found.name}: since={found.since} is newer than the package's version")
        elif "## [Unreleased]" not in changelog or version(found.since) <= newest:
            problems.append(f"{found.name}: since={found.since} is neither released nor the release under way")
    upcoming = {e.since for e in entries if e.since not in released and re.fullmatch(r"\d+\.\d+\.\d+", e.since)}
    if len(upcoming) > 1:
        problems.append(f"more than one unreleased version: {sorted(upcoming)}")
    return problems


def test_every_entry_says_the_release_it_arrived_in() -> None:
    assert since_problems(ENTRIES, CHANGELOG) == []
    first = {"torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow", "xla"}  # CHANGELOG's 0.1.0 names these
    assert {e.name for e in ENTRIES if e.since == "0.1.0"} == first


@pytest.mark.parametrize(
    ("since", "found"),
    [("", "is no version"), ("0.0.9", "neither released"), ("0.1", "is no version"), ("0.3.0", "more than one")],
)
def test_a_missing_or_wrong_since_fails(since: str, found: str) -> None:
    broken = (*ENTRIES[:-1], ENTRIES[-1]._replace(since=since))
    assert any(found in problem for problem in since_problems(broken, CHANGELOG)), since_problems(broken, CHANGELOG)


def test_sources_by_release_lists_every_source_once_under_its_release() -> None:
    listed = SITE.sources_by_release(CHANGELOG)
    lines = listed.splitlines()
    for found in ENTRIES:
        where = [line for line in lines if f"[`{found.name}`](launchers/{found.docs_page}.md)" in line]
        assert len(where) == 1 and where[0].startswith(f"- {found.since}"), found.name
    assert [line.split(":")[0] for line in lines] == ["- 0.2.0 (unreleased)", "- 0.1.0"]


# -- the adversarial table ----------------------------------------------------------------------------------


def test_the_adversarial_table_has_a_row_for_every_source() -> None:
    covered = {key.partition(":")[0] for key in SOURCES}
    assert covered == {e.name for e in ENTRIES} - {"xla"}  # xla reads no variable: torch_xla's runtime, a probe


def test_the_pages_with_generated_lists_are_read_at_every_build() -> None:
    """Sphinx watches pages, not the registry: an incremental build must still list a new source."""

    class Env:
        found_docs = frozenset(path.relative_to(DOCS).with_suffix("").as_posix() for path in DOCS.rglob("*.md"))

        def doc2path(self, name: str) -> Path:
            return DOCS / f"{name}.md"

    assert sorted(SITE.regenerated(None, Env(), set(), set(), set())) == ["changelog", "launchers/index", "testing"]
