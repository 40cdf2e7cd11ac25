from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resolver import Topology, __version__
from resolver.__main__ import main, render_env
from tests.conftest import CAPTURES, CAPTURES_HPC, read_capture

CAPTURE = CAPTURES / "torchrun" / "2node_static" / "rank3.env"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(Path.cwd())}
    return subprocess.run(
        [sys.executable, "-m", "resolver", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_text_on_this_machine() -> None:
    out = run()
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("lightning rank 0/1 local 0/? node 0/? main 127.0.0.1:")
    assert "probe:free_port" in out.stdout


# the torchrun capture's two nodes ran on one host (MASTER_ADDR=127.0.0.1)
EMULATED = "--allow-loopback"


def test_json_of_a_captured_env_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--format", "json", "--env-file", str(CAPTURE), EMULATED], environ={}) == 0
    t = Topology.from_dict(json.loads(capsys.readouterr().out))
    assert (t.source, t.global_rank, t.world_size, t.node_rank) == ("torchelastic", 3, 4, 1)


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explain", "--env-file", str(CAPTURE), EMULATED], environ={}) == 0
    out = capsys.readouterr().out
    assert out.startswith("* torchelastic")
    assert "chosen: torchelastic: first match in detection order" in out
    assert main(["--explain", "--format", "json", "--env-file", str(CAPTURE), EMULATED], environ={}) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["explain"]["chosen"] == "torchelastic" and data["topology"]["global_rank"] == 3


def test_forced_source(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "m", "MASTER_PORT": "2"}
    assert main(["--source", "kubeflow", "--format", "json"], environ=env) == 0
    assert json.loads(capsys.readouterr().out)["node_rank"] == 1


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            [],
            {"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "2", "RANK": "5", "LOCAL_RANK": "0"},
            "error: RANK='5' is invalid: expected < world_size (2) (world_size from WORLD_SIZE=2)",
        ),
        ([], {"TORCHELASTIC_RUN_ID": "x"}, "error: WORLD_SIZE is not set"),
        (["--source", "nope"], {}, "error: source='nope' is not a known source"),
        (["--env-file", "/does/not/exist"], {}, "error: --env-file '/does/not/exist' cannot be read"),
        (["--devices", "2"], {}, "error: --devices and --num-nodes go together"),
        (
            ["--devices", "3", "--num-nodes", "1", "--env-file", str(CAPTURE), EMULATED],
            {},
            "error: You set devices=3, but torchelastic started 2 processes",
        ),
        (["--devices", "0", "--num-nodes", "1"], {}, "error: devices=0 is invalid"),
    ],
)
def test_errors_are_one_line_exit_2_no_traceback(args: list[str], env: dict[str, str], message: str) -> None:
    out = run(*args, env=env)
    assert out.returncode == 2
    assert out.stderr.startswith(message), out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_json_errors_are_json() -> None:
    out = run("--format", "json", env={"TORCHELASTIC_RUN_ID": "x", "WORLD_SIZE": "w", "RANK": "0", "LOCAL_RANK": "0"})
    assert out.returncode == 2
    error = json.loads(out.stdout)["error"]
    assert error["type"] == "InvalidVariable" and error["variable"] == "WORLD_SIZE" and error["value"] == "w"


def test_bad_env_file_line(tmp_path: Path) -> None:
    bad = tmp_path / "env"
    bad.write_text("# comment\n\nexport A=1\nnot a line\n")
    out = run("--env-file", str(bad))
    assert out.returncode == 2
    assert f"{bad}:4" in out.stderr


def test_help_documents_everything() -> None:
    out = run("--help")
    for word in ("--format", "--source", "--explain", "--env-file", "--devices", "--num-nodes", "exit status"):
        assert word in out.stdout


def test_console_script_is_installed() -> None:
    import shutil

    script = shutil.which("cluster-topology")
    assert script is not None, "pip install -e . installs the cluster-topology console script"
    out = subprocess.run([script, "--format", "json"], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout)["source"] == "lightning"


def bash_env(script: str) -> dict[str, str]:
    out = subprocess.run(
        ["bash", "-c", script + "\nenv -0"],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        timeout=60,
        check=True,
    )
    return dict(item.split("=", 1) for item in out.stdout.decode().split("\0") if "=" in item)


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\0"), max_size=40))
def test_env_format_round_trips_through_bash_eval(name: str) -> None:
    t = Topology(
        source="slurm",
        world_size=2,
        global_rank=1,
        local_rank=0,
        node_rank=1,
        num_nodes=2,
        main_address="ci1",
        main_port=15010,
        creates_processes_externally=True,
        job_name=name,
        job_id="7",
    )
    exported = render_env(t)
    env = bash_env(f"eval {_shell_quote(exported)}")
    assert env["CLUSTER_TOPOLOGY_JOB_NAME"] == name
    assert env["MASTER_ADDR"] == "ci1" and env["RANK"] == "1" and env["CLUSTER_TOPOLOGY_JOB_ID"] == "7"


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def test_env_format_from_the_command_line() -> None:
    out = run("--format", "env", "--env-file", str(CAPTURE), EMULATED)
    env = bash_env(f"eval {_shell_quote(out.stdout)}")
    assert (env["MASTER_ADDR"], env["RANK"], env["WORLD_SIZE"], env["NODE_RANK"]) == ("127.0.0.1", "3", "4", "1")


def test_version_is_the_package_version() -> None:
    out = run("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"cluster-topology {__version__}\n"


# -- issue 15: warnings, --strict, loopback, a well-made Unix tool ------------------------------------

# node 1 of 2 under torchrun, with a MASTER_ADDR that every node can reach
TORCHRUN_NODE1 = {
    "TORCHELASTIC_RUN_ID": "7",
    "GROUP_RANK": "1",
    "GROUP_WORLD_SIZE": "2",
    "WORLD_SIZE": "4",
    "RANK": "2",
    "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "2",
    "MASTER_ADDR": "node0",
    "MASTER_PORT": "29500",
}
# the default source when LOCAL_RANK is set without MASTER_PORT: resolves with a warning
WARNED = {"LOCAL_RANK": "0", "PATH": "/nonexistent"}


@pytest.mark.parametrize("fmt", ["text", "json", "env"])
def test_every_format_prints_the_warnings_on_stderr(fmt: str) -> None:
    out = run("--format", fmt, env=WARNED)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("warning: LOCAL_RANK is set but MASTER_PORT is not"), out.stderr
    assert "warning:" not in out.stdout


@pytest.mark.parametrize("fmt", ["text", "json", "env"])
def test_strict_makes_a_warning_an_error(fmt: str) -> None:
    out = run("--format", fmt, "--strict", env=WARNED)
    assert out.returncode == 2
    assert out.stderr.startswith("error: strict: lightning rank 0/1"), out.stderr
    assert "warning: LOCAL_RANK is set but MASTER_PORT is not" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    if fmt == "json":
        assert json.loads(out.stdout)["error"]["type"] == "StrictWarnings"
    else:
        assert out.stdout == ""


def test_strict_without_warnings_resolves() -> None:
    out = run("--strict", "--format", "json", env=TORCHRUN_NODE1)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["node_rank"] == 1 and out.stderr == ""


@pytest.mark.parametrize(
    ("change", "origin"),
    [
        ({"MASTER_ADDR": "127.0.0.1"}, "env:MASTER_ADDR"),  # inherited from an eval in the batch script
        ({"MASTER_ADDR": "localhost"}, "env:MASTER_ADDR"),
        ({"MASTER_ADDR": "::1"}, "env:MASTER_ADDR"),
        ({"MASTER_ADDR": None}, "default:127.0.0.1"),  # torchrun node 1 of 2 without MASTER_ADDR
    ],
)
def test_a_loopback_address_across_nodes_is_refused(change: dict[str, str | None], origin: str) -> None:
    env = {k: v for k, v in {**TORCHRUN_NODE1, **change}.items() if v is not None}
    out = run(env=env)
    assert out.returncode == 2
    line = out.stderr.strip()
    assert len(line.splitlines()) == 1
    assert "not a loopback address" in line and f"(from {origin})" in line and "num_nodes=2" in line
    assert "HINT: set MASTER_ADDR" in line and "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK=1" in line
    # the documented opt-ins: a flag and a variable
    assert run("--allow-loopback", env=env).returncode == 0
    assert run(env={**env, "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "1"}).returncode == 0
    refused = run(env={**env, "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK": "yes"})
    assert refused.returncode == 2 and "CLUSTER_TOPOLOGY_ALLOW_LOOPBACK='yes' is invalid" in refused.stderr


def test_loopback_on_one_node_is_fine() -> None:
    one_node = {**TORCHRUN_NODE1, "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "WORLD_SIZE": "2", "RANK": "0"}
    assert run(env={**one_node, "MASTER_ADDR": "127.0.0.1"}).returncode == 0


def test_usage_names_the_command_typed() -> None:
    import shutil

    script = shutil.which("cluster-topology")
    assert script is not None
    out = subprocess.run([script, "--nope"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2 and out.stderr.startswith("usage: cluster-topology [options]")
    assert run("--nope").stderr.startswith("usage: python -m resolver [options]")
    assert run("exec", "--nope").stderr.startswith("usage: python -m resolver exec [options] -- PROGRAM")


def test_help_lists_every_source() -> None:
    from resolver import registered

    text = " ".join(run("--help").stdout.split())
    for source in registered():
        assert source.name in text


def test_a_closed_pipe_ends_quietly() -> None:
    script = f"set -o pipefail; {sys.executable} -m resolver --explain | head -1; echo status=$?"
    out = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(Path.cwd()), "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Traceback" not in out.stderr and "Error" not in out.stderr and "Exception" not in out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and lines[1] in ("status=0", "status=141")  # 141: as a tool SIGPIPE ended


MPI_ONE_NODE = {
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_RANK": "0",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_COMM_WORLD_LOCAL_RANK": "0",
    "MASTER_ADDR": "a",
    "MASTER_PORT": "1",
}


@pytest.mark.parametrize("columns", ["80", "60"])
def test_explain_lines_fit_the_terminal(columns: str) -> None:
    for env in ({}, MPI_ONE_NODE):
        out = run("--explain", env={**env, "COLUMNS": columns})
        assert out.returncode == 0, out.stderr
        explanation = out.stdout.split("\n\n")[0].splitlines()
        assert explanation[-1].startswith("chosen:") or any(x.startswith("chosen:") for x in explanation)
        assert max(len(line) for line in explanation) < int(columns)


def test_plural_forms() -> None:
    one = {**TORCHRUN_NODE1, "LOCAL_WORLD_SIZE": "1", "WORLD_SIZE": "2", "RANK": "1"}
    out = run("--devices", "2", "--num-nodes", "2", env=one)
    assert "torchelastic started 1 process on this node" in out.stderr
    out = run("--devices", "2", "--num-nodes", "1", env=TORCHRUN_NODE1)
    assert "torchelastic runs on 2 nodes" in out.stderr


def test_an_integer_past_18_digits_says_the_limit() -> None:
    out = run(env={**TORCHRUN_NODE1, "RANK": "1" * 19})
    assert out.returncode == 2 and "at most 18 digits" in out.stderr
    assert "at most 18 digits" in run("--devices", "9" * 19, "--num-nodes", "1").stderr


GPU_TASK = CAPTURES_HPC / "slurm-gpu" / "a3b_srun_N1_n4_gres4_nobind" / "task2.env"  # 4 tasks share GPUs 0-3


def test_exec_bind_device_gives_the_program_its_device_alone() -> None:
    env = read_capture(GPU_TASK)
    done = run(
        "exec",
        "--bind-device",
        "--",
        "sh",
        "-c",
        "echo $CUDA_VISIBLE_DEVICES $ROCR_VISIBLE_DEVICES $LOCAL_RANK",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "2", "2"]  # task 2's GPU, under every variable SLURM set
    plain = run("exec", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES", env=env)
    assert plain.stdout.split() == ["0,1,2,3"]  # without the option nothing is narrowed


def test_exec_bind_device_refuses_when_the_device_is_unknown() -> None:
    env = read_capture(GPU_TASK) | dict.fromkeys(
        ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "GPU_DEVICE_ORDINAL"), "0,1"
    )
    done = run("exec", "--bind-device", "--", "sh", "-c", "echo ran", env=env)
    assert done.returncode == 2 and "ran" not in done.stdout
    assert "cannot bind this process to its device" in done.stderr and "local_rank % 2" in done.stderr


def test_env_format_exports_the_narrowed_variables_when_asked() -> None:
    args = ("--env-file", str(GPU_TASK), "--format", "env")
    assert "CUDA_VISIBLE_DEVICES" not in run(*args).stdout
    bound = run(*args, "--bind-device")
    assert bound.returncode == 0, bound.stderr
    assert "export CUDA_VISIBLE_DEVICES=2\n" in bound.stdout and "export ZE_AFFINITY_MASK=2\n" in bound.stdout
    text = run("--env-file", str(GPU_TASK), "--bind-device")
    assert text.returncode == 2 and "--format env" in text.stderr


def test_text_shows_the_device_and_where_it_came_from() -> None:
    out = run("--env-file", str(GPU_TASK)).stdout
    assert " device 2/4 (2) " in out.splitlines()[0]
    assert any(line.split()[:2] == ["local_device", "2"] and "local_rank" in line for line in out.splitlines())
    explained = run("--env-file", str(GPU_TASK), "--explain").stdout
    assert "visible_devices" in explained and "env:CUDA_VISIBLE_DEVICES" in explained


# -- exec ----------------------------------------------------------------------------------------------


def test_exec_replaces_itself_with_the_program() -> None:
    script = "import os, signal; print(os.getpid(), os.environ['RANK'], os.environ['GROUP_RANK']); raise SystemExit(7)"
    probe = subprocess.Popen(
        [sys.executable, "-m", "resolver", "exec", "--", sys.executable, "-c", script],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(Path.cwd()), **TORCHRUN_NODE1},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = probe.communicate(timeout=60)
    assert probe.returncode == 7, err  # the program's exit status
    pid, rank, group = out.split()
    assert int(pid) == probe.pid  # the same process: exec, not a child
    assert (rank, group) == ("2", "1")


def test_exec_writes_the_env_variables_and_nothing_stale() -> None:
    # SLURM without SLURM_STEP_TASKS_PER_NODE: the tasks per node are unknown, so an inherited
    # LOCAL_WORLD_SIZE would be a stale answer: exec removes it
    slurm = {
        "SLURM_JOB_ID": "5",
        "SLURM_STEP_ID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_PROCID": "1",
        "SLURM_LOCALID": "0",
        "SLURM_NODEID": "1",
        "SLURM_STEP_NODELIST": "n[1-2]",
    }
    out = run("exec", "--", "env", env={**slurm, "LOCAL_WORLD_SIZE": "9", "RANK": "7"})
    assert out.returncode == 0, out.stderr
    seen = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
    names = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK")
    assert {k: seen.get(k) for k in names} == {
        "MASTER_ADDR": "n1",
        "MASTER_PORT": "15005",
        "WORLD_SIZE": "2",
        "RANK": "1",
        "LOCAL_RANK": "0",
        "NODE_RANK": "1",
        "GROUP_RANK": "1",
    }
    assert "LOCAL_WORLD_SIZE" not in seen
    assert (seen["CLUSTER_TOPOLOGY_SOURCE"], seen["CLUSTER_TOPOLOGY_NUM_NODES"]) == ("slurm", "2")


def test_exec_restores_the_default_sigpipe_for_the_program() -> None:
    out = run("exec", "--", "sh", "-c", "grep SigIgn /proc/self/status", env=TORCHRUN_NODE1)
    ignored = int(out.stdout.split()[1], 16)
    assert not ignored & (1 << (13 - 1)), out.stdout  # SIGPIPE (13) is not ignored


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--", "sh", "-c", "echo started"], {**TORCHRUN_NODE1, "RANK": "x"}, "error: RANK='x' is invalid"),
        (
            ["--", "sh", "-c", "echo started"],
            {**TORCHRUN_NODE1, "MASTER_ADDR": "127.0.0.1"},
            "error: MASTER_ADDR='127.0.0.1'",
        ),
        (["--strict", "--", "sh", "-c", "echo started"], WARNED, "error: strict:"),
        (["--", "no-such-program-here"], TORCHRUN_NODE1, "error: cannot run 'no-such-program-here'"),
    ],
)
def test_exec_errors_are_one_line_exit_2_and_the_program_never_starts(
    args: list[str], env: dict[str, str], message: str
) -> None:
    out = run("exec", *args, env=env)
    assert out.returncode == 2
    assert out.stderr.startswith(message), out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "started" not in out.stdout


def test_exec_without_a_program_is_a_usage_error() -> None:
    out = run("exec", "--strict")
    assert out.returncode == 2 and "no PROGRAM" in out.stderr


# -- the shell idiom -----------------------------------------------------------------------------------

IDIOM = 'set -euo pipefail\nenv="$(cluster-topology --format env)"\neval "$env"\necho "rank $RANK"\n'


@pytest.mark.parametrize(("extra", "rank"), [({}, "2"), ({"RANK": "x"}, None)])
def test_the_documented_shell_idiom_stops_the_script_when_resolution_fails(
    extra: dict[str, str], rank: str | None
) -> None:
    import shutil

    script = shutil.which("cluster-topology")
    assert script is not None
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert 'env="$(cluster-topology --format env)"\neval "$env"' in readme  # the idiom tested is the one documented
    out = subprocess.run(
        ["bash", "-c", IDIOM],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(Path.cwd()), **TORCHRUN_NODE1, **extra},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if rank is None:
        assert out.returncode == 2 and out.stdout == "" and "RANK='x' is invalid" in out.stderr
    else:
        assert out.returncode == 0 and out.stdout == f"rank {rank}\n", out.stderr


def test_the_plain_eval_idiom_carries_on() -> None:
    """Why the README's idiom has two lines: `eval "$(...)"` ignores the status even under set -e."""
    out = subprocess.run(
        ["bash", "-c", 'set -euo pipefail\neval "$(cluster-topology --format env)"\necho "rank ${RANK:-unset}"'],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(Path.cwd()), **TORCHRUN_NODE1, "RANK": "x"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.stdout == "rank x\n"  # RANK is the bad inherited value: the script went on


# -- --env-file is offline -----------------------------------------------------------------------------


def test_env_file_asks_this_machine_nothing(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text("LOCAL_RANK=0\nMASTER_PORT=29500\n")  # the default source: would ask which(srun)
    out = run("--format", "json", "--env-file", str(path))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["main_port"] == 29500
    no_port = tmp_path / "noport"
    no_port.write_text("WORLD_SIZE=1\n")
    out = run("--env-file", str(no_port))
    assert out.returncode == 2
    assert "probe 'free_port' failed: --env-file resolves offline" in out.stderr and "--free-port PORT" in out.stderr
    out = run("--format", "json", "--env-file", str(no_port), "--free-port", "4242")
    assert json.loads(out.stdout)["main_port"] == 4242


def test_env_file_of_an_open_mpi_rank_does_not_start_mpi(tmp_path: Path) -> None:
    capture = CAPTURES / "openmpi"
    rank = sorted(capture.glob("*/rank*.env"))[0]
    out = run("--env-file", str(rank), env={"OMPI_MCA_no_such": "1"})
    assert out.returncode == 2
    assert "probe 'comm' failed: --env-file resolves offline" in out.stderr
    assert "capture MASTER_ADDR, MASTER_PORT" in out.stderr and "mpi4py" not in out.stderr


def test_env_file_files_and_hostname_come_from_the_command_line(tmp_path: Path) -> None:
    from resolver.testing import lsf_env

    task = lsf_env(rank=4, hosts=("a01n01", "a01n02"), tasks_per_host=3)
    path = next(p for p in task.files if p.endswith("rankfile"))
    copy = tmp_path / "rankfile"
    copy.write_text(task.files[path])
    env = tmp_path / "env"
    env.write_text("".join(f"{k}={v}\n" for k, v in task.environ.items()))
    out = run("--format", "json", "--env-file", str(env))
    assert out.returncode == 2 and f"pass --file {path}" in out.stderr
    out = run("--format", "json", "--env-file", str(env), "--file", f"{path}={copy}", "--hostname", task.hostname)
    assert out.returncode == 0, out.stderr
    assert (json.loads(out.stdout)["node_rank"], json.loads(out.stdout)["main_address"]) == (1, "a01n01")
    assert "use them with --env-file" in run("--hostname", "x").stderr


def test_env_file_reads_proc_environ_and_its_own_env_format(tmp_path: Path) -> None:
    env = {**TORCHRUN_NODE1, "CLUSTER_TOPOLOGY_JOB_NAME": "it's\na job"}
    nul = tmp_path / "environ"
    nul.write_bytes(b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
    from_nul = run("--format", "env", "--env-file", str(nul))
    assert from_nul.returncode == 0, from_nul.stderr
    exported = tmp_path / "exported"
    exported.write_text(from_nul.stdout)
    again = run("--format", "env", "--env-file", str(exported), "--source", "lightning")
    assert again.returncode == 0, again.stderr
    assert bash_env(f"eval {_shell_quote(again.stdout)}")["RANK"] == "2"
    from resolver.__main__ import parse_env_file

    assert parse_env_file(str(exported))["MASTER_ADDR"] == "node0"
    quoted = tmp_path / "quoted"
    quoted.write_text("export A='it'\"'\"'s\nnext'\nB=plain value\n")
    assert parse_env_file(str(quoted)) == {"A": "it's\nnext", "B": "plain value"}


# -- the command's shape ---------------------------------------------------------------------------------


def test_the_env_file_is_parsed_once(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--explain` and the resolution read the same captured environment: one read, one parse."""
    import resolver._offline
    from resolver._envfile import parse_env_file as parse

    reads: list[str] = []

    def counted(path: str) -> dict[str, str]:
        reads.append(path)
        return parse(path)

    monkeypatch.setattr(resolver._offline, "parse_env_file", counted)
    assert main(["--explain", "--format", "json", "--env-file", str(CAPTURE), EMULATED], environ={}) == 0
    assert reads == [str(CAPTURE)]
    assert json.loads(capsys.readouterr().out)["explain"]["chosen"] == "torchelastic"


def test_exec_sets_exactly_what_the_env_format_exports(tmp_path: Path) -> None:
    """`exec` and `--format env` share one computation: the program's environment is the exported lines."""
    options = ("--env-file", str(GPU_TASK), "--bind-device")
    exported = run("--format", "env", *options)
    assert exported.returncode == 0, exported.stderr
    lines = tmp_path / "exported.env"
    lines.write_text(exported.stdout)
    from resolver.__main__ import parse_env_file

    expected = parse_env_file(str(lines))
    assert {"RANK", "MASTER_ADDR", "CUDA_VISIBLE_DEVICES", "CLUSTER_TOPOLOGY_SOURCE"} <= set(expected)
    names = " ".join(expected)
    dump = f'for name in {names}; do printf "%s=%s\\0" "$name" "$(printenv "$name")"; done'
    child = run("exec", *options, "--", "bash", "-c", dump)
    assert child.returncode == 0, child.stderr
    received = dict(item.split("=", 1) for item in child.stdout.split("\0") if item)
    assert received == expected


def test_the_command_module_only_wires() -> None:
    """`resolver/__main__.py` parses arguments and dispatches: inputs, probes and formats live elsewhere."""
    import ast
    import inspect

    import resolver.__main__ as command

    source = inspect.getsource(command)
    assert len(source.splitlines()) <= 250
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {"json", "shlex", "textwrap", "signal", "probes.tcp"} & imported  # resolver/_render.py, _exec.py


def test_every_command_is_in_the_usage_and_the_help() -> None:
    from resolver.__main__ import COMMANDS

    out = run("--help").stdout
    usage = out.split("\n\n")[0]
    for name in COMMANDS:
        assert f"python -m resolver {name} " in usage
        assert f"\n  {name} " in out.split("commands:")[1]
        assert run(name, "--help").stdout.startswith(f"usage: python -m resolver {name} ")
