"""`import resolver` and a resolve must not pull in torch, mpi4py, torch_xla or importlib.metadata."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = ("torch", "mpi4py", "torch_xla", "numpy", "importlib.metadata", "argparse")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nimport json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PYTHONPATH": str(Path.cwd())},
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def test_import_and_resolve_stay_light() -> None:
    modules = loaded_after("import os, resolver; resolver.resolve(os.environ); resolver.explain(os.environ)")
    assert not {m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY}
    assert "probes.nonblocking" not in modules  # the MPI polling code: only once a comm is asked


def test_every_public_name_is_exported() -> None:
    import resolver

    for name in resolver.__all__:
        assert hasattr(resolver, name), name


def test_the_testing_kit_imports_no_test_dependency() -> None:
    # hypothesis comes with the first strategy; jsonschema is the user's (topology_schema() only reads the file)
    modules = loaded_after("import resolver.testing")
    assert not {m for m in modules if m.split(".")[0] in ("hypothesis", "jsonschema", *HEAVY)}
    assert "resolver.testing.strategies" in modules  # the probe really imported the kit
