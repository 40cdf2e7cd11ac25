"""The JSON Schema of a `Topology` record: `topology_schema()`, defined next to the record in
`resolver.topology` and kept here under its first name."""

from __future__ import annotations

from resolver.topology import topology_schema

__all__ = ["topology_schema"]
