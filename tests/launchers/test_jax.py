"""JAX on the CPU under real launchers: `resolver.integrations.jax.initialize()` forms one world per
launch, and beside it what `jax.distributed.initialize()` with JAX's own detection does on the same
kind of launch (docs/integrations-jax.md's table is these measurements).

Each process runs tests/launchers/jax_worker.py and writes JSON (see there); the checks are here:
`jax.process_index()`/`process_count()` equal the launcher's rank and size, and an all-gather of
every process's launcher rank over JAX's CPU collectives (gloo) gives 0..n-1 in process order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_tool
from tests.integrations import require_module
from tests.launchers.slurm_cluster import Cluster

WORKER = Path(__file__).resolve().with_name("jax_worker.py")
ROOT = WORKER.parents[2]
PY = sys.executable
TIMEOUT = 240.0  # one launch; a hang fails the test, not the CI job
LAUNCHER_PREFIXES = ("OMPI_", "PMI_", "PMIX_", "MPI_LOCAL", "MV2_", "SLURM_", "TORCHELASTIC_", "HYDI_", "JAX_")
LAUNCHER_NAMES = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
OPEN_MPI = {  # as root, and more ranks than cores
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
}
LOOPBACK = {"OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}


@pytest.fixture(autouse=True)
def _jax() -> None:
    require_module("jax", "jax")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(*extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without an enclosing launcher's (or JAX's) variables, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_PREFIXES) and k not in LAUNCHER_NAMES}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    for more in extra:
        env.update(more)
    return env


def run(args: list[str], env: Mapping[str, str]) -> tuple[int, str]:
    """Run a launcher in its own session, bounded; whatever it leaves is killed. (exit code, output)."""
    with subprocess.Popen(
        args, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            pytest.fail(f"{args!r} did not finish in {TIMEOUT} s:\n{output[-5000:]}")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, output


def records(directory: Path) -> list[dict[str, Any]]:
    """Every process's record, in launcher-rank order."""
    found = [json.loads(p.read_text()) for p in directory.glob("*.json")]
    return sorted(found, key=lambda r: r["truth"]["rank"])


def world(directory: Path, count: int, output: str) -> list[dict[str, Any]]:
    """`count` processes that all formed one JAX world agreeing with their launcher; their records."""
    found = records(directory)
    assert len(found) == count, f"{len(found)} of {count} processes answered; output:\n{output[-5000:]}"
    for rank, record in enumerate(found):
        assert record["status"] == "ok", f"rank {rank}: {record}\n{output[-5000:]}"
        assert record["truth"]["rank"] == rank and record["truth"]["size"] == count, record
        assert (record["process_index"], record["process_count"]) == (rank, count), record
        assert record["gathered"] == list(range(count)), record
        assert set(record["gathered_steps"]) == {int(record["step"] or -1)}, record  # one step's processes
        top = record["topology"]
        assert (top["global_rank"], top["world_size"]) == (rank, count), top
    assert len({r["coordinator_address"] for r in found}) == 1, [r["coordinator_address"] for r in found]
    return found


def outcome(record: dict[str, Any]) -> str:
    """One process of a plain run, in the words of the docs' table."""
    if record["status"] == "ok":
        n = record["process_count"]
        text = f"ok {record['process_index']}/{n}"
        if record["gathered"] != list(range(n)):
            text += f" gathered ranks {record['gathered']}"
        if len(set(record["gathered_steps"])) > 1:
            text += f" in one world with steps {record['gathered_steps']}"
        return text
    if record["status"] == "error":
        return "error " + str(record["error"]).splitlines()[0][:200]
    return "died in jax.distributed.initialize"


def report(title: str, rc: int, found: list[dict[str, Any]]) -> str:
    """What a plain run did, printed for the log (pytest -s, or the failure's captured output)."""
    lines = [f"{title}: launcher exit {rc}"]
    for record in found:
        where = f"step {record['step']} " if record.get("step") is not None else ""
        detected = record.get("detected")
        chosen = detected.get("coordinator_address") if isinstance(detected, dict) else detected
        lines.append(
            f"  {where}rank {record['truth']['rank']} on {record['node']}: {outcome(record)} (JAX chose {chosen})"
        )
    text = "\n".join(lines)
    print(text)
    return text


def coordinator_host(record: dict[str, Any]) -> str:
    detected = record["detected"]
    assert isinstance(detected, dict) and detected["coordinator_address"], detected
    return str(detected["coordinator_address"]).rsplit(":", 1)[0]


def directories(tmp_path: Path, *names: str) -> list[Path]:
    out = []
    for name in names:
        (tmp_path / name).mkdir()
        out.append(tmp_path / name)
    return out


# -- SLURM ---------------------------------------------------------------------------------------


def srun(cluster: Cluster, args: str, mode: str, out: Path, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    command = f"srun {args} {PY} {WORKER} {mode} {out}"
    try:
        res = cluster.run(command, env={"PYTHONPATH": str(ROOT), **(env or {})}, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command!r} did not finish in {TIMEOUT} s")
    return res.returncode, res.stdout + res.stderr


@pytest.mark.slurm
def test_srun_two_nodes_four_tasks(slurm_cluster: Cluster, tmp_path: Path) -> None:
    ours, plain = directories(tmp_path, "ours", "plain")
    rc, output = srun(slurm_cluster, "-N2 -n4", "ours", ours)
    assert rc == 0, output
    found = world(ours, 4, output)
    nodes = sorted({r["node"] for r in found})
    assert len(nodes) == 2
    assert found[0]["coordinator_address"].rsplit(":", 1)[0] == found[0]["node"] == nodes[0]
    assert not any(r["torch_after"] for r in found)  # no agent store: torch is never imported
    rc, output = srun(slurm_cluster, "-N2 -n4", "plain", plain)
    measured = records(plain)
    text = report("srun -N2 -n4, jax.distributed.initialize()", rc, measured)
    # measured: JAX's SLURM detection names the first node and port job_id % 4096 + 61440; task 0 is there
    assert rc == 0 and [outcome(r) for r in measured] == [f"ok {i}/4" for i in range(4)], text
    first = sorted({r["node"] for r in measured})[0]  # this job's nodes: not always the first job's
    assert {coordinator_host(r) for r in measured} == {first} and measured[0]["node"] == first, text


@pytest.mark.slurm
def test_two_concurrent_steps_are_two_worlds(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """`sbatch -N1 -n4` running two `srun -N1 -n2 --exact` at once: two worlds of two, two coordinators."""
    a, b, plain_a, plain_b = directories(tmp_path, "a", "b", "plain_a", "plain_b")
    script = tmp_path / "job.sh"
    step = f"srun -N1 -n2 --exact {PY} {WORKER}"
    script.write_text(
        "#!/bin/bash\n"
        f"{step} ours {a} > {tmp_path}/a.txt 2>&1 &\n"
        f"{step} ours {b} > {tmp_path}/b.txt 2>&1 &\n"
        "wait\n"
        f"{step} plain {plain_a} > {tmp_path}/plain_a.txt 2>&1 &\n"
        f"{step} plain {plain_b} > {tmp_path}/plain_b.txt 2>&1 &\n"
        "wait\n"
        "exit 0\n"  # the plain steps may fail: that is what is measured
    )
    try:
        res = slurm_cluster.run(
            ["sbatch", "--wait", "-N1", "-n4", "-o", str(tmp_path / "out.txt"), str(script)],
            env={"PYTHONPATH": str(ROOT)},
            timeout=2 * TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job did not finish in {2 * TIMEOUT} s")
    logs = "\n".join(f"{p.name}:\n{p.read_text()}" for p in sorted(tmp_path.glob("*.txt")))
    assert res.returncode == 0, res.stderr + logs
    worlds = [world(directory, 2, logs) for directory in (a, b)]
    assert {w[0]["step"] for w in worlds} == {"0", "1"}
    assert worlds[0][0]["coordinator_address"] != worlds[1][0]["coordinator_address"]
    measured = records(plain_a) + records(plain_b)
    text = report("two concurrent srun --exact steps, jax.distributed.initialize()", res.returncode, measured)
    for name in ("plain_a.txt", "plain_b.txt"):  # how the processes that died went: srun says
        said = [line for line in (tmp_path / name).read_text().splitlines() if line.startswith("srun: error")]
        text += f"\n  {name}: " + ("; ".join(said) or "srun reported no error")
    print(text)
    # measured: both steps' JAX chose one coordinator (same job id, same node); what follows is a
    # race (in seven runs: one step formed twice, neither twice, a world mixing the steps twice, both once)
    assert len(measured) == 4, text
    assert len({r["detected"]["coordinator_address"] for r in measured}) == 1, text


@pytest.mark.slurm
def test_arbitrary_distribution_task_0_on_the_second_node(slurm_cluster: Cluster, tmp_path: Path) -> None:
    ours, plain = directories(tmp_path, "ours", "plain")
    hostfile = tmp_path / "hosts"
    hostfile.write_text("ci2\nci2\nci1\nci1\n")
    env = {"SLURM_HOSTFILE": str(hostfile)}
    rc, output = srun(slurm_cluster, "-N2 -n4 --distribution=arbitrary", "ours", ours, env)
    assert rc == 0, output
    found = world(ours, 4, output)
    assert [r["node"] for r in found] == ["ci2", "ci2", "ci1", "ci1"]  # SLURM's placement
    assert found[0]["coordinator_address"].rsplit(":", 1)[0] == "ci2"  # process 0's node
    rc, output = srun(slurm_cluster, "-N2 -n4 --distribution=arbitrary", "plain", plain, env)
    measured = records(plain)
    text = report("srun --distribution=arbitrary (task 0 on ci2), jax.distributed.initialize()", rc, measured)
    # measured: JAX names ci1, the first node of the list, where process 0 is not; it forms here
    # only because the emulated nodes all are 127.0.0.1 (on a real cluster nothing listens there)
    assert {coordinator_host(r) for r in measured} == {"ci1"}, text
    assert measured[0]["node"] == "ci2", text


@pytest.mark.slurm
def test_check_then_initialize_under_srun(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """`resolver.check()` meets at the main endpoint, then JAX's coordinator binds that port: the check let it go."""
    (out,) = directories(tmp_path, "out")
    rc, output = srun(slurm_cluster, "-N2 -n4", "check", out)
    assert rc == 0, output
    found = world(out, 4, output)
    assert all(r["check"] == {"ok": True, "problems": []} for r in found), [r["check"] for r in found]
    top = found[0]["topology"]
    assert found[0]["coordinator_address"] == f"{top['main_address']}:{top['main_port']}"


# -- mpirun on two emulated hosts -------------------------------------------------------------------


@pytest.mark.mpi
def test_mpirun_on_two_emulated_hosts(tmp_path: Path, fake_ssh: Path) -> None:
    require_tool("mpirun")
    ours, plain = directories(tmp_path, "ours", "plain")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("nodeA slots=2\nnodeB slots=2\n")
    master = {"MASTER_ADDR": "nodeA", "MASTER_PORT": str(free_port())}
    args = ["mpirun", "--mca", "plm_rsh_agent", str(fake_ssh), "--hostfile", str(hostfile), "-n", "4"]
    args += ["-x", "MASTER_ADDR", "-x", "MASTER_PORT", "-x", "PYTHONPATH"]
    env = clean_env(OPEN_MPI, LOOPBACK, master)
    rc, output = run([*args, PY, str(WORKER), "ours", str(ours)], env)
    assert rc == 0, output
    found = world(ours, 4, output)
    assert [r["node"] for r in found] == ["nodeA", "nodeA", "nodeB", "nodeB"]
    assert found[0]["coordinator_address"] == f"nodeA:{master['MASTER_PORT']}"
    assert all(r["topology"]["source"] == "mpi" for r in found)
    assert not any(r["torch_after"] for r in found)
    rc, output = run([*args, PY, str(WORKER), "plain", str(plain)], env)
    measured = records(plain)
    text = report("mpirun (Open MPI 4) on nodeA, nodeB, jax.distributed.initialize()", rc, measured)
    # measured: JAX's Open MPI detection reads OMPI_MCA_orte_hnp_uri: mpirun's own address (127.0.0.1
    # here, with oob_tcp_if_include=lo) and a port from the job id, not the host of rank 0 (nodeA)
    assert len(measured) == 4, output
    assert {coordinator_host(r) for r in measured} == {"127.0.0.1"}, text
    assert [outcome(r) for r in measured] == [f"ok {i}/4" for i in range(4)], text


# -- torchrun ---------------------------------------------------------------------------------------


def torchrun(*options: str) -> list[str]:
    return [PY, "-m", "torch.distributed.run", *options, "--no-python", PY, str(WORKER)]


def check_agent_store(found: list[dict[str, Any]]) -> None:
    """The coordinator is not MASTER_PORT (torchrun's agent store holds it), and torch was needed for it."""
    for record in found:
        top = record["topology"]
        assert record["coordinator_address"] != f"{top['main_address']}:{top['main_port']}"
        assert record["coordinator_address"].rsplit(":", 1)[0] == top["main_address"]
        assert record["torch_after"] is True


@pytest.mark.torchrun
def test_torchrun_two_workers_on_one_node(tmp_path: Path) -> None:
    require_tool("torchrun")
    require_module("torch", "torch")
    ours, plain, master = directories(tmp_path, "ours", "plain", "master")
    options = ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}"]
    rc, output = run([*torchrun(*options), "ours", str(ours)], clean_env())
    assert rc == 0, output
    check_agent_store(world(ours, 2, output))
    rc, output = run([*torchrun(*options), "plain", str(plain)], clean_env())
    measured = records(plain)
    text = report("torchrun --nproc-per-node=2, jax.distributed.initialize()", rc, measured)
    # measured: JAX detects nothing under torchrun and asks for the coordinator
    assert len(measured) == 2, text  # the worker catches the error and exits 0
    assert {outcome(r) for r in measured} == {"error ValueError: coordinator_address should be defined."}, text
    options[-1] = f"--rdzv-endpoint=127.0.0.1:{free_port()}"
    rc, output = run([*torchrun(*options), "master", str(master)], clean_env())
    measured = records(master)
    text = report("torchrun, jax.distributed.initialize(MASTER_ADDR:MASTER_PORT, WORLD_SIZE, RANK)", rc, measured)
    print(output[-3000:])
    # measured: the agent's store holds MASTER_PORT, JAX's coordinator cannot bind it, process 0 dies
    assert rc != 0, text
    assert "Failed to add port to server" in output, output[-5000:]
    assert outcome(measured[0]) != "ok 0/2", text


@pytest.mark.torchrun
def test_check_then_initialize_under_torchrun(tmp_path: Path) -> None:
    """Both meet through torchrun's agent store, under keys of their own: the check, then JAX's port."""
    require_tool("torchrun")
    require_module("torch", "torch")
    (out,) = directories(tmp_path, "out")
    options = ["--nnodes=1", "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}"]
    rc, output = run([*torchrun(*options), "check", str(out)], clean_env())
    assert rc == 0, output
    found = world(out, 2, output)
    assert all(r["check"] == {"ok": True, "problems": []} for r in found), [r["check"] for r in found]
    check_agent_store(found)


@pytest.mark.torchrun
def test_torchrun_two_agents_as_two_nodes(tmp_path: Path) -> None:
    require_tool("torchrun")
    require_module("torch", "torch")
    ours, plain = directories(tmp_path, "ours", "plain")
    for mode, out in (("ours", ours), ("plain", plain)):
        common = ["--nnodes=2", "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={free_port()}"]
        agents = [
            subprocess.Popen(
                [*torchrun(*common, f"--node-rank={rank}"), mode, str(out)],
                env=clean_env({"CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"}),  # two nodes emulated on one host
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            for rank in (0, 1)
        ]
        outputs, codes = [], []
        for agent in agents:
            try:
                outputs.append(agent.communicate(timeout=TIMEOUT)[0])
            except subprocess.TimeoutExpired:
                for each in agents:
                    os.killpg(each.pid, signal.SIGKILL)
                pytest.fail(f"torchrun agents ({mode}) did not finish in {TIMEOUT} s")
            codes.append(agent.returncode)
        output = "\n".join(outputs)
        if mode == "ours":
            assert codes == [0, 0], output[-5000:]
            found = world(ours, 4, output)
            assert [r["topology"]["node_rank"] for r in found] == [0, 0, 1, 1]
            check_agent_store(found)
        else:
            measured = records(plain)
            text = report("two torchrun agents, jax.distributed.initialize()", max(codes), measured)
            assert len(measured) == 4, text
            assert {outcome(r) for r in measured} == {"error ValueError: coordinator_address should be defined."}, text


# -- a proxy in front of the coordinator (issue 33, point 5): what JAX does, and what initialize() does ---------

PROXY_PROBE = """
import sys, jax
jax.distributed.initialize(coordinator_address=sys.argv[1], num_processes=1, process_id=0, initialization_timeout=4)
print("initialized", jax.process_count(), flush=True)
jax.distributed.shutdown()
"""


class _Proxy:
    """A listener that records the first bytes of each connection and closes it: a proxy that never connects on."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.seen: list[bytes] = []
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                with contextlib.suppress(OSError):
                    self.seen.append(conn.recv(200))

    def close(self) -> None:
        self.stop = True
        self.thread.join(5)
        self.sock.close()


@pytest.mark.parametrize("variable", ["grpc_proxy", "https_proxy", "http_proxy", "HTTP_PROXY"])
def test_what_jax_does_with_a_proxy_variable(variable: str) -> None:
    """JAX 0.10.2's coordinator client goes through gRPC's proxy (lower-case names only): with a proxy that
    never connects on, the client sends it CONNECT and initialize fails; HTTP_PROXY is not read."""
    proxy = _Proxy()
    try:
        coordinator = f"127.0.0.1:{free_port()}"
        env = clean_env({variable: f"http://127.0.0.1:{proxy.port}"})
        for name in ("grpc_proxy", "https_proxy", "http_proxy", "no_grpc_proxy", "no_proxy"):
            if name != variable:
                env.pop(name, None)
        code, output = run([PY, "-c", PROXY_PROBE, coordinator], env)
    finally:
        proxy.close()
    print(f"{variable}: exit {code}; the proxy saw {proxy.seen[:1]!r}")
    if variable == "HTTP_PROXY":
        assert code == 0 and "initialized 1" in output and not proxy.seen, output[-2000:]
        return
    assert code != 0 and "initialized" not in output, output[-2000:]
    assert proxy.seen and proxy.seen[0].startswith(f"CONNECT {coordinator} ".encode()), proxy.seen


def test_initialize_refuses_such_a_proxy_by_name_before_jax_starts() -> None:
    code = (
        "import resolver.integrations.jax as j\n"
        "try:\n"
        "    j.initialize({'MASTER_ADDR': '127.0.0.1', 'MASTER_PORT': '29999', 'WORLD_SIZE': '1', 'RANK': '0',"
        " 'LOCAL_RANK': '0', 'TORCHELASTIC_RUN_ID': 'p'})\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc.variable, exc)\n"
    )
    status, output = run([PY, "-c", code], clean_env({"http_proxy": "http://127.0.0.1:9"}))
    assert status == 0, output
    assert output.startswith("InvalidSettings http_proxy http_proxy=http://127.0.0.1:9 would carry JAX's coordinator")
    assert "add 127.0.0.1 to no_proxy" in output
