"""Small helpers: set_skip_existing, WrapModule and the as_tensordict_module decorator."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tdnn._base import TensorDictModuleBase
from tdnn._module import SKIP, TensorDictModule, skip_on
from tensordict import NestedKey


def skip_existing() -> bool:
    """Whether modules skip computing outputs that are all present already (set with
    :class:`set_skip_existing`).

    >>> from tensordict.nn import set_skip_existing, skip_existing
    >>> with set_skip_existing(True):
    ...     skip_existing()
    True
    >>> skip_existing()
    False
    """
    return skip_on()


class set_skip_existing:
    """Within this context (or while a decorated ``forward`` runs), a TensorDict module
    whose out_keys are all present already, and not read, returns its input untouched.

    As a decorator of ``forward(self, tensordict, ...)`` it also applies that check to the
    method; ``set_skip_existing(None)`` only applies the check, leaving the mode to the
    caller's context (it is refused as a context manager). ``thread_local=True`` sets the
    mode for the calling thread only.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, set_skip_existing
    >>> calls = []
    >>> m = TensorDictModule(lambda x: calls.append(1) or x, ["a"], ["b"])
    >>> td = TensorDict({"a": torch.zeros(1), "b": torch.ones(1)}, [1])
    >>> with set_skip_existing(True):
    ...     _ = m(td)
    >>> calls
    []
    """

    def __init__(
        self,
        mode: bool | None = True,
        in_key_attr: str = "in_keys",
        out_key_attr: str = "out_keys",
        *,
        thread_local: bool = False,
    ) -> None:
        self.mode = mode
        self.in_key_attr = in_key_attr
        self.out_key_attr = out_key_attr
        self.thread_local = thread_local
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        if self.mode is None:
            raise RuntimeError(
                "set_skip_existing: It seems you are using set_skip_existing(None) as a "
                "context manager; None only makes sense as a method decorator"
            )
        if self.thread_local:
            SKIP.push_local(self.mode)
        else:
            self._previous.append(SKIP.set_global(self.mode))

    def __exit__(self, *exc: Any) -> None:
        if self.thread_local:
            SKIP.pop_local()
        else:
            SKIP.set_global(self._previous.pop())

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(func).parameters)
        if len(params) < 2 or params[1] != "tensordict":
            raise RuntimeError(
                f"set_skip_existing: the decorated method's first argument after self must "
                f"be named 'tensordict', got {params[1:2]}"
            )
        mode, ins, outs = self.mode, self.in_key_attr, self.out_key_attr
        local = self.thread_local

        @functools.wraps(func)
        def wrapper(module: Any, tensordict: Any, *args: Any, **kwargs: Any) -> Any:
            previous = None
            if mode is not None:
                if local:
                    SKIP.push_local(mode)
                else:
                    previous = SKIP.set_global(mode)
            try:
                if skip_on():
                    in_keys, out_keys = getattr(module, ins), getattr(module, outs)
                    present = tensordict.keys(True)
                    if all(k in present for k in out_keys) and not any(
                        k in out_keys for k in in_keys
                    ):
                        return tensordict
                return func(module, tensordict, *args, **kwargs)
            finally:
                if mode is not None:
                    if local:
                        SKIP.pop_local()
                    else:
                        SKIP.set_global(previous)

        return wrapper


class WrapModule(TensorDictModuleBase):
    """A ``td -> td`` callable as a module, with declared in_keys and out_keys (not
    checked: they tell a sequence what the function reads and writes).

    ``inplace=True`` writes the result's entries into the input (``update``) and returns
    the input; by default the call returns what ``func`` returns.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import WrapModule
    >>> double = WrapModule(lambda td: td.set("y", td["x"] * 2), in_keys=["x"], out_keys=["y"])
    >>> double(TensorDict({"x": torch.ones(2)}, [2]))["y"]
    tensor([2., 2.])
    >>> td = TensorDict(x=torch.ones(2))
    >>> WrapModule(lambda t: TensorDict(y=t["x"] + 1), inplace=True)(td) is td
    True
    """

    def __init__(
        self,
        func: Callable[[Any], Any],
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        *,
        inplace: bool = False,
    ) -> None:
        super().__init__()
        self.func = func
        self.inplace = inplace
        self.in_keys = [] if in_keys is None else in_keys
        self.out_keys = [] if out_keys is None else out_keys

    @property
    def fn(self) -> Callable[[Any], Any]:
        """The wrapped callable (``func``)."""
        return self.func

    def forward(self, tensordict: Any) -> Any:
        result = self.func(tensordict)
        if self.inplace and result is not tensordict:
            return tensordict.update(result)
        return result


def as_tensordict_module(
    in_keys: Sequence[NestedKey], out_keys: Sequence[NestedKey]
) -> Callable[[Callable[..., Any]], Any]:
    """Decorate a function of tensors into a TensorDictModule; a method (its first
    parameter named ``self``) into a method that calls one such module, shared by every
    instance, with the instance.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import as_tensordict_module
    >>> @as_tensordict_module(in_keys=["a", "b"], out_keys=["c"])
    ... def add(a, b):
    ...     return a + b
    >>> add(TensorDict({"a": torch.ones(1), "b": torch.ones(1)}, [1]))["c"]
    tensor([2.])
    """

    def wrap(fn: Callable[..., Any]) -> Any:
        if list(inspect.signature(fn).parameters)[:1] != ["self"]:
            return TensorDictModule(fn, in_keys=in_keys, out_keys=out_keys)

        def call(*args: Any, _instance: Any, **kwargs: Any) -> Any:
            return fn(_instance, *args, **kwargs)

        module = TensorDictModule(call, in_keys=in_keys, out_keys=out_keys)

        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            return module(*args, _instance=self, **kwargs)

        return method

    return wrap
