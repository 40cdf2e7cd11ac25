"""TopologyEnvironment: Lightning's ClusterEnvironment API answered by a Topology, over dict environments."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest

import probes
import resolver
from resolver import InvalidSettings, Topology
from resolver.origin import Origin
from tests.conftest import captures, read_capture
from tests.integrations import require_module, run_python

if TYPE_CHECKING:
    from probes import Probes

ROOT = Path(__file__).resolve().parents[2]

environments: Any = require_module("lightning.fabric.plugins.environments", "lightning")
fabric_module: Any = require_module("lightning.fabric", "lightning")

from resolver.integrations.lightning import LIGHTNING_WRITES, TopologyEnvironment  # noqa: E402


class Recording(dict[str, str]):
    """A dict environment that counts every read and write, to prove an answer touched neither."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.touched: list[str] = []

    def __getitem__(self, key: str) -> str:
        self.touched.append(f"get {key}")
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.touched.append(f"get {key}")
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.touched.append(f"in {key}")
        return super().__contains__(key)

    def __setitem__(self, key: str, value: str) -> None:
        self.touched.append(f"set {key}")
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.touched.append(f"del {key}")
        super().__delitem__(key)


def spawning(port: int = 41000) -> dict[str, Any]:
    """`python train.py` on one machine: the Lightning default, and this process starts the workers."""
    return {"environ": {}, "probes": probes.fake(free_port=port)}


# the torchrun captures ran both nodes on one host (MASTER_ADDR=127.0.0.1): resolving them needs the opt-in
EMULATED = {"CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"}


def torchrun_rank(n: int = 3) -> dict[str, str]:
    return {**read_capture(captures(f"torchrun/2node_static/rank{n}.env")[0]), **EMULATED}


def answers(env: TopologyEnvironment) -> dict[str, Any]:
    return {
        "creates_processes_externally": env.creates_processes_externally,
        "main_address": env.main_address,
        "main_port": env.main_port,
        "world_size": env.world_size(),
        "global_rank": env.global_rank(),
        "local_rank": env.local_rank(),
        "node_rank": env.node_rank(),
    }


@pytest.fixture(autouse=True)
def _os_environ_untouched() -> Iterator[None]:
    before = {k: os.environ.get(k) for k in LIGHTNING_WRITES}
    yield
    assert {k: os.environ.get(k) for k in LIGHTNING_WRITES} == before


# -- the answers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "capture",
    [
        *captures("torchrun/*/rank*.env"),
        *captures("slurm/f_2node_srun_N2_n4/rank*.env"),
        *captures("openmpi/n4/rank*.env"),
    ],
    ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.stem}",
)
def test_answers_are_the_resolved_records(capture: Path) -> None:
    environ = {**read_capture(capture), **EMULATED}
    if "OMPI_COMM_WORLD_RANK" in environ:  # as with mpirun -x MASTER_ADDR -x MASTER_PORT: no comm needed
        environ.update(MASTER_ADDR="node0", MASTER_PORT="29500")
    expected = resolver.resolve(environ, probes.fake(hostname="node0", free_port=41000, which={}))
    env = TopologyEnvironment(environ=dict(environ), probes=probes.fake(hostname="node0", free_port=41000, which={}))
    assert env.topology == expected
    assert answers(env) == {
        "creates_processes_externally": expected.creates_processes_externally,
        "main_address": expected.main_address,
        "main_port": expected.main_port,
        "world_size": expected.world_size,
        "global_rank": expected.global_rank,
        "local_rank": expected.local_rank,
        "node_rank": expected.node_rank,
    }
    assert expected.creates_processes_externally


def test_a_topology_handed_in_is_used_as_it_is() -> None:
    t = Topology(
        source="kubeflow", world_size=4, global_rank=2, local_rank=0, node_rank=2, main_address="m", main_port=9
    )
    env = TopologyEnvironment(t)
    assert env.topology is t
    assert answers(env) == {
        "creates_processes_externally": False,
        "main_address": "m",
        "main_port": 9,
        "world_size": 4,
        "global_rank": 2,
        "local_rank": 0,
        "node_rank": 2,
    }
    assert isinstance(env, environments.ClusterEnvironment)
    assert TopologyEnvironment.detect() is True
    assert repr(env) == f"<TopologyEnvironment {t}>"


def test_reading_answers_touches_no_environment() -> None:
    environ = Recording(torchrun_rank())
    env = TopologyEnvironment(environ=environ, probes=probes.fake())
    environ.touched.clear()  # resolving read it, once, when the object was made
    os_before = dict(os.environ)
    for _ in range(3):
        answers(env)
        env.validate_settings(num_devices=2, num_nodes=2)
    assert environ.touched == []
    assert dict(os.environ) == os_before


def test_source_forces_a_source_as_in_resolve() -> None:
    environ = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "7"}
    env = TopologyEnvironment(environ=environ, probes=probes.fake(), source="kubeflow")
    assert (env.topology.source, env.global_rank(), env.node_rank()) == ("kubeflow", 1, 1)


def test_wrong_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="Topology or None"):
        TopologyEnvironment({"world_size": 1})  # type: ignore[arg-type]
    t = resolver.resolve({}, probes.fake(free_port=41000))
    with pytest.raises(TypeError, match="only without a topology"):
        TopologyEnvironment(t, source="slurm")


def test_a_topology_without_a_main_endpoint_says_so() -> None:
    env = TopologyEnvironment(Topology(source="custom", world_size=1, global_rank=0, local_rank=0, node_rank=0))
    with pytest.raises(InvalidSettings, match="no main address"):
        env.main_address  # noqa: B018
    with pytest.raises(InvalidSettings, match="no main port"):
        env.main_port  # noqa: B018


# -- what Lightning tells us: set_world_size / set_global_rank evolve ------------------------------


def test_setters_evolve_a_new_record_and_leave_the_old_one_alone() -> None:
    env = TopologyEnvironment(**spawning())
    old = env.topology
    env.set_global_rank(0)
    assert env.topology is old  # nothing changed: the same record, provenance and all
    env.set_world_size(2)
    env.set_global_rank(1)
    new = env.topology
    assert new is not old
    assert (old.world_size, old.global_rank) == (1, 0)
    assert (new.world_size, new.global_rank) == (2, 1)
    assert new.provenance["world_size"] == Origin.argument("lightning:set_world_size(2)")
    assert new.provenance["global_rank"] == Origin.argument("lightning:set_global_rank(1)")
    assert old.provenance["world_size"].kind == "default"


def test_a_rank_set_before_the_world_size_it_fits_in_waits_for_it() -> None:
    """Lightning sets the rank first: node 1 of 2 with 2 devices is rank 2 before the world is 4."""
    environ = {"NODE_RANK": "1", "MASTER_ADDR": "node0"}  # node 1 of 2 needs node 0's address
    env = TopologyEnvironment(environ=environ, probes=probes.fake(free_port=41000, which={}))
    before = env.topology
    env.set_global_rank(2)
    assert env.global_rank() == 2
    assert env.topology is before  # no record can say rank 2 of 1
    env.set_world_size(4)
    assert (env.topology.global_rank, env.topology.world_size) == (2, 4)
    assert env.global_rank() == 2


def test_a_pending_rank_without_a_world_size_fails_validation() -> None:
    env = TopologyEnvironment(**spawning())
    env.set_global_rank(3)
    with pytest.raises(InvalidSettings, match="no world size it fits in"):
        env.validate_settings(num_devices=2, num_nodes=1)


def test_a_world_size_the_launcher_contradicts_is_invalid_settings() -> None:
    env = TopologyEnvironment(environ=torchrun_rank(1), probes=probes.fake())  # 2 per node, 2 nodes, rank 1
    before = env.topology
    with pytest.raises(InvalidSettings, match=r"set_world_size\(1\).*HINT") as info:
        env.set_world_size(1)
    assert isinstance(info.value.__cause__, resolver.InvalidTopology)
    assert env.topology is before


def test_validate_settings_is_resolver_validate() -> None:
    env = TopologyEnvironment(environ=torchrun_rank(), probes=probes.fake())
    env.validate_settings(num_devices=2, num_nodes=2)
    with pytest.raises(InvalidSettings, match="HINT: set devices=2"):
        env.validate_settings(num_devices=4, num_nodes=2)
    with pytest.raises(InvalidSettings, match="HINT: set num_nodes=2"):
        env.validate_settings(num_devices=2, num_nodes=1)


def test_the_first_launch_makes_this_process_worker_0_of_spawn() -> None:
    env = TopologyEnvironment(**spawning())
    # what Fabric's DDP strategy and its script launcher do, in order
    env.set_global_rank(0)
    env.set_world_size(2)
    assert env.creates_processes_externally is False
    env.validate_settings(num_devices=2, num_nodes=1)
    assert env.creates_processes_externally is False  # the launcher starts the workers now
    expected = resolver.spawn(resolver.resolve({}, probes.fake(free_port=41000)), devices=2, num_nodes=1)[0]
    assert env.topology == expected
    assert (env.topology.local_world_size, env.topology.num_nodes) == (2, 1)
    origin = env.topology.provenance["world_size"]
    assert (origin.kind, origin.name.startswith("spawn:")) == ("argument", True)
    # a second launch (trainer.test() after trainer.fit()): the workers exist
    env.validate_settings(num_devices=2, num_nodes=1)
    assert env.creates_processes_externally is True
    assert env.topology == expected


def test_a_worker_the_script_launcher_started_gets_its_rank_from_lightning() -> None:
    """A child of Fabric's script launcher: LOCAL_RANK, NODE_RANK, WORLD_SIZE, MASTER_* but no RANK."""
    environ = {
        "LOCAL_RANK": "1",
        "NODE_RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "41000",
    }
    env = TopologyEnvironment(environ=environ, probes=probes.fake(which={}))
    assert env.creates_processes_externally and env.global_rank() == 0  # RANK unset: the default
    env.set_global_rank(0 * 2 + env.local_rank())
    env.set_world_size(2)
    env.validate_settings(num_devices=2, num_nodes=1)
    assert (env.global_rank(), env.world_size(), env.local_rank()) == (1, 2, 1)
    assert env.creates_processes_externally is True


# -- teardown: what Lightning wrote from our answers goes back ----------------------------------


def test_teardown_restores_what_lightnings_launcher_wrote_from_our_answers() -> None:
    environ: dict[str, str] = {"NODE_RANK": "0", "UNRELATED": "x"}
    env = TopologyEnvironment(environ=environ, probes=probes.fake(free_port=41000, which={}))
    env.set_global_rank(0)
    env.set_world_size(2)
    env.validate_settings(num_devices=2, num_nodes=1)
    # lightning/fabric/strategies/launchers/subprocess_script.py:115-121, in the parent process
    environ.update(
        MASTER_ADDR=env.main_address,
        MASTER_PORT=str(env.main_port),
        NODE_RANK=str(env.node_rank()),
        LOCAL_RANK=str(env.local_rank()),
        WORLD_SIZE="2",
    )
    environ["UNRELATED"] = "y"
    env.teardown()
    assert environ == {"NODE_RANK": "0", "UNRELATED": "y"}
    env.teardown()  # idempotent
    assert environ == {"NODE_RANK": "0", "UNRELATED": "y"}


def test_teardown_leaves_values_that_are_not_our_answers() -> None:
    environ: dict[str, str] = {}
    env = TopologyEnvironment(environ=environ, probes=probes.fake(free_port=41000, which={}))
    environ.update(MASTER_ADDR="elsewhere", MASTER_PORT="41000")
    env.teardown()
    assert environ == {"MASTER_ADDR": "elsewhere"}


def test_teardown_under_a_launcher_changes_nothing() -> None:
    environ = torchrun_rank()
    copy = dict(environ)
    env = TopologyEnvironment(environ=environ, probes=probes.fake())
    environ.update(MASTER_ADDR=env.main_address, MASTER_PORT=str(env.main_port))  # _init_dist_connection
    env.teardown()
    assert environ == copy


# -- real Fabric, in this process (construction only: no launch) ----------------------------------


def test_fabric_takes_the_plugin_and_its_set_calls_evolve_the_record() -> None:
    env = TopologyEnvironment(**spawning())
    first = env.topology
    fabric = fabric_module.Fabric(accelerator="cpu", devices=2, strategy="ddp", plugins=[env])
    assert fabric.strategy.cluster_environment is env
    assert (fabric.world_size, fabric.global_rank, fabric.local_rank, fabric.node_rank) == (2, 0, 0, 0)
    assert (first.world_size, env.topology.world_size) == (1, 2)


def test_fabric_under_a_launcher_keeps_the_launchers_answers() -> None:
    env = TopologyEnvironment(environ=torchrun_rank(3), probes=probes.fake())
    first = env.topology
    fabric = fabric_module.Fabric(accelerator="cpu", devices=2, num_nodes=2, strategy="ddp", plugins=[env])
    assert (fabric.world_size, fabric.global_rank, fabric.local_rank, fabric.node_rank) == (4, 3, 1, 1)
    assert env.topology is first  # Lightning's set calls agreed with torchrun: nothing to evolve


# -- pickling, and a copy used in another process -------------------------------------------------


def test_pickles_and_a_copy_in_another_process_refuses_to_answer_ranks() -> None:
    env = TopologyEnvironment(**spawning())
    env.set_world_size(2)
    same = pickle.loads(pickle.dumps(env))  # noqa: S301 - our own bytes
    assert same.topology == env.topology
    same.set_global_rank(1)  # in this process a copy works
    code = """if True:
        import json, pickle, sys
        env = pickle.loads(sys.stdin.buffer.read())
        try:
            env.set_global_rank(1)
        except Exception as exc:
            print(json.dumps({"type": type(exc).__name__, "message": str(exc), "world": env.world_size()}))
    """
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(env),
        capture_output=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    result = json.loads(out.stdout.decode().splitlines()[-1])
    assert result["type"] == "InvalidSettings"
    assert "ddp_spawn" in result["message"] and "strategy='ddp'" in result["message"]
    assert result["world"] == 2


# -- imports -------------------------------------------------------------------------------------


def test_without_lightning_the_import_error_names_the_extra() -> None:
    code = """if True:
        import json, sys
        sys.modules["lightning"] = None  # as if lightning were not installed
        try:
            import resolver.integrations.lightning
        except ImportError as exc:
            print(json.dumps({"message": str(exc), "name": exc.name}))
        else:
            print(json.dumps({"message": None}))
    """
    result = run_python(code)
    assert result["message"] is not None
    assert "resolver.integrations.lightning needs lightning" in result["message"]
    assert "pip install 'cluster-topology[lightning]'" in result["message"]
    assert result["name"] == "lightning"


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "resolver.integrations.lightning"]


def test_warnings_are_logged_and_a_loopback_address_across_nodes_is_refused(caplog: pytest.LogCaptureFixture) -> None:
    fields: dict[str, Any] = {"source": "kubeflow", "world_size": 4, "global_rank": 2, "local_rank": 0, "node_rank": 1}
    warned = Topology(**fields, main_address="m", main_port=9, creates_processes_externally=True, warnings=("look",))
    with caplog.at_level("WARNING", logger="resolver"):
        env = TopologyEnvironment(warned)  # a launcher started it and gave its rank: logged now
        assert logged(caplog) == [f"{warned}: look"]
        env.validate_settings(num_devices=1, num_nodes=4)
    assert logged(caplog) == [f"{warned}: look"]  # once
    with pytest.raises(resolver.InvalidVariable, match="not a loopback address"):
        TopologyEnvironment(Topology(**fields, main_address="127.0.0.1", main_port=9), environ={})
    TopologyEnvironment(
        Topology(**fields, main_address="127.0.0.1", main_port=9), environ={"CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"}
    )


# -- the warnings are logged with the record of the worker this process is ------------------------


class Noted:
    """The default source with a warning of its own: how any source's warning reaches the log."""

    name = "noted"
    auto = False

    def detect(self, environ: Mapping[str, str]) -> resolver.Detection:
        return resolver.Detection(True, "always, as the default", ())

    def resolve(self, environ: Mapping[str, str], probes: Probes) -> Topology:
        record = resolver.by_name("lightning").resolve(environ, probes)
        return attrs.evolve(record, warnings=(*record.warnings, "look at this"))


SCRIPT_CHILD = {  # what Fabric's script launcher gives the worker it starts for local rank 1
    "LOCAL_RANK": "1",
    "NODE_RANK": "0",
    "WORLD_SIZE": "2",
    "MASTER_ADDR": "127.0.0.1",
    "MASTER_PORT": "41000",
}


def test_a_worker_fabric_started_logs_its_own_record(caplog: pytest.LogCaptureFixture) -> None:
    """Its environment has no RANK: the record it resolves says rank 0 until Fabric sets rank 1."""
    with caplog.at_level("WARNING", logger="resolver"):
        env = TopologyEnvironment(environ=dict(SCRIPT_CHILD), probes=probes.fake(which={}), source=Noted())
        assert env.global_rank() == 0
        fabric = fabric_module.Fabric(accelerator="cpu", devices=2, strategy="ddp", plugins=[env])
        assert logged(caplog) == []  # not yet: the rank comes from Fabric
        fabric.strategy.launcher.launch(lambda: None)  # what fabric.launch() does first, without the process group
    own = env.topology
    assert (own.global_rank, own.world_size, own.local_rank) == (1, 2, 1)
    assert logged(caplog) == [f"{own}: look at this"]
    assert str(own).startswith("lightning rank 1/2 local 1/")


def test_the_process_that_starts_the_workers_logs_worker_0s_record(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="resolver"):
        env = TopologyEnvironment(environ={}, probes=probes.fake(free_port=41000, which={}), source=Noted())
        before = env.topology
        env.set_global_rank(0)
        env.set_world_size(2)
        assert logged(caplog) == []
        env.validate_settings(num_devices=2, num_nodes=1)  # the first launch: this process becomes worker 0
        env.validate_settings(num_devices=2, num_nodes=1)  # a second launch logs nothing more
    worker = env.topology
    assert worker == resolver.spawn(before, devices=2, num_nodes=1)[0]
    assert logged(caplog) == [f"{worker}: look at this"]
    assert str(worker).startswith("lightning rank 0/2 local 0/2 node 0/1")


def test_a_launch_that_fails_still_logs_the_warnings(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="resolver"):
        env = TopologyEnvironment(environ=torchrun_rank(3) | {"RANK": "3"}, probes=probes.fake(), source=Noted())
        with pytest.raises(InvalidSettings, match="HINT"):
            env.validate_settings(num_devices=4, num_nodes=2)
    assert logged(caplog) == [f"{env.topology}: look at this"]


FABRIC_SCRIPT = """
import json, logging, os, sys

import attrs
import torch
from lightning.fabric import Fabric

import resolver
from resolver.integrations.lightning import TopologyEnvironment


class Noted:
    name = "noted"
    auto = False

    def detect(self, environ):
        return resolver.by_name("lightning").detect(environ)

    def resolve(self, environ, probes):
        record = resolver.by_name("lightning").resolve(environ, probes)
        return attrs.evolve(record, warnings=(*record.warnings, "look at this"))


lines = []


class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())


logging.getLogger("resolver.integrations.lightning").addHandler(Keep())
environment = TopologyEnvironment(source=Noted())
fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp", plugins=[environment])
fabric.launch()
fabric.barrier()
out = {"rank": fabric.global_rank, "record": str(environment.topology), "lines": lines}
with open(os.path.join(sys.argv[1], f"{os.getpid()}.json"), "w") as file:
    json.dump(out, file)
import torch.distributed as dist

dist.destroy_process_group()
"""


def test_under_a_real_fabric_launch_each_worker_logs_its_own_record(tmp_path: Path) -> None:
    """`python script.py` with Fabric's script launcher: the script runs again as local rank 1."""
    script = tmp_path / "train.py"
    script.write_text(FABRIC_SCRIPT)
    answers = tmp_path / "answers"
    answers.mkdir()
    environ = {k: v for k, v in os.environ.items() if k not in (*LIGHTNING_WRITES, "RANK")}
    done = subprocess.run(
        [sys.executable, str(script), str(answers)],
        cwd=tmp_path,
        env={**environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    reports = sorted((json.loads(path.read_text()) for path in answers.glob("*.json")), key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1]
    for report in reports:
        assert report["record"].startswith(f"lightning rank {report['rank']}/2 local {report['rank']}/")
        ours = [line for line in report["lines"] if line.endswith(": look at this")]
        assert ours == [f"{report['record']}: look at this"]
        assert all(line.startswith(f"{report['record']}: ") for line in report["lines"])
