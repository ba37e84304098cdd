"""Operations on the key structure: select, exclude, rename, flatten and unflatten keys, empty."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import Size, Tensor

from tensordict._batch import starts_with
from tensordict._keys import (
    NO_DEFAULT,
    NestedKey,
    join_path,
    key_path,
    locked_error,
    missing_key_error,
)
from tensordict._nontensor import NonTensor
from tensordict._primitives import CollectionPrimitives
from tensordict._tolist import with_unset_fields
from tensordict._views import with_non_tensor

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

    from tensordict._base import DenseTensorDictBase


class KeyCollisionError(KeyError, ValueError):
    """Keys that collide when flattened or unflattened (upstream raises KeyError)."""

    def __str__(self) -> str:  # the message as written, not the repr KeyError gives
        return str(self.args[0]) if self.args else ""


def _is_nested(value: Any) -> bool:
    return not isinstance(value, (Tensor, NonTensor))


def _stack_at(td: DenseTensorDictBase, path: tuple[str, ...]) -> int:
    """How many parts of ``path`` lead to a ragged lazy stack nested in ``td`` (0: none)."""
    node: Any = td
    for i, part in enumerate(path[:-1]):
        node = node._tensordict.get(part)
        if node is None or not _is_nested(node):
            return 0
        if not hasattr(node, "_tensordict"):
            return i + 1
    return 0


class StructureOps(CollectionPrimitives):
    """Re-arranging keys without touching the data: results share the leaves."""

    __slots__ = ()

    def select(
        self,
        *keys: NestedKey,
        inplace: bool = False,
        strict: bool = True,
        as_tensordict: bool = False,
    ) -> Self:
        """A TensorDict holding only ``keys`` (nested ones keep their path).

        With ``strict=False`` missing keys are ignored; with ``inplace`` the others are removed.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> b = {"c": torch.zeros(1), "d": torch.zeros(1)}
        >>> td = TensorDict({"a": torch.zeros(1), "b": b}, [1])
        >>> list(td.select("a", ("b", "c")).keys(include_nested=True))
        ['a', 'b', ('b', 'c')]
        """
        call = self._call("select")
        paths = [key_path(k, call) for k in keys]
        if as_tensordict:  # a plain TensorDict (a tensorclass gives its entries)
            return self.to_tensordict()._per_member(_select, paths, inplace, strict, call)  # type: ignore[attr-defined,no-any-return]
        return self._per_member(_select, paths, inplace, strict, call)

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> Self:
        """A TensorDict without ``keys`` (missing keys are ignored).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.zeros(1)}}, [1])
        >>> list(td.exclude(("b", "c")).keys(include_nested=True))
        ['a', 'b']
        """
        call = self._call("exclude")
        return self._per_member(_exclude, [key_path(k, call) for k in keys], inplace, call)

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> Self:
        """Move the entry at ``old_key`` to ``new_key``; ``safe`` refuses to overwrite.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1)}, [1]).rename_key_("a", ("b", "c"))
        >>> list(td.keys(include_nested=True))
        ['b', ('b', 'c')]
        """
        call = self._call("rename_key_")
        old, new = key_path(old_key, call), key_path(new_key, call)
        return self._per_member(_rename_key, old, new, safe, call)

    def flatten_keys(
        self,
        separator: str = ".",
        inplace: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
    ) -> Self:
        """One level: nested keys joined by ``separator`` (``("a", "b")`` -> ``"a.b"``).

        Only leaves are kept, as upstream: a nested TensorDict with no leaf leaves no key
        (so ``module.load_state_dict(td.flatten_keys("."))`` takes a ``from_module``
        TensorDict holding the empty levels of parameter-free submodules).
        ``is_leaf(cls)`` (as upstream's) chooses the leaves instead: a nested collection
        whose class it accepts is kept whole under its joined key, and an entry that is
        neither accepted nor a collection is left out.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": {"c": torch.zeros(2)}}}, [2])
        >>> list(td.flatten_keys().keys())
        ['a.b.c']
        >>> list(TensorDict({"e": {}, "x": torch.zeros(2)}, [2]).flatten_keys().keys())
        ['x']
        >>> list(td.flatten_keys(is_leaf=lambda cls: cls is TensorDict).keys())
        ['a']
        """
        return self._per_member(
            _flatten_keys, separator, inplace, self._call("flatten_keys"), is_leaf
        )

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Self:
        """Split keys on ``separator`` into nested TensorDicts (the inverse of flatten_keys).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a.b": torch.zeros(2), "a.c": torch.ones(2)}, [2]).unflatten_keys()
        >>> list(td.keys(include_nested=True))
        ['a', ('a', 'b'), ('a', 'c')]
        """
        return self._per_member(_unflatten_keys, separator, inplace, self._call("unflatten_keys"))

    def to_dict(
        self,
        *,
        retain_none: bool = True,
        convert_tensors: bool | str = False,
        tolist_first: bool = False,
    ) -> dict[str, Any]:
        """Nested plain dicts of the entries (non-tensor entries as their values).

        ``retain_none=False`` leaves out None entries; ``convert_tensors`` turns the
        tensors into lists (``"numpy"``: arrays); ``tolist_first`` turns nested
        TensorDicts with more batch dims into lists (see :meth:`tolist`).

        ``td.flatten_keys(".").to_dict()`` is what ``torch.func.functional_call`` takes.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {"b": torch.zeros(1)}, "s": "x"}, [1]).to_dict()
        {'a': {'b': tensor([0.])}, 's': 'x'}

        ``convert_tensors=True`` gives tensors as lists; ``retain_none`` is taken for
        upstream's signature (None entries are never stored here).
        """
        dense = self._as_dense(self._call("to_dict"))
        if retain_none and not convert_tensors and not tolist_first:
            return _to_dict(dense)
        from tensordict._tolist import to_dict

        return to_dict(
            dense,
            retain_none=retain_none,
            convert_tensors=convert_tensors,
            tolist_first=tolist_first,
        )

    def empty(
        self,
        recurse: bool = False,
        *,
        batch_size: Any = None,
        device: Any = NO_DEFAULT,
        names: Any = NO_DEFAULT,
    ) -> Self:
        """A collection of the same kind, batch size and device, with no entries.

        With ``recurse`` the nested TensorDicts are kept, each emptied, and so are the
        non-tensor entries (as upstream: only tensor leaves are dropped). ``batch_size``,
        ``device`` (None: no device) and ``names`` give the result others, set as the
        ``batch_size`` setter, :meth:`to` / :meth:`clear_device_` and the ``names``
        setter would set them (names that no longer fit the new batch size are dropped).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4], names=["x", "y"])
        >>> out = td.empty(batch_size=[3])
        >>> out.batch_size, out.names, len(out.keys())
        (torch.Size([3]), ['x'], 0)
        """
        out: Any = self._per_member(_empty, recurse)
        if batch_size is not None and out._stack_parts() is not None:
            out = _resized_stack(out, Size(batch_size))
        elif batch_size is not None:
            current = out.names
            kept = current if names is NO_DEFAULT and any(n is not None for n in current) else None
            out.names = None
            out.batch_size = batch_size
            if kept is not None and names is NO_DEFAULT:  # the dims that remain keep theirs
                n = len(out.batch_size)
                out.names = (kept + [None] * n)[:n]
        if device is not NO_DEFAULT:
            out = out.clear_device_() if device is None else out.to(device)
        if names is not NO_DEFAULT:
            out.names = names
        return out  # type: ignore[no-any-return]

    def is_empty(self) -> bool:
        """Whether no leaf (tensor or non-tensor entry) is held, at any depth.

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {}}, []).is_empty(), TensorDict({"a": {"b": "text"}}).is_empty()
        (True, False)
        """
        return not any(True for _ in self.keys(True, True, is_leaf=with_non_tensor))


def _resized_stack(stack: Any, batch_size: Size) -> Any:
    """An emptied lazy stack given ``batch_size``: its members take it, less the stack dim,
    when it keeps one member per element along that dim (as upstream); any other size
    gives an empty TensorDict of that size."""
    dim, members = stack._stack_parts()
    if len(batch_size) > dim and batch_size[dim] == len(members):
        for member in members:  # fresh empties: resized in place
            member.batch_size = batch_size[:dim] + batch_size[dim + 1 :]
        return type(stack)(*members, stack_dim=dim)
    from tensordict._td import TensorDict  # (the module of the dense class builds on this one)

    return TensorDict({}, batch_size=batch_size, device=stack.device)


def _shell(td: DenseTensorDictBase) -> DenseTensorDictBase:
    return td._new_unsafe({}, td._batch_size, td._device, td._names)


def _open_levels(out: DenseTensorDictBase, td: DenseTensorDictBase, prefix: tuple[str, ...]) -> Any:
    """The level of ``out`` at ``prefix``, made (empty, shaped like ``td``'s) where
    missing, as far as ``td`` has TensorDict levels there (None past the last one)."""
    node: Any = out
    src: Any = td
    for part in prefix:
        src = src._tensordict.get(part)
        if src is None or not hasattr(src, "_tensordict"):
            return None
        if part not in node._tensordict:
            node._tensordict[part] = _shell(src)
        node = node._tensordict[part]
    return node


def _select(
    td: DenseTensorDictBase, paths: list[tuple[str, ...]], inplace: bool, strict: bool, call: str
) -> DenseTensorDictBase:
    out = _shell(td)
    missing = []
    under: dict[tuple[str, ...], list[tuple[str, ...]]] = {}  # paths below ragged stacks
    for path in paths:
        i = _stack_at(td, path)
        if i:
            under.setdefault(path[:i], []).append(path[i:])
            continue
        value = td._get_path_or_none(path)
        if value is None:
            missing.append(join_path(path))
            if not strict:  # the levels on the way that exist are kept, as upstream
                _open_levels(out, td, path[:-1])
            continue
        node = _open_levels(out, td, path[:-1])
        node._tensordict[path[-1]] = (
            value._per_member(_copy_structure) if _is_nested(value) else value
        )
    for prefix, rest in under.items():
        stack = td._get_path_or_none(prefix).select(*rest, strict=strict)
        if prefix[:-1] and out._get_path_or_none(prefix[:-1]) is None:
            out._set_path(prefix, stack, call)
        else:
            (out._get_path_or_none(prefix[:-1]) if prefix[:-1] else out)._tensordict[prefix[-1]] = (
                stack
            )
    if missing and strict:
        raise KeyError(
            f"{call}: keys not found: {missing} (pass strict=False to ignore missing keys)"
        )
    if inplace:
        _replace_entries(td, out, call)
        return td
    return out


def _exclude(
    td: DenseTensorDictBase, paths: list[tuple[str, ...]], inplace: bool, call: str
) -> DenseTensorDictBase:
    out = _copy_structure(td)
    for path in paths:
        i = _stack_at(out, path)
        if i:  # below a ragged lazy stack: it excludes the rest itself
            holder = out._get_path_or_none(path[: i - 1]) if i > 1 else out
            holder._tensordict[path[i - 1]] = holder._tensordict[path[i - 1]].exclude(path[i:])
            continue
        parent = out._get_path_or_none(path[:-1]) if len(path) > 1 else out
        if parent is not None and _is_nested(parent):
            parent._tensordict.pop(path[-1], None)
    if inplace:
        _replace_entries(td, out, call)
        return td
    return out


def _replace_entries(td: DenseTensorDictBase, other: DenseTensorDictBase, call: str) -> None:
    if td._is_locked:
        removed = [k for k in td._tensordict if k not in other._tensordict]
        raise locked_error(call, removed[0] if removed else (), "remove")
    td._tensordict.clear()
    td._tensordict.update(other._tensordict)


def _rename_key(
    td: DenseTensorDictBase, old: tuple[str, ...], new: tuple[str, ...], safe: bool, call: str
) -> DenseTensorDictBase:
    if td._is_locked:  # before the keys are looked at, as upstream
        raise locked_error(call, join_path(old), "rename")
    value = td._get_path_or_none(old)
    if value is None:
        parent = td._get_path_or_none(old[:-1]) if len(old) > 1 else td
        raise missing_key_error(call, join_path(old), getattr(parent, "_tensordict", {}))
    if old == new:
        return td
    moves_up = len(new) < len(old) and old[: len(new)] == new  # replaces its own ancestor
    moves_down = len(new) > len(old) and new[: len(old)] == old  # goes under its own name
    if safe and td._get_path_or_none(new) is not None:
        raise KeyError(f"{call}: key {join_path(new)!r} already present in TensorDict (safe=True)")
    parent = td._get_path_or_none(old[:-1]) if len(old) > 1 else td
    if moves_down:  # ("n" -> ("n", "m")): the old entry leaves first, then a new level holds it
        del parent._tensordict[old[-1]]
        try:
            td._set_path(new, value, call)
        except BaseException:
            parent._tensordict[old[-1]] = value  # put back: a failed rename changes nothing
            raise
        return td
    td._set_path(new, value, call)
    if not moves_up:  # (moving up, the old key went with the ancestor it replaced)
        del parent._tensordict[old[-1]]
    return td


def _flatten_keys(
    td: DenseTensorDictBase,
    separator: str,
    inplace: bool,
    call: str,
    is_leaf: Callable[[type], bool] | None = None,
) -> DenseTensorDictBase:
    entries: dict[str, Any] = {}
    _flatten_into(td, "", separator, entries, call, is_leaf)
    out = td._new_unsafe(entries, td._batch_size, td._device, td._names)
    if inplace:
        _replace_entries(td, out, call)
        return td
    return out


def _unflatten_node(
    root: dict[str, Any], td: DenseTensorDictBase, prefix: str, key: str, separator: str, call: str
) -> tuple[dict[str, Any], Size]:
    """The entries (and batch size) of the nested level ``prefix``, made where missing."""
    node, owner_bs = root, td._batch_size
    for part in prefix.split(separator):
        if not part:
            raise ValueError(
                f"{call}: key {key!r} splits into an empty part on separator {separator!r}"
            )
        try:
            owner = node[part]
            node = owner._tensordict
            owner_bs = owner._batch_size
        except KeyError:
            child = node[part] = td._new_unsafe({}, owner_bs, td._device, td._names)
            node = child._tensordict
        except AttributeError:  # a tensor or non-tensor leaf holds that name
            raise KeyCollisionError(
                f"{call}: Unflattening key(s) in tensordict will override an existing for "
                f"unflattened key: key {key!r} needs {part!r} to be nested, but it holds a leaf"
            ) from None
    return node, owner_bs


def _unflatten_keys(
    td: DenseTensorDictBase, separator: str, inplace: bool, call: str
) -> DenseTensorDictBase:
    bs, device, names = td._batch_size, td._device, td._names
    new = td._new_unsafe
    root: dict[str, Any] = {}
    dotted = []
    for key, value in td._tensordict.items():
        if type(value) is not Tensor and _is_nested(value):  # new: safe to merge into
            value = value._per_member(_unflatten_keys, separator, False, call)
        if separator in key:
            dotted.append((key, value))
        else:
            root[key] = value
    nodes: dict[str, tuple[dict[str, Any], Size]] = {}  # by prefix: keys share them
    for key, value in dotted:
        prefix, _, last = key.rpartition(separator)
        try:
            node, owner_bs = nodes[prefix]
        except KeyError:
            node, owner_bs = nodes[prefix] = _unflatten_node(root, td, prefix, key, separator, call)
        if not last:
            raise ValueError(
                f"{call}: key {key!r} splits into an empty part on separator {separator!r}"
            )
        if last in node:
            raise KeyCollisionError(
                f"{call}: Unflattening key(s) in tensordict will override an existing for "
                f"unflattened key: key {key!r} collides with an existing entry"
            )
        if owner_bs is not bs:  # merged into a nested level with a longer batch size
            if isinstance(value, NonTensor):
                value = value._with(owner_bs, value.device)
            elif not starts_with(value.shape, owner_bs):
                raise ValueError(
                    f"{call}: shape {tuple(value.shape)} of key {key!r} does not start with "
                    f"batch_size {tuple(owner_bs)} of {prefix!r}"
                )
        node[last] = value
    out = new(root, bs, device, names)
    if inplace:
        _replace_entries(td, out, call)
        return td
    return out


def _to_dict(td: DenseTensorDictBase) -> dict[str, Any]:
    return with_unset_fields(
        td,
        {
            key: value._public()
            if isinstance(value, NonTensor)
            else value
            if isinstance(value, Tensor)
            else _to_dict(value)
            if hasattr(value, "_tensordict")
            else value.to_dict()
            for key, value in td._tensordict.items()
        },
    )


def _empty(td: DenseTensorDictBase, recurse: bool) -> DenseTensorDictBase:
    out = _shell(td)
    if recurse:
        for key, value in td._tensordict.items():
            if _is_nested(value):
                out._tensordict[key] = value._per_member(_empty, True)
            elif isinstance(value, NonTensor):  # data, not a tensor leaf: kept (as upstream)
                out._tensordict[key] = value
    return out


def _copy_structure(td: DenseTensorDictBase) -> DenseTensorDictBase:
    entries = {
        key: value._per_member(_copy_structure) if _is_nested(value) else value
        for key, value in td._tensordict.items()
    }
    return td._new_unsafe(entries, td._batch_size, td._device, td._names)


def _flatten_into(
    td: DenseTensorDictBase,
    prefix: str,
    sep: str,
    out: dict[str, Any],
    call: str,
    is_leaf: Callable[[type], bool] | None = None,
) -> None:
    for key, value in td._tensordict.items():
        name = prefix + key
        if is_leaf is not None and is_leaf(type(value)):
            pass  # a leaf by the caller's rule, kept whole
        elif isinstance(value, (Tensor, NonTensor)):
            if is_leaf is not None:
                continue  # not a leaf by the caller's rule, and nothing to walk into
        elif not hasattr(value, "_tensordict"):  # a ragged lazy stack
            value = value.flatten_keys(sep, is_leaf=is_leaf)  # one entry, its keys flattened
        else:  # a nested TensorDict: its leaves only (an empty one leaves nothing, as upstream)
            _flatten_into(value, name + sep, sep, out, call, is_leaf)
            continue
        if name in out:
            raise KeyCollisionError(
                f"{call}: Flattening keys in tensordict causes keys to collide: key {name!r} "
                f"appears twice after flattening with separator {sep!r}"
            )
        out[name] = value
