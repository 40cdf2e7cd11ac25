"""Framework integrations, each in its own module and each behind its own extra.

- `resolver.integrations.torch`: `init_process_group()` for `torch.distributed`
  (`pip install 'cluster-topology[torch]'`).
- `resolver.integrations.lightning`: `TopologyEnvironment`, a Lightning `ClusterEnvironment`
  backed by a Topology (`pip install 'cluster-topology[lightning]'`).

Importing this package imports neither; importing a module without its dependency raises an
ImportError that names the extra to install.
"""

from __future__ import annotations

__all__ = ["missing"]


def missing(module: str, package: str, extra: str, exc: ImportError) -> ImportError:
    """The ImportError for an integration whose dependency is absent: it names the extra."""
    return ImportError(
        f"{module} needs {package}, which could not be imported ({exc}). "
        f"Install it with: pip install 'cluster-topology[{extra}]'",
        name=package,
    )
