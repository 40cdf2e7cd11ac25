from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import probes
import resolver
from resolver import Detection, InvalidSettings, Topology, TopologyError
from resolver.sources._registry import DEFAULT, DETECTION_ORDER


class Custom:
    name = "custom"
    auto = True

    def detect(self, environ: Mapping[str, str]) -> bool:
        return "CUSTOM" in environ

    def resolve(self, environ: Mapping[str, str], probes: probes.Probes) -> Topology:
        return Topology(source="custom", world_size=1, global_rank=0, local_rank=0, node_rank=0)


def test_order_is_data_and_the_default_is_last() -> None:
    names = [s.name for s in resolver.registered()]
    assert names[0] == "torchelastic"
    assert names.index("lightning") == len(DETECTION_ORDER)
    assert [s.name for s in resolver.registered(auto_only=True)][-1] == DEFAULT.name == "lightning"
    assert "kubeflow" not in [s.name for s in resolver.registered(auto_only=True)]


def test_forced_source_by_name_and_instance() -> None:
    env = {"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    assert resolver.resolve(env, probes.fake()).source == "torchelastic"
    assert resolver.resolve(env, probes.fake(free_port=5), source="lightning").source == "lightning"
    assert resolver.resolve({}, probes.fake(), source=Custom()).source == "custom"


def test_unknown_source_and_non_source() -> None:
    with pytest.raises(InvalidSettings, match=r"source='condor' is not a known source: expected one of torchelastic"):
        resolver.resolve({}, probes.fake(), source="condor")
    with pytest.raises(InvalidSettings, match="is not a source"):
        resolver.resolve({}, probes.fake(), source=object())  # type: ignore[arg-type]


def test_environ_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="Mapping"):
        resolver.resolve([("A", "1")], probes.fake())  # type: ignore[arg-type]


def test_explain_lists_every_candidate_in_order() -> None:
    env = {"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}
    e = resolver.explain(env)
    assert [c.name for c in e.candidates] == [s.name for s in resolver.registered()]
    assert e.chosen == "torchelastic"
    assert e.why == "first match in detection order"
    first = e.candidates[0]
    assert first.detection == Detection(True, "TORCHELASTIC_RUN_ID is set (torchrun worker)", ("TORCHELASTIC_RUN_ID",))
    text = str(e)
    assert text.splitlines()[0].startswith("* torchelastic")
    assert text.endswith("chosen: torchelastic: first match in detection order")
    assert json.loads(json.dumps(e.to_dict()))["chosen"] == "torchelastic"
    assert resolver.explain({}).why == "no launcher matched, so the default applies"
    assert resolver.explain(env, source="kubeflow").why == "forced with source='kubeflow'"


def test_entry_point_plugins_are_found(tmp_path: Path) -> None:
    (tmp_path / "condor_source.py").write_text(
        textwrap.dedent("""
        from resolver import Topology
        class Condor:
            name = "condor"
            auto = True
            def detect(self, environ):
                return "_CONDOR_JOB_AD" in environ
            def resolve(self, environ, probes):
                return Topology(source="condor", world_size=1, global_rank=0, local_rank=0, node_rank=0)
    """)
    )
    dist = tmp_path / "condor_source-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: condor-source\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[resolver.sources]\ncondor = condor_source:Condor\n")
    code = (
        "import resolver, probes;"
        "print(resolver.resolve({'_CONDOR_JOB_AD': '1'}, probes.fake()).source,"
        " resolver.resolve({}, probes.fake(), source='condor').source,"
        " resolver.resolve({}, probes.fake(free_port=9)).source,"
        " [s.name for s in resolver.registered()])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{tmp_path}:{Path.cwd()}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split(maxsplit=3)[:3] == ["condor", "condor", "lightning"]
    assert "'condor', 'lightning', 'kubeflow'" in out.stdout  # plugins sit just before the default


environs = st.dictionaries(
    st.sampled_from(
        [
            "TORCHELASTIC_RUN_ID",
            "WORLD_SIZE",
            "RANK",
            "LOCAL_RANK",
            "GROUP_RANK",
            "LOCAL_WORLD_SIZE",
            "GROUP_WORLD_SIZE",
            "NODE_RANK",
            "MASTER_ADDR",
            "MASTER_PORT",
            "STANDALONE_PORT",
            "TORCHELASTIC_RESTART_COUNT",
            "SLURM_NTASKS",
            "SLURM_PROCID",
            "SLURM_JOB_NAME",
            "SLURM_NODELIST",
            "SLURM_TASKS_PER_NODE",
            "SLURM_STEP_ID",
            "SLURM_JOB_ID",
            "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK",
            "PMI_SIZE",
            "PMI_RANK",
            "LSB_JOBID",
            "JSM_NAMESPACE_SIZE",
        ]
    )
    | st.text(max_size=8),
    st.text(max_size=12) | st.sampled_from(["0", "1", "2", "4", "65535", "65536", "-1", "١", "host", "a[1-3]"]),
    max_size=12,
)


@settings(max_examples=400)
@given(environs, st.sampled_from([None, "torchelastic", "kubeflow", "lightning"]))
def test_any_mapping_gives_a_topology_or_a_topology_error(env: dict[str, str], source: str | None) -> None:
    fake = probes.fake(hostname="vm", free_port=29500, files={}, which={})
    try:
        t = resolver.resolve(env, fake, source=source)
    except TopologyError:
        return
    assert isinstance(t, Topology)
    assert Topology.from_dict(t.to_dict()) == t


def test_a_scheduler_s_job_facts_reach_a_process_another_launcher_started() -> None:
    # mpirun inside sbatch: MPI resolves the ranks, SLURM says which job (and requeue) it is
    env = {
        "OMPI_COMM_WORLD_SIZE": "2",
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "PMIX_NAMESPACE": "prterun-vm-123@1",
        "MASTER_ADDR": "vm",
        "MASTER_PORT": "29500",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NAME": "train",
        "SLURM_RESTART_COUNT": "2",
        "ENVIRONMENT": "BATCH",
    }
    t = resolver.resolve(env, probes.fake())
    assert (t.source, t.job_id, t.job_name, t.restart_count) == ("mpi", "4242", "train", 2)
    assert str(t.provenance["job_id"]) == "env:SLURM_JOB_ID"
    assert str(t.provenance["restart_count"]) == "env:SLURM_RESTART_COUNT"
    # without a scheduler, the launcher's own id stays
    plain = {k: v for k, v in env.items() if not k.startswith("SLURM_")}
    assert resolver.resolve(plain, probes.fake()).job_id == "prterun-vm-123@1"


def test_a_malformed_scheduler_restart_count_is_named() -> None:
    env = {"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "SLURM_JOB_ID": "7"}
    assert resolver.resolve(env, probes.fake()).job_id == "7"
    with pytest.raises(resolver.InvalidVariable) as info:
        resolver.resolve({**env, "SLURM_RESTART_COUNT": "x"}, probes.fake())
    assert info.value.variable == "SLURM_RESTART_COUNT"


def _plugin_dist(folder: Path) -> None:
    """A distribution declaring one `resolver.sources` entry point, laid out under `folder`."""
    (folder / "pbs_source.py").write_text(
        "from resolver import Topology\n"
        "class Pbs:\n"
        "    name = 'pbs'\n"
        "    auto = True\n"
        "    def detect(self, environ):\n"
        "        return 'PBS_JOBID' in environ\n"
        "    def resolve(self, environ, probes):\n"
        "        return Topology(source='pbs', world_size=1, global_rank=0, local_rank=0, node_rank=0)\n"
    )
    dist = folder / "pbs_source-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pbs-source\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[resolver.sources]\npbs = pbs_source:Pbs\n")


def test_a_plugin_in_a_zip_on_sys_path_is_found(tmp_path: Path) -> None:
    """A zip (or egg) file on sys.path cannot be byte-scanned: importlib.metadata decides for it."""
    import zipfile

    tree = tmp_path / "tree"
    tree.mkdir()
    _plugin_dist(tree)
    archive = tmp_path / "plugin.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in tree.rglob("*"):
            zipped.write(path, path.relative_to(tree).as_posix())
    code = "import resolver, probes; print(resolver.resolve({'PBS_JOBID': '1'}, probes.fake()).source)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": f"{archive}:{Path.cwd()}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.split() == ["pbs"]


@pytest.mark.parametrize("declared", [True, False])
def test_the_byte_scan_agrees_with_importlib_metadata(tmp_path: Path, declared: bool) -> None:
    from importlib.metadata import distributions

    from resolver._detect import ENTRY_POINT_GROUP, _declared

    if declared:
        _plugin_dist(tmp_path)
    else:
        (tmp_path / "other-1.0.dist-info").mkdir()
        (tmp_path / "other-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1.0\n")
        (tmp_path / "other-1.0.dist-info" / "entry_points.txt").write_text("[console_scripts]\nx = y:z\n")
    path = [str(tmp_path)]
    by_metadata = any(
        point.group == ENTRY_POINT_GROUP for dist in distributions(path=path) for point in dist.entry_points
    )
    assert _declared(path) == by_metadata == declared


def test_the_byte_scan_reads_what_importlib_metadata_would_and_skips_the_rest(tmp_path: Path) -> None:
    """Distributions without entry points, an egg-info file, a folder called
    entry_points.txt and a large one: the scan neither fails nor misses the group."""
    from resolver._detect import ENTRY_POINT_GROUP, _declared

    (tmp_path / "plain-1.0.dist-info").mkdir()
    (tmp_path / "old-1.0.egg-info").write_text("Metadata-Version: 1.0\n")  # an egg-info *file*
    (tmp_path / "odd-1.0.dist-info" / "entry_points.txt").mkdir(parents=True)
    (tmp_path / "README.txt").write_text("not a distribution\n")
    path = [str(tmp_path), str(tmp_path / "missing")]
    assert _declared(path) is False

    big = tmp_path / "big-1.0.dist-info"
    big.mkdir()
    filler = "".join(f"x{n} = y:z\n" for n in range(20000))  # well past one read
    (big / "entry_points.txt").write_text(f"[console_scripts]\n{filler}[{ENTRY_POINT_GROUP}]\nb = b:B\n")
    assert len((big / "entry_points.txt").read_bytes()) > 200_000
    assert _declared(path) is True


def test_the_byte_scan_searches_the_working_folder_for_an_empty_sys_path_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from resolver._detect import _declared

    _plugin_dist(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert _declared([""]) is True


# Layouts importlib.metadata reads a `resolver.sources` entry point from: the scan must not miss one.
PLUGIN_POINT = "[resolver.sources]\npbs = pbs_source:Pbs\n"
LAYOUTS = {
    "dist-info": ("pbs_source-1.0.dist-info", PLUGIN_POINT),
    "egg-info": ("pbs_source-1.0.egg-info", PLUGIN_POINT),
    "egg folder": ("pbs_source-1.0-py3.11.egg/EGG-INFO", PLUGIN_POINT),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_byte_scan_finds_every_layout_importlib_metadata_reads(tmp_path: Path, layout: str) -> None:
    from importlib.metadata import distributions

    from resolver._detect import ENTRY_POINT_GROUP, _declared

    folder, text = LAYOUTS[layout]
    info = tmp_path / folder
    info.mkdir(parents=True)
    (info / "PKG-INFO").write_text("Metadata-Version: 1.0\nName: pbs-source\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(text)
    entry = tmp_path / folder.split("/")[0] if layout == "egg folder" else tmp_path
    path = [str(entry)]
    assert any(point.group == ENTRY_POINT_GROUP for dist in distributions(path=path) for point in dist.entry_points)
    assert _declared(path)


@pytest.mark.timeout(30)
def test_the_byte_scan_skips_a_fifo_instead_of_waiting_on_it(tmp_path: Path) -> None:
    """A FIFO called entry_points.txt would block a plain open() forever; the scan reads through the
    file probe's reader, which opens without waiting and reads only regular files."""
    import os

    from resolver._detect import _declared

    (tmp_path / "odd-1.0.dist-info").mkdir()
    os.mkfifo(tmp_path / "odd-1.0.dist-info" / "entry_points.txt")
    assert _declared([str(tmp_path)]) is False
    _plugin_dist(tmp_path)
    assert _declared([str(tmp_path)]) is True
