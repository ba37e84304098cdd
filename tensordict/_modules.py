"""Parameters of torch.nn modules as TensorDicts: from_module, from_modules, to_module."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from tensordict._protocol import CollectionProtocol

if TYPE_CHECKING:
    pass


def _module_tree(module: nn.Module, cls: Any, use_state_dict: bool, lock: bool) -> Any:
    """Parameters and buffers of ``module`` keyed by submodule names (no copies)."""
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
                sub = _module_tree(child, cls, False, False)
                if not sub.is_empty() or sub._tensordict:
                    entries[name] = sub
        td = cls._new_unsafe(entries, torch.Size([]), None, None)
    if lock:
        td.lock_()
    return td


def _same_structure_error(call: str, modules: tuple[nn.Module, ...]) -> None:
    first = modules[0]
    for i, other in enumerate(modules[1:], start=1):
        if type(other) is not type(first):
            raise TypeError(
                f"{call}: module {i} is a {type(other).__name__}, module 0 a {type(first).__name__}"
            )
        if other.training != first.training:
            mode = "train" if other.training else "eval"
            raise ValueError(f"{call}: module {i} is in {mode} mode, module 0 is not")
        names0 = [n for n, _ in first.named_parameters()] + [n for n, _ in first.named_buffers()]
        names = [n for n, _ in other.named_parameters()] + [n for n, _ in other.named_buffers()]
        if names != names0:
            missing = sorted(set(names0) - set(names))
            extra = sorted(set(names) - set(names0))
            raise ValueError(
                f"{call}: module {i} has other parameters than module 0: missing {missing}, "
                f"extra {extra}"
            )
        for (name, p0), (_, p) in zip(
            first.named_parameters(), other.named_parameters(), strict=True
        ):
            if p0.shape != p.shape or p0.dtype != p.dtype:
                raise ValueError(
                    f"{call}: parameter {name!r} of module {i} has shape {tuple(p.shape)} "
                    f"{p.dtype}, module 0 has {tuple(p0.shape)} {p0.dtype}"
                )
            if p0.requires_grad != p.requires_grad:
                raise ValueError(
                    f"{call}: parameter {name!r} of module {i} differs in requires_grad"
                )


class _Swap:
    """The originals replaced by :meth:`to_module`; restores them on exit (also on errors)."""

    def __init__(
        self, restore: list[tuple[dict[str, Any], str, Any, tuple[str, ...]]], swapped: Any
    ) -> None:
        self._restore = restore
        self.swapped = swapped

    def __enter__(self) -> Any:
        return self.swapped

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    def restore(self) -> None:
        """Put the original tensors back (idempotent)."""
        for store, name, value, _ in reversed(self._restore):
            store[name] = value
        self._restore = []


def _swap_into(
    td: Any,
    module: nn.Module,
    inplace: bool,
    restore: list[tuple[dict[str, Any], str, Any, tuple[str, ...]]],
    path: tuple[str, ...],
    missing: list[str],
    unexpected: list[str],
    memo: dict[int, Any],
) -> None:
    """Put ``td``'s tensors into ``module`` (tied modules swapped once, via ``memo``)."""
    if id(module) in memo:
        return
    memo[id(module)] = module
    keys = set(td.keys())
    stores: tuple[dict[str, Any], ...] = (module._parameters, module._buffers)
    for store in stores:
        for name, current in list(store.items()):
            if current is None:
                continue
            full = ".".join((*path, name))
            if name not in keys:
                missing.append(full)
                continue
            keys.discard(name)
            value = td._tensordict[name]
            if not isinstance(value, Tensor):
                unexpected.append(full)
                continue
            if inplace:
                with torch.no_grad():
                    current.copy_(value)
            else:
                restore.append((store, name, current, (*path, name)))
                store[name] = value
    for name, child in module._modules.items():
        if child is None:
            continue
        full = ".".join((*path, name))
        if name not in keys:
            if any(True for _ in child.parameters()) or any(True for _ in child.buffers()):
                missing.append(full)
            continue
        keys.discard(name)
        sub = td._tensordict[name]
        if not isinstance(sub, CollectionProtocol):
            unexpected.append(full)
            continue
        _swap_into(sub, child, inplace, restore, (*path, name), missing, unexpected, memo)
    unexpected.extend(".".join((*path, k)) for k in sorted(keys))


class ModuleOps(CollectionProtocol):
    """TensorDicts of module parameters, and swapping them into modules."""

    __slots__ = ()

    @classmethod
    def from_module(
        cls, module: nn.Module, lock: bool = False, use_state_dict: bool = False
    ) -> Any:
        """The parameters and buffers of ``module`` as a nested TensorDict (the same tensors,
        no copies), keyed by submodule names (``"0"``, ``"1"``, ... for nn.Sequential).

        ``lock`` defaults to False for every spelling (one documented default).

        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4))
        >>> params = TensorDict.from_module(model)
        >>> params["0", "weight"] is model[0].weight
        True
        """
        return _module_tree(module, cls, use_state_dict, lock)

    @classmethod
    def from_modules(cls, *modules: nn.Module, lock: bool = False) -> Any:
        """The parameters of same-structure ``modules`` stacked along a new first dim, as
        fresh leaves (parameters where the originals were) that an optimiser can own.

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
        _same_structure_error(call, modules)
        trees = [_module_tree(m, cls, False, False) for m in modules]
        with torch.no_grad():
            stacked: Any = torch.stack([t.detach() for t in trees], 0)
        params = dict(modules[0].named_parameters())

        def fresh(name: tuple[str, ...], x: Tensor) -> Tensor:
            # the stack made fresh tensors already: wrap them, no second copy
            original = params.get(".".join(name) if isinstance(name, tuple) else name)
            if original is not None:
                return nn.Parameter(x, requires_grad=original.requires_grad)
            return x

        out = stacked.named_apply(fresh, nested_keys=True)
        if lock:
            out.lock_()
        return out

    def to_module(
        self,
        module: nn.Module,
        *,
        inplace: bool = False,
        return_swap: bool = True,
        swap_dest: Any = None,
        use_state_dict: bool = False,
        strict: bool = True,
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
        """
        call = "TensorDict.to_module"
        source: Any = self
        if use_state_dict:
            source = self.flatten_keys(".").unflatten_keys(".")  # type: ignore[attr-defined]
        restore: list[tuple[dict[str, Any], str, Any, tuple[str, ...]]] = []
        missing: list[str] = []
        unexpected: list[str] = []
        try:
            _swap_into(source, module, inplace, restore, (), missing, unexpected, {})
            if strict and (missing or unexpected):
                raise KeyError(
                    f"{call}: missing keys {missing}, unexpected keys {unexpected} for "
                    f"{type(module).__name__} (pass strict=False to swap what matches)"
                )
        except BaseException:
            _Swap(restore, None).restore()
            raise
        if not return_swap or inplace:
            return _Swap([], None) if inplace else None
        swapped = (
            swap_dest if swap_dest is not None else self._new_unsafe({}, torch.Size([]), None, None)
        )
        for _, _, value, path in restore:
            swapped.set(path, value)
        return _Swap(restore, swapped)
