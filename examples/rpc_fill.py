"""Two RPC workers on this machine share a memory-mapped TensorDict through its files.

Worker 0 creates a TensorDict on disk and asks worker 1, through
``torch.distributed.rpc.rpc_sync``, to fill some rows with ones. The TensorDict travels
as a reference to its files (a few hundred bytes whatever its size), worker 1 writes
into the same files, and worker 0 sees the writes. Run: ``python examples/rpc_fill.py``.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
import time
import warnings

import torch
import torch.multiprocessing as mp
from torch.distributed import rpc

from tensordict import CloudpickleWrapper, MemoryMappedTensor, TensorDict

TIMEOUT_S = 20


def fill_tensordict(tensordict: TensorDict, idx: list[int]) -> TensorDict:
    """Runs on worker 1: write ones at rows ``idx`` (straight into the shared files)."""
    tensordict[idx] = TensorDict(
        {"memmap": torch.ones(len(idx), 64, 64, 3, dtype=torch.uint8)}, [len(idx)]
    )
    return tensordict


def worker(rank: int, port: int, folder: str) -> None:
    # torch's own RPC agent trips one of torch's deprecation warnings: not ours to fix
    warnings.filterwarnings("ignore", message="You are using a Backend", category=UserWarning)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=TIMEOUT_S
    )
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    try:
        if rank == 0:
            tensordict = TensorDict(
                {
                    "memmap": MemoryMappedTensor.empty(
                        1000, 64, 64, 3, dtype=torch.uint8, filename=os.path.join(folder, "data")
                    )
                },
                [1000],
            )
            fill_tensordict_cp = CloudpickleWrapper(fill_tensordict)
            idx = [4, 5, 6, 7, 998]
            t0 = time.time()
            out = rpc.rpc_sync("worker1", fill_tensordict_cp, args=(tensordict, idx))
            print(f"time elapsed: {time.time() - t0:.3f} s")
            print("check all ones:", out["memmap"][idx, :1, :1, :1].clone().flatten().tolist())
            assert bool((tensordict["memmap"][idx] == 1).all()), (
                "the caller does not see the writes"
            )
            assert int(tensordict["memmap"][8].sum()) == 0, "a row that was not filled changed"
            print("the caller sees the writes of worker1")
    finally:
        rpc.shutdown()  # also when a check fails: the other worker is not left waiting


def main() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=worker, args=(r, port, folder)) for r in range(2)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + 2 * TIMEOUT_S
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        stuck = [p for p in procs if p.is_alive()]
        for p in stuck:
            p.kill()
            p.join()
        if stuck or any(p.exitcode != 0 for p in procs):
            sys.exit(f"rpc_fill: a worker failed or timed out: {[p.exitcode for p in procs]}")


if __name__ == "__main__":
    main()
