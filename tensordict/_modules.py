"""Parameters of torch.nn modules as TensorDicts: from_module, from_modules, to_module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from tensordict._keys import key_path
from tensordict._primitives import CollectionPrimitives
from tensordict._torch_compat import is_functorch_wrapped


def _module_tree(
    module: nn.Module, cls: Any, use_state_dict: bool, lock: bool, filter_empty: bool = True
) -> Any:
    """Parameters and buffers of ``module`` keyed by submodule names (no copies); with
    ``filter_empty=False`` parameterless submodules appear as empty TensorDicts."""
    if use_state_dict:
        td = cls(dict(module.state_dict(keep_vars=True)), []).unflatten_keys(".")
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
        from tensordict._pytree import register_view_node  # (above this module)

        _PARAMS_VIEW[:] = [(params_type, view)]
        register_view_node(params_type, view)


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


# One undo step: (the store written, the store the original came from, name, original).
_Restore = list[tuple[dict[str, Any], dict[str, Any], str, Any]]


class _Swap:
    """The originals replaced by :meth:`to_module`; restores them on exit (also on errors)."""

    def __init__(
        self,
        restore: _Restore,
        swapped: Any,
        copy_back: list[tuple[Tensor, Tensor]] | None = None,
        originals: dict[str, Any] | None = None,
    ) -> None:
        self._restore = restore
        self._copy_back = copy_back or []  # inplace=True: (module tensor, its saved value)
        self._swapped = swapped
        self._originals = originals  # built into ``swapped`` when first asked for

    @property
    def swapped(self) -> Any:
        """The module's original tensors, as a TensorDict shaped like the one swapped in."""
        if self._swapped is None and self._originals is not None:
            from tensordict._td import TensorDict  # the concrete class sits above this mixin

            self._swapped = _as_tree(TensorDict, self._originals)
        return self._swapped

    def __enter__(self) -> Any:
        return self.swapped

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the original tensors back (idempotent)."""
        for written, origin, name, value in self._restore:  # in order: so is each store
            if written is not origin:
                written.pop(name, None)
            origin[name] = value
        with torch.no_grad():
            for tensor, saved in self._copy_back:
                tensor.copy_(saved)
        self._restore = []
        self._copy_back = []


def _placed(
    module: nn.Module, kind: str, name: str, current: Tensor, value: Tensor, preserve: bool
) -> tuple[dict[str, Any], Any]:
    """Where ``value`` goes in ``module`` and as what: with ``preserve`` a parameter slot
    keeps a parameter (with the module's requires_grad; a value with autograd history is
    aliased, so gradients still flow) and a buffer slot a buffer; without, a plain tensor
    replaces a parameter as a plain attribute (out of ``parameters()``, ``state_dict()``
    and ``from_module``, as upstream) and a parameter is registered as one."""
    # (the exact-type tests first: Parameter's metaclass makes isinstance slow)
    is_param = type(value) is nn.Parameter or (
        type(value) is not Tensor and isinstance(value, nn.Parameter)
    )
    if kind == "__dict__":  # (a plain attribute: a parameter is registered, as upstream)
        return (module._parameters if is_param else module.__dict__), value
    if kind == "_parameters":
        if preserve:
            if not is_param or value.requires_grad != current.requires_grad:
                if current.requires_grad and (value.requires_grad or is_functorch_wrapped(value)):
                    value = value.as_subclass(nn.Parameter)
                else:
                    # a memory-mapped leaf becomes a plain view of the same bytes (it has
                    # no autograd of its own): the parameter still reads and writes the file
                    plain = (
                        value
                        if type(value) in (Tensor, nn.Parameter)
                        else value.as_subclass(Tensor)
                    )
                    if plain.requires_grad:
                        plain = plain.detach()
                    # what nn.Parameter(plain, requires_grad) builds, without its Python
                    # __new__ (this runs once per leaf on every swap)
                    value = Tensor._make_subclass(nn.Parameter, plain, current.requires_grad)
            return module._parameters, value
        return (module._parameters if is_param else module.__dict__), value
    if is_param and not preserve:
        return module._parameters, value
    if is_param:
        value = value.as_subclass(Tensor)  # (an alias: autograd history is kept)
    return module._buffers, value


def _has_tensors(module: nn.Module) -> bool:
    if not (module._parameters or module._buffers or module._modules):
        return False  # the common parameterless child (activations, dropout): no walk
    return any(True for _ in module.parameters()) or any(True for _ in module.buffers())


# One planned replacement: (module, "_parameters", "_buffers" or "__dict__", name, the module's
# tensor, the new tensor, the path of the module's submodule).
_Plan = list[tuple[nn.Module, str, str, Tensor, Tensor, tuple[str, ...]]]


def _plan_swap(
    td: Any,
    module: nn.Module,
    plan: _Plan,
    path: tuple[str, ...],
    missing: list[str],
    unexpected: list[str],
    memo: dict[int, Any],
) -> dict[str, Any]:
    """Match ``td``'s tensors with ``module``'s (tied modules once, via ``memo``) into
    ``plan``, changing nothing; returns the tensors to be replaced as a nested dict."""
    originals: dict[str, Any] = {}
    if id(module) in memo:
        return originals
    memo[id(module)] = module
    entries = td._tensordict
    keys = set(entries)
    for kind in ("_parameters", "_buffers"):
        store: dict[str, Any] = getattr(module, kind)
        for name, current in list(store.items()):
            if current is None:
                continue
            if name not in keys:
                missing.append(".".join((*path, name)))
                continue
            keys.discard(name)
            value = entries[name]
            if not isinstance(value, Tensor):
                unexpected.append(".".join((*path, name)))
                continue
            plan.append((module, kind, name, current, value, path))  # key joined on error
            originals[name] = current
    for name, child in module._modules.items():
        if child is None:
            continue
        if name not in keys:
            if _has_tensors(child):
                missing.append(".".join((*path, name)))
            continue
        keys.discard(name)
        sub = entries[name]
        if not isinstance(sub, CollectionPrimitives):
            unexpected.append(".".join((*path, name)))
            continue
        inner = _plan_swap(sub, child, plan, (*path, name), missing, unexpected, memo)
        if inner:
            originals[name] = inner
    if keys:  # a plain attribute (an enclosing swap's), or unexpected
        for name in [k for k in entries if k in keys]:
            current = module.__dict__.get(name)
            value = entries[name]
            if isinstance(current, Tensor) and isinstance(value, Tensor):
                plan.append((module, "__dict__", name, current, value, path))
                originals[name] = current
                keys.discard(name)
        unexpected.extend(".".join((*path, k)) for k in sorted(keys))
    return originals


def _copy_checked(call: str, plan: _Plan, non_blocking: bool = False) -> None:
    """``to_module(inplace=True)``: check every shape first, then copy (all or nothing)."""
    for _, _, name, current, value, path in plan:
        if value.shape != current.shape:
            key = ".".join((*path, name))
            raise ValueError(
                f"{call}: key {key!r} has shape {tuple(value.shape)}, the module's tensor "
                f"{tuple(current.shape)}; inplace=True copies into it, so they must match"
            )
    with torch.no_grad():
        for _, _, _, current, value, _ in plan:
            current.copy_(value, non_blocking=non_blocking)


def _map_tree(nested: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    return {k: _map_tree(v, fn) if isinstance(v, dict) else fn(v) for k, v in nested.items()}


_NO_BATCH = torch.Size([])


def _as_tree(cls: Any, nested: dict[str, Any]) -> Any:
    entries = {k: _as_tree(cls, v) if type(v) is dict else v for k, v in nested.items()}
    return cls._new_unsafe(entries, _NO_BATCH, None, None)


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
        tree = _module_tree(module, cls, use_state_dict, lock, filter_empty)
        return _wrap("TensorDict.from_module", tree, as_module, module)

    @classmethod
    def from_modules(
        cls,
        *modules: nn.Module,
        as_module: bool = False,
        lock: bool = False,
        use_state_dict: bool = False,
        lazy_stack: bool = False,
        expand_identical: bool = False,
    ) -> Any:
        """The parameters of same-structure ``modules`` stacked along a new first dim, as
        fresh leaves (parameters where the originals were) that an optimiser can own.

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
        if lock:
            out.lock_()
        return _wrap(call, out, as_module)

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
        """
        call = self._call("to_module")
        source: Any = self
        if use_state_dict:
            source = self.flatten_keys(".").unflatten_keys(".")  # type: ignore[attr-defined]
        plan: _Plan = []
        missing: list[str] = []
        unexpected: list[str] = []
        originals = _plan_swap(source, module, plan, (), missing, unexpected, {})
        if strict and (missing or unexpected):  # refused before anything changes
            raise KeyError(
                f"{call}: missing keys {missing}, unexpected keys {unexpected} for "
                f"{type(module).__name__} (pass strict=False to swap what matches)"
            )
        if inplace:
            saved: dict[int, Tensor] = {}
            if return_swap:  # the values overwritten, kept to copy back on exit (ties once)
                for _, _, _, current, _, _ in plan:
                    if id(current) not in saved:
                        saved[id(current)] = current.detach().clone()
            _copy_checked(call, plan, non_blocking)
            if not return_swap:
                return None
            from tensordict._td import TensorDict  # the concrete class sits above this mixin

            copy_back = [(current, saved[id(current)]) for _, _, _, current, _, _ in plan]
            swapped = _as_tree(TensorDict, _map_tree(originals, lambda t: saved[id(t)]))
            if swap_dest is not None:
                swapped = swap_dest.update(swapped)
            return _Swap([], swapped, copy_back)
        restore: _Restore = []
        try:
            for owner, kind, name, current, value, _ in plan:
                origin: dict[str, Any] = (
                    owner.__dict__ if kind == "__dict__" else owner.__dict__[kind]
                )
                written, placed = _placed(owner, kind, name, current, value, preserve_module_state)
                if written is not origin:  # moved to another store: a plain attribute...
                    del origin[name]
                restore.append((written, origin, name, current))
                written[name] = placed  # (a slot kept in its store keeps its position)
        except BaseException:  # (an interrupt mid-way): put back what was swapped
            _Swap(restore, None).restore()
            raise
        if not return_swap:
            return None
        if swap_dest is None:  # the TensorDict of originals is built only if asked for
            return _Swap(restore, None, None, originals)
        from tensordict._td import TensorDict  # the concrete class sits above this mixin

        return _Swap(restore, swap_dest.update(_as_tree(TensorDict, originals)))
