"""Parameters of torch.nn modules as TensorDicts: from_module, from_modules, to_module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from tensordict import _swap
from tensordict._keys import key_path
from tensordict._primitives import CollectionPrimitives


def _through_load_hooks(td: Any, module: nn.Module, strict: bool, call: str) -> Any:
    """``td`` as ``module.load_state_dict`` would see it: its flat state dict passed through
    every load-state-dict pre-hook of ``module`` and its submodules (each called, as torch
    calls it, with the whole dict and the submodule's key prefix), then nested again."""
    flat = td.flatten_keys(".")
    state = dict(flat.items())
    missing: list[str] = []
    unexpected: list[str] = []
    errors: list[str] = []
    for name, sub in module.named_modules():
        prefix = f"{name}." if name else ""
        for hook in sub._load_state_dict_pre_hooks.values():
            hook(state, prefix, {}, strict, missing, unexpected, errors)
    if errors:
        raise RuntimeError(f"{call}: a load-state-dict pre-hook reported: " + "; ".join(errors))
    return type(flat)(state, flat.batch_size).unflatten_keys(".")


def _check_module(call: str, module: Any, i: int | None = None) -> None:
    """A ``TypeError`` naming ``call`` unless ``module`` is an ``nn.Module``."""
    if not isinstance(module, nn.Module):
        which = "module" if i is None else f"module {i}"
        raise TypeError(f"{call}: {which} must be an nn.Module, got {type(module).__name__}")


def _module_tree(
    module: nn.Module, cls: Any, use_state_dict: bool, lock: bool, filter_empty: bool = True
) -> Any:
    """Parameters and buffers of ``module`` keyed by submodule names (no copies); with
    ``filter_empty=False`` parameterless submodules appear as empty TensorDicts."""
    if use_state_dict:
        # detached tensors sharing storage (the state dict's own values), as upstream
        td = cls(dict(module.state_dict()), []).unflatten_keys(".")
    else:
        entries: dict[str, Any] = {}
        for store in (module._parameters, module._buffers):
            for name, tensor in store.items():
                if tensor is not None:
                    entries[name] = tensor
        for name, child in module._modules.items():
            if child is not None:
                sub = _module_tree(child, cls, False, False, filter_empty)
                if sub._tensordict or not filter_empty:
                    entries[name] = sub
        td = cls._new_unsafe(entries, torch.Size([]), None, None)
    if lock:
        td.lock_()
    return td


def _differs(call: str, i: int, where: str, what: str) -> ValueError:
    return ValueError(f"{call}: {where}module {i} {what}")


_Tied = dict[int, tuple[list[Tensor], Tensor]]


def _stack_modules(
    cls: Any,
    modules: tuple[nn.Module, ...],
    path: str,
    call: str,
    tied: _Tied,
    expand_identical: bool = False,
) -> Any:
    """Walk same-structure ``modules`` in step, check them, stack their tensors (one pass).

    A tensor module 0 holds under several names (tied weights) is stacked once and the
    stack appears under each name, as long as every module ties the same names."""
    first = modules[0]
    where = f"submodule {path!r} of " if path else ""
    for i, other in enumerate(modules[1:], start=1):
        if type(other) is not type(first):
            raise TypeError(
                f"{call}: {where}module {i} is a "
                f"{type(other).__name__}, module 0 a {type(first).__name__}"
            )
        if other.training != first.training:
            mode = "train" if other.training else "eval"
            raise _differs(call, i, where, f"is in {mode} mode, module 0 is not")
    entries: dict[str, Any] = {}
    for kind in ("_parameters", "_buffers"):
        stores = [getattr(m, kind) for m in modules]
        names = [n for n, t in stores[0].items() if t is not None]
        for i, store in enumerate(stores[1:], start=1):
            have = [n for n, t in store.items() if t is not None]
            if have != names:
                missing = sorted(set(names) - set(have))
                extra = sorted(set(have) - set(names))
                what = (
                    f"has its {kind[1:]} in another order: {have}, module 0 has {names}"
                    if not missing and not extra
                    else f"has other {kind[1:]} than module 0: missing {missing}, extra {extra}"
                )
                raise _differs(call, i, where, what)
        for name in names:
            tensors = [store[name] for store in stores]
            t0 = tensors[0]
            full = f"{path}.{name}" if path else name
            seen = tied.get(id(t0))
            if seen is not None:
                for i, (t, before) in enumerate(zip(tensors, seen[0], strict=True)):
                    if t is not before:
                        raise ValueError(
                            f"{call}: {kind[1:-1]} {full!r} is tied to another in module 0 "
                            f"but not in module {i}"
                        )
                entries[name] = seen[1]
                continue
            if isinstance(t0, (UninitializedParameter, UninitializedBuffer)):
                raise NotImplementedError(
                    f"{call}: {kind[1:-1]} {full!r} of module 0 is uninitialized (a lazy "
                    "module): stacking lazy modules is not supported; run a forward pass "
                    "through each module first to initialize it"
                )
            shape, dtype, grad = t0.shape, t0.dtype, t0.requires_grad
            for i, t in enumerate(tensors[1:], start=1):
                if t.shape != shape or t.dtype != dtype or t.requires_grad != grad:
                    what = "requires_grad" if t.requires_grad != grad else "shape or dtype"
                    raise ValueError(
                        f"{call}: {kind[1:-1]} {full!r} of module {i} differs in {what}: "
                        f"{tuple(t.shape)} {t.dtype} requires_grad={t.requires_grad}, module 0 "
                        f"has {tuple(shape)} {dtype} requires_grad={grad}"
                    )
            if expand_identical and all(t is t0 for t in tensors):
                with torch.enable_grad():  # a view of the one tensor: its gradient reaches it
                    stacked = t0.expand(len(tensors), *t0.shape)
            else:
                stacked = torch.stack(tensors, 0)  # fresh storage (no grad): wrapped, no copy
                if isinstance(t0, nn.Parameter):
                    stacked = nn.Parameter(stacked, requires_grad=t0.requires_grad)
            tied[id(t0)] = (tensors, stacked)
            entries[name] = stacked
    names = [n for n, m in first._modules.items() if m is not None]
    for i, other in enumerate(modules[1:], start=1):
        have = [n for n, m in other._modules.items() if m is not None]
        if have != names:
            raise _differs(call, i, where, f"has submodules {have}, module 0 has {names}")
    for name in names:
        children: tuple[nn.Module, ...] = tuple(m._modules[name] for m in modules)  # type: ignore[misc]
        sub = _stack_modules(
            cls, children, f"{path}.{name}" if path else name, call, tied, expand_identical
        )
        if sub._tensordict:
            entries[name] = sub
    return cls._new_unsafe(entries, torch.Size([len(modules)]), None, None)


# The module layer registers its TensorDictParams here when it is imported (the core
# never imports it): see tensordict.utils.register_params_module.
_PARAMS_MODULE: list[Callable[[Any, Any], Any]] = []
_PARAMS_VIEW: list[tuple[type, Callable[[Any], Any]]] = []


def register_params_module(
    factory: Callable[[Any, Any], Any],
    *,
    params_type: type | None = None,
    view: Callable[[Any], Any] | None = None,
) -> None:
    """Set the callable ``factory(td, module)`` that ``from_module(..., as_module=True)``
    (and ``from_modules``, with ``module=None``) wrap their TensorDict with;
    ``import tensordict.nn`` registers ``TensorDictParams``. With ``params_type`` (that
    class) and ``view`` (``view(obj)``: the TensorDict of its own leaves that an instance
    reads as), an instance is taken as that TensorDict where a TensorDict is expected:
    a member of a lazy stack, an entry of a TensorDict, an input of ``vmap``.

    >>> import tensordict.nn
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> type(TensorDict.from_module(nn.Linear(2, 2), as_module=True)).__name__
    'TensorDictParams'
    """
    _PARAMS_MODULE[:] = [factory]
    if params_type is not None and view is not None:
        from tensordict._mapping import register_mapping_collection
        from tensordict._pytree import register_view_node  # (above this module)

        _PARAMS_VIEW[:] = [(params_type, view)]
        register_view_node(params_type, view)
        register_mapping_collection(params_type)  # a MutableMapping, as a TensorDict is


def params_view(obj: Any) -> Any:
    """The TensorDict of leaves that ``obj``, an instance of the ``params_type`` given to
    :func:`register_params_module` (a ``TensorDictParams``), reads as; None for anything else."""
    for params_type, view in _PARAMS_VIEW:
        if isinstance(obj, params_type):
            return view(obj)
    return None


def _wrap(call: str, td: Any, as_module: bool, module: nn.Module | None = None) -> Any:
    """``td`` itself, or as a ``TensorDictParams`` module (of ``module``) when ``as_module``."""
    if not as_module:
        return td
    if not _PARAMS_MODULE:
        raise ImportError(
            f"{call}(as_module=True) returns a tensordict.nn.TensorDictParams, and the module "
            "layer is not loaded: run `import tensordict.nn` first"
        )
    return _PARAMS_MODULE[0](td, module)


# The concrete TensorDict class (it sits above this mixin), looked up on first use.
_TD_CLASS: list[Any] = []


def _td_class() -> Any:
    if not _TD_CLASS:
        from tensordict._td import TensorDict

        _TD_CLASS.append(TensorDict)
    return _TD_CLASS[0]


def _key_error(call: str, missing: list[str], unexpected: list[str], module: nn.Module) -> KeyError:
    return KeyError(
        f"{call}: missing keys {missing}, unexpected keys {unexpected} for "
        f"{type(module).__name__} (pass strict=False to swap what matches)"
    )


class ModuleOps(CollectionPrimitives):
    """TensorDicts of module parameters, and swapping them into modules."""

    __slots__ = ()

    @classmethod
    def from_module(
        cls,
        module: nn.Module,
        as_module: bool = False,
        lock: bool = False,
        use_state_dict: bool = False,
        filter_empty: bool = True,
    ) -> Any:
        """The parameters and buffers of ``module`` as a nested TensorDict (the same tensors,
        no copies), keyed by submodule names (``"0"``, ``"1"``, ... for nn.Sequential).

        ``lock`` defaults to False for every spelling (one documented default).
        ``as_module=True`` returns a ``tensordict.nn.TensorDictParams`` (an ``nn.Module``
        whose parameters are these leaves; ``import tensordict.nn`` first).
        ``filter_empty=False`` keeps parameterless submodules as empty TensorDicts.

        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4))
        >>> params = TensorDict.from_module(model)
        >>> params["0", "weight"] is model[0].weight
        True
        """
        _check_module("TensorDict.from_module", module)
        tree = _module_tree(module, cls, use_state_dict, lock, filter_empty)
        return _wrap("TensorDict.from_module", tree, as_module, module)

    @classmethod
    def from_modules(
        cls,
        *modules: nn.Module,
        as_module: bool = False,
        lock: bool = True,
        use_state_dict: bool = False,
        lazy_stack: bool = False,
        expand_identical: bool = False,
    ) -> Any:
        """The parameters of same-structure ``modules`` stacked along a new first dim, as
        fresh leaves (parameters where the originals were) that an optimiser can own.

        The result is locked unless ``lock=False`` (as upstream).
        ``lazy_stack=True`` stacks the modules' own tensors lazily instead (no copy, a
        ``LazyStackedTensorDict``; not with lazy modules, nor with ``as_module=True``);
        ``expand_identical=True`` expands a tensor that every module holds (the same
        object) instead of copying it: a plain view of it, through which gradients reach it.

        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> stacked = TensorDict.from_modules(*[nn.Linear(3, 4) for _ in range(5)])
        >>> stacked.batch_size, stacked["weight"].shape, stacked["weight"].is_leaf
        (torch.Size([5]), torch.Size([5, 4, 3]), True)
        """
        call = "TensorDict.from_modules"
        if not modules:
            raise ValueError(f"{call}: needs at least one module")
        for i, module in enumerate(modules):
            _check_module(call, module, i)
        if lazy_stack:
            from tensordict._lazy import LazyStackedTensorDict  # (above this mixin)

            members = [_module_tree(m, cls, use_state_dict, False) for m in modules]
            for i, member in enumerate(members):
                lazy = [
                    ".".join(key_path(k, call))
                    for k, t in member.items(True, True)
                    if isinstance(t, (UninitializedParameter, UninitializedBuffer))
                ]
                if lazy:  # (upstream's wording, which callers match, typo included)
                    raise RuntimeError(
                        f"{call}: module {i} has uninitialized (lazy) tensors {lazy}: "
                        "lasy_stack=True is not compatible with lazy modules."
                    )
            if as_module:
                raise RuntimeError(
                    f"{call}: as_module=True with lazy_stack=True: a LazyStackedTensorDict "
                    "within a TensorDictParams isn't permitted (its leaves are stacked copies, "
                    "not the modules' tensors); pass one of the two"
                )
            out = LazyStackedTensorDict(members, stack_dim=0)
        else:
            with torch.no_grad():
                out = _stack_modules(cls, modules, "", call, {}, expand_identical)
        wrapped = _wrap(call, out, as_module)
        if lock:  # (after wrapping: a TensorDictParams holds its own lock, locked as upstream)
            wrapped.lock_()
        return wrapped

    def to_module(
        self,
        module: nn.Module,
        *,
        inplace: bool = False,
        return_swap: bool = True,
        swap_dest: Any = None,
        use_state_dict: bool = False,
        strict: bool = True,
        non_blocking: bool = False,
        preserve_module_state: bool = True,
    ) -> Any:
        """Put this TensorDict's tensors into ``module`` in place of its parameters and
        buffers. Used as a context manager the originals come back on exit, also when the
        body raises:

        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> model = nn.Linear(3, 4)
        >>> zeros = TensorDict.from_module(model).apply(torch.zeros_like)
        >>> with zeros.to_module(model):
        ...     out = model(torch.ones(2, 3))
        >>> bool((out == 0).all()), bool((model.weight != 0).any())
        (True, True)

        ``inplace=True`` copies the values into the module's tensors instead. With
        ``strict`` every missing and unexpected key is reported at once (KeyError).
        ``preserve_module_state=True`` (the default) keeps each slot's kind: a value
        swapped into a parameter is an ``nn.Parameter`` (with the module's
        ``requires_grad``; a value with autograd history is aliased, not detached) and a
        value swapped into a buffer a buffer, so ``state_dict()`` keeps its keys.
        ``False`` writes plain tensors as plain attributes (upstream's older behaviour).
        Under ``torch.compile`` a parameter slot receives the tensor itself (dynamo cannot
        build an ``nn.Parameter`` without breaking the graph); gradients flow as in eager.
        """
        if not isinstance(module, nn.Module):
            _check_module(self._call("to_module"), module)
        source: Any = self
        if use_state_dict:  # the values the module's load-state-dict pre-hooks make of them
            source = _through_load_hooks(self, module, strict, self._call("to_module"))
        if not inplace:  # one walk: each tensor swapped as it is matched
            walk = _swap.SwapWalk(preserve_module_state, _td_class() if return_swap else None)
            try:
                originals = walk.walk(source, module, ())
            except BaseException:  # (an interrupt mid-way): put back what was swapped
                walk.swap().restore()
                raise
            if strict and (walk.missing or walk.unexpected):  # undone before raising
                walk.swap().restore()
                raise _key_error(self._call("to_module"), walk.missing, walk.unexpected, module)
            if not return_swap:
                return None
            swapped = walk.cls._new_unsafe(originals, _swap.NO_BATCH, None, None)
            if swap_dest is not None:
                swapped = swap_dest.update(swapped)
            return _swap.Swap(walk.undo, swapped, walk.moves)
        call = self._call("to_module")
        walk = _swap.SwapWalk(True, None)  # matched as a swap would, then undone at once
        try:
            nested = walk.walk(source, module, ())
            pairs = _swap.planned_copies(walk)
        finally:
            walk.swap().restore()
        if strict and (walk.missing or walk.unexpected):  # refused before anything changes
            raise _key_error(call, walk.missing, walk.unexpected, module)
        saved: dict[int, Tensor] = {}
        if return_swap:  # the values overwritten, kept to copy back on exit (ties once)
            for current, _ in pairs:
                if id(current) not in saved:
                    saved[id(current)] = current.detach().clone()
        _swap.copy_checked(call, pairs, nested, non_blocking)
        if not return_swap:
            return None
        copy_back = [(current, saved[id(current)]) for current, _ in pairs]
        swapped = _swap.as_tree(_td_class(), _swap.map_tree(nested, lambda t: saved[id(t)]))
        if swap_dest is not None:
            swapped = swap_dest.update(swapped)
        return _swap.Swap([], swapped, None, copy_back)
