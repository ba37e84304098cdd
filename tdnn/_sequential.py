"""TensorDictSequential: TensorDict modules run one after the other on one TensorDict."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from torch import nn

from tdnn._module import TensorDictModule, TensorDictModuleBase, positional_out, tensor_inputs
from tensordict import NestedKey, TensorDict, is_tensor_collection, unravel_key


def _io(module: Any) -> tuple[list[Any], list[Any]]:
    return list(getattr(module, "in_keys", [])), list(getattr(module, "out_keys", []))


class TensorDictSequential(TensorDictModuleBase):
    """Run TensorDict modules (or plain ``td -> td`` callables) in order.

    ``in_keys`` are the keys read before any module writes them; ``out_keys`` the keys
    written (or ``selected_out_keys``).

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tdnn import TensorDictModule, TensorDictSequential
    >>> seq = TensorDictSequential(
    ...     TensorDictModule(nn.Linear(3, 4), ["obs"], ["hidden"]),
    ...     TensorDictModule(nn.Linear(4, 2), ["hidden"], ["action"]),
    ... )
    >>> seq.in_keys, seq.out_keys
    (['obs'], ['hidden', 'action'])
    >>> seq(TensorDict({"obs": torch.zeros(5, 3)}, [5]))["action"].shape
    torch.Size([5, 2])
    """

    def __init__(
        self,
        *modules: Callable[..., Any],
        partial_tolerant: bool = False,
        selected_out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        wrapped = []
        for i, m in enumerate(modules):
            if isinstance(m, nn.Module):
                wrapped.append(m)
            elif callable(m):
                wrapped.append(_Callable(m))
            else:
                raise TypeError(f"TensorDictSequential: item {i} is not callable: {m!r}")
        self.module = nn.ModuleList(wrapped)
        self.partial_tolerant = partial_tolerant
        self._selected = (
            None if selected_out_keys is None else [unravel_key(k) for k in selected_out_keys]
        )
        self._refresh_keys()

    def _refresh_keys(self) -> None:
        read: list[Any] = []
        written: list[Any] = []
        for m in self.module:
            ins, outs = _io(m)
            read += [k for k in ins if k not in written and k not in read]
            written += [k for k in outs if k not in written and k != "_"]
        self.in_keys = read
        self.out_keys = written if self._selected is None else list(self._selected)

    def forward(
        self, tensordict: Any = None, *args: Any, tensordict_out: Any = None, **kwargs: Any
    ) -> Any:
        if not isinstance(tensordict, TensorDict) and not is_tensor_collection(tensordict):
            return self._dispatch(tensordict, *args, **kwargs)
        if args:
            tensordict_out = positional_out("TensorDictSequential", args, tensordict_out)
        td = tensordict
        tolerant = self.partial_tolerant
        members: Any = self._modules["module"]
        for m in members._modules.values():  # (iterating self.module, without the lookups)
            if tolerant:
                ins, _ = _io(m)
                if any(k not in td.keys(True) for k in ins):
                    continue
            td = m(td, **kwargs)
        if tensordict_out is not None:
            tensordict_out.update(td.select(*self.out_keys, strict=False))
            return tensordict_out
        return td

    def _dispatch(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        """Called with tensors: run the modules on a ``{key: tensor}`` dict, return the
        out_keys. TensorDictModules and nested sequences are called with tensors too (so
        ``torch.fx`` traces through, and their forward hooks see tensors); any other
        module or callable is given a TensorDict of the entries so far."""
        env = tensor_inputs("TensorDictSequential", self.in_keys, first, args, kwargs)
        for m in self.module:
            ins, outs = _io(m)
            if self.partial_tolerant and any(k not in env for k in ins):
                continue
            if type(m).forward not in _TENSOR_CALLS:  # a td -> td callable or module
                env.update(m(TensorDict(env, [])).items(True, True))
                continue
            result = m(*[env.get(k) for k in ins])
            written = [k for k in outs if k != "_"]
            if not written:
                continue
            values = result if isinstance(result, tuple) and len(written) > 1 else (result,)
            env.update(zip(written, values, strict=True))
        results = [env[k] for k in self.out_keys]
        return results[0] if len(results) == 1 else tuple(results)

    def select_out_keys(self, *out_keys: NestedKey) -> TensorDictSequential:
        """Report only ``out_keys`` (the others are still computed and written)."""
        self._selected = [unravel_key(k) for k in out_keys]
        self._refresh_keys()
        return self

    def select_subsequence(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> TensorDictSequential:
        """The modules needed to go from ``in_keys`` to ``out_keys``."""
        modules = list(self.module)
        if in_keys is not None:
            reachable = {unravel_key(k) for k in in_keys}
            keep = []
            for m in modules:
                ins, outs = _io(m)
                if reachable & set(ins):
                    keep.append(m)
                    reachable |= set(outs)
            modules = keep
        if out_keys is not None:
            needed = {unravel_key(k) for k in out_keys}
            keep = []
            for m in reversed(modules):
                ins, outs = _io(m)
                if needed & set(outs):
                    keep.append(m)
                    needed |= set(ins)
            modules = keep[::-1]
        if not modules:
            raise ValueError("TensorDictSequential.select_subsequence: no module is selected")
        return TensorDictSequential(*modules)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return TensorDictSequential(*list(self.module)[index])
        return self.module[index]

    def __len__(self) -> int:
        return len(self.module)


# Modules whose forward also takes plain tensors (the others are given a TensorDict).
_TENSOR_CALLS = (TensorDictModule.forward, TensorDictSequential.forward)


class _Callable(nn.Module):
    """A plain ``td -> td`` function as a module (no declared keys)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn
        self.in_keys: list[Any] = []
        self.out_keys: list[Any] = []

    def forward(self, td: Any, **kwargs: Any) -> Any:
        return self.fn(td)
