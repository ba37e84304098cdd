"""Upstream's deprecated ``functional_modules.set_tensor`` / ``set_tensor_dict`` helpers."""

from __future__ import annotations

import warnings
from typing import Any

from torch import Tensor, nn

from tdnn._fastcall import parameter_registration_hooks


def _deprecated(name: str) -> None:
    warnings.warn(
        f"tensordict.nn.functional_modules.{name}() is deprecated and will be removed in "
        "TensorDict 0.17 (use TensorDict.to_module)",
        DeprecationWarning,
        stacklevel=3,
    )


def set_tensor(module: nn.Module, name: str, tensor: Tensor) -> None:
    """Put ``tensor`` at ``module.<name>``: a parameter if it is an ``nn.Parameter``, a
    buffer where a buffer was, else a plain attribute (deprecated, as upstream).

    >>> import torch, warnings
    >>> from torch import nn
    >>> from tensordict.nn.functional_modules import set_tensor
    >>> m = nn.Linear(1, 1)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     set_tensor(m, "weight", torch.zeros(1, 1))
    >>> "weight" in dict(m.named_parameters()), m.weight.sum().item()
    (False, 0.0)
    """
    _deprecated("set_tensor")
    _set(module.__dict__, module, name, tensor)


def set_tensor_dict(
    module_dict: dict[str, Any], module: nn.Module, name: str, tensor: Tensor
) -> None:
    """``set_tensor`` given the module's ``__dict__`` (deprecated, as upstream).

    >>> import torch, warnings
    >>> from torch import nn
    >>> from tensordict.nn.functional_modules import set_tensor_dict
    >>> m = nn.Linear(1, 1)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     set_tensor_dict(m.__dict__, m, "bias", nn.Parameter(torch.ones(1)))
    >>> m.bias.item()
    1.0
    """
    _deprecated("set_tensor_dict")
    _set(module_dict, module, name, tensor)


def _set(state: dict[str, Any], module: nn.Module, name: str, tensor: Tensor) -> None:
    state["_parameters"].pop(name, None)
    was_buffer = state["_buffers"].pop(name, None) is not None
    if isinstance(tensor, nn.Parameter):
        state.pop(name, None)
        for hook in parameter_registration_hooks():
            out = hook(module, name, tensor)
            if out is not None:
                tensor = out
        state["_parameters"][name] = tensor
    elif was_buffer and isinstance(tensor, Tensor):
        state["_buffers"][name] = tensor
    else:
        state[name] = tensor
