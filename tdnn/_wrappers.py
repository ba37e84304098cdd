"""Module wrappers: TensorDictModuleWrapper, the TensorClass module pair, CudaGraphModule."""

from __future__ import annotations

import typing
import warnings
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import torch
from torch import nn

from tdnn._base import TensorDictModuleBase
from tensordict import TensorClass, TensorDict, is_tensorclass, unravel_key


class TensorDictModuleWrapper(TensorDictModuleBase):
    """Wrap a TensorDict module: calls go to it, and so do attributes the wrapper lacks
    (subclasses add behaviour around ``forward``).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, TensorDictModuleWrapper
    >>> inner = TensorDictModule(lambda x: x + 1, ["x"], ["y"])
    >>> wrapped = TensorDictModuleWrapper(inner)
    >>> wrapped.in_keys, wrapped(TensorDict(x=torch.zeros(1)))["y"]
    (['x'], tensor([1.]))
    """

    td_module: Any

    def __init__(self, td_module: Any) -> None:
        super().__init__()
        if not isinstance(td_module, nn.Module):
            raise TypeError(
                "TensorDictModuleWrapper: td_module must be a TensorDict module (an "
                f"nn.Module), got {type(td_module).__name__}"
            )
        self.td_module = td_module
        if hasattr(td_module, "_forward_hooks"):
            for hook in td_module._forward_hooks.values():
                self.register_forward_hook(hook)

    @property
    def in_keys(self) -> list[Any]:
        """The wrapped module's in_keys (setting them sets the wrapped module's)."""
        return list(self.td_module.in_keys)

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        self.td_module.in_keys = value

    @property
    def out_keys(self) -> list[Any]:
        """The wrapped module's out_keys (setting them sets the wrapped module's)."""
        return list(self.td_module.out_keys)

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        self.td_module.out_keys = value

    @property
    def out_keys_source(self) -> list[Any]:
        """The wrapped module's out_keys_source."""
        return list(self.td_module.out_keys_source)

    def select_out_keys(self, *out_keys: Any) -> TensorDictModuleWrapper:
        """Select on the wrapped module (see ``TensorDictModuleBase.select_out_keys``).

        >>> from tensordict.nn import TensorDictModule, TensorDictModuleWrapper
        >>> w = TensorDictModuleWrapper(TensorDictModule(lambda x: (x, x), ["x"], ["y", "z"]))
        >>> w.select_out_keys("z").out_keys
        ['z']
        """
        self.td_module.select_out_keys(*out_keys)
        return self

    def reset_out_keys(self) -> TensorDictModuleWrapper:
        """Reset the wrapped module's selection.

        >>> from tensordict.nn import TensorDictModule, TensorDictModuleWrapper
        >>> w = TensorDictModuleWrapper(TensorDictModule(lambda x: (x, x), ["x"], ["y", "z"]))
        >>> w.select_out_keys("z").reset_out_keys().out_keys
        ['y', 'z']
        """
        self.td_module.reset_out_keys()
        return self

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__"):
                raise
            return getattr(self.__dict__["_modules"]["td_module"], name)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.td_module(*args, **kwargs)


InputClass = TypeVar("InputClass")
OutputClass = TypeVar("OutputClass")
InputTensorClass = TypeVar("InputTensorClass", bound=TensorClass)
OutputTensorClass = TypeVar("OutputTensorClass", bound=TensorClass)


def _fields(cls: Any) -> list[tuple[str, ...]]:
    """The (nested) keys of a TensorClass type, from its annotations."""
    keys: list[tuple[str, ...]] = []
    hints = typing.get_type_hints(cls)
    for name, hint in hints.items():
        if name.startswith("_") or typing.get_origin(hint) is typing.ClassVar:
            continue
        if isinstance(hint, type) and issubclass(hint, TensorDict) and hint is not TensorDict:
            keys += [(name, *sub) for sub in _fields(hint)]
        else:
            keys.append((name,))
    return keys


class TensorClassModuleBase(nn.Module, Generic[InputClass, OutputClass]):
    """Base of modules from one TensorClass type to another, declared as
    ``class M(TensorClassModuleBase[In, Out])``; ``as_td_module()`` gives a TensorDict
    module reading ``In``'s fields and writing ``Out``'s.

    >>> import torch
    >>> from tensordict import TensorClass, TensorDict
    >>> from tensordict.nn import TensorClassModuleBase
    >>> class In(TensorClass):
    ...     x: torch.Tensor
    >>> class Out(TensorClass):
    ...     y: torch.Tensor
    >>> class AddOne(TensorClassModuleBase[In, Out]):
    ...     def forward(self, data):
    ...         return Out(y=data.x + 1, batch_size=data.batch_size)
    >>> AddOne().as_td_module()(TensorDict(x=torch.zeros(2), batch_size=[2]))["y"]
    tensor([1., 1.])
    """

    input_type: Any
    output_type: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is TensorClassModuleBase:
                args = typing.get_args(base)
                if len(args) != 2:
                    raise ValueError(
                        f"{cls.__name__}: TensorClassModuleBase needs [Input, Output] types"
                    )
                cls.input_type, cls.output_type = args

    def as_td_module(self) -> TensorClassModuleWrapper:
        """This module as a TensorDict module (see :class:`TensorClassModuleWrapper`).

        >>> import torch
        >>> from tensordict import TensorClass
        >>> from tensordict.nn import TensorClassModuleBase
        >>> class In(TensorClass):
        ...     x: torch.Tensor
        >>> class Same(TensorClassModuleBase[In, In]):
        ...     def forward(self, data):
        ...         return data
        >>> Same().as_td_module().in_keys
        ['x']
        """
        return TensorClassModuleWrapper(self)


class TensorClassModuleWrapper(TensorDictModuleBase):
    """A :class:`TensorClassModuleBase` as a TensorDict module: the TensorDict is read as
    the input type, and the output converted back to a TensorDict.

    >>> import torch
    >>> from tensordict import TensorClass, TensorDict
    >>> from tensordict.nn import TensorClassModuleBase, TensorClassModuleWrapper
    >>> class In(TensorClass):
    ...     x: torch.Tensor
    >>> class Same(TensorClassModuleBase[In, In]):
    ...     def forward(self, data):
    ...         return data
    >>> TensorClassModuleWrapper(Same()).out_keys
    ['x']
    """

    def __init__(self, module: TensorClassModuleBase[Any, Any]) -> None:
        kinds = (getattr(module, "input_type", None), getattr(module, "output_type", None))
        if not all(isinstance(k, type) and is_tensorclass(k) for k in kinds):
            raise ValueError(
                f"{type(self).__name__}({type(module).__name__}): Only TensorClassModuleBase "
                "implementations with both input and output type as TensorClass can be "
                f"converted to a TensorDict module; got {kinds[0]!r} -> {kinds[1]!r}"
            )
        super().__init__()
        self.tc_module = module
        self.in_keys = _fields(module.input_type)
        self.out_keys = _fields(module.output_type)

    def forward(self, tensordict: Any, *args: Any, **kwargs: Any) -> Any:
        cls = self.tc_module.input_type
        fields = {f.name for f in cls.fields()}
        extra = [k for k in tensordict.keys() if k not in fields]  # noqa: SIM118 (iter: rows)
        # shared entries; unset fields None, nested tensorclass fields built (as upstream)
        data = cls.from_tensordict(tensordict.exclude(*extra) if extra else tensordict)
        out = self.tc_module(data, *args, **kwargs)
        to_td = getattr(out, "to_tensordict", None)
        return to_td() if callable(to_td) else out


class CudaGraphModule(nn.Module):
    """Upstream's CUDA-graph wrapper, by name and signature: calls run ``module`` as is
    (no graph is captured here, on CUDA either); without CUDA it warns once at
    construction, as upstream. ``state_dict()``/``load_state_dict()`` are the wrapped
    module's own, as upstream's (keys without a ``module.`` prefix); as a submodule of
    another module it is saved and loaded as any child.

    >>> import warnings, torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import CudaGraphModule, TensorDictModule
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     m = CudaGraphModule(TensorDictModule(lambda x: x + 1, ["x"], ["y"]))
    >>> m(TensorDict(x=torch.zeros(1)))["y"]
    tensor([1.])
    """

    def __init__(
        self,
        module: Callable[..., Any],
        warmup: int = 2,
        in_keys: list[Any] | None = None,
        out_keys: list[Any] | None = None,
        device: torch.device | None = None,
    ) -> None:
        super().__init__()
        if not torch.cuda.is_available():
            warnings.warn(
                "CudaGraphModule: no CUDA device is available; calls run the module as is, "
                "without graph capture",
                UserWarning,
                stacklevel=2,
            )
        if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 1:
            raise ValueError(f"CudaGraphModule: warmup must be an int >= 1, got {warmup!r}")
        self.module = module
        self.warmup = warmup
        self.in_keys = _own_keys(module, "in_keys", in_keys)
        self.out_keys = _own_keys(module, "out_keys", out_keys)
        self.device = device

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> Any:
        """The wrapped module's state dict (called on its own; as a child, the usual one).

        >>> import warnings
        >>> from torch import nn
        >>> from tensordict.nn import CudaGraphModule, TensorDictModule
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     m = CudaGraphModule(TensorDictModule(nn.Linear(2, 2), ["x"], ["y"]))
        >>> list(m.state_dict())
        ['module.weight', 'module.bias']
        >>> m.load_state_dict(m.state_dict())
        <All keys matched successfully>
        """
        module = self._modules.get("module")
        if module is not None and not args and destination is None and not prefix:
            return module.state_dict(keep_vars=keep_vars)
        return super().state_dict(
            *args, destination=destination, prefix=prefix, keep_vars=keep_vars
        )

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """Load into the wrapped module (the keys ``state_dict()`` gives)."""
        module = self._modules.get("module")
        if module is not None:
            return module.load_state_dict(state_dict, strict=strict, assign=assign)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)


def _own_keys(module: Any, name: str, given: list[Any] | None) -> Any:
    """A module's own ``in_keys``/``out_keys`` are the ones used, as upstream, which warns
    when others are given (and were ignored); ``given`` for a module without them."""
    if not hasattr(module, name):
        return given
    own = getattr(module, name)
    if given and list(map(unravel_key, given)) != list(own):
        warnings.warn(
            f"CudaGraphModule ignores {name}={given}: the module has its own {name}={own}, "
            f"which it uses; leave {name} unset to silence this warning",
            UserWarning,
            stacklevel=3,
        )
    return own
