"""EnsembleModule: independently initialised copies of a module run with one vmap."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from tdnn._params import TensorDictParams
from tensordict import TensorDict


def _reinitialise(module: nn.Module) -> nn.Module:
    for sub in module.modules():
        reset = getattr(sub, "reset_parameters", None)
        if callable(reset):
            reset()
    return module


class EnsembleModule(nn.Module):
    """``num_copies`` copies of ``module``, each initialised independently, evaluated with
    one ``torch.vmap`` over their stacked parameters.

    With ``expand_input=True`` every copy sees the same input and the output gains a
    leading dim of size ``num_copies``; with ``False`` the input must already carry
    that leading dim. Randomness policy: vmap runs with ``randomness="different"``, so
    dropout and other random ops draw independently for each copy.

    >>> import torch
    >>> from torch import nn
    >>> from tdnn import EnsembleModule
    >>> ensemble = EnsembleModule(nn.Linear(3, 2), num_copies=4)
    >>> ensemble(torch.randn(5, 3)).shape
    torch.Size([4, 5, 2])
    """

    def __init__(self, module: nn.Module, num_copies: int, expand_input: bool = True) -> None:
        super().__init__()
        if num_copies < 1:
            raise ValueError(f"EnsembleModule: num_copies must be >= 1, got {num_copies}")
        copies = [_reinitialise(copy.deepcopy(module)) for _ in range(num_copies)]
        self.params = TensorDictParams(TensorDict.from_modules(*copies))
        self._base = [copy.deepcopy(module).to("meta")]  # structure only, not registered
        self.num_copies = num_copies
        self.expand_input = expand_input

    def forward(self, *args: Any) -> Any:
        base = self._base[0]

        def call(params: Any, *inputs: Any) -> Any:
            with params.to_module(base):
                return base(*inputs)

        in_dims = (0, *([None] * len(args))) if self.expand_input else (0, *([0] * len(args)))
        return torch.vmap(call, in_dims, randomness="different")(self.params.data, *args)
