"""The timing harness: library and baseline interleaved, medians and same-run ratios."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

Fn = Callable[[], object]

# The clock every timing reads: wall time by default; ``--cpu-time`` switches to this
# thread's CPU time, which a loaded machine disturbs far less (time spent waiting for a
# core is not counted; the cases run torch on one thread).
CLOCK: list[Callable[[], float]] = [time.perf_counter]


@dataclass(frozen=True)
class Case:
    """One comparison: ``setup()`` returns (library callable, baseline callable)."""

    name: str
    baseline: str
    target: float | None
    setup: Callable[[], tuple[Fn, Fn]]
    rounds: int | None = None  # heavy cases (hundreds of MB per call) run fewer rounds


@dataclass(frozen=True)
class Result:
    case: Case
    lib_s: float
    base_s: float
    ratio: float


def _calibrate(fn: Fn, budget_s: float) -> int:
    """How many calls of ``fn`` fill about ``budget_s``."""
    n = 1
    while True:
        start = CLOCK[0]()
        for _ in range(n):
            fn()
        elapsed = CLOCK[0]() - start
        if elapsed >= budget_s / 4 or n >= 1 << 20:
            return max(1, int(n * budget_s / max(elapsed, 1e-9)))
        n *= 4


def _batch(fn: Fn, n: int) -> float:
    start = CLOCK[0]()
    for _ in range(n):
        fn()
    return (CLOCK[0]() - start) / n


def measure(case: Case, rounds: int = 21, budget_s: float = 0.01) -> Result:
    """Time both callables in alternating batches; the ratio is the median of per-round ratios.

    Pairing each library batch with the baseline batch next to it cancels most of the
    drift of a shared, noisy machine; absolute times are reported but mean little.
    """
    rounds = case.rounds or rounds
    lib, base = case.setup()
    lib()
    base()  # warm up both (lazy imports, allocator)
    n_lib = _calibrate(lib, budget_s)
    n_base = _calibrate(base, budget_s)
    lib_times, base_times, ratios = [], [], []
    gc.collect()
    gc.disable()
    try:
        for i in range(rounds):
            if i % 2:
                b = _batch(base, n_base)
                t = _batch(lib, n_lib)
            else:
                t = _batch(lib, n_lib)
                b = _batch(base, n_base)
            lib_times.append(t)
            base_times.append(b)
            ratios.append(t / b)
    finally:
        gc.enable()
    return Result(
        case, statistics.median(lib_times), statistics.median(base_times), statistics.median(ratios)
    )


def _fmt_time(seconds: float) -> str:
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    return f"{seconds * 1e3:.2f} ms"


def table(results: list[Result]) -> str:
    """A Markdown table of the results."""
    lines = [
        "| case | baseline | library | baseline time | ratio | target | ok |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        target = "" if r.case.target is None else f"<= {r.case.target:g}x"
        ok = "" if r.case.target is None else ("yes" if r.ratio <= r.case.target else "NO")
        lines.append(
            f"| {r.case.name} | {r.case.baseline} | {_fmt_time(r.lib_s)} | "
            f"{_fmt_time(r.base_s)} | {r.ratio:.2f}x | {target} | {ok} |"
        )
    return "\n".join(lines)
