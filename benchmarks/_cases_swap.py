"""Cases for to_module's other swap paths: plain-attribute swaps, buffers, a partial swap."""

from __future__ import annotations

from torch import nn
from torch.nn.utils import stateless

from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def _mlp() -> nn.Module:
    return nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)])


def _normed() -> nn.Module:
    return nn.Sequential(*[nn.Sequential(nn.Linear(64, 64), nn.BatchNorm1d(64)) for _ in range(6)])


def _swap(m: nn.Module, drop: str | None = None, **kwargs: bool) -> tuple[Fn, Fn]:
    params = TensorDict.from_module(m).detach().clone()
    flat = {k: v.detach().clone() for k, v in m.state_dict(keep_vars=True).items()}
    if drop is not None:  # one tensor left out: the swap matches the rest
        del params[tuple(drop.split("."))]
        del flat[drop]

    def lib() -> None:
        with params.to_module(m, **kwargs):
            pass

    def base() -> None:
        with stateless._reparametrize_module(m, flat):
            pass

    return lib, base


CASES = [
    Case(
        "with p.to_module(m, preserve_module_state=False): pass, MLP",
        "stateless._reparametrize_module",
        1.0,
        lambda: _swap(_mlp(), preserve_module_state=False),
    ),
    Case(
        "with p.to_module(m): pass, 6 x (Linear(64), BatchNorm1d)",
        "stateless._reparametrize_module",
        1.5,
        lambda: _swap(_normed()),
    ),
    Case(
        "with p.to_module(m, strict=False): pass, MLP less one bias",
        "stateless._reparametrize_module",
        1.5,
        lambda: _swap(_mlp(), drop="7.bias", strict=False),
    ),
]
