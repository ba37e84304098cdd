"""The hot paths of a module call: ``forward`` called directly where ``nn.Module.__call__``
would add nothing (the one tdnn file that reads torch's private module-hook registries),
and outputs written through a TensorDict's fast path.

``nn.Module.__call__`` costs two Python frames and a dozen checks before it reaches
``forward``; with no hook anywhere, no JIT tracing, no ``torch.compile`` and no ``fx``
patch in place, it only calls ``forward``. A TensorDict module pays it once for itself
and once per wrapped layer, which is most of its overhead on small layers, so the
modules here check those conditions themselves and call ``forward`` when they hold.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.modules import module as _torch_module

from tensordict import TensorDict

_MODULE_CALL = nn.Module.__call__
_tracing = torch._C._get_tracing_state
_compiling = torch.compiler.is_compiling
# the calls a module class may have that do nothing but nn.Module.__call__'s work
PLAIN_CALLS: set[Any] = {_MODULE_CALL}


def plain_calls() -> bool:
    """Whether ``nn.Module.__call__`` is the stock one, no global module hook is
    registered, and nothing (JIT trace, dynamo, export) is tracing."""
    m = _torch_module
    return not (
        _compiling()
        or nn.Module.__call__ is not _MODULE_CALL  # torch.fx patches it while tracing
        or m._global_forward_pre_hooks
        or m._global_forward_hooks
        or m._global_backward_pre_hooks
        or m._global_backward_hooks
        or _tracing()
    )


def own_hookless(module: Any) -> bool:
    """:func:`plain_calls` and, for a module whose own ``__call__`` is running (so its
    class's ``__call__`` is known), no hook of its own and not compiled."""
    if _compiling():  # first: dynamo need not trace the rest
        return False
    d = module.__dict__
    m = _torch_module
    return not (
        d["_forward_pre_hooks"]
        or d["_forward_hooks"]
        or d["_backward_pre_hooks"]
        or d["_backward_hooks"]
        or d.get("_compiled_call_impl") is not None
        or nn.Module.__call__ is not _MODULE_CALL
        or m._global_forward_pre_hooks
        or m._global_forward_hooks
        or m._global_backward_pre_hooks
        or m._global_backward_hooks
        or _tracing()
    )


def hookless(module: Any) -> bool:
    """Whether calling ``module`` would only call its ``forward`` (given
    :func:`plain_calls`): a plain ``__call__``, no hooks of its own, not compiled."""
    d = module.__dict__
    return (
        type(module).__call__ in PLAIN_CALLS
        and not (
            d["_forward_pre_hooks"]
            or d["_forward_hooks"]
            or d["_backward_pre_hooks"]
            or d["_backward_hooks"]
        )
        and d.get("_compiled_call_impl") is None
    )


def put(tensordict: Any, key: Any, value: Any) -> None:
    """``tensordict.set(key, value)``; a tensor under a flat key of a plain TensorDict
    goes through ``td[key] = value``, which writes it the same way with fewer hops."""
    if type(tensordict) is TensorDict and type(key) is str and isinstance(value, Tensor):
        tensordict[key] = value
    else:
        tensordict.set(key, value)


def parameter_registration_hooks() -> list[Any]:
    """torch's global parameter-registration hooks (run when a parameter is registered)."""
    return list(_torch_module._global_parameter_registration_hooks.values())
