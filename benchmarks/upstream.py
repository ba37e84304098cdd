"""Upstream's own benchmark suite, run on this library and on upstream tensordict 0.15.3.

``python -m benchmarks.upstream --mirror DIR [--rounds 3]`` needs upstream's repository
(a bare git directory, e.g. the conformance mirror ``../.mirror/pytorch+tensordict/repo``)
for the benchmark files, and a network-reachable package index: it makes a virtual
environment under ``/tmp/td-upstream-bench`` holding this project's torch, pytest-benchmark
and ``tensordict==0.15.3``. Each round runs the suite twice in that environment, once with
this repository first on ``PYTHONPATH`` (so ``import tensordict`` is ours) and once
without (upstream's), timing with process CPU time; rounds alternate, and a benchmark's
ratio (ours / upstream, of medians) is the median over rounds. Prints the counts (win
below 0.95, tie, lose above 1.05), the geometric mean, and every benchmark above 1.05.
The compile benchmarks are left out (minutes per round); pass ``--compile`` to add them.
Cases that allocate tens of MB per call (tensorclass ``clone``/``ones_like`` of 24 MB,
``consolidate(filename=)``, the model saves) swing up to 8x on either side with the
allocator's state (page faults of fresh memory, or reuse), so use three rounds or more.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = Path("/tmp/td-upstream-bench")
FILES = [
    "benchmarks/common/common_ops_test.py",
    "benchmarks/common/memmap_benchmarks_test.py",
    "benchmarks/common/pytree_benchmarks_test.py",
    "benchmarks/tensorclass/test_tensorclass_speed.py",
    "benchmarks/tensorclass/test_torch_functions.py",
    "benchmarks/nn/functional_benchmarks_test.py",
]
COMPILE = ["benchmarks/compile/compile_td_test.py", "benchmarks/compile/tensordict_nn_test.py"]


def _setup(mirror: str, files: list[str]) -> Path:
    """The environment and upstream's benchmark files (made once, then reused)."""
    python = WORK / "venv" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(WORK / "venv")], check=True)
        import torch

        pins = [f"torch=={torch.__version__.split('+')[0]}", "tensordict==0.15.3"]
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *pins, "pytest", "pytest-benchmark"],
            check=True,
        )
    for name in ["benchmarks/conftest.py", *files]:
        text = subprocess.run(
            ["git", f"--git-dir={mirror}", "show", f"HEAD:{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        target = WORK / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return python


def _run(python: Path, files: list[str], ours: bool, out: Path) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT) if ours else ""}
    subprocess.run(
        [
            str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *files,
            "--benchmark-max-time=0.02", "--benchmark-min-rounds=20",
            "--benchmark-timer=time.process_time", "--benchmark-disable-gc",
            f"--benchmark-json={out}",
        ],
        cwd=WORK, env=env, check=False, capture_output=True, timeout=3600,
    )  # fmt: skip
    data = json.loads(out.read_text())
    return {b["fullname"]: b["stats"]["median"] for b in data["benchmarks"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", required=True, help="upstream's bare git directory")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--compile", action="store_true", help="add the compile benchmarks")
    args = parser.parse_args()
    files = FILES + (COMPILE if args.compile else [])
    python = _setup(args.mirror, files)
    ratios: dict[str, list[float]] = {}
    for r in range(args.rounds):
        ours = _run(python, files, True, WORK / f"ours-{r}.json")
        theirs = _run(python, files, False, WORK / f"upstream-{r}.json")
        for name in ours.keys() & theirs.keys():
            ratios.setdefault(name, []).append(ours[name] / theirs[name])
    med = {name: statistics.median(r) for name, r in ratios.items()}
    win = sum(v < 0.95 for v in med.values())
    lose = sum(v > 1.05 for v in med.values())
    mean = math.exp(statistics.fmean(math.log(v) for v in med.values()))
    print(
        f"{len(med)} benchmarks on both: win {win}, tie {len(med) - win - lose}, "
        f"lose {lose}; geometric mean {mean:.2f}"
    )
    for name, v in sorted(med.items(), key=lambda kv: -kv[1]):
        if v > 1.05:
            print(f"  {v:5.2f}  {name}  (rounds: {', '.join(f'{x:.2f}' for x in ratios[name])})")


if __name__ == "__main__":
    main()
