"""Every list of sources outside the registry is held to it, both ways: a row missing or extra fails.

The registry (`resolver/sources/_registry.py`) is the one table; the README's launcher table and its
node-level sentence, the launchers index's detection order, the changelog, the adversarial table
and the testing docs are each checked here (the CLI's `--help` in tests/test_cli.py, the testing
kit's exports in tests/testing/test_init.py). Precedence is the registry's order: no list numbers it.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from resolver.sources._registry import DEFAULT, DETECTION_ORDER, ENTRIES, ON_REQUEST, Entry, entry
from tests.test_adversarial import SOURCES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
EXPLAINED = (*DETECTION_ORDER, DEFAULT, *ON_REQUEST)  # explain's order
PAGE_OF = {"lightning": "default", "kubeflow_trainer": "kubeflow"}  # else a source's page is its name


def page(found: Entry) -> str:
    return PAGE_OF.get(found.name, found.name)


def readme_rows() -> dict[str, list[str]]:
    """The README launcher table's rows by source, in the table's order: the cells after the name."""
    rows = {}
    for line in README.splitlines():
        match = re.match(r"\| `(\w+)` \| (.*) \|$", line)
        if match:
            rows[match[1]] = match[2].split(" | ")
    return rows


def test_the_readme_table_has_one_row_per_source_in_the_registry_s_order() -> None:
    assert list(readme_rows()) == [e.name for e in EXPLAINED]
    assert "| # |" not in README  # precedence is the order of the rows, not a hand-kept number


def test_each_readme_row_names_its_detection_variables_and_links_its_page() -> None:
    for found in EXPLAINED:
        detected_by, _, links = readme_rows()[found.name]
        missing = [name for name in found.candidates.names if f"`{name}`" not in detected_by]
        assert not missing, f"{found.name}: the README row's 'detected by' lacks {missing}"
        assert f"(docs/launchers/{page(found)}.md)" in links, found.name


def uses_the_node_agent(found: Entry) -> bool:
    source = Path(importlib.import_module(found.module).__file__ or "").read_text()
    return bool(re.search(r"\b(named_)?agent\(b", source))


def test_the_node_level_sentence_names_the_rows_it_means() -> None:
    assert "The rows between `pbs` and the default are node-level platforms" in README
    after = list(DETECTION_ORDER[DETECTION_ORDER.index(entry("pbs")) + 1 :])
    assert after and all(uses_the_node_agent(e) for e in after), [e.name for e in after if not uses_the_node_agent(e)]
    assert not [e.name for e in DETECTION_ORDER[: DETECTION_ORDER.index(entry("pbs")) + 1] if uses_the_node_agent(e)]


def test_the_launchers_index_gives_the_registry_s_detection_order() -> None:
    text = (ROOT / "docs" / "launchers" / "index.md").read_text()
    order = text[text.index("Detection order:") : text.index("the [default](default.md)")]
    linked = re.findall(r"\]\((\w+)\.md\)", order)
    assert linked == [page(e) for e in DETECTION_ORDER]
    for found in ON_REQUEST:
        assert f"({page(found)}.md)" in text and f'`source="{found.name}"`' in text, found.name


def test_the_changelog_names_every_source() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert [e.name for e in ENTRIES if f"`{e.name}`" not in changelog] == []


def test_the_adversarial_table_has_a_row_for_every_source() -> None:
    covered = {key.partition(":")[0] for key in SOURCES}
    assert covered == {e.name for e in ENTRIES} - {"xla"}  # xla reads no variable: torch_xla's runtime, a probe


TABLE_ROW = re.compile(r"^\| (`[a-z][a-z0-9_]*_(?:env|job)\b.*?) \| `(\w+Launch)`", re.M)
BUILDER = re.compile(r"`([a-z][a-z0-9_]*_(?:env|job))[(`]")


def documented_builders() -> dict[str, set[str]]:
    """docs/testing.md's table: each launch class with the builders its row's first cell names."""
    text = (ROOT / "docs" / "testing.md").read_text()
    return {launch: set(BUILDER.findall(first)) for first, launch in TABLE_ROW.findall(text)}


def test_the_testing_docs_have_a_row_per_builder_module() -> None:
    documented = documented_builders()
    expected: dict[str, set[str]] = {}
    for found in ENTRIES:
        for name in found.builders:
            module = importlib.import_module(f"resolver.testing.{name}")
            builders = {n for n in module.__all__ if n.endswith(("_env", "_job"))}
            launches = {n for n in module.__all__ if n.endswith("Launch")}
            assert len(launches) == 1, (name, launches)
            expected[launches.pop()] = builders
    assert documented == expected


def test_a_backticked_word_ending_in_job_outside_the_table_is_no_builder() -> None:
    text = (
        "| `array_job` is a word | `Nothing`: `x` |\n"
        "| `slurm_env(procid=...)`, `slurm_job` | `SlurmLaunch`: `nodes` |\n"
    )
    assert TABLE_ROW.findall(text) == [("`slurm_env(procid=...)`, `slurm_job`", "SlurmLaunch")]
    assert BUILDER.findall(TABLE_ROW.findall(text)[0][0]) == ["slurm_env", "slurm_job"]
