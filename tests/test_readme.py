"""The README is a contract: its commands are what CI runs, its examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import probes
import resolver

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_two_setup_commands_come_first() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README, re.S)
    assert blocks[0].strip() == "pip install -e . && python -m resolver"
    assert blocks[1].strip().endswith("python -m pytest")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "<!-- test-command" in README
    assert "awk '/<!-- test-command/" in ci


def test_the_dict_fixture_examples_hold() -> None:
    block = re.search(r"\*\*Dict fixtures in tests\*\*.*?```python\n(.*?)```", README, re.S)
    assert block is not None
    namespace: dict[str, object] = {"probes": probes, "resolver": resolver}
    exec(block[1], namespace)  # noqa: S102 - our own README
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 2
    for test in tests:
        test()


def test_the_one_line_example_is_what_str_prints() -> None:
    env = {
        "TORCHELASTIC_RUN_ID": "none",
        "WORLD_SIZE": "8",
        "RANK": "5",  # GROUP_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK, as torchrun assigns it
        "LOCAL_RANK": "1",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_WORLD_SIZE": "2",
        "MASTER_ADDR": "10.1.2.3",
        "MASTER_PORT": "29500",
    }
    line = str(resolver.resolve(env, probes.fake()))
    assert line in README


def test_the_testing_section_examples_hold() -> None:
    start = README.index("## Testing your scheduler code")
    section = README[start : README.index("\n## ", start)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 1  # the rest of the kit is on the site (docs/testing.md, run by test_docs)
    namespace: dict[str, object] = {}
    for block in blocks:
        exec(block, namespace)  # noqa: S102 - our own README
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert len(tests) == 3
    for test in tests:
        test()
