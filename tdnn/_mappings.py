"""Positive mappings for scale parameters: mappings(), biased_softplus, inv_softplus."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def inv_softplus(bias: float | torch.Tensor) -> float | torch.Tensor:
    """The ``x`` with ``softplus(x) == bias`` (a float for a float).

    >>> import torch
    >>> from tensordict.nn import inv_softplus
    >>> round(float(torch.nn.functional.softplus(torch.tensor(inv_softplus(2.0)))), 4)
    2.0
    """
    value = bias if isinstance(bias, torch.Tensor) else torch.tensor(float(bias))
    out = value.expm1().clamp_min(1e-6).log()
    return out if isinstance(bias, torch.Tensor) else float(out)


class biased_softplus(nn.Module):
    """``softplus(x + b) + min_val`` with ``b`` chosen so that 0 maps to ``bias``.

    >>> import torch
    >>> from tensordict.nn import biased_softplus
    >>> round(float(biased_softplus(1.0)(torch.zeros(()))), 4)
    1.0
    """

    def __init__(self, bias: float, min_val: float = 0.01) -> None:
        super().__init__()
        self.bias = inv_softplus(bias - min_val)
        self.min_val = min_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(x + self.bias) + self.min_val


def expln(x: torch.Tensor) -> torch.Tensor:
    """``exp(x)`` for ``x <= 0``, ``log1p(x) + 1`` above: positive, smooth, slow-growing.

    >>> import torch
    >>> from tensordict.nn.utils import expln
    >>> expln(torch.tensor([0.0, 1.0]))
    tensor([1.0000, 1.6931])
    """
    return torch.where(x <= 0, x.clamp_max(0).exp(), x.clamp_min(0).log1p() + 1)


_MAPPINGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softplus": torch.nn.functional.softplus,
    "exp": torch.exp,
    "relu": torch.relu,
    "biased_softplus": biased_softplus(1.0),
    "none": lambda x: x,
    "expln": expln,
}


def mappings(key: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The positive mapping named ``key``: ``softplus``, ``exp``, ``relu``, ``expln``,
    ``none``, ``biased_softplus`` or ``biased_softplus_{bias}[_{min_val}]``, or one added
    with :func:`add_custom_mapping`.

    >>> import torch
    >>> from tensordict.nn import mappings
    >>> mappings("exp")(torch.zeros(1))
    tensor([1.])
    """
    if key in _MAPPINGS:
        return _MAPPINGS[key]
    if key.startswith("biased_softplus_"):
        parts = key.split("_")[2:]
        if len(parts) == 1:
            return biased_softplus(float(parts[0]))
        if len(parts) == 2:
            return biased_softplus(float(parts[0]), min_val=float(parts[1]))
        raise ValueError(f"mappings: {key!r} should read biased_softplus_{{bias}}[_{{min_val}}]")
    raise NotImplementedError(f"mappings: unknown mapping {key!r}; known: {sorted(_MAPPINGS)}")


def add_custom_mapping(name: str, mapping: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Register ``mapping`` under ``name`` for :func:`mappings`.

    >>> import torch
    >>> from tensordict.nn import add_custom_mapping, mappings
    >>> add_custom_mapping("square", torch.square)
    >>> mappings("square")(torch.tensor([3.0]))
    tensor([9.])
    """
    _MAPPINGS[name] = mapping
