"""TensorDictParams: a TensorDict of parameters registered as an nn.Module's own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from tensordict import TensorDict, is_tensor_collection
from tensordict.utils import register_params_module


def _convert(value: Tensor, no_convert: bool) -> Tensor:
    """A float leaf becomes an ``nn.Parameter`` (unless ``no_convert``), others buffers."""
    if isinstance(value, (nn.Parameter, nn.Buffer)):
        return value
    if not no_convert and (value.is_floating_point() or value.is_complex()):
        return nn.Parameter(value.detach(), requires_grad=True)
    return nn.Buffer(value)


class TensorDictParams(nn.Module):
    """An nn.Module whose parameters and buffers are the leaves of a TensorDict, and
    which reads and acts like that TensorDict.

    Float leaves become ``nn.Parameter`` (others buffers; ``no_convert=True`` keeps
    leaves as they are). Optimisers, ``.parameters()``, ``.to()``, ``state_dict()`` and
    ``load_state_dict()`` see the leaves; nested TensorDicts are submodules, so
    state-dict keys are dotted key paths. Every TensorDict method is available on it and
    works on the registered leaves (``params["0", "weight"]``, ``params.zero_()``,
    ``params.apply(f)``, ``params + 1``, ``params.to_module(m)``); ``data`` is the
    TensorDict itself. The module's registrations are the one source of truth, so a
    swap into it (``other.to_module(params)``) shows in every read.

    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictParams
    >>> params = TensorDictParams(TensorDict.from_modules(nn.Linear(3, 2), nn.Linear(3, 2)))
    >>> sorted(name for name, _ in params.named_parameters())
    ['bias', 'weight']
    >>> params["weight"].shape, params.batch_size
    (torch.Size([2, 2, 3]), torch.Size([2]))
    """

    def __init__(
        self, parameters: Any = None, *, no_convert: bool = False, lock: bool = False, **kwargs: Any
    ) -> None:
        super().__init__()
        if parameters is None:
            parameters = TensorDict(kwargs)
        elif isinstance(parameters, dict):
            parameters = TensorDict(parameters)
        elif isinstance(parameters, TensorDictParams):
            parameters = parameters.data
        if not is_tensor_collection(parameters):
            raise TypeError(
                "TensorDictParams: expected a TensorDict or a dict, got "
                f"{type(parameters).__name__}"
            )
        self.__dict__["_batch_size"] = parameters.batch_size
        self.__dict__["_device"] = parameters.device
        self.__dict__["no_convert"] = no_convert
        self.__dict__["_hooks_get"] = []
        memo: dict[int, Tensor] = {}
        for key in list(parameters.keys()):
            self._put(key, parameters.get(key), memo)

    def _put(self, key: str, value: Any, memo: dict[int, Any]) -> None:
        # the registries are written directly: a key may be the name of a TensorDict method
        # ("norm", "apply"), which add_module / register_* refuse as an existing attribute
        if is_tensor_collection(value):
            self._parameters.pop(key, None)
            self._buffers.pop(key, None)
            self._modules[key] = TensorDictParams(value, no_convert=self.no_convert)
            return
        if not isinstance(value, Tensor):
            value = torch.as_tensor(value)
        leaf = memo.get(id(value))
        if leaf is None:
            leaf = memo[id(value)] = _convert(value, self.no_convert)
        self._parameters.pop(key, None)
        self._buffers.pop(key, None)
        self._modules.pop(key, None)
        if isinstance(leaf, nn.Parameter):
            self._parameters[key] = leaf
        else:
            self._buffers[key] = leaf
            self._non_persistent_buffers_set.discard(key)

    @property
    def data(self) -> Any:
        """The TensorDict of the registered leaves (the same tensor objects)."""
        entries: dict[str, Any] = {}
        hooks = self.__dict__["_hooks_get"]
        for key, value in self._parameters.items():
            entries[key] = value
        for key, buffer in self._buffers.items():
            entries[key] = buffer
        for key, sub in self._modules.items():
            if isinstance(sub, TensorDictParams):
                entries[key] = sub.data
        if hooks:
            for hook in hooks:
                entries = {
                    k: v if is_tensor_collection(v) else hook(self, v) for k, v in entries.items()
                }
        try:
            return TensorDict(
                entries, self.__dict__["_batch_size"], device=self.__dict__["_device"]
            )
        except ValueError:  # leaves swapped in with other batch dims (to_module into it)
            return TensorDict(entries, [], device=self.__dict__["_device"])

    @property
    def _param_td(self) -> Any:
        """The parameters as a locked TensorDict (new keys go through this module)."""
        return self.data.lock_()

    @property
    def is_locked(self) -> bool:
        """False: keys are added and removed through the module."""
        return False

    def register_get_post_hook(self, hook: Callable[[Any, Tensor], Tensor]) -> None:
        """Pass every leaf read through ``hook(self, leaf)`` (e.g. ``lambda _, x: x.data``).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1))
        >>> p.register_get_post_hook(lambda _, x: x.data)
        >>> p["a"].requires_grad
        False
        """
        self.__dict__["_hooks_get"].append(hook)
        for sub in self._modules.values():
            if isinstance(sub, TensorDictParams):
                sub.register_get_post_hook(hook)

    def __getitem__(self, key: Any) -> Any:
        return self.data[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, tuple) and len(key) > 1:
            sub = self._modules.get(key[0])
            if not isinstance(sub, TensorDictParams):
                sub = TensorDictParams(
                    TensorDict({}, self.__dict__["_batch_size"]), no_convert=self.no_convert
                )
                self._modules[key[0]] = sub
            sub[key[1:] if len(key) > 2 else key[1]] = value
            return
        name = key[0] if isinstance(key, tuple) else key
        if isinstance(name, str):
            self._put(name, value, {})
            return
        self.data[key] = value  # (an index: written into the leaves)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, tuple) and len(key) > 1:
            sub = self._modules.get(key[0])
            if not isinstance(sub, TensorDictParams):
                raise KeyError(f"TensorDictParams.__delitem__: no sub-TensorDict {key[0]!r}")
            del sub[key[1:] if len(key) > 2 else key[1]]
            return
        name = key[0] if isinstance(key, tuple) else key
        for store in (self._parameters, self._buffers, self._modules):
            store.pop(name, None)

    def set(self, key: Any, value: Any, **kwargs: Any) -> TensorDictParams:
        """Register ``value`` under ``key`` (converted as at construction).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1)).set("b", torch.ones(1))
        >>> sorted(name for name, _ in p.named_parameters())
        ['a', 'b']
        """
        self[key] = value
        return self

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__") or "_parameters" not in self.__dict__:
                raise
        attr = getattr(self.data, name)
        if not callable(attr):
            return attr
        return _Forwarded(self, name, attr)

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictParams:
        """A TensorDictParams of copies (parameters stay parameters, ties stay tied).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1))
        >>> p.clone()["a"] is p["a"]
        False
        """
        if not recurse:
            return TensorDictParams(self.data.clone(False), no_convert=True)
        memo: dict[int, Tensor] = {}

        def copy(x: Tensor) -> Tensor:
            out = memo.get(id(x))
            if out is None:
                out = x.detach().clone().requires_grad_(x.requires_grad)
                if isinstance(x, nn.Parameter):
                    out = nn.Parameter(out, requires_grad=x.requires_grad)
                memo[id(x)] = out
            return out

        data = self.data
        copied = data.apply(copy)  # nested batch sizes kept
        return TensorDictParams(copied, no_convert=True)

    def copy(self) -> TensorDictParams:
        """A TensorDictParams holding the same leaves (a shallow copy).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1))
        >>> p.copy()["a"] is p["a"]
        True
        """
        return TensorDictParams(self.data, no_convert=True)

    def apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> Any:
        """``TensorDict.apply`` on the leaves (not ``nn.Module.apply``); with
        ``inplace=True`` the leaves are updated and the module returned.

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> TensorDictParams(a=torch.ones(1)).apply(lambda x: x.data * 2)["a"]
        tensor([2.])
        """
        return _Forwarded(self, "apply", self.data.apply)(fn, *others, **kwargs)

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """``nn.Module.load_state_dict``; a TensorDict's own state dict loads too (its
        ``__batch_size``/``__device`` entries describe the TensorDict, not a leaf).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.ones(2))
        >>> _ = p.load_state_dict(TensorDict(a=torch.zeros(2)).state_dict())
        >>> p["a"]
        Parameter containing:
        tensor([0., 0.], requires_grad=True)
        """
        leaves = {k: v for k, v in state_dict.items() if not k.rpartition(".")[2].startswith("__")}
        return super().load_state_dict(leaves, strict=strict, assign=assign)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("TensorDictParams holds parameters; it has no forward")

    def extra_repr(self) -> str:
        return f"batch_size={tuple(self.__dict__['_batch_size'])}"

    # Arithmetic and comparison dunders are looked up on the type, not via __getattr__.
    def __eq__(self, other: object) -> Any:
        return self.data == _unwrap(other)

    def __ne__(self, other: object) -> Any:
        return self.data != _unwrap(other)

    __hash__ = nn.Module.__hash__

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Any:
        return iter(self.data)

    def __contains__(self, key: Any) -> bool:
        return key in self.data.keys(True)

    def __bool__(self) -> bool:
        return True


def _unwrap(value: Any) -> Any:
    return value.data if isinstance(value, TensorDictParams) else value


def _binary(name: str) -> Callable[..., Any]:
    def op(self: TensorDictParams, other: Any) -> Any:
        return getattr(self.data, name)(_unwrap(other))

    op.__name__ = name
    return op


for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__pow__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
    "__neg__", "__abs__", "__invert__",
):  # fmt: skip
    if _name in ("__neg__", "__abs__", "__invert__"):
        setattr(TensorDictParams, _name, lambda self, _n=_name: getattr(self.data, _n)())
    else:
        setattr(TensorDictParams, _name, _binary(_name))


class _Forwarded:
    """A TensorDict method called on a TensorDictParams: runs on its ``data``; a result
    that is that same TensorDict (in-place methods) gives back the module."""

    def __init__(self, owner: TensorDictParams, name: str, method: Callable[..., Any]) -> None:
        self._owner, self._name, self._method = owner, name, method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_unwrap(a) for a in args)
        data = getattr(self._method, "__self__", None)
        if self._name.endswith("_") and not self._name.endswith("__"):
            with torch.no_grad():  # in-place writes into parameters, as an optimiser does
                out = self._method(*args, **kwargs)
        else:
            out = self._method(*args, **kwargs)
        if out is data and data is not None:
            return self._owner
        return out


def _of_module(td: Any, module: nn.Module | None) -> TensorDictParams:
    """``from_module(module, as_module=True)``: a TensorDictParams of ``td``, in which a
    TensorDictParams held by ``module`` is that same module (so it sees what is swapped
    into it), as upstream returns it."""
    if isinstance(module, TensorDictParams):
        return module
    params = TensorDictParams(td, no_convert=True)
    if module is not None:
        _adopt(params, module)
    return params


def _adopt(params: TensorDictParams, module: nn.Module) -> None:
    for name, child in module._modules.items():
        sub = params._modules.get(name)
        if isinstance(child, TensorDictParams):
            if sub is not None:
                params._modules[name] = child
        elif isinstance(sub, TensorDictParams) and child is not None:
            _adopt(sub, child)


def _register() -> None:
    """Make ``TensorDict.from_module(..., as_module=True)`` return a TensorDictParams."""
    register_params_module(_of_module)
