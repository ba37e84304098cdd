"""Data-parallel training with TensorDict batches and an ``all_reduce`` of the gradients.

Every process builds the same model (same seed), takes its own shard of a synthetic
regression data set as a TensorDict, and after each backward pass puts the gradients in
a TensorDict, consolidates it (one storage) and calls ``all_reduce`` on it: one
reduction per dtype, not one per parameter. The replicas stay identical, which the last
line of each process shows with a checksum of its parameters.

Run on 4 CPU processes (gloo)::

    torchrun --standalone --nproc-per-node 4 examples/ddp_tensordict.py

Run as a plain script, it trains in one process (a group of one).
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch import nn

from tensordict import TensorDict

STEPS = 30
ROWS = 256  # the whole data set; each process takes every world_size-th row


def data(rank: int, world: int) -> TensorDict:
    """This process's shard of ``y = x @ w + 0.5`` (the same data set on every process)."""
    gen = torch.Generator().manual_seed(1234)
    x = torch.randn(ROWS, 8, generator=gen)
    y = x @ torch.linspace(-1, 1, 8).unsqueeze(-1) + 0.5
    full = TensorDict({"x": x, "y": y}, [ROWS])
    return full[rank::world]


def main() -> None:
    torch.set_num_threads(1)
    if "RANK" in os.environ:  # started by torchrun: rank, world size and rendezvous in env
        dist.init_process_group("gloo")
    else:
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial parameters on every process
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    shard = data(rank, world)
    loss = torch.zeros(())
    for _ in range(STEPS):
        for batch in shard.split(16):
            optim.zero_grad()
            loss = nn.functional.mse_loss(model(batch["x"]), batch["y"])
            loss.backward()
            grads = TensorDict(
                {name: p.grad for name, p in model.named_parameters() if p.grad is not None}, []
            ).consolidate()
            grads.all_reduce()  # the sum over the processes, in one call
            for name, p in model.named_parameters():
                assert p.grad is not None
                p.grad.copy_(grads[name] / world)
            optim.step()
    checksum = sum(float(p.detach().double().sum()) for p in model.parameters())
    print(f"rank {rank}/{world}: final loss {loss.item():.4f}, checksum {checksum:.10f}")
    dist.barrier()  # no process leaves while another still talks to it
    dist.destroy_process_group()
    if "RANK" in os.environ:
        # Under torchrun, leave without the interpreter's teardown: after every rank had
        # finished, gloo was seen to abort in it ("terminate called without an active
        # exception") in about one run in three on a loaded machine.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
