"""``python -m benchmarks [--only NAME] [--rounds N] [--cpu-time]``: run the cases, print a
Markdown table."""

from __future__ import annotations

import argparse
import time

import torch

from benchmarks import (
    _cases_checkpoint,
    _cases_checkpoint_v2,
    _cases_compile,
    _cases_container,
    _cases_distributed,
    _cases_floors,
    _cases_interop,
    _cases_lazy,
    _cases_load,
    _cases_map,
    _cases_mapping,
    _cases_modules,
    _cases_nn,
    _cases_overhead,
    _cases_pack,
    _cases_repr,
    _cases_shapes,
    _cases_swap,
    _cases_tensorclass,
    _cases_typed,
)
from benchmarks._harness import CLOCK, Case, measure, table

ALL: list[Case] = [
    *_cases_container.CASES,
    *_cases_mapping.CASES,
    *_cases_shapes.CASES,
    *_cases_lazy.CASES,
    *_cases_tensorclass.CASES,
    *_cases_typed.CASES,
    *_cases_overhead.CASES,
    *_cases_floors.CASES,
    *_cases_pack.CASES,
    *_cases_checkpoint.CASES,
    *_cases_checkpoint_v2.CASES,
    *_cases_load.CASES,
    *_cases_interop.CASES,
    *_cases_modules.CASES,
    *_cases_swap.CASES,
    *_cases_nn.CASES,
    *_cases_compile.CASES,
    *_cases_repr.CASES,
    *_cases_map.CASES,  # before the distributed cases: their peer process stays up until exit
    *_cases_distributed.CASES,
]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--only", help="run the cases whose name contains this text")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with thread CPU time (steadier under load)"
    )
    args = parser.parse_args()
    if args.cpu_time:
        CLOCK[0] = time.thread_time
    torch.set_num_threads(1)
    cases = [c for c in ALL if args.only is None or args.only in c.name]
    if not cases:
        raise SystemExit(f"no benchmark case matches {args.only!r}")
    results = []
    for case in cases:
        results.append(measure(case, rounds=args.rounds))
        print(f"{case.name}: {results[-1].ratio:.2f}x", flush=True)
    print()
    print(table(results))


if __name__ == "__main__":
    main()
