"""Real peers for the multi-process tests: a free local port, a launch of one spawned
process per rank that collects each rank's report and never hangs, and a fresh
TensorDictPipe pair over 127.0.0.1."""

from __future__ import annotations

import dataclasses
import queue
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import torch.multiprocessing as mp


def free_port() -> int:
    """A TCP port on 127.0.0.1 free at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclasses.dataclass
class Launch:
    """What a launch left: each reporting rank's report, the ranks killed at the deadline
    (a hang) and every process's exit code."""

    reports: dict[int, Any]
    stuck: list[int]
    exitcodes: list[int | None]


def launch(
    target: Callable[..., None],
    world: int,
    args_of: Callable[[int, Any], tuple[Any, ...]],
    timeout_s: float,
) -> Launch:
    """Run ``target(*args_of(rank, results))`` in ``world`` spawned processes, each putting
    ``(rank, report)`` on ``results``; wait at most ``timeout_s`` for every report (less
    when every process is gone: a crash reports nothing), then kill what still runs."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [
        ctx.Process(target=target, args=args_of(rank, results), daemon=True)
        for rank in range(world)
    ]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    reports: dict[int, Any] = {}
    while len(reports) < world and time.monotonic() < deadline:
        try:
            rank, report = results.get(timeout=1)
            reports[rank] = report
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                break
    for p in procs:
        p.join(timeout=10)
    stuck = [i for i, p in enumerate(procs) if p.is_alive()]
    for i in stuck:
        procs[i].kill()
        procs[i].join()
    return Launch(reports, stuck, [p.exitcode for p in procs])


def over_a_pipe(body: Callable[[Any, Any], Awaitable[Any]], timeout: float) -> Any:
    """``body(sender, receiver)`` over a fresh ``TensorDictPipe`` pair on 127.0.0.1, closed
    afterwards, within ``timeout`` seconds."""
    import asyncio

    from tensordict import TensorDictPipe

    async def main() -> Any:
        port = free_port()
        server = asyncio.ensure_future(TensorDictPipe.listen(port))
        sender = await TensorDictPipe.connect("127.0.0.1", port)
        receiver = await server
        async with sender, receiver:
            return await body(sender, receiver)

    return asyncio.run(asyncio.wait_for(main(), timeout))
