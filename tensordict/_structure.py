"""Operations on the key structure: select, exclude, rename, flatten and unflatten keys, empty."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torch import Tensor

from tensordict._batch import starts_with
from tensordict._keys import NestedKey, join_path, key_path, missing_key_error
from tensordict._nontensor import NonTensor
from tensordict._protocol import CollectionProtocol

if TYPE_CHECKING:
    from tensordict._td import TensorDict


def _is_nested(value: Any) -> bool:
    return not isinstance(value, (Tensor, NonTensor))


class StructureOps(CollectionProtocol):
    """Re-arranging keys without touching the data: results share the leaves."""

    __slots__ = ()

    def _shell(self) -> TensorDict:
        return self._new_unsafe({}, self._batch_size, self._device, self._names)

    def select(self, *keys: NestedKey, inplace: bool = False, strict: bool = True) -> TensorDict:
        """A TensorDict holding only ``keys`` (nested ones keep their path).

        With ``strict=False`` missing keys are ignored; with ``inplace`` the others are removed.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> b = {"c": torch.zeros(1), "d": torch.zeros(1)}
        >>> td = TensorDict({"a": torch.zeros(1), "b": b}, [1])
        >>> list(td.select("a", ("b", "c")).keys(include_nested=True))
        ['a', 'b', ('b', 'c')]
        """
        paths = [key_path(k, "TensorDict.select") for k in keys]
        out = self._shell()
        missing = []
        for path in paths:
            value = self._get_path_or_none(path)
            if value is None:
                missing.append(join_path(path))
                continue
            node: Any = out
            src: Any = self
            for part in path[:-1]:
                src = src._tensordict[part]
                if part not in node._tensordict:
                    node._tensordict[part] = src._new_unsafe(
                        {}, src._batch_size, src._device, src._names
                    )
                node = node._tensordict[part]
            node._tensordict[path[-1]] = _copy_structure(value) if _is_nested(value) else value
        if missing and strict:
            raise KeyError(
                f"TensorDict.select: keys not found: {missing} "
                "(pass strict=False to ignore missing keys)"
            )
        if inplace:
            self._replace_entries(out, "TensorDict.select")
            return self  # type: ignore[return-value]
        return out

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> TensorDict:
        """A TensorDict without ``keys`` (missing keys are ignored).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1), "b": {"c": torch.zeros(1)}}, [1])
        >>> list(td.exclude(("b", "c")).keys(include_nested=True))
        ['a', 'b']
        """
        drop = [key_path(k, "TensorDict.exclude") for k in keys]
        out = _copy_structure(self)
        for path in drop:
            parent = out._get_path_or_none(path[:-1]) if len(path) > 1 else out
            if parent is not None and _is_nested(parent):
                parent._tensordict.pop(path[-1], None)
        if inplace:
            self._replace_entries(out, "TensorDict.exclude")
            return self  # type: ignore[return-value]
        return out

    def _replace_entries(self, other: CollectionProtocol, call: str) -> None:
        if self._is_locked:
            raise RuntimeError(
                f"{call}: cannot remove keys in place: the TensorDict is locked "
                "(call unlock_() first)"
            )
        self._tensordict.clear()
        self._tensordict.update(other._tensordict)

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> TensorDict:
        """Move the entry at ``old_key`` to ``new_key``; ``safe`` refuses to overwrite.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(1)}, [1]).rename_key_("a", ("b", "c"))
        >>> list(td.keys(include_nested=True))
        ['b', ('b', 'c')]
        """
        call = "TensorDict.rename_key_"
        old, new = key_path(old_key, call), key_path(new_key, call)
        value = self._get_path_or_none(old)
        if value is None:
            parent = self._get_path_or_none(old[:-1]) if len(old) > 1 else self
            raise missing_key_error(call, join_path(old), getattr(parent, "_tensordict", {}))
        if old == new:
            return self  # type: ignore[return-value]
        shorter = min(len(old), len(new))
        if old[:shorter] == new[:shorter]:
            raise ValueError(
                f"{call}: cannot move {join_path(old)!r} to {join_path(new)!r}: one key "
                "lies inside the other"
            )
        if safe and self._get_path_or_none(new) is not None:
            raise KeyError(f"{call}: key {join_path(new)!r} already exists and safe=True")
        if self._is_locked:
            raise RuntimeError(f"{call}: cannot rename keys: the TensorDict is locked")
        self._set_path(new, value, call)
        parent = self._get_path_or_none(old[:-1]) if len(old) > 1 else self
        del parent._tensordict[old[-1]]
        return self  # type: ignore[return-value]

    def flatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDict:
        """One level: nested keys joined by ``separator`` (``("a", "b")`` -> ``"a.b"``).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": {"b": {"c": torch.zeros(2)}}}, [2])
        >>> list(td.flatten_keys().keys())
        ['a.b.c']
        """
        entries: dict[str, Any] = {}
        _flatten_into(self, "", separator, entries)
        out = self._new_unsafe(entries, self._batch_size, self._device, self._names)
        if inplace:
            self._replace_entries(out, "TensorDict.flatten_keys")
            return self  # type: ignore[return-value]
        return out

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDict:
        """Split keys on ``separator`` into nested TensorDicts (the inverse of flatten_keys).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a.b": torch.zeros(2), "a.c": torch.ones(2)}, [2]).unflatten_keys()
        >>> list(td.keys(include_nested=True))
        ['a', ('a', 'b'), ('a', 'c')]
        """
        bs, device, names = self._batch_size, self._device, self._names
        new = self._new_unsafe
        root: dict[str, Any] = {}
        dotted = []
        for key, value in self._tensordict.items():
            if type(value) is not Tensor and _is_nested(value):
                value = value.unflatten_keys(separator)  # a new TensorDict: safe to merge into
            if separator in key:
                dotted.append((key, value))
            else:
                root[key] = value
        for key, value in dotted:
            parts = key.split(separator)
            if "" in parts:
                raise ValueError(
                    f"TensorDict.unflatten_keys: key {key!r} splits into an empty part "
                    f"on separator {separator!r}"
                )
            node, owner_bs = root, bs
            for part in parts[:-1]:
                try:
                    owner = node[part]
                    node = owner._tensordict
                    owner_bs = owner._batch_size
                except KeyError:
                    child = node[part] = new({}, owner_bs, device, names)
                    node = child._tensordict
                except AttributeError:  # a tensor or non-tensor leaf holds that name
                    raise ValueError(
                        f"TensorDict.unflatten_keys: key {key!r} needs {part!r} to be "
                        "nested, but it holds a leaf"
                    ) from None
            if parts[-1] in node:
                raise ValueError(
                    f"TensorDict.unflatten_keys: key {key!r} collides with an existing entry"
                )
            if owner_bs is not bs:  # merged into a nested level with a longer batch size
                if isinstance(value, NonTensor):
                    value = value._with(owner_bs, value.device)
                elif not starts_with(value.shape, owner_bs):
                    raise ValueError(
                        f"TensorDict.unflatten_keys: shape {tuple(value.shape)} of key {key!r} "
                        f"does not start with batch_size {tuple(owner_bs)} of "
                        f"{separator.join(parts[:-1])!r}"
                    )
            node[parts[-1]] = value
        out = new(root, bs, device, names)
        if inplace:
            self._replace_entries(out, "TensorDict.unflatten_keys")
            return self  # type: ignore[return-value]
        return out

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dicts of the entries (non-tensor entries as their values).

        ``td.flatten_keys(".").to_dict()`` is what ``torch.func.functional_call`` takes.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {"b": torch.zeros(1)}, "s": "x"}, [1]).to_dict()
        {'a': {'b': tensor([0.])}, 's': 'x'}
        """
        return {
            key: value._public()
            if isinstance(value, NonTensor)
            else value
            if isinstance(value, Tensor)
            else value.to_dict()
            for key, value in self._tensordict.items()
        }

    def empty(self, recurse: bool = False) -> TensorDict:
        """A TensorDict with the same batch size and device and no entries.

        With ``recurse`` the nested TensorDicts are kept, each emptied.
        """
        out = self._shell()
        if recurse:
            for key, value in self._tensordict.items():
                if _is_nested(value):
                    out._tensordict[key] = value.empty(recurse=True)
        return out

    def is_empty(self) -> bool:
        """Whether no leaf is held, at any depth.

        >>> from tensordict import TensorDict
        >>> TensorDict({"a": {}}, []).is_empty()
        True
        """
        return all(_is_nested(v) and v.is_empty() for v in self._tensordict.values())


def _copy_structure(td: CollectionProtocol) -> TensorDict:
    entries = {
        key: _copy_structure(value) if _is_nested(value) else value
        for key, value in td._tensordict.items()
    }
    return td._new_unsafe(entries, td._batch_size, td._device, td._names)


def _flatten_into(td: CollectionProtocol, prefix: str, sep: str, out: dict[str, Any]) -> None:
    for key, value in td._tensordict.items():
        name = prefix + key
        if _is_nested(value) and value._tensordict:
            _flatten_into(value, name + sep, sep, out)
            continue
        if name in out:
            raise ValueError(
                f"TensorDict.flatten_keys: key {name!r} appears twice after flattening "
                f"with separator {sep!r}"
            )
        out[name] = _copy_structure(value) if _is_nested(value) else value
