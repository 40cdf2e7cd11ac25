"""The JSON Schema of a `Topology` record, shipped as resolver/topology.schema.json."""

from __future__ import annotations

from typing import Any

__all__ = ["topology_schema"]


def topology_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `Topology.to_dict()` output, shipped as resolver/topology.schema.json."""
    import json
    from importlib import resources

    text = resources.files("resolver").joinpath("topology.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
