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
from tests.conftest import CAPTURES

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


def test_json_of_a_captured_env_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--format", "json", "--env-file", str(CAPTURE)], environ={}) == 0
    t = Topology.from_dict(json.loads(capsys.readouterr().out))
    assert (t.source, t.global_rank, t.world_size, t.node_rank) == ("torchelastic", 3, 4, 1)


def test_explain(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--explain", "--env-file", str(CAPTURE)], environ={}) == 0
    out = capsys.readouterr().out
    assert out.startswith("* torchelastic")
    assert "chosen: torchelastic: first match in detection order" in out
    assert main(["--explain", "--format", "json", "--env-file", str(CAPTURE)], environ={}) == 0
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
            ["--devices", "3", "--num-nodes", "1", "--env-file", str(CAPTURE)],
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
    out = run("--format", "env", "--env-file", str(CAPTURE))
    env = bash_env(f"eval {_shell_quote(out.stdout)}")
    assert (env["MASTER_ADDR"], env["RANK"], env["WORLD_SIZE"], env["NODE_RANK"]) == ("127.0.0.1", "3", "4", "1")


def test_version_is_the_package_version() -> None:
    out = run("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"cluster-topology {__version__}\n"
