"""The kit for source authors: what a source is, the `Builder` and its readers, and the shared rules.

Its parts live in two private modules: the kit itself (sources, detections, the builder, job facts,
hosts) and the shared rules (the job's port, host files, the one process a scheduler starts). The
kit sits below the engine: nothing here imports the engine or anything above it.
"""

from resolver.sources import _kit, _rules
from resolver.sources._kit import *  # noqa: F403  the kit's names, listed once: in its __all__
from resolver.sources._rules import *  # noqa: F403  likewise the shared rules'

__all__ = _kit.__all__ + _rules.__all__
