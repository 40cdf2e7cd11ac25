"""AWS Batch multi-node parallel jobs, from the documented variables: the main node is node rank 0 on
every node, its own address is its host name, and the job facts reach a launcher's workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import probes
import resolver
from resolver import InvalidVariable, MissingVariable, ProbeFailed, TopologyError
from resolver.origin import Origin

MAIN_IP = "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"
HOSTNAME_NOTE = "the main node, which AWS Batch does not tell its address"


def node(index: int, *, nodes: int = 4, main: int = 0, attempt: int = 1) -> dict[str, str]:
    """Node `index` of an MNP job as AWS Batch sets it (mnp-env-vars.html, job_env_vars.html)."""
    env = {
        "AWS_BATCH_CE_NAME": "gpu-ce",
        "AWS_BATCH_JOB_ATTEMPT": str(attempt),
        "AWS_BATCH_JOB_ID": f"7c9a3e52-1f0b-4d7e-8a2c-5b6d4e3f2a10#{index}",
        "AWS_BATCH_JQ_NAME": "training",
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": str(main),
        "AWS_BATCH_JOB_NODE_INDEX": str(index),
        "AWS_BATCH_JOB_NUM_NODES": str(nodes),
    }
    if index != main:
        env[MAIN_IP] = "10.0.3.17"
    return env


def host(index: int) -> probes.Probes:
    return probes.fake(hostname=f"ip-10-0-3-{17 + index}.ec2.internal")


@pytest.mark.parametrize("main", [0, 2, 3])
def test_every_node_agrees_and_the_main_node_is_node_0(main: int) -> None:
    records = [resolver.resolve(node(i, main=main), host(i)) for i in range(4)]
    assert {t.source for t in records} == {"aws_batch"}
    assert sorted(t.node_rank for t in records) == [0, 1, 2, 3]
    assert records[main].node_rank == 0
    assert {(t.main_address, t.main_port) for i, t in enumerate(records) if i != main} == {("10.0.3.17", 29500)}
    assert records[main].main_address == f"ip-10-0-3-{17 + main}.ec2.internal"
    assert records[main].provenance["main_address"] == Origin.probe("hostname", note=HOSTNAME_NOTE)
    assert {(t.world_size, t.local_world_size, t.nproc_per_node) for t in records} == {(4, 1, None)}
    assert not any(t.creates_processes_externally for t in records)


@pytest.mark.parametrize("answer", ["", "not a host name", None])
def test_a_bad_hostname_answer_names_the_probe_not_its_note(answer: str | None) -> None:
    """The main node's address is the hostname probe's answer: a bad one is a ProbeFailed of `hostname`
    (the note, why the probe was asked, is no part of the probe's name)."""
    fake = probes.fake() if answer is None else probes.fake(hostname=answer)
    with pytest.raises(ProbeFailed) as info:
        resolver.resolve(node(0), fake)
    assert info.value.probe == "hostname"


def test_the_hostname_probe_and_its_note_are_kept_apart_in_the_provenance() -> None:
    t = resolver.resolve(node(0), host(0))
    assert t.to_dict()["provenance"]["main_address"] == {"kind": "probe", "name": "hostname", "note": HOSTNAME_NOTE}
    assert str(t.provenance["main_address"]) == f"probe:hostname ({HOSTNAME_NOTE})"  # as --format text shows it
    out = subprocess.run(
        [sys.executable, "-m", "resolver", "--format", "json", "--explain"],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(Path.cwd()), **node(0)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = json.loads(out.stdout)
    assert shown["explain"]["chosen"] == "aws_batch"
    assert shown["topology"]["provenance"]["main_address"] == {
        "kind": "probe",
        "name": "hostname",
        "note": HOSTNAME_NOTE,
    }


def test_master_addr_and_port_where_the_user_sets_them() -> None:
    t = resolver.resolve({**node(0), "MASTER_ADDR": "10.0.3.17", "MASTER_PORT": "6000"}, probes.fake())
    assert (t.main_address, t.main_port) == ("10.0.3.17", 6000)  # the main node asks no probe then


def test_job_facts_for_the_agent_and_for_torchruns_workers() -> None:
    t = resolver.resolve(node(1, attempt=3), host(1))
    assert (t.job_id, t.restart_count) == ("7c9a3e52-1f0b-4d7e-8a2c-5b6d4e3f2a10#1", 2)
    worker = {
        **node(1, attempt=3),
        "TORCHELASTIC_RUN_ID": "none",
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "GROUP_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "MASTER_ADDR": "10.0.3.17",
        "MASTER_PORT": "29500",
        "TORCHELASTIC_RESTART_COUNT": "0",
    }
    w = resolver.resolve(worker, probes.fake())
    assert (w.source, w.global_rank, w.job_id, w.restart_count) == ("torchelastic", 5, t.job_id, 2)
    assert w.provenance["restart_count"] == Origin.formula(
        "AWS_BATCH_JOB_ATTEMPT - 1 (3 - 1)", variables=("AWS_BATCH_JOB_ATTEMPT",)
    )


def test_a_single_node_job_is_not_this_source_but_keeps_its_facts() -> None:
    single = {"AWS_BATCH_JOB_ID": "a1b2", "AWS_BATCH_JOB_ATTEMPT": "1"}
    t = resolver.resolve(single, probes.fake(free_port=5000, which={}))
    assert (t.source, t.job_id, t.restart_count) == ("lightning", "a1b2", 0)


@pytest.mark.parametrize(
    ("environ", "variable", "error"),
    [
        ({**node(1), "AWS_BATCH_JOB_NODE_INDEX": "4"}, "AWS_BATCH_JOB_NODE_INDEX", InvalidVariable),
        ({**node(1), "AWS_BATCH_JOB_MAIN_NODE_INDEX": "9"}, "AWS_BATCH_JOB_MAIN_NODE_INDEX", InvalidVariable),
        ({k: v for k, v in node(1).items() if k != MAIN_IP}, MAIN_IP, MissingVariable),
        (
            {k: v for k, v in node(1).items() if k != "AWS_BATCH_JOB_MAIN_NODE_INDEX"},
            "AWS_BATCH_JOB_MAIN_NODE_INDEX",
            MissingVariable,
        ),
        ({**node(1), MAIN_IP: "10.0.3.17; reboot"}, MAIN_IP, InvalidVariable),
        ({**node(1), "AWS_BATCH_JOB_ATTEMPT": "0"}, "AWS_BATCH_JOB_ATTEMPT", InvalidVariable),
    ],
)
def test_errors_name_the_variable(environ: dict[str, str], variable: str, error: type[TopologyError]) -> None:
    with pytest.raises(error) as info:
        resolver.resolve(environ, host(1))
    assert info.value.variable == variable
