"""Operations on the key structure: select, exclude, rename, flatten and unflatten keys, empty."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import Size, Tensor

from tensordict._batch import starts_with
from tensordict._keys import NestedKey, join_path, key_path, missing_key_error
from tensordict._nontensor import NonTensor
from tensordict._primitives import CollectionPrimitives
from tensordict._views import default_is_leaf

if TYPE_CHECKING:
    from typing import Self

    from tensordict._td import TensorDict


def _is_nested(value: Any) -> bool:
    return not isinstance(value, (Tensor, NonTensor))


def _stack_at(td: TensorDict, path: tuple[str, ...]) -> int:
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

    def flatten_keys(self, separator: str = ".", inplace: bool = False) -> Self:
        """One level: nested keys joined by ``separator`` (``("a", "b")`` -> ``"a.b"``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": {"c": torch.zeros(2)}}}, [2])
        >>> list(td.flatten_keys().keys())
        ['a.b.c']
        """
        return self._per_member(_flatten_keys, separator, inplace, self._call("flatten_keys"))

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> Self:
        """Split keys on ``separator`` into nested TensorDicts (the inverse of flatten_keys).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a.b": torch.zeros(2), "a.c": torch.ones(2)}, [2]).unflatten_keys()
        >>> list(td.keys(include_nested=True))
        ['a', ('a', 'b'), ('a', 'c')]
        """
        return self._per_member(_unflatten_keys, separator, inplace, self._call("unflatten_keys"))

    def to_dict(self, *, retain_none: bool = True, convert_tensors: bool = False) -> dict[str, Any]:
        """Nested plain dicts of the entries (non-tensor entries as their values).

        ``td.flatten_keys(".").to_dict()`` is what ``torch.func.functional_call`` takes.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {"b": torch.zeros(1)}, "s": "x"}, [1]).to_dict()
        {'a': {'b': tensor([0.])}, 's': 'x'}

        ``convert_tensors=True`` gives tensors as lists; ``retain_none`` is taken for
        upstream's signature (None entries are never stored here).
        """
        out = _to_dict(self._as_dense(self._call("to_dict")))
        return _tolists(out) if convert_tensors else out

    def empty(self, recurse: bool = False) -> Self:
        """A collection of the same kind, batch size and device, with no entries.

        With ``recurse`` the nested TensorDicts are kept, each emptied.
        """
        return self._per_member(_empty, recurse)

    def is_empty(self) -> bool:
        """Whether no leaf is held, at any depth.

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {}}, []).is_empty()
        True
        """
        leaf = default_is_leaf
        return not any(leaf(type(v)) for v in self.values(True, True))


def _shell(td: TensorDict) -> TensorDict:
    return td._new_unsafe({}, td._batch_size, td._device, td._names)


def _select(
    td: TensorDict, paths: list[tuple[str, ...]], inplace: bool, strict: bool, call: str
) -> TensorDict:
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
            continue
        node: Any = out
        src: Any = td
        for part in path[:-1]:
            src = src._tensordict[part]
            if part not in node._tensordict:
                node._tensordict[part] = src._new_unsafe(
                    {}, src._batch_size, src._device, src._names
                )
            node = node._tensordict[part]
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


def _exclude(td: TensorDict, paths: list[tuple[str, ...]], inplace: bool, call: str) -> TensorDict:
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


def _replace_entries(td: TensorDict, other: TensorDict, call: str) -> None:
    if td._is_locked:
        raise RuntimeError(
            f"{call}: cannot remove keys in place: the {type(td).__name__} is locked "
            "(call unlock_() first)"
        )
    td._tensordict.clear()
    td._tensordict.update(other._tensordict)


def _rename_key(
    td: TensorDict, old: tuple[str, ...], new: tuple[str, ...], safe: bool, call: str
) -> TensorDict:
    value = td._get_path_or_none(old)
    if value is None:
        parent = td._get_path_or_none(old[:-1]) if len(old) > 1 else td
        raise missing_key_error(call, join_path(old), getattr(parent, "_tensordict", {}))
    if old == new:
        return td
    shorter = min(len(old), len(new))
    if old[:shorter] == new[:shorter]:
        raise ValueError(
            f"{call}: cannot move {join_path(old)!r} to {join_path(new)!r}: one key "
            "lies inside the other"
        )
    if safe and td._get_path_or_none(new) is not None:
        raise KeyError(f"{call}: key {join_path(new)!r} already present in TensorDict (safe=True)")
    if td._is_locked:
        raise RuntimeError(f"{call}: cannot rename keys: the {type(td).__name__} is locked")
    td._set_path(new, value, call)
    parent = td._get_path_or_none(old[:-1]) if len(old) > 1 else td
    del parent._tensordict[old[-1]]
    return td


def _flatten_keys(td: TensorDict, separator: str, inplace: bool, call: str) -> TensorDict:
    entries: dict[str, Any] = {}
    _flatten_into(td, "", separator, entries, call)
    out = td._new_unsafe(entries, td._batch_size, td._device, td._names)
    if inplace:
        _replace_entries(td, out, call)
        return td
    return out


def _unflatten_node(
    root: dict[str, Any], td: TensorDict, prefix: str, key: str, separator: str, call: str
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
            raise ValueError(
                f"{call}: key {key!r} needs {part!r} to be nested, but it holds a leaf"
            ) from None
    return node, owner_bs


def _unflatten_keys(td: TensorDict, separator: str, inplace: bool, call: str) -> TensorDict:
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
            raise ValueError(f"{call}: key {key!r} collides with an existing entry")
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


def _to_dict(td: TensorDict) -> dict[str, Any]:
    return {
        key: value._public()
        if isinstance(value, NonTensor)
        else value
        if isinstance(value, Tensor)
        else _to_dict(value)
        if hasattr(value, "_tensordict")
        else value.to_dict()
        for key, value in td._tensordict.items()
    }


def _tolists(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _tolists(v) if isinstance(v, dict) else v.tolist() if isinstance(v, Tensor) else v
        for k, v in d.items()
    }


def _empty(td: TensorDict, recurse: bool) -> TensorDict:
    out = _shell(td)
    if recurse:
        for key, value in td._tensordict.items():
            if _is_nested(value):
                out._tensordict[key] = value._per_member(_empty, True)
    return out


def _copy_structure(td: TensorDict) -> TensorDict:
    entries = {
        key: value._per_member(_copy_structure) if _is_nested(value) else value
        for key, value in td._tensordict.items()
    }
    return td._new_unsafe(entries, td._batch_size, td._device, td._names)


def _flatten_into(td: TensorDict, prefix: str, sep: str, out: dict[str, Any], call: str) -> None:
    for key, value in td._tensordict.items():
        name = prefix + key
        if _is_nested(value) and not hasattr(value, "_tensordict"):  # a ragged lazy stack
            value = value.flatten_keys(sep)  # stays one entry, its own keys flattened
        elif _is_nested(value) and value._tensordict:
            _flatten_into(value, name + sep, sep, out, call)
            continue
        if name in out:
            raise ValueError(
                f"{call}: key {name!r} appears twice after flattening with separator {sep!r}"
            )
        out[name] = value._per_member(_copy_structure) if _is_nested(value) else value
