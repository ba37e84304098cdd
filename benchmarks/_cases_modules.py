"""Cases for the module layer (issue 6) against torch.func and plain modules."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, stack_module_state
from torch.nn.utils import stateless

from benchmarks._harness import Case, Fn
from tdnn import TensorDictModule, TensorDictSequential
from tensordict import TensorDict


def _mlp(width: int = 512, depth: int = 8) -> nn.Module:
    return nn.Sequential(*[nn.Linear(width, width) for _ in range(depth)])


def _flat(m: nn.Module) -> dict[str, torch.Tensor]:
    return dict(list(m.named_parameters()) + list(m.named_buffers()))


def _from_module(m: nn.Module) -> tuple[Fn, Fn]:
    return (lambda: TensorDict.from_module(m)), (lambda: _flat(m))


def _swap(m: nn.Module) -> tuple[Fn, Fn]:
    params = TensorDict.from_module(m).detach().clone()
    flat = {k: v.detach().clone() for k, v in _flat(m).items()}

    def lib() -> None:
        with params.to_module(m):
            pass

    def base() -> None:
        with stateless._reparametrize_module(m, flat):
            pass

    return lib, base


def swap_call() -> tuple[Fn, Fn]:
    m = _mlp()
    x = torch.randn(4, 512)
    params = TensorDict.from_module(m).detach().clone()
    flat = {k: v.detach().clone() for k, v in _flat(m).items()}

    def lib() -> torch.Tensor:
        with params.to_module(m):
            return m(x)

    return lib, (lambda: functional_call(m, flat, (x,)))


def _mlps(n: int = 10, width: int = 256) -> list[nn.Module]:
    return [
        nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)) for _ in range(n)
    ]


def stack_params() -> tuple[Fn, Fn]:
    models = _mlps()
    return (lambda: TensorDict.from_modules(*models)), (lambda: stack_module_state(models))


def vmap_ensemble() -> tuple[Fn, Fn]:
    models = _mlps()
    base = copy.deepcopy(models[0]).to("meta")
    stacked = TensorDict.from_modules(*models).detach()
    params, buffers = stack_module_state(models)
    params = {k: v.detach() for k, v in params.items()}
    x = torch.randn(64, 256)

    def call_td(p: Any, x: torch.Tensor) -> torch.Tensor:
        with p.to_module(base):
            return base(x)

    def call_fc(p: Any, b: Any, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (x,))

    lib = torch.vmap(call_td, (0, None))
    ref = torch.vmap(call_fc, (0, 0, None))
    return (lambda: lib(stacked, x)), (lambda: ref(params, buffers, x))


def td_module() -> tuple[Fn, Fn]:
    linear = nn.Linear(16, 16)
    module = TensorDictModule(linear, ["x"], ["y"])
    x = torch.randn(32, 16)
    td = TensorDict({"x": x}, [32])
    return (lambda: module(td)), (lambda: linear(x))


def td_sequential() -> tuple[Fn, Fn]:
    layers = [nn.Linear(16, 16) for _ in range(4)]
    seq = TensorDictSequential(*[TensorDictModule(m, ["x"], ["x"]) for m in layers])
    ref = nn.Sequential(*layers)
    x = torch.randn(32, 16)
    td = TensorDict({"x": x}, [32])

    def lib() -> TensorDict:
        # each call starts again from x (its cost counted here): chained onto the last
        # call's output instead, x would carry an autograd graph growing call after call
        td["x"] = x
        return seq(td)

    return lib, (lambda: ref(x))


CASES = [
    Case(
        "from_module, MLP of 8 Linear(512)",
        "dict(named_parameters + buffers)",
        0.85,
        lambda: _from_module(_mlp()),
    ),
    Case(
        "from_module, nn.Transformer()",
        "dict(named_parameters + buffers)",
        0.85,
        lambda: _from_module(nn.Transformer()),
    ),
    Case(
        "with p.to_module(m): pass, MLP",
        "stateless._reparametrize_module",
        1.5,
        lambda: _swap(_mlp()),
    ),
    Case(
        "with p.to_module(m): pass, Transformer",
        "stateless._reparametrize_module",
        1.5,
        lambda: _swap(nn.Transformer()),
    ),
    Case("with p.to_module(m): m(x), MLP", "torch.func.functional_call", 1.05, swap_call),
    Case("stack the params of 10 MLPs", "torch.func.stack_module_state", 1.0, stack_params),
    Case("vmap ensemble of 10 MLPs(256), batch 64", "vmap of functional_call", 1.02, vmap_ensemble),
    Case("TensorDictModule(Linear(16,16)), batch 32", "linear(x)", 1.2, td_module),
    Case("TensorDictSequential of 4 Linear(16,16)", "nn.Sequential(x)", 1.2, td_sequential),
]
