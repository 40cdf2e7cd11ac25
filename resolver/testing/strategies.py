"""Hypothesis strategies: whole launches (`jobs`) and valid records (`topologies`).

Hypothesis is a test extra (``pip install 'cluster-topology[testing]'``), not a dependency: it is
imported when a strategy function is called, never at import, so the builders work without it.

`resolver.testing.REGISTRY` lists every launcher the kit builds; each launcher's strategy of jobs
(``LAUNCHER.jobs``) uses `host_names` and, for MPI, `mpi_master`/`with_master` from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from resolver import Topology
from resolver.environ import is_address
from resolver.origin import Origin
from resolver.testing._launch import host_names, mpi_master, with_master
from resolver.testing._registry import LAUNCHERS, REGISTRY
from resolver.testing.world import Job
from resolver.topology import _SOURCE_RE

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

__all__ = ["host_names", "jobs", "mpi_master", "topologies", "with_master"]


def jobs(*, launchers: Sequence[str] | None = None, max_processes: int = 16) -> SearchStrategy[Job]:
    """Whole launches of the given launchers (default: all of `resolver.testing.LAUNCHERS`).

    Needs hypothesis (a test extra), imported here. Each job resolves, process by process, to one
    world: ``assert_consistent(job.resolve(), job)``.
    """
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    if launchers is None:
        launchers = LAUNCHERS
    unknown = sorted(set(launchers) - set(LAUNCHERS))
    if unknown or not launchers:
        raise ValueError(f"launchers={list(launchers)!r}: expected some of {LAUNCHERS}")
    by_name = {launcher.name: launcher for launcher in REGISTRY}
    return st.one_of([by_name[name].jobs(max_processes) for name in launchers])


def topologies(*, max_world_size: int = 1 << 20) -> SearchStrategy[Topology]:
    """Valid `Topology` records, every field exercised; needs hypothesis (a test extra), imported here."""
    from hypothesis import strategies as st  # optional (the test extra): builders work without it

    names = [field.name for field in attrs.fields(Topology)]
    text = st.text(max_size=24)
    label = st.from_regex(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,8}[A-Za-z0-9])?", fullmatch=True)
    addresses = (
        st.lists(label, min_size=1, max_size=4).map(".".join).filter(is_address)
        | st.ip_addresses().map(str)
        | st.sampled_from(["fe80::1%eth0", "localhost", "n001.cluster.example"])
    )

    variable = st.from_regex(r"[A-Z][A-Z0-9_]{0,15}", fullmatch=True)
    origins = st.one_of(
        variable.map(Origin.env),
        st.builds(Origin.probe, st.sampled_from(["hostname", "free_port", "read_text", "comm"]), st.none() | text),
        st.builds(
            lambda words, used: Origin.formula(words or "f", variables=used), text, st.lists(variable, max_size=3)
        ),
        st.builds(lambda words: Origin.default(words or "d"), text),
        st.builds(lambda words: Origin.rule(words or "r"), text),
        st.builds(lambda words: Origin.argument(words or "a"), text),
    )

    @st.composite
    def build(draw: st.DrawFn) -> Topology:
        world = draw(st.integers(1, max_world_size))
        nodes = draw(st.none() | st.integers(1, world))
        local_size = draw(st.none() | st.integers(1, world))
        visible = draw(st.none() | st.lists(st.from_regex(r"[0-9]{1,2}|GPU-[0-9a-f]{8}", fullmatch=True), unique=True))
        device = None if not visible else draw(st.none() | st.integers(0, len(visible) - 1))
        return Topology(
            source=draw(
                st.sampled_from(["slurm", "torchelastic", "mpi", "lsf", "kubeflow", "xla", "lightning"])
                | st.from_regex(_SOURCE_RE, fullmatch=True)
            ),
            world_size=world,
            global_rank=draw(st.integers(0, world - 1)),
            local_rank=draw(st.integers(0, (local_size or world) - 1)),
            node_rank=draw(st.integers(0, (nodes or world) - 1)),
            num_nodes=nodes,
            local_world_size=local_size,
            nproc_per_node=draw(st.none() | st.integers(1, 64)),
            main_address=draw(st.none() | addresses),
            main_port=draw(st.none() | st.integers(1, 65535)),
            creates_processes_externally=draw(st.booleans()),
            job_id=draw(st.none() | text),
            job_name=draw(st.none() | text),
            step_id=draw(st.none() | text),
            array_job_id=draw(st.none() | text),
            array_task_id=draw(st.none() | text),
            restart_count=draw(st.none() | st.integers(0, 10**6)),
            visible_devices=visible,
            local_device=device,
            provenance=draw(st.dictionaries(st.sampled_from(names), origins, max_size=4)),
            warnings=draw(st.lists(text, max_size=3)),
        )

    return build()
