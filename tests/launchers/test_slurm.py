"""Real SLURM: every task's `python -m resolver --format json` equals what SLURM itself says of that task.

SLURM's own word: `srun -l` labels each line with the task id, `SLURMD_NODENAME` names the node a
task ran on, `scontrol show hostnames` expands the step's nodelist. A gloo group formed through
`apply` passes an all_reduce.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from resolver.origin import Origin
from tests.launchers.slurm_cluster import Cluster

pytestmark = pytest.mark.slurm
ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
REPORT = f"{PY} {ROOT / 'tests' / 'launchers' / 'report.py'}"
WORKER = f"{PY} {ROOT / 'tests' / 'launchers' / 'worker.py'} --truth slurm"


def env() -> dict[str, str]:
    return {"PYTHONPATH": str(ROOT)}


def labelled(stdout: str) -> dict[int, list[str]]:
    """`srun -l` output: the chunks of each task id (srun cuts long lines into labelled chunks)."""
    out: dict[int, list[str]] = defaultdict(list)
    for line in stdout.splitlines():
        match = re.match(r"\s*(\d+): (.*)", line)
        if match:
            out[int(match[1])].append(match[2])
    return dict(out)


def hostnames(cluster: Cluster, nodelist: str) -> list[str]:
    res = cluster.run(["scontrol", "show", "hostnames", nodelist], timeout=60)
    assert res.returncode == 0, res.stderr
    return res.stdout.split()


def reports(cluster: Cluster, stdout: str) -> dict[int, dict[str, Any]]:
    rows = {}
    for task, lines in labelled(stdout).items():
        row = json.loads("".join(lines))
        assert row["rc"] == 0, row["err"]
        rows[task] = row
    return rows


def check_step(cluster: Cluster, rows: dict[int, dict[str, Any]], ntasks: int, nodes: list[str]) -> None:
    """Every task against SLURM's own word; all agree on the main endpoint."""
    assert sorted(rows) == list(range(ntasks))
    per_node: dict[str, int] = defaultdict(int)
    for row in rows.values():
        per_node[row["node"]] += 1
    for task, row in rows.items():
        t = row["topology"]
        assert t["source"] == "slurm", t
        assert (t["global_rank"], t["world_size"]) == (task, ntasks)
        assert t["node_rank"] == nodes.index(row["node"])
        assert t["num_nodes"] == len(nodes)
        assert t["local_world_size"] == per_node[row["node"]]
        assert t["main_address"] == nodes[0]
        assert t["creates_processes_externally"] is True
    assert sorted(r["topology"]["local_rank"] for r in rows.values() if r["node"] == nodes[0]) == list(
        range(per_node[nodes[0]])
    )
    assert len({(r["topology"]["main_address"], r["topology"]["main_port"]) for r in rows.values()}) == 1


def srun(cluster: Cluster, args: str, command: str = REPORT, timeout: float = 180) -> str:
    res = cluster.run(f"srun -l {args} {command}", env=env(), timeout=timeout)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_srun_two_nodes_places_three_and_one(slurm_cluster: Cluster) -> None:
    rows = reports(slurm_cluster, srun(slurm_cluster, "-N2 -n4"))
    nodes = sorted({r["node"] for r in rows.values()})
    check_step(slurm_cluster, rows, 4, nodes)
    assert sorted(r["topology"]["local_world_size"] for r in rows.values()) == [1, 3, 3, 3]


@pytest.mark.parametrize("plugin", ["pmix", "pmi2"])
def test_srun_with_an_mpi_plugin_stays_slurm(slurm_cluster: Cluster, plugin: str) -> None:
    """`srun --mpi=pmix|pmi2` also writes PMIx/PMI variables: it is still SLURM's launch, SLURM's ranks."""
    rows = reports(slurm_cluster, srun(slurm_cluster, f"--mpi={plugin} -N2 -n3"))
    nodes = sorted({r["node"] for r in rows.values()})
    check_step(slurm_cluster, rows, 3, nodes)
    for task, row in rows.items():
        rank = row["pmi"]["PMIX_RANK" if plugin == "pmix" else "PMI_RANK"]
        assert int(rank) == task, row["pmi"]  # the plugin's rank is SLURM's task id


def test_srun_bash_c_is_a_launch_and_a_gloo_group_forms(slurm_cluster: Cluster) -> None:
    out = srun(slurm_cluster, "-N2 -n4 --job-name=bash", f"bash -c '{WORKER}'")
    rows = {task: json.loads("".join(lines)) for task, lines in labelled(out).items()}
    assert sorted(rows) == [0, 1, 2, 3]
    for task, row in rows.items():
        t = row["topology"]
        assert t["source"] == "slurm"
        assert {k: t[k] for k in row["truth"]} == row["truth"]
        assert t["global_rank"] == task
        assert row["sum"] == 10.0


def test_a_heterogeneous_step_is_one_world(slurm_cluster: Cluster) -> None:
    """`srun A : B` runs the components' tasks as one step: one world of 3 + 2 ranks, one gloo group."""
    rows = reports(slurm_cluster, srun(slurm_cluster, "-N2 -n3 : -N1 -n2"))
    nodes = sorted({r["node"] for r in rows.values()})
    assert len(nodes) == 3  # components never share a node on this cluster
    check_step(slurm_cluster, rows, 5, nodes)
    out = srun(slurm_cluster, "-N2 -n3 : -N1 -n2", WORKER)
    gloo = {task: json.loads("".join(lines)) for task, lines in labelled(out).items()}
    assert sorted(gloo) == [0, 1, 2, 3, 4]
    for task, row in gloo.items():
        t = row["topology"]
        assert {k: t[k] for k in row["truth"]} == row["truth"]
        assert (t["source"], t["global_rank"], row["sum"]) == ("slurm", task, 15.0)


def test_one_task_named_bash_or_interactive_is_a_shell(slurm_cluster: Cluster) -> None:
    for name in ("bash", "interactive"):
        rows = reports(slurm_cluster, srun(slurm_cluster, f"-n1 --job-name={name}"))
        t = rows[0]["topology"]
        assert (t["source"], t["world_size"]) == ("lightning", 1)


def test_sbatch_batch_script_and_a_one_node_step_inside_a_two_node_job(slurm_cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"{REPORT} > {tmp_path}/batch.json\n"
        # 2 + 1 of the job's 2 + 2 (the step inherits SLURM_NTASKS_PER_NODE=2, which no longer fits)
        f"srun -l -N2 -n3 {REPORT} > {tmp_path}/step0.txt\n"
        f"srun -l -N1 -n2 -w $(scontrol show hostnames $SLURM_JOB_NODELIST | tail -1) {REPORT} > {tmp_path}/step1.txt\n"
        f"srun -l -N2 -n2 {WORKER} > {tmp_path}/gloo.txt\n"
    )
    res = slurm_cluster.run(
        ["sbatch", "--wait", "-N2", "--ntasks-per-node=2", "-o", str(tmp_path / "out.txt"), str(script)],
        env=env(),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr + (tmp_path / "out.txt").read_text()
    batch = json.loads((tmp_path / "batch.json").read_text())["topology"]
    assert (batch["source"], batch["world_size"], batch["global_rank"]) == ("lightning", 1, 0)
    assert any("batch script itself" in w for w in batch["warnings"])

    step0 = reports(slurm_cluster, (tmp_path / "step0.txt").read_text())
    job_nodes = sorted({r["node"] for r in step0.values()})
    check_step(slurm_cluster, step0, 3, job_nodes)

    step1 = reports(slurm_cluster, (tmp_path / "step1.txt").read_text())
    check_step(slurm_cluster, step1, 2, [job_nodes[-1]])
    assert step1[0]["topology"]["main_address"] == job_nodes[-1]  # the step's node, not the job's first
    assert step1[0]["topology"]["step_id"] == "1"

    gloo = {task: json.loads("".join(lines)) for task, lines in labelled((tmp_path / "gloo.txt").read_text()).items()}
    assert [gloo[t]["sum"] for t in sorted(gloo)] == [3.0, 3.0]


def test_salloc_then_srun(slurm_cluster: Cluster) -> None:
    res = slurm_cluster.run(f"salloc -N2 -n2 srun -l {REPORT}", env=env(), timeout=180)
    assert res.returncode == 0, res.stderr
    rows = reports(slurm_cluster, res.stdout)
    check_step(slurm_cluster, rows, 2, sorted({r["node"] for r in rows.values()}))


def test_array_job(slurm_cluster: Cluster, tmp_path: Path) -> None:
    script = tmp_path / "array.sh"
    script.write_text(f"#!/bin/bash\nsrun -l -n2 {REPORT} > {tmp_path}/task$SLURM_ARRAY_TASK_ID.txt\n")
    res = slurm_cluster.run(
        ["sbatch", "--wait", "--array=0-1", "-n2", "-o", str(tmp_path / "out-%a.txt"), str(script)],
        env=env(),
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    seen = {}
    for task in (0, 1):
        rows = reports(slurm_cluster, (tmp_path / f"task{task}.txt").read_text())
        check_step(slurm_cluster, rows, 2, sorted({r["node"] for r in rows.values()}))
        t = rows[0]["topology"]
        assert t["array_task_id"] == str(task)
        seen[task] = (t["array_job_id"], t["job_id"])
    assert seen[0][0] == seen[1][0]  # one array job, two job ids
    assert seen[0][1] != seen[1][1]


def test_requeue_on_signal(slurm_cluster: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "callback-runs"
    script = tmp_path / "requeue.sh"
    body = (
        "import os, pathlib, signal, time, resolver.requeue\n"
        f"marker = pathlib.Path({str(marker)!r})\n"
        "restart = int(os.environ.get('SLURM_RESTART_COUNT', '0'))\n"
        "if restart > 0:\n"
        "    pathlib.Path(str(marker) + '.restarted').write_text(str(restart))\n"
        "    raise SystemExit(0)\n"
        "def save():\n"
        "    with marker.open('a') as f: f.write('ran\\n')\n"
        "with resolver.requeue.on_signal(save):\n"
        "    pathlib.Path(str(marker) + '.ready').write_text('1')\n"
        "    time.sleep(120)\n"
    )
    (tmp_path / "train.py").write_text(body)
    script.write_text(f"#!/bin/bash\nexec {PY} {tmp_path / 'train.py'}\n")
    res = slurm_cluster.run(["sbatch", "--parsable", "-o", str(tmp_path / "out.txt"), str(script)], env=env())
    assert res.returncode == 0, res.stderr
    job = res.stdout.strip().split(";")[0]
    _wait(Path(str(marker) + ".ready"), 120)
    sig = slurm_cluster.run(["scancel", "--batch", "--signal=USR1", job])
    assert sig.returncode == 0, sig.stderr
    restarted = _wait(Path(str(marker) + ".restarted"), 240)
    assert restarted == "1"
    assert marker.read_text() == "ran\n"  # the callback ran exactly once


def _wait(path: Path, timeout: float) -> str:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.5)
    pytest.fail(f"{path} did not appear within {timeout} s")


def test_arbitrary_distribution_puts_the_main_address_on_task_0_s_node(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """`--distribution=arbitrary`: task 0 on the hostfile's first host (ci2), though the nodelist says ci[1-2]."""
    hostfile = tmp_path / "hosts"
    hostfile.write_text("ci2\nci2\nci1\nci1\n")
    res = slurm_cluster.run(
        f"srun -l -N2 -n4 --distribution=arbitrary {REPORT}", env={**env(), "SLURM_HOSTFILE": str(hostfile)}
    )
    assert res.returncode == 0, res.stderr
    rows = reports(slurm_cluster, res.stdout)
    assert [rows[task]["node"] for task in range(4)] == ["ci2", "ci2", "ci1", "ci1"]  # SLURM's own placement
    for task, row in rows.items():
        t = row["topology"]
        assert (t["source"], t["global_rank"], t["world_size"]) == ("slurm", task, 4)
        assert t["node_rank"] == ["ci1", "ci2"].index(row["node"])  # SLURM_NODEID follows the sorted nodelist
        assert t["main_address"] == rows[0]["node"] == "ci2"
        assert (
            str(Origin.from_dict(t["provenance"]["main_address"])) == "probe:read_text (first host of SLURM_HOSTFILE)"
        )
    gloo = slurm_cluster.run(
        f"srun -l -N2 -n4 --distribution=arbitrary {WORKER}", env={**env(), "SLURM_HOSTFILE": str(hostfile)}
    )
    assert gloo.returncode == 0, gloo.stderr
    sums = {task: json.loads("".join(lines))["sum"] for task, lines in labelled(gloo.stdout).items()}
    assert sums == dict.fromkeys(range(4), 10.0)


def test_two_concurrent_steps_on_one_node_each_form_their_group(slurm_cluster: Cluster, tmp_path: Path) -> None:
    """Two `srun --exact` steps at once on one node: distinct ports, so both gloo groups form."""
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f"srun -l --exact -n2 {WORKER} > {tmp_path}/a.txt &\n"
        f"srun -l --exact -n2 {WORKER} > {tmp_path}/b.txt &\n"
        "wait\n"
    )
    res = slurm_cluster.run(
        ["sbatch", "--wait", "-N1", "-n4", "-o", str(tmp_path / "out.txt"), str(script)], env=env(), timeout=300
    )
    assert res.returncode == 0, res.stderr + (tmp_path / "out.txt").read_text()
    steps = []
    for name in ("a", "b"):
        rows = {t: json.loads("".join(lines)) for t, lines in labelled((tmp_path / f"{name}.txt").read_text()).items()}
        assert [rows[t]["sum"] for t in sorted(rows)] == [3.0, 3.0], (tmp_path / "out.txt").read_text()
        ports = {row["topology"]["main_port"] for row in rows.values()}
        step_ids = {row["topology"]["step_id"] for row in rows.values()}
        assert len(ports) == 1 and len(step_ids) == 1
        steps.append((ports.pop(), step_ids.pop()))
    (port_a, step_a), (port_b, step_b) = steps
    assert {step_a, step_b} == {"0", "1"}
    assert port_a != port_b
