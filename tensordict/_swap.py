"""The engine of ``TensorDict.to_module``: put tensors into a module's slots, undo it on exit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from tensordict._primitives import CollectionPrimitives
from tensordict._torch_compat import compile_disabled, functorch_wrapped

_PARAMETER = nn.Parameter
_make_subclass = Tensor._make_subclass
_compiling = torch.compiler.is_compiling
NO_BATCH = torch.Size([])

# Undo steps. A slot written in place: (the store, name, original); assigning the original
# back keeps the store's key order. A tensor moved to another store (with
# preserve_module_state=False a parameter slot given a plain tensor puts it in the
# module's __dict__, a plain attribute, as upstream; a buffer slot given a parameter
# registers it): (the store written, the store it left, name, original, the key order of
# the store it left before the move; () for a __dict__).
_Undo = list[tuple[dict[str, Any], str, Any]]
_Moves = list[tuple[dict[str, Any], dict[str, Any], str, Any, tuple[str, ...]]]


class Swap:
    """The originals replaced by :meth:`to_module`; restores them on exit (also on errors)."""

    __slots__ = ("_copy_back", "_moves", "_swapped", "_undo")

    def __init__(
        self,
        undo: _Undo,
        swapped: Any,
        moves: _Moves | None = None,
        copy_back: list[tuple[Tensor, Tensor]] | None = None,
    ) -> None:
        self._undo = undo
        self._moves = moves
        self._copy_back = copy_back  # inplace=True: (module tensor, its saved value)
        self._swapped = swapped

    @property
    def swapped(self) -> Any:
        """The module's original tensors, as a TensorDict shaped like the one swapped in."""
        return self._swapped

    def __enter__(self) -> Any:
        return self.swapped

    def __exit__(self, *exc: Any) -> None:
        self.restore()

    # Upstream's to_module(return_swap=True) returns the TensorDict of the originals
    # itself, so code written for it reads them off the result (``swap.to_module(m)``,
    # ``swap["0", "weight"]``): those reads reach ``swapped``.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # (an unset slot, or a private name: not forwarded)
            raise AttributeError(f"'Swap' object has no attribute {name!r}")
        return getattr(self._swapped, name)

    def __getitem__(self, key: Any) -> Any:
        return self._swapped[key]

    def __iter__(self) -> Any:
        return iter(self._swapped)

    def __len__(self) -> int:
        return len(self._swapped)

    def __bool__(self) -> bool:  # (len() is the originals' batch length: 0)
        return True

    def __contains__(self, key: object) -> bool:
        return key in self._swapped

    def restore(self) -> None:
        """Put the original tensors back (idempotent)."""
        undo = self._undo
        if undo:
            self._undo = []
            for store, name, value in reversed(undo):
                store[name] = value
        if self._moves:
            moves, self._moves = self._moves, None
            _undo_moves(moves)
        if self._copy_back:
            copy_back, self._copy_back = self._copy_back, None
            with torch.no_grad():
                for tensor, saved in copy_back:
                    tensor.copy_(saved)


def _forwarded(name: str) -> Callable[..., Any]:
    def op(self: Swap, *args: Any) -> Any:
        args = tuple(a._swapped if isinstance(a, Swap) else a for a in args)
        return getattr(self._swapped, name)(*args)

    op.__name__ = name
    return op


# ...and so do its operators: ``old == new`` compares the originals (it was object
# identity, a silent False), ``old * 0`` computes on them
for _name in (
    *("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"),
    *("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__"),
    *("__truediv__", "__rtruediv__", "__floordiv__", "__mod__", "__pow__", "__rpow__"),
    *("__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__"),
    *("__neg__", "__abs__", "__invert__", "__setitem__", "__delitem__"),
):
    setattr(Swap, _name, _forwarded(_name))
Swap.__hash__ = object.__hash__  # type: ignore[method-assign]


def _undo_moves(moves: _Moves) -> None:
    # in the order they were made: a store whose moved names all come back gets its order
    # back as is; one that kept some names in place is reordered (it differs, then)
    orders: dict[int, tuple[dict[str, Any], tuple[str, ...]]] = {}
    for written, origin, name, value, order in moves:
        written.pop(name, None)
        origin[name] = value
        if id(origin) not in orders:
            orders[id(origin)] = (origin, order)  # (its order before the first move)
    for origin, order in orders.values():
        if (
            order and tuple(origin) != order
        ):  # (a module's __dict__ keeps its own order)  # (a name it gained meanwhile goes last)
            head = {k: origin[k] for k in order if k in origin}
            tail = {k: v for k, v in origin.items() if k not in head}
            origin.clear()
            origin.update(head)
            origin.update(tail)


def param_value(value: Tensor, current: Tensor) -> Tensor:
    """What a parameter slot holding ``current`` receives for ``value`` when the module's
    state is preserved: a parameter with ``current``'s requires_grad (a value with autograd
    history, or a functorch wrapper, is aliased so gradients still flow; otherwise a
    detached alias)."""
    # (the exact-type tests first: Parameter's metaclass makes isinstance slow)
    tv = type(value)
    if tv is Tensor:
        if value.requires_grad:
            if current.requires_grad:
                return value.as_subclass(_PARAMETER)
            return _make_subclass(_PARAMETER, value.detach(), False)
        if current.requires_grad and functorch_wrapped(value):
            return value.as_subclass(_PARAMETER)
        # what nn.Parameter(value, requires_grad) builds, without its Python __new__
        return _make_subclass(_PARAMETER, value, current.requires_grad)
    if (tv is _PARAMETER or isinstance(value, _PARAMETER)) and (
        value.requires_grad == current.requires_grad
    ):
        return value
    if current.requires_grad and (value.requires_grad or functorch_wrapped(value)):
        return value.as_subclass(_PARAMETER)
    # a memory-mapped leaf becomes a plain view of the same bytes (it has no autograd of
    # its own): the parameter still reads and writes the file
    plain = value if tv is _PARAMETER else value.as_subclass(Tensor)
    if plain.requires_grad:
        plain = plain.detach()
    return _make_subclass(_PARAMETER, plain, current.requires_grad)


def _as_plain(value: Tensor) -> Tensor:
    """A tensor subclass (a memory-mapped leaf) as a plain view of the same bytes."""
    return value.as_subclass(Tensor)


# (dynamo cannot trace as_subclass: run it outside the graph, a clean graph break)
_plain_view: Callable[[Tensor], Tensor] = compile_disabled(_as_plain)


def traced_value(value: Tensor, current: Tensor) -> Tensor:
    """What a parameter slot holding ``current`` receives for ``value`` under
    ``torch.compile``: dynamo can neither build an ``nn.Parameter`` nor tell a functorch
    wrapper without breaking the graph, so the slot gets ``value`` itself (a memory-mapped
    leaf as a plain view of its bytes, as in eager mode), detached where the slot's own
    parameter does not require grad. A ``current`` that is not a parameter is what an
    enclosing swap put there (the originals coming back): nothing is detached then.
    Gradients reach ``value`` as in eager mode; a value that does not require grad is not
    made a leaf that does (eager builds one)."""
    kind = type(value)
    if kind is not Tensor and kind is not _PARAMETER:
        value = _plain_view(value)
    if value.requires_grad and not current.requires_grad and type(current) is _PARAMETER:
        return value.detach()
    return value


def _is_param(value: Tensor) -> bool:
    tv = type(value)
    return tv is _PARAMETER or (tv is not Tensor and isinstance(value, _PARAMETER))


def _has_tensors(module: nn.Module) -> bool:
    if not (module._parameters or module._buffers or module._modules):
        return False  # the common parameterless child (activations, dropout): no walk
    return any(True for _ in module.parameters()) or any(True for _ in module.buffers())


# A submodule's path, as (its parent's path, its name) pairs from the root's (): built
# for every submodule walked, joined only for an error.
_Path = tuple[Any, ...]


def _dotted(path: _Path, name: str) -> str:
    parts = [name]
    while path:
        path, last = path
        parts.append(last)
    return ".".join(reversed(parts))


class SwapWalk:
    """One walk over a TensorDict and a module together that swaps each tensor as it is
    matched, recording the undo steps and every missing or unexpected key (dotted).

    With ``preserve`` a parameter slot keeps a parameter (:func:`param_value`) and a buffer
    slot a buffer (a parameter given to it becomes a plain alias); without, a plain tensor
    replaces a parameter as a plain attribute (out of ``parameters()``, ``state_dict()``
    and ``from_module``, as upstream) and a parameter replaces a buffer as a parameter. A
    key naming a plain tensor attribute (put there by an enclosing swap) swaps it, a
    parameter being registered. A module met again
    (shared) is swapped once; its originals appear under each of its names. The originals
    come back as nested ``cls`` TensorDicts (dicts when ``cls`` is None)."""

    __slots__ = ("cls", "memo", "missing", "moves", "preserve", "undo", "unexpected")

    def __init__(self, preserve: bool, cls: Any) -> None:
        self.preserve = preserve
        self.cls = cls
        self.undo: _Undo = []
        self.moves: _Moves = []
        self.memo: dict[int, Any] = {}
        self.missing: list[str] = []
        self.unexpected: list[str] = []

    def swap(self) -> Swap:
        """What undoes the walk so far."""
        return Swap(self.undo, None, self.moves)

    def walk(self, td: Any, module: nn.Module, path: _Path) -> dict[str, Any]:
        """Swap ``td``'s tensors into ``module`` (at ``path``); returns the originals."""
        entries: dict[str, Any] = td._tensordict
        originals: dict[str, Any] = {}
        matched = 0
        params = module._parameters
        buffers = module._buffers
        first_move = len(self.moves)
        if self.preserve:  # (nothing moves between stores: each is walked as it is)
            if params:
                matched = self._params_preserved(params, entries, originals, path)
            if buffers:
                matched += self._store(module, "_buffers", entries, originals, path, buffers)
        elif params or buffers:  # both stores as they were before either changed
            pending = dict(buffers)
            if params:
                matched = self._store(module, "_parameters", entries, originals, path, params)
            if pending:
                matched += self._store(module, "_buffers", entries, originals, path, pending)
        moved = self.moves[first_move:]  # (this module's: its children's come after)
        memo = self.memo
        for name, child in module._modules.items():
            if child is None:
                continue
            sub = entries.get(name)
            if sub is None:
                if _has_tensors(child):
                    self.missing.append(_dotted(path, name))
                continue
            matched += 1
            if not isinstance(sub, CollectionPrimitives):
                self.unexpected.append(_dotted(path, name))
                continue
            got = memo.get(id(child), memo)
            if got is memo:  # (not met before)
                inner = self.walk(sub, child, (path, name))
                cls = self.cls
                got = memo[id(child)] = (
                    None
                    if not inner
                    else inner
                    if cls is None
                    else cls._new_unsafe(inner, NO_BATCH, None, None)
                )
            if got is not None:
                originals[name] = got
        if matched != len(entries):  # keys naming no slot (a store may have moved names)
            stores = (params, buffers, module._modules)
            slots = {k for store in stores for k, v in store.items() if v is not None}
            slots.update(m[2] for m in moved)  # (names moved out of a store just now)
            rest = [k for k in entries if k not in slots]
            left = self._attributes(module, rest, entries, originals)
            self.unexpected.extend(_dotted(path, k) for k in sorted(left))
        return originals

    def _attributes(
        self, module: nn.Module, keys: list[str], entries: dict[str, Any], originals: dict[str, Any]
    ) -> list[str]:
        """Swap the ``keys`` that name a plain tensor attribute of ``module`` (an enclosing
        swap's); returns the others, which are unexpected."""
        attrs = module.__dict__
        left = []
        for name in keys:
            current, value = attrs.get(name), entries[name]
            if not (isinstance(current, Tensor) and isinstance(value, Tensor)):
                left.append(name)
                continue
            originals[name] = current
            if _is_param(value):  # registered, as upstream
                params: dict[str, Any] = module._parameters
                del attrs[name]
                params[name] = value
                self.moves.append((params, attrs, name, current, ()))
            else:
                attrs[name] = value
                self.undo.append((attrs, name, current))
        return left

    def _params_preserved(
        self,
        params: dict[str, Any],
        entries: dict[str, Any],
        originals: dict[str, Any],
        path: _Path,
    ) -> int:
        undo = self.undo
        # (dynamo cannot build a Parameter: see traced_value. Asked per module, not per
        # walk: after a graph break dynamo runs the walk's frames eagerly and compiles
        # each one it enters, such as this one, apart)
        traced = _compiling()
        matched = 0
        for name, current in params.items():  # (values reassigned, keys unchanged: safe)
            if current is None:
                continue
            value = entries.get(name)
            if value is None:
                self.missing.append(_dotted(path, name))
                continue
            matched += 1
            if type(value) is Tensor and not value.requires_grad:  # (param_value inlined)
                grad = current.requires_grad
                if traced:
                    params[name] = value
                elif grad and functorch_wrapped(value):
                    params[name] = value.as_subclass(_PARAMETER)
                else:
                    params[name] = _make_subclass(_PARAMETER, value, grad)
            elif isinstance(value, Tensor):
                params[name] = (
                    traced_value(value, current) if traced else param_value(value, current)
                )
            else:
                self.unexpected.append(_dotted(path, name))
                continue
            undo.append((params, name, current))
            originals[name] = current
        return matched

    def _store(
        self,
        module: nn.Module,
        kind: str,
        entries: dict[str, Any],
        originals: dict[str, Any],
        path: _Path,
        before: dict[str, Any],
    ) -> int:
        """One store of ``module`` (all but preserved parameters), as ``before`` holds it."""
        store: dict[str, Any] = module.__dict__[kind]
        to_params = kind == "_parameters"
        preserve = self.preserve
        undo = self.undo
        other: dict[str, Any] = {}
        order: tuple[str, ...] = ()
        matched = 0
        for name, current in list(before.items()):
            if current is None:
                continue
            value = entries.get(name)
            if value is None:
                self.missing.append(_dotted(path, name))
                continue
            matched += 1
            if not isinstance(value, Tensor):
                self.unexpected.append(_dotted(path, name))
                continue
            originals[name] = current
            if preserve:  # (a buffer slot: a parameter given to it becomes a plain alias)
                store[name] = value.as_subclass(Tensor) if _is_param(value) else value
                undo.append((store, name, current))
                continue
            if _is_param(value) == to_params:
                store[name] = value
                undo.append((store, name, current))
                continue
            if not order:
                order = tuple(store)
                # a parameter slot given a plain tensor: a plain attribute (as upstream)
                other = module.__dict__ if to_params else module.__dict__["_parameters"]
            del store[name]
            other[name] = value
            self.moves.append((other, store, name, current, order))
        return matched


def planned_copies(walk: SwapWalk) -> list[tuple[Tensor, Tensor]]:
    """``to_module(inplace=True)``'s copies, as (the module's tensor, the new value) pairs:
    what ``walk`` swapped in, read before it is undone (each value it put in a slot
    aliases the TensorDict's tensor), so the matching rules are :class:`SwapWalk`'s alone."""
    pairs = [(current, store[name]) for store, name, current in walk.undo]
    pairs.extend((current, written[name]) for written, _, name, current, _ in walk.moves)
    return pairs


def _key_of(nested: dict[str, Any], tensor: Tensor) -> str:
    """The dotted key under which ``tensor`` sits in the nested dict of originals."""
    for name, value in nested.items():
        if value is tensor:
            return name
        if isinstance(value, dict):
            inner = _key_of(value, tensor)
            if inner:
                return f"{name}.{inner}"
    return ""


def copy_checked(
    call: str,
    pairs: list[tuple[Tensor, Tensor]],
    originals: dict[str, Any],
    non_blocking: bool = False,
) -> None:
    """``to_module(inplace=True)``: check every shape first, then copy (all or nothing);
    a mismatch names its key, found in ``originals``."""
    for current, value in pairs:
        if value.shape != current.shape:
            raise ValueError(
                f"{call}: key {_key_of(originals, current)!r} has shape {tuple(value.shape)}, "
                f"the module's tensor {tuple(current.shape)}; inplace=True copies into it, so "
                "they must match"
            )
    with torch.no_grad():
        for current, value in pairs:
            current.copy_(value, non_blocking=non_blocking)


def map_tree(nested: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """``nested`` with ``fn`` applied to every leaf."""
    return {k: map_tree(v, fn) if isinstance(v, dict) else fn(v) for k, v in nested.items()}


def as_tree(cls: Any, nested: dict[str, Any]) -> Any:
    """A nested dict as a ``cls`` (TensorDict) with an empty batch size, level by level."""
    entries = {k: as_tree(cls, v) if type(v) is dict else v for k, v in nested.items()}
    return cls._new_unsafe(entries, NO_BATCH, None, None)
