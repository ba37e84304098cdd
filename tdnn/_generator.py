"""The ``generator`` of a probabilistic module: which RNG a draw uses, and routing it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch

from tensordict import NonTensorData, is_non_tensor, unravel_key

Writeback = Callable[[torch.Generator], None]


def as_generator(call: str, generator: Any) -> tuple[torch.Generator | None, Any]:
    """``(owned generator, input key)`` for a module's ``generator`` argument: a
    ``torch.Generator`` is used as is, an ``int`` seeds a new CPU one, a key names an
    input entry read at each call."""
    if generator is None:
        return None, None
    if isinstance(generator, torch.Generator):
        return generator, None
    if isinstance(generator, int) and not isinstance(generator, bool):
        owned = torch.Generator()
        owned.manual_seed(generator)
        return owned, None
    if isinstance(generator, (str, tuple)):
        return None, unravel_key(generator)
    raise TypeError(
        f"{call}: generator must be a torch.Generator, an int seed, a key or None, "
        f"got {type(generator).__name__}"
    )


def from_input(
    call: str, key: Any, tensordict: Any, in_keys: list[Any]
) -> tuple[torch.Generator | None, Writeback | None]:
    """The generator held at ``key`` of the input (a Generator, or a seed: then a new
    generator, and a writeback that stores the next seed drawn from it at ``key``)."""
    value = tensordict.get(key, None)
    if value is None:
        return None, None
    value = value.data if is_non_tensor(value) else value
    if isinstance(value, torch.Generator):
        return value, None
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(
                f"{call}: generator key {key!r} holds a tensor of shape "
                f"{tuple(value.shape)}, expected a scalar seed"
            )
        seed, device, as_tensor = int(value.item()), value.device, True
    elif isinstance(value, int) and not isinstance(value, bool):
        params = (tensordict.get(k, None) for k in in_keys)
        found = (p.device for p in params if isinstance(p, torch.Tensor))
        seed, device, as_tensor = value, next(found, torch.device("cpu")), False
    else:
        raise TypeError(
            f"{call}: generator key {key!r} holds a {type(value).__name__}, expected a "
            "torch.Generator, an int or a scalar tensor seed"
        )
    local = torch.Generator(device=device)
    local.manual_seed(seed)

    def writeback(gen: torch.Generator) -> None:
        nxt = torch.randint(0, 2**62, (), generator=gen, dtype=torch.int64, device=device)
        tensordict.set(key, nxt if as_tensor else NonTensorData(int(nxt.item())))

    return local, writeback


@contextlib.contextmanager
def use_generator(generator: torch.Generator | None) -> Iterator[None]:
    """Draw from ``generator`` within the block (its state advances; the global RNG's is
    kept), so every distribution's ``sample``/``rsample`` follows it."""
    if generator is None or torch.compiler.is_compiling():
        yield
        return
    device = generator.device
    if device.type == "cuda":
        with torch.random.fork_rng(devices=[device.index]):
            torch.cuda.set_rng_state(generator.get_state(), device)
            try:
                yield
            finally:
                generator.set_state(torch.cuda.get_rng_state(device))
    else:
        with torch.random.fork_rng(devices=[]):
            torch.set_rng_state(generator.get_state())
            try:
                yield
            finally:
                generator.set_state(torch.get_rng_state())
