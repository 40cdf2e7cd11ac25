"""XLA / TPU pods: ranks from the torch_xla runtime; never auto-detected (chosen with `source="xla"`).

The `xla` probe (the live one imports `torch_xla.runtime`) is asked once per resolve, and each of
its four functions once. PJRT connects the devices itself, so there is no main address or port.

Ask inside a worker (the function given to `torch_xla.launch`): the runtime's first answer
initializes it, and `torch_xla.launch` then refuses to start ("Runtime is already initialized").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from resolver.errors import ProbeFailed, shown
from resolver.sources import Builder, Detection, Origin, present
from resolver.topology import Topology

if TYPE_CHECKING:
    from probes import Probes, XlaRuntime

__all__ = ["FUNCTIONS", "HINT_VARIABLES", "NAME", "NO_ENDPOINT", "Xla"]

NAME = "xla"
# (field, runtime function), in Lightning's XLAEnvironment mapping
FUNCTIONS = (
    ("world_size", "world_size"),
    ("global_rank", "global_ordinal"),
    ("local_rank", "local_ordinal"),
    ("node_rank", "host_index"),
)
# shown by `explain` when present, as hints that this is an XLA job; never used for detection
HINT_VARIABLES = ("PJRT_DEVICE", "TPU_WORKER_ID", "TPU_WORKER_HOSTNAMES", "XRT_TPU_CONFIG")
NO_ENDPOINT = "xla: the PJRT runtime connects the devices itself; there is no main {}"


def _ask(runtime: XlaRuntime, function: str) -> int:
    """One answer of the runtime, which must be a non-negative int; anything else is ProbeFailed('xla')."""
    try:
        value: object = getattr(runtime, function)()
    except ProbeFailed:
        raise
    except Exception as exc:  # the runtime's own failures (PJRT initialisation, a missing function)
        raise ProbeFailed(NAME, f"torch_xla.runtime.{function}() raised {exc!r}") from exc
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ProbeFailed(NAME, f"torch_xla.runtime.{function}() answered {shown(value)}: expected an int >= 0")
    return value


class Xla:
    """Lightning's XLAEnvironment: the program starts one worker per device (`torch_xla.launch`)."""

    name = NAME
    auto = False

    def detect(self, environ: Mapping[str, str]) -> Detection:
        found = present(environ, *HINT_VARIABLES)
        return Detection(False, "never auto-detected: choose it with source='xla'", found)

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        b = Builder(NAME, environ)
        runtime = probes.xla()
        answers = {field: _ask(runtime, function) for field, function in FUNCTIONS}
        world = answers["world_size"]
        if world < 1:
            raise ProbeFailed(NAME, f"torch_xla.runtime.world_size() answered {world}: expected an int >= 1")
        for field, function in FUNCTIONS[1:]:
            if answers[field] >= world:
                raise ProbeFailed(
                    NAME,
                    f"torch_xla.runtime.{function}() answered {answers[field]}: expected < world_size() ({world})",
                )
        for field, function in FUNCTIONS:
            b.set(field, answers[field], Origin.probe(f"xla.{function}()"))
        b.rule("main_address", None, NO_ENDPOINT.format("address"))
        b.rule("main_port", None, NO_ENDPOINT.format("port"))
        b.rule(
            "creates_processes_externally",
            False,
            "xla: the program starts one worker per device (torch_xla.launch), as in Lightning",
        )
        return b.build()
