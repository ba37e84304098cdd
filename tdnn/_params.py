"""TensorDictParams: a TensorDict of parameters registered as an nn.Module's own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor, nn

from tensordict import is_tensor_collection


class TensorDictParams(nn.Module):
    """An nn.Module whose parameters and buffers are the leaves of a TensorDict.

    Optimisers, ``.parameters()``, ``.to()``, ``state_dict()`` and ``load_state_dict()``
    see the leaves (``nn.Parameter`` leaves as parameters, other tensors as buffers);
    reading it like a TensorDict (``params["0", "weight"]``, ``params.to_module(m)``)
    reaches the same tensors. Nested TensorDicts become submodules, so state-dict keys
    are the dotted key paths.

    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tdnn import TensorDictParams
    >>> params = TensorDictParams(TensorDict.from_modules(nn.Linear(3, 2), nn.Linear(3, 2)))
    >>> sorted(name for name, _ in params.named_parameters())
    ['bias', 'weight']
    >>> params["weight"].shape
    torch.Size([2, 2, 3])
    """

    def __init__(self, td: Any) -> None:
        super().__init__()
        if not is_tensor_collection(td):
            raise TypeError(f"TensorDictParams: expected a TensorDict, got {type(td).__name__}")
        self._td = td
        for key, value in td.items():
            if isinstance(value, nn.Parameter):
                self.register_parameter(key, value)
            elif isinstance(value, Tensor):
                self.register_buffer(key, value)
            elif is_tensor_collection(value):
                self.add_module(key, TensorDictParams(value))

    @property
    def data(self) -> Any:
        """The TensorDict (the same leaves the module registers)."""
        return self._td

    def _apply(self, fn: Callable[..., Any], recurse: bool = True) -> Any:
        out = super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        # buffers are replaced by new tensors: point the TensorDict at them again
        for key, buffer in self._buffers.items():
            self._td._tensordict[key] = buffer
        for key, param in self._parameters.items():
            self._td._tensordict[key] = param
        return out

    def __getitem__(self, key: Any) -> Any:
        return self._td[key]

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_td"], name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("TensorDictParams holds parameters; it has no forward")

    def extra_repr(self) -> str:
        return f"batch_size={tuple(self._td.batch_size)}"
