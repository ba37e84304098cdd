"""Every script in examples/ runs to completion (a smoke test, bounded in time): exit code 0,
some output, no warning (run with ``-W error``, like the tests)."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
TIMEOUT_S = 120  # a guard against hangs, not a timing claim: each script takes seconds


def test_examples_found() -> None:
    names = {p.name for p in EXAMPLES}
    assert {
        "quickstart.py",
        "ensemble_training.py",
        "checkpoint.py",
        "memmap_dataset.py",
        "rpc_fill.py",
        "map_preprocess.py",
    } <= names


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_is_a_documented_script(script: pathlib.Path) -> None:
    tree = ast.parse(script.read_text())
    assert ast.get_docstring(tree), f"{script.name}: no module docstring saying what it shows"
    assert 'if __name__ == "__main__":' in script.read_text(), f"{script.name}: no main guard"


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # this checkout's packages first, whatever is installed; run from a scratch folder
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
