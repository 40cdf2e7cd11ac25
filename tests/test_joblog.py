"""The site's job-log snippets (docs/logs.md) run as written: the one-line str, the JSON in `logging`, JSON lines."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given

import resolver
from resolver import testing as rt

ROOT = Path(__file__).resolve().parents[1]

# The site's "Job logs" page (docs/logs.md) shows these blocks verbatim (test_the_site_shows_these_snippets).
IN_LOGGING = """\
import logging, os, resolver

logging.basicConfig(level=logging.INFO)
log = logging.getLogger("train")
topology = resolver.resolve(os.environ)
log.info("topology %s", topology)            # one line: source, ranks, nodes, main endpoint, job
log.info("topology %s", topology.to_json())  # the whole record: "schema": 2, every field, provenance
"""

JSON_LINES = """\
import json, logging

class JsonLines(logging.Formatter):
    \"\"\"One JSON object per line; what is passed as extra={"fields": {...}} becomes keys of it.\"\"\"

    def format(self, record):
        line = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                "message": record.getMessage(), **getattr(record, "fields", {})}
        return json.dumps(line)

handler = logging.StreamHandler()
handler.setFormatter(JsonLines())
logging.getLogger("train").addHandler(handler)
logging.getLogger("train").info("topology", extra={"fields": {"topology": topology.to_dict()}})
"""

READ_BACK = """\
import json, jsonschema, resolver
from resolver import topology_schema  # resolver/topology.schema.json, draft 2020-12

record = json.loads(line)["topology"]
jsonschema.validate(record, topology_schema())  # any draft 2020-12 validator will do
same = resolver.Topology.from_dict(record)      # refuses unknown schemas and tampered fields
"""

SNIPPETS = (IN_LOGGING, JSON_LINES, READ_BACK)

# what a worker of `torchrun --nnodes=2 --nproc-per-node=4` sees (rank 5: agent 1, local rank 1)
WORKER = rt.torchrun_env(nnodes=2, nproc_per_node=4, node_rank=1, local_rank=1, hosts=("n1", "n2"), run_id="77")


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """This process's environment is a torchrun worker's; the "train" logger's handlers are restored after."""
    for key, value in WORKER.items():
        monkeypatch.setenv(key, value)
    train = logging.getLogger("train")
    before = list(train.handlers)
    yield dict(WORKER)
    for handler in train.handlers:
        if handler not in before:
            train.removeHandler(handler)


def run(code: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(code, namespace)  # noqa: S102 - the site's own snippets
    return namespace


def test_the_one_line_str_and_the_json_in_logging(worker: dict[str, str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="train")
    namespace = run(IN_LOGGING, {})
    topology = namespace["topology"]
    assert isinstance(topology, resolver.Topology)
    assert (topology.source, topology.global_rank, topology.node_rank) == ("torchelastic", 5, 1)
    one_line, whole = (r.getMessage() for r in caplog.records if r.name == "train")
    assert (
        one_line
        == "topology torchelastic rank 5/8 local 1/4 node 1/2 main n1:" + worker["MASTER_PORT"] + " external job 77"
    )
    assert "\n" not in one_line and "\n" not in whole
    assert resolver.Topology.from_json(whole.removeprefix("topology ")) == topology


def test_json_lines_with_the_standard_library(
    worker: dict[str, str], caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="train")
    namespace = run(IN_LOGGING, {})
    capsys.readouterr()
    run(JSON_LINES, namespace)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    line = json.loads(lines[0])
    assert (line["level"], line["logger"], line["message"]) == ("INFO", "train", "topology")
    assert re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:,]+", line["time"])
    back = run(READ_BACK, {"line": lines[0]})
    assert back["same"] == namespace["topology"]
    assert back["same"].provenance == namespace["topology"].provenance


@given(rt.topologies())
def test_str_is_always_one_line_and_to_json_one_object(t: resolver.Topology) -> None:
    assert "\n" not in str(t) and "\r" not in str(t)
    text = t.to_json()
    assert "\n" not in text
    jsonschema.validate(json.loads(text), rt.topology_schema())


def test_the_site_shows_these_snippets() -> None:
    page = (ROOT / "docs" / "logs.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert [block for block in blocks if block in SNIPPETS] == list(SNIPPETS)
