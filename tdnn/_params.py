"""TensorDictParams: a TensorDict of parameters registered as an nn.Module's own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    TensorDictBase,
    is_tensor_collection,
)
from tensordict.utils import register_params_module

#: Methods that change the entries without returning the collection itself: their
#: effect on the TensorDict of leaves is written back into the registrations.
_STRUCTURAL = frozenset(
    {"clear", "pop", "popitem", "setdefault", "create_nested", "set_non_tensor", "update"}
)


def _data_swappable(leaf: Any, new: Any) -> bool:
    """Whether ``leaf.data = new`` keeps ``leaf`` as ``module.to`` does: tensors of
    compatible kinds, and a leaf requiring gradients stays floating or complex."""
    return (
        isinstance(leaf, Tensor)
        and isinstance(new, Tensor)
        and torch._has_compatible_shallow_copy_type(leaf, new)
        and (not leaf.requires_grad or new.is_floating_point() or new.is_complex())
    )


def _convert(value: Tensor, no_convert: bool) -> Tensor:
    """A float leaf becomes an ``nn.Parameter``, others buffers; with ``no_convert`` every
    leaf is a buffer, and one that requires grad is kept as it is (an expanded parameter
    keeps its link to it, as upstream)."""
    if isinstance(value, (nn.Parameter, nn.Buffer)) or (no_convert and value.requires_grad):
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

    _tensor_collection = True  # is_tensor_collection(params) is True, as upstream

    def __init__(
        self, parameters: Any = None, *, no_convert: bool = False, lock: bool = False, **kwargs: Any
    ) -> None:
        super().__init__()
        if parameters is None:
            parameters = TensorDict(kwargs)
        elif isinstance(parameters, dict):
            parameters = TensorDict(parameters)
        elif isinstance(parameters, TensorDictParams):
            parameters = parameters._tree(hooks=False)
        if not is_tensor_collection(parameters):
            raise TypeError(
                "TensorDictParams: expected a TensorDict or a dict, got "
                f"{type(parameters).__name__}"
            )
        if isinstance(parameters, LazyStackedTensorDict):
            raise RuntimeError(
                "TensorDictParams: a LazyStackedTensorDict within a TensorDictParams isn't "
                "permitted (its leaves would be stacked copies, not the members' tensors); "
                "stack densely first (torch.stack(members) or lazy.contiguous())"
            )
        self.__dict__["_batch_size"] = parameters.batch_size
        self.__dict__["_device"] = parameters.device
        self.__dict__["no_convert"] = no_convert
        self.__dict__["_hooks_get"] = []
        self.__dict__["_extras"] = {}  # non-tensor entries, in no module registry
        self.__dict__["_order"] = {}  # every key, in the order it was first set
        self.__dict__["_locked"] = lock
        self.__dict__["_lock_ops"] = []  # lock_/unlock_ calls a `with` block undoes
        memo: dict[int, Tensor] = {}
        for key in list(parameters.keys()):
            self._put(key, parameters.get(key), memo)

    def _put(self, key: str, value: Any, memo: dict[int, Any]) -> None:
        # Registered straight into the module's dicts, as upstream does: a key may be any
        # TensorDict key, even the name of a method ("numpy", "sub").
        self._parameters.pop(key, None)
        self._buffers.pop(key, None)
        self._modules.pop(key, None)
        self.__dict__["_extras"].pop(key, None)
        self.__dict__["_order"].setdefault(key, None)
        if isinstance(value, Mapping) and not isinstance(value, (TensorDictParams, TensorDictBase)):
            value = TensorDict(value, self.__dict__["_batch_size"])
        if isinstance(value, (NonTensorData, NonTensorStack)):
            self.__dict__["_extras"][key] = value
            return
        if is_tensor_collection(value):
            self._modules[key] = TensorDictParams(value, no_convert=self.no_convert)
            return
        if not isinstance(value, Tensor):
            try:
                value = torch.as_tensor(value)
            except (TypeError, ValueError, RuntimeError):  # a non-tensor entry
                self.__dict__["_extras"][key] = value
                return
        leaf = memo.get(id(value))
        if leaf is None:
            leaf = memo[id(value)] = _convert(value, self.no_convert)
        if isinstance(leaf, nn.Parameter):
            self._parameters[key] = leaf
        else:
            self._buffers[key] = leaf
            self._non_persistent_buffers_set.discard(key)

    def _sync(self, tree: Any) -> None:
        """Make the registrations what ``tree`` (a TensorDict of them, changed in place by
        a TensorDict method) now holds: same leaves kept, new ones converted."""
        memo: dict[int, Any] = {}
        seen = set()
        for key, value in tree.items():
            seen.add(key)
            sub = self._modules.get(key)
            if isinstance(sub, TensorDictParams) and isinstance(value, TensorDict):
                sub._sync(value)
                continue
            current = self._parameters.get(key, self._buffers.get(key))
            if current is None or current is not value:
                self._put(key, value, memo)
        for store in (self._parameters, self._buffers, self._modules, self.__dict__["_extras"]):
            for key in [k for k in store if k not in seen]:
                del store[key]
        self.__dict__["_order"] = dict.fromkeys(tree.keys())
        self.__dict__["_batch_size"] = tree.batch_size
        self.__dict__["_device"] = tree.device

    @property
    def data(self) -> Any:
        """The TensorDict of the leaves' ``.data``: detached, sharing their storage, so
        in-place writes into it reach the parameters (as ``TensorDict.data``, and upstream).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(2))
        >>> _ = p.data.fill_("a", 1.0)
        >>> p["a"].requires_grad, p.data["a"].requires_grad, p["a"].tolist()
        (True, False, [1.0, 1.0])
        """
        return self._tree(hooks=False).data

    def _tree(self, hooks: bool = True) -> Any:
        """The TensorDict of the registered leaves themselves (gradients flow through it).
        While locked it is built once and kept (as long as it holds what is registered):
        the TensorDicts nested in it then have a live locked parent, as upstream's have."""
        state = self.__dict__
        if state["_locked"] and not state["_hooks_get"]:
            kept = state.get("_locked_tree")
            if kept is not None and self._holds(kept):
                return kept
        hooks_get = state["_hooks_get"] if hooks else ()
        entries: dict[str, Any] = dict(self._parameters)
        if self._buffers:
            entries.update(self._buffers)
        for key, sub in self._modules.items():
            if isinstance(sub, TensorDictParams):
                entries[key] = sub._tree(hooks)
        if state["_extras"]:
            entries.update(state["_extras"])
        order = state["_order"]  # the keys in the order they were set, as a dict has
        keys = list(entries)
        if keys != (list(order) if len(order) == len(keys) else [k for k in order if k in entries]):
            entries = {k: entries[k] for k in (*order, *entries) if k in entries}
        if hooks_get:
            for hook in hooks_get:
                entries = {
                    k: hook(self, v) if isinstance(v, Tensor) else v for k, v in entries.items()
                }
        try:
            tree = TensorDict(entries, state["_batch_size"], device=state["_device"])
        except ValueError:  # leaves swapped in with other batch dims (to_module into it)
            tree = TensorDict(entries, [], device=state["_device"])
        if state["_locked"]:
            tree.lock_()
            if not state["_hooks_get"]:
                state["_locked_tree"] = tree
        return tree

    def _holds(self, tree: Any) -> bool:
        """Whether ``tree`` holds exactly the leaves registered now (nothing was swapped in,
        moved or cast since it was built), and none of its levels has get hooks since (a
        hook registered on a sub-module alone must be applied when the tree is read)."""
        state = self.__dict__
        if tree.batch_size != state["_batch_size"] or state["_hooks_get"]:
            return False
        extras, count = state["_extras"], 0
        for key, value in tree.items():
            count += 1
            if isinstance(value, Tensor):
                if self._parameters.get(key, self._buffers.get(key)) is not value:
                    return False
            elif key in extras:  # (only this module's own methods change those, unlocked)
                continue
            else:
                sub = self._modules.get(key)
                if not isinstance(sub, TensorDictParams) or not sub._holds(value):
                    return False
        subs = sum(isinstance(m, TensorDictParams) for m in self._modules.values())
        return count == len(self._parameters) + len(self._buffers) + subs + len(extras)

    @property
    def batch_size(self) -> torch.Size:
        """The batch size of the TensorDict of leaves; settable as a TensorDict's is.

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(3, 2))
        >>> p.batch_size = [3]
        >>> p.batch_size
        torch.Size([3])
        """
        return torch.Size(self.__dict__["_batch_size"])

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        tree = self._tree(hooks=False)
        tree.batch_size = value  # validated against every leaf
        self.__dict__["_batch_size"] = tree.batch_size

    @property
    def _param_td(self) -> Any:
        """The parameters as a locked TensorDict (new keys go through this module)."""
        return self._tree().lock_()

    @property
    def is_locked(self) -> bool:
        """Whether keys may not be added, removed or replaced (``lock_``/``unlock_``)."""
        return bool(self.__dict__["_locked"])

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        """``td.is_locked = flag`` locks (``lock_()``) or unlocks (``unlock_()``)."""
        self.lock_() if value else self.unlock_()

    def lock_(self) -> TensorDictParams:
        """Refuse new, removed or replaced keys until ``unlock_()`` (or the end of a
        ``with params.lock_():`` block).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1))
        >>> with p.lock_():
        ...     p.is_locked
        True
        >>> p.is_locked
        False
        """
        self._set_lock(True, "lock_")
        return self

    def unlock_(self) -> TensorDictParams:
        """Allow new, removed and replaced keys again (see :meth:`lock_`).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> TensorDictParams(a=torch.zeros(1), lock=True).unlock_().is_locked
        False
        """
        self._set_lock(False, "unlock_")
        return self

    def _set_lock(self, value: bool, op: str) -> None:
        before = self.__dict__["_locked"]
        self._lock_all(value)
        self.__dict__["_lock_ops"].append(None if before == value else op)
        del self.__dict__["_lock_ops"][:-1]  # only the latest call is what a `with` undoes

    def _lock_all(self, value: bool) -> None:
        self.__dict__["_locked"] = value
        kept = self.__dict__.pop("_locked_tree", None)
        if kept is not None and not value:  # what is nested in it may be unlocked now
            kept.unlock_()
        for sub in self._modules.values():
            if isinstance(sub, TensorDictParams):
                sub._lock_all(value)

    def __enter__(self) -> TensorDictParams:
        ops = self.__dict__["_lock_ops"]
        self.__dict__.setdefault("_entered", []).append(ops.pop() if ops else None)
        return self

    def __exit__(self, *exc: object) -> None:
        op = self.__dict__["_entered"].pop()
        if op == "lock_":
            self._set_lock(False, "unlock_")
        elif op == "unlock_":
            self._set_lock(True, "lock_")
        self.__dict__["_lock_ops"].clear()

    def _check_unlocked(self, call: str, key: object) -> None:
        if self.__dict__["_locked"]:
            raise RuntimeError(
                f"TensorDictParams.{call}: Cannot modify locked TensorDictParams: cannot "
                f"add, remove or replace key {key!r} (call unlock_() first)"
            )

    @classmethod
    def __torch_function__(
        cls,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        """A torch function given a TensorDictParams runs on its TensorDict of leaves
        (``torch.stack([p, p])``, ``torch.mean(p, 0)``, ``torch.clone(p)``...)."""

        def unwrap(value: Any) -> Any:
            if isinstance(value, TensorDictParams):
                return value._tree()
            if isinstance(value, (list, tuple)):
                return type(value)(unwrap(v) for v in value)
            return value

        kwargs = dict(kwargs or {})
        target = kwargs.get("out")
        if isinstance(target, TensorDictParams):  # written through its detached leaves
            kwargs["out"] = target.data
        result = func(*unwrap(args), **{k: unwrap(v) for k, v in kwargs.items()})
        return target if isinstance(target, TensorDictParams) else result

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
        return self._tree()[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, tuple) and len(key) == 1:
            key = key[0]
        if self.__dict__["_locked"] and isinstance(key, (str, tuple)):
            self._check_unlocked("__setitem__", key)
        if isinstance(key, tuple) and any(isinstance(k, tuple) for k in key):
            from tensordict.utils import unravel_key

            key = unravel_key(key)
        if isinstance(key, tuple) and len(key) > 1 and all(isinstance(k, str) for k in key):
            sub = self._modules.get(key[0])
            if not isinstance(sub, TensorDictParams):
                sub = TensorDictParams(
                    TensorDict({}, self.__dict__["_batch_size"]), no_convert=self.no_convert
                )
                self._modules[key[0]] = sub
            sub[key[1:] if len(key) > 2 else key[1]] = value
            return
        if isinstance(key, str):
            bs = self.__dict__["_batch_size"]
            shape = None if is_tensor_collection(value) else getattr(value, "shape", None)
            if isinstance(value, TensorDict) and len(value.batch_size) < len(bs):
                value = value.clone(False)  # a shorter batch is refined, as TensorDict does
                value.batch_size = bs
            if shape is not None and tuple(shape[: len(bs)]) != tuple(bs):
                raise RuntimeError(
                    f"TensorDictParams.set: shape {tuple(shape)} of key {key!r} does not start "
                    f"with batch_size {tuple(bs)}"
                )
            self._put(key, value, {})
            return
        self._tree()[key] = _unwrap(value)  # (an index: written into the leaves)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, tuple) and len(key) > 1:
            sub = self._modules.get(key[0])
            if not isinstance(sub, TensorDictParams):
                raise KeyError(f"TensorDictParams.__delitem__: no sub-TensorDict {key[0]!r}")
            del sub[key[1:] if len(key) > 2 else key[1]]
            return
        name = key[0] if isinstance(key, tuple) else key
        self._check_unlocked("__delitem__", name)
        for store in (self._parameters, self._buffers, self._modules, self.__dict__["_extras"]):
            store.pop(name, None)
        self.__dict__["_order"].pop(name, None)

    def set(self, key: Any, value: Any, **kwargs: Any) -> TensorDictParams:
        """Register ``value`` under ``key`` (converted as at construction).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1)).set("b", torch.ones(1))
        >>> sorted(name for name, _ in p.named_parameters())
        ['a', 'b']
        """
        if kwargs.get("inplace") and key in self:
            with torch.no_grad():
                self.data.set_(key, value)
            return self
        if key in self:
            self._check_unlocked("set", key)
        self[key] = value
        return self

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__") or "_parameters" not in self.__dict__:
                raise
        raw = name in _STRUCTURAL or (name.endswith("_") and not name.endswith("__"))
        tree = self._tree(hooks=not raw)
        attr = getattr(tree, name)
        if not callable(attr):
            return attr
        return _Forwarded(self, name, attr, tree)

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictParams:
        """A TensorDictParams of copies (parameters stay parameters, ties stay tied).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1))
        >>> p.clone()["a"] is p["a"]
        False
        """
        if not recurse:
            return TensorDictParams(self._tree().clone(False), no_convert=True)
        memo: dict[int, Tensor] = {}

        def copy(x: Tensor) -> Tensor:
            out = memo.get(id(x))
            if out is None:
                out = x.detach().clone().requires_grad_(x.requires_grad)
                if isinstance(x, nn.Parameter):
                    out = nn.Parameter(out, requires_grad=x.requires_grad)
                memo[id(x)] = out
            return out

        copied = self._tree().apply(copy)  # nested batch sizes kept
        return TensorDictParams(copied, no_convert=True)

    def copy(self) -> TensorDictParams:
        """A TensorDictParams holding the same leaves (a shallow copy).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(1))
        >>> p.copy()["a"] is p["a"]
        True
        """
        return TensorDictParams(self._tree(), no_convert=True)

    def apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> Any:
        """``TensorDict.apply`` on the leaves (not ``nn.Module.apply``); with
        ``inplace=True`` the leaves are updated and the module returned.

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> TensorDictParams(a=torch.ones(1)).apply(lambda x: x.data * 2)["a"]
        tensor([2.])
        """
        return self._apply_via("apply", fn, others, kwargs)

    def named_apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> Any:
        """``TensorDict.named_apply`` on the leaves (not ``nn.Module.named_apply``).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> TensorDictParams(a=torch.ones(1)).named_apply(lambda k, x: x.data * 0)["a"]
        tensor([0.])
        """
        return self._apply_via("named_apply", fn, others, kwargs)

    def _apply_via(
        self, name: str, fn: Callable[..., Any], others: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """``apply``/``named_apply`` on the TensorDict of leaves. ``out=`` a
        TensorDictParams takes the results as its entries (made parameters, as any entry
        it is given), and is returned."""
        target = kwargs.get("out")
        if isinstance(target, TensorDictParams):
            result = self._apply_via(name, fn, others, {**kwargs, "out": None})
            target.update(result)
            return target
        tree = self._tree(hooks=not kwargs.get("inplace"))
        try:
            return _Forwarded(self, name, getattr(tree, name), tree)(fn, *others, **kwargs)
        except RuntimeError as err:
            if not kwargs.get("inplace"):
                raise
            raise ValueError(
                f"TensorDictParams.{name}: Failed to update the leaves in place ({err}); "
                "write into params.data instead"
            ) from None

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        """``nn.Module.load_state_dict``; a TensorDict's own state dict loads too (the
        ``__batch_size``/``__device`` entries of its older layout describe the TensorDict,
        not a leaf, and are skipped).

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

    def memmap_(self, *args: Any, **kwargs: Any) -> Any:
        """Refused: parameters cannot be memory-mapped in place (``memmap()`` copies them
        into a new TensorDict).

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> TensorDictParams(a=torch.zeros(1)).memmap_()
        Traceback (most recent call last):
        ...
        RuntimeError: TensorDictParams.memmap_: Cannot build a memmap TensorDict in-place ...
        """
        raise RuntimeError(
            "TensorDictParams.memmap_: Cannot build a memmap TensorDict in-place from "
            "parameters; call memmap() for a memory-mapped copy"
        )

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """``TensorDict.to`` on the leaves: a TensorDictParams of the moved or cast leaves
        (this one when nothing changes), as upstream. A module holding this one still
        moves it in place through ``module.to(...)``.

        >>> import torch
        >>> from tensordict.nn import TensorDictParams
        >>> p = TensorDictParams(a=torch.zeros(2))
        >>> q = p.to(torch.float64)
        >>> type(q).__name__, type(q["a"]).__name__, q["a"].dtype, p["a"].dtype
        ('TensorDictParams', 'Parameter', torch.float64, torch.float32)

        With ``inplace=True`` each leaf's data is replaced, as ``module.float()`` does:
        the parameters stay the same objects (an optimizer holding them keeps them).

        >>> a = p["a"]
        >>> p.to(torch.float64, inplace=True) is p, p["a"] is a, a.dtype
        (True, True, torch.float64)
        """
        tree = self._tree(hooks=False)
        if kwargs.get("inplace"):
            if self.__dict__["_locked"]:
                raise RuntimeError(
                    "TensorDictParams.to: Cannot modify locked TensorDict with inplace=True "
                    "(call unlock_() first, or use the result without inplace)"
                )
            before = list(tree.items(True, True))
            tree.to(*args, **kwargs)
            with torch.no_grad():
                for key, leaf in before:
                    new = tree.get(key)
                    if new is not leaf and _data_swappable(leaf, new):
                        leaf.data = new
                        tree.set(key, leaf)
                        if leaf.grad is not None:  # (as module.to: the gradient follows)
                            leaf.grad = leaf.grad.to(device=leaf.device, dtype=leaf.dtype)
            self._sync(tree)  # (the leaves that could not keep their object: registered anew)
            return self
        out = tree.to(*args, **kwargs)
        if out is tree:
            return self
        if not is_tensor_collection(out):
            return out
        for key, leaf in tree.items(True, True):  # a cast parameter is a parameter again
            moved = out.get(key)
            if (
                type(leaf) is nn.Parameter
                and type(moved) is not nn.Parameter
                and (moved.is_floating_point() or moved.is_complex())
            ):  # (an integer cast cannot be a parameter: a plain tensor, as upstream)
                out.set(key, nn.Parameter(moved.detach(), requires_grad=leaf.requires_grad))
        return TensorDictParams(out, no_convert=True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("TensorDictParams holds parameters; it has no forward")

    def extra_repr(self) -> str:
        return f"batch_size={tuple(self.__dict__['_batch_size'])}"

    # Arithmetic and comparison dunders are looked up on the type, not via __getattr__.
    def __eq__(self, other: object) -> Any:
        return self._tree() == _unwrap(other)

    def __ne__(self, other: object) -> Any:
        return self._tree() != _unwrap(other)

    __hash__ = nn.Module.__hash__

    def __len__(self) -> int:
        return len(self._tree())

    def __iter__(self) -> Any:
        return iter(self._tree())

    def __contains__(self, key: Any) -> bool:
        return key in self._tree().keys(True)

    def __bool__(self) -> bool:
        return bool(self._tree())  # raises, as a TensorDict's truth value is ambiguous


def _unwrap(value: Any) -> Any:
    return value._tree() if isinstance(value, TensorDictParams) else value


def _binary(name: str) -> Callable[..., Any]:
    def op(self: TensorDictParams, other: Any) -> Any:
        return getattr(self._tree(), name)(_unwrap(other))

    op.__name__ = name
    return op


def _cast(name: str) -> Callable[..., Any]:
    def cast(self: TensorDictParams, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._tree(), name)(*args, **kwargs)

    cast.__name__ = name
    cast.__doc__ = f"``TensorDict.{name}`` of the leaves (a TensorDict), not nn.Module's."
    return cast


for _name in ("float", "double", "half", "bfloat16", "type"):  # nn.Module's cast in place
    setattr(TensorDictParams, _name, _cast(_name))

for _name in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__pow__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__",
    "__neg__", "__abs__", "__invert__",
):  # fmt: skip
    if _name in ("__neg__", "__abs__", "__invert__"):
        setattr(TensorDictParams, _name, lambda self, _n=_name: getattr(self._tree(), _n)())
    else:
        setattr(TensorDictParams, _name, _binary(_name))


class _Forwarded:
    """A TensorDict method called on a TensorDictParams: runs on its ``data``; a result
    that is that same TensorDict (in-place methods) gives back the module."""

    def __init__(
        self, owner: TensorDictParams, name: str, method: Callable[..., Any], tree: Any
    ) -> None:
        self._owner, self._name, self._method, self._tree = owner, name, method, tree

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = tuple(_unwrap(a) for a in args)
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        tree, name, owner = self._tree, self._name, self._owner
        structural = name in _STRUCTURAL
        if structural and owner.__dict__["_locked"]:
            owner._check_unlocked(name, args[0] if args else None)
        if name.endswith("_") and not name.endswith("__"):
            with torch.no_grad():  # in-place writes into parameters, as an optimiser does
                out = self._method(*args, **kwargs)
        else:
            out = self._method(*args, **kwargs)
        if out is tree:
            if not owner.__dict__["_hooks_get"] or name != "apply":
                owner._sync(tree)
            return owner
        if isinstance(out, tuple) and any(part is tree for part in out):  # split_keys(inplace)
            owner._sync(tree)
            return tuple(owner if part is tree else part for part in out)
        if structural:
            owner._sync(tree)
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
    register_params_module(_of_module, params_type=TensorDictParams, view=_leaves_of)


def _leaves_of(params: TensorDictParams) -> Any:
    """What a lazy stack, a TensorDict or ``vmap`` takes a TensorDictParams as: the
    TensorDict of its own leaves (no copy: gradients reach them)."""
    return params._tree()
