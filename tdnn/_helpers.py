"""Small helpers: skip_existing, WrapModule and the as_tensordict_module decorator."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tdnn._module import SKIP_EXISTING, TensorDictModule, TensorDictModuleBase
from tensordict import NestedKey


@contextlib.contextmanager
def skip_existing(mode: bool = True) -> Iterator[None]:
    """Within this context, a TensorDictModule whose out_keys are all present already
    returns its input untouched (a process-wide switch, like torch.no_grad's cousins).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tdnn import TensorDictModule, skip_existing
    >>> calls = []
    >>> m = TensorDictModule(lambda x: calls.append(1) or x, ["a"], ["b"])
    >>> td = TensorDict({"a": torch.zeros(1), "b": torch.ones(1)}, [1])
    >>> with skip_existing():
    ...     _ = m(td)
    >>> calls
    []
    """
    previous = SKIP_EXISTING[0]
    SKIP_EXISTING[0] = mode
    try:
        yield
    finally:
        SKIP_EXISTING[0] = previous


class WrapModule(TensorDictModuleBase):
    """A ``td -> td`` callable as a module, with declared in_keys and out_keys.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tdnn import WrapModule
    >>> double = WrapModule(lambda td: td.set("y", td["x"] * 2), in_keys=["x"], out_keys=["y"])
    >>> double(TensorDict({"x": torch.ones(2)}, [2]))["y"]
    tensor([2., 2.])
    """

    def __init__(
        self,
        fn: Callable[[Any], Any],
        in_keys: Sequence[NestedKey] = (),
        out_keys: Sequence[NestedKey] = (),
    ) -> None:
        super().__init__()
        self.fn = fn
        self.in_keys = list(in_keys)
        self.out_keys = list(out_keys)

    def forward(self, tensordict: Any) -> Any:
        return self.fn(tensordict)


def as_tensordict_module(
    in_keys: Sequence[NestedKey], out_keys: Sequence[NestedKey]
) -> Callable[[Callable[..., Any]], TensorDictModule]:
    """Decorate a function of tensors into a TensorDictModule.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tdnn import as_tensordict_module
    >>> @as_tensordict_module(in_keys=["a", "b"], out_keys=["c"])
    ... def add(a, b):
    ...     return a + b
    >>> add(TensorDict({"a": torch.ones(1), "b": torch.ones(1)}, [1]))["c"]
    tensor([2.])
    """

    def wrap(fn: Callable[..., Any]) -> TensorDictModule:
        return TensorDictModule(fn, in_keys=in_keys, out_keys=out_keys)

    return wrap
