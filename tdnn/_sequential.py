"""TensorDictSequential: TensorDict modules run one after the other on one TensorDict."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tdnn._base import TensorDictModuleBase
from tdnn._fastcall import hookless, plain_calls
from tdnn._helpers import WrapModule
from tdnn._module import (
    SKIP_EXISTING,
    TensorDictModule,
    deprecated_device,
    positional_out,
    skip_on,
    tensor_inputs,
)
from tensordict import NestedKey, TensorDict, is_leaf_nontensor, is_tensor_collection, unravel_key


def _io(module: Any) -> tuple[list[Any], list[Any]]:
    return list(getattr(module, "in_keys", [])), list(getattr(module, "out_keys", []))


class TensorDictSequential(TensorDictModuleBase):
    """Run TensorDict modules (or plain ``td -> td`` callables) in order.

    Modules are given as arguments, or as one (ordered) dict of named modules.
    ``in_keys`` are the keys read before any module writes them; ``out_keys`` the keys
    written, or those kept by ``selected_out_keys``/:meth:`select_out_keys`: then the
    modules run on a shallow copy and only the selected keys are written back, so
    intermediate results never reach the caller's TensorDict.
    ``inplace``: None returns what the last module returned, True writes the outputs
    into the input, False into a new empty TensorDict, ``"empty"`` into
    ``tensordict.empty()``. ``partial_tolerant=True`` skips a module whose inputs are
    missing.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, TensorDictSequential
    >>> seq = TensorDictSequential(
    ...     TensorDictModule(nn.Linear(3, 4), ["obs"], ["hidden"]),
    ...     TensorDictModule(nn.Linear(4, 2), ["hidden"], ["action"]),
    ... )
    >>> seq.in_keys, seq.out_keys
    (['obs'], ['hidden', 'action'])
    >>> sorted(seq.select_out_keys("action")(TensorDict({"obs": torch.zeros(5, 3)}, [5])).keys())
    ['action', 'obs']
    """

    # Upstream attributes of a module wrapper that a sequence answers with constants.
    method: str | None = None
    method_kwargs: dict[str, Any] = {}  # noqa: RUF012  (read-only)
    strict: bool = False

    @property
    def is_functional(self) -> bool:
        """False, as for ``TensorDictModule`` (deprecated, as upstream)."""
        return bool(TensorDictModule.is_functional.fget(self))  # type: ignore[attr-defined]

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        selected_out_keys: Sequence[NestedKey] | None = None,
        inplace: bool | str | None = None,
    ) -> None:
        super().__init__()
        if (
            len(modules) == 1
            and isinstance(modules[0], Mapping)
            and not isinstance(modules[0], nn.Module)
        ):
            named = {str(k): _as_module(k, m) for k, m in modules[0].items()}
            self.module: nn.ModuleList | nn.ModuleDict = nn.ModuleDict(named)
        else:
            self.module = nn.ModuleList([_as_module(i, m) for i, m in enumerate(modules)])
        if inplace not in (None, True, False, "empty"):
            raise ValueError(
                f"TensorDictSequential: inplace must be None, True, False or 'empty', got "
                f"{inplace!r}"
            )
        self.partial_tolerant = partial_tolerant
        self.inplace = inplace
        self._select_before_return = False
        self._refresh_keys()
        if selected_out_keys is not None:
            missing = [k for k in map(unravel_key, selected_out_keys) if k not in self._out_keys]
            if missing:
                raise ValueError(
                    f"TensorDictSequential: All keys in selected_out_keys must be in out_keys: "
                    f"{missing} are not in {self._out_keys}"
                )
            self.select_out_keys(*selected_out_keys)

    @property
    def device(self) -> torch.device:
        """The device of the first parameter (cpu if none). Deprecated upstream.

        >>> import warnings
        >>> from torch import nn
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(TensorDictModule(nn.Linear(2, 2), ["x"], ["y"]))
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     seq.device
        device(type='cpu')
        """
        return deprecated_device(self, type(self).__name__)

    def _members(self) -> list[Any]:
        members: Any = self._modules["module"]
        return list(members._modules.values())

    def _refresh_keys(self) -> None:
        read: list[Any] = []
        written: list[Any] = []
        for m in self._members():
            ins, outs = _io(m)
            for k in ins:  # (a module may read one key twice: listed once)
                if k not in written and k not in read:
                    read.append(k)
            written += [k for k in outs if k != "_"]
        # a key written twice is listed where it is written last, as upstream's
        written = [k for i, k in enumerate(written) if k not in written[i + 1 :]]
        self._in_keys = read
        selected = self.__dict__.get("_out_keys_apparent")
        self._out_keys = written
        if self._select_before_return and selected is not None:
            self._out_keys_apparent = [k for k in selected if k in written]
        else:
            self._out_keys_apparent = written

    def _select(self, selected: list[Any]) -> None:
        self._select_before_return = True

    def reset_out_keys(self) -> TensorDictSequential:
        """Undo :meth:`select_out_keys`: every written key is returned again.

        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(TensorDictModule(lambda x: x, ["a"], ["b"]))
        >>> seq.select_out_keys("b").reset_out_keys()._select_before_return
        False
        """
        super().reset_out_keys()
        self._select_before_return = False
        return self

    def forward(
        self, tensordict: Any = None, *args: Any, tensordict_out: Any = None, **kwargs: Any
    ) -> Any:
        if not isinstance(tensordict, TensorDict) and not is_tensor_collection(tensordict):
            if tensordict is None and "tensordict" in kwargs:
                return self.forward(kwargs.pop("tensordict"), *args, **kwargs)
            return self._dispatch(tensordict, *args, **kwargs)
        if args:
            tensordict_out = positional_out("TensorDictSequential", args, tensordict_out)
        select = self._select_before_return
        if SKIP_EXISTING[0] and skip_on() and self._skippable(tensordict):
            return tensordict
        inplace = self.inplace
        if tensordict_out is None:
            if inplace is False:
                tensordict_out = TensorDict()
            elif inplace == "empty":
                tensordict_out = tensordict.empty()
        # the members write into a shallow copy unless the input itself is the output
        td = tensordict.clone(False) if select or tensordict_out is not None else tensordict
        if tensordict_out is None and inplace is True:
            tensordict_out = tensordict  # members that return new TensorDicts: copied back
        tolerant = self.partial_tolerant
        plain = not kwargs and plain_calls()
        for m in self._members():
            if tolerant:
                ins, _ = _io(m)
                present = td.keys(True)
                if any(k not in present for k in ins):
                    continue
            if plain and hookless(m):  # all that m(td) would do
                out = m._simple(td, True) if isinstance(m, TensorDictModuleBase) else NotImplemented
                td = m.forward(td) if out is NotImplemented else out
            else:
                td = m(td, **kwargs)
        if tensordict_out is not None:
            if td is not tensordict_out:
                _copy_keys(td, tensordict_out, self.out_keys)
            return tensordict_out
        if select:
            _copy_keys(td, tensordict, self.out_keys)
            return tensordict
        return td

    def _skippable(self, tensordict: Any) -> bool:
        present = tensordict.keys(True)
        out_keys = self.out_keys
        return all(k in present for k in out_keys) and not any(k in out_keys for k in self.in_keys)

    def _dispatch(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        """Called with tensors: run the modules on a ``{key: tensor}`` dict, return the
        out_keys. TensorDictModules and nested sequences are called with tensors too (so
        ``torch.fx`` traces through, and their forward hooks see tensors); any other
        module or callable is given a TensorDict of the entries so far."""
        env = tensor_inputs("TensorDictSequential", self.in_keys, first, args, kwargs)
        if kwargs:
            raise TypeError(
                f"TensorDictSequential: unexpected input {next(iter(kwargs))!r}; in_keys are "
                f"{self.in_keys}"
            )
        for m in self._members():
            ins, outs = _io(m)
            if self.partial_tolerant and any(k not in env for k in ins):
                continue
            if type(m).forward not in _TENSOR_CALLS:  # a td -> td callable or module
                env.update(m(TensorDict(env, [])).items(True, True, is_leaf=is_leaf_nontensor))
                continue
            result = m(*[env.get(k) for k in ins])
            written = [k for k in outs if k != "_"]
            if not written:
                continue
            values = result if isinstance(result, tuple) and len(written) > 1 else (result,)
            env.update(zip(written, values, strict=True))
        results = [env[k] for k in self.out_keys]
        return results[0] if len(results) == 1 else tuple(results)

    def _flat(self) -> list[tuple[str, Any]]:
        """(name, module) of the leaf modules, nested sequences expanded."""
        out: list[tuple[str, Any]] = []
        members: Any = self._modules["module"]
        for name, m in members._modules.items():
            if isinstance(m, TensorDictSequential) and not m._select_before_return:
                out += m._flat()
            else:
                out.append((name, m))
        return out

    def select_subsequence(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> TensorDictSequential:
        """The modules (the same objects) needed to go from ``in_keys`` to ``out_keys``
        (defaults: the sequence's); a nested sequence is filtered in place of being kept
        whole. ``partial_tolerant`` and ``inplace`` are kept.

        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(
        ...     TensorDictModule(lambda x: x, ["a"], ["b"]),
        ...     TensorDictModule(lambda x: x, ["c"], ["d"]),
        ... )
        >>> seq.select_subsequence(out_keys=["d"]).in_keys
        ['c']
        """
        # As upstream: a module stays if each of its inputs is given or written by a module
        # kept before it; then, going back, if it writes a key wanted or read by a module
        # kept after it. A nested sequence (of this exact type) is filtered the same way.
        members: Any = self._modules["module"]
        modules = list(members._modules.items())
        available = [unravel_key(k) for k in (self.in_keys if in_keys is None else in_keys)]
        kept = []
        for name, m in modules:
            if type(m) is TensorDictSequential:
                try:
                    m = m.select_subsequence(in_keys=available)
                except ValueError:
                    continue
            ins, outs = _io(m)
            if all(k in available for k in ins):
                kept.append((name, m))
                available += outs
        needed = [unravel_key(k) for k in (self.out_keys if out_keys is None else out_keys)]
        modules = []
        for name, m in reversed(kept):
            if any(k in needed for k in _io(m)[1]):
                if type(m) is TensorDictSequential:
                    m = m.select_subsequence(out_keys=needed)
                modules.append((name, m))
                needed += _io(m)[0]
        modules.reverse()
        if not modules:
            raise ValueError(
                f"TensorDictSequential.select_subsequence: no module is selected for "
                f"in_keys={in_keys}, out_keys={out_keys}"
            )
        return self._like(modules)

    def _like(self, modules: list[tuple[str, Any]]) -> TensorDictSequential:
        tolerant, inplace = self.partial_tolerant, self.inplace
        if isinstance(self.module, nn.ModuleDict):
            return TensorDictSequential(dict(modules), partial_tolerant=tolerant, inplace=inplace)
        members = [m for _, m in modules]
        return TensorDictSequential(*members, partial_tolerant=tolerant, inplace=inplace)

    def __getitem__(self, index: int | slice | str) -> Any:
        members: Any = self._modules["module"]
        if isinstance(index, slice):
            return self._like(list(members._modules.items())[index])
        if isinstance(index, str):
            return members[index]
        return self._members()[index]

    def __setitem__(self, index: int | str, module: Any) -> None:
        members: Any = self._modules["module"]
        if isinstance(members, nn.ModuleDict):
            members[str(index)] = _as_module(index, module)
        else:
            members[index] = _as_module(index, module)
        self._refresh_keys()

    def __delitem__(self, index: int | str) -> None:
        members: Any = self._modules["module"]
        del members[index]
        self._refresh_keys()

    def __len__(self) -> int:
        return len(self._modules["module"])  # type: ignore[arg-type]

    def append(self, module: Any) -> TensorDictSequential:
        """Add ``module`` at the end; the in and out keys follow (upstream reaches the
        module list's ``append`` and leaves them stale).

        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["a"], ["b"]))
        >>> seq.append(TensorDictModule(lambda x: x * 2, ["b"], ["c"])).out_keys
        ['b', 'c']
        """
        return self.insert(len(self), module)

    def insert(self, index: int, module: Any) -> TensorDictSequential:
        """Add ``module`` before position ``index``; the in and out keys follow.

        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> seq = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["a"], ["b"]))
        >>> seq.insert(0, TensorDictModule(lambda x: x - 1, ["z"], ["a"])).in_keys
        ['z']
        """
        members: Any = self._modules["module"]
        if isinstance(members, nn.ModuleDict):
            raise TypeError(
                f"{type(self).__name__}.insert: this sequence was built from a dict, whose "
                "members have names: set seq[name] = module instead"
            )
        members.insert(index, _as_module(index, module))
        self._refresh_keys()
        return self


def _copy_keys(source: Any, dest: Any, keys: list[Any]) -> None:
    present = source.keys(True)
    for key in keys:
        if key in present:
            dest.set(key, source.get(key))


def _as_module(where: Any, m: Any) -> nn.Module:
    if isinstance(m, nn.Module):
        return m
    if callable(m):
        return WrapModule(m)  # as upstream: a plain td -> td callable
    raise TypeError(f"TensorDictSequential: item {where!r} is not callable: {m!r}")


# Modules whose forward also takes plain tensors (the others are given a TensorDict).
_TENSOR_CALLS = (TensorDictModule.forward, TensorDictSequential.forward)
