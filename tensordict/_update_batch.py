"""``update(other, update_batch_size=True)``: take ``other``'s batch size along with its entries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from tensordict._entry_ops import update_source
from tensordict._primitives import CollectionPrimitives


def batch_sizes_clash(td: Any, other: Any) -> bool:
    """Whether ``other``'s batch size obviously disagrees with ``td``'s (upstream's loose
    check: the shared leading dims differ)."""
    if not isinstance(other, CollectionPrimitives):
        return False
    mine, theirs = td.batch_size, other.batch_size
    if mine == theirs:  # the common case, without building two slices
        return False
    return bool(mine[: len(theirs)] != theirs[: len(mine)])


def prepare_update(
    td: Any,
    other: Any,
    inplace: bool,
    clone: bool,
    keys_to_update: Any,
    update_batch_size: bool,
    kwargs: dict[str, Any],
    resize: Callable[[Any], Any],
) -> tuple[Any, Any]:
    """What every collection's ``update`` does before writing entries: keyword entries
    (written after ``other``, so they win on conflicts), nothing to write, a source of
    another batch size (checked, then ``resize(other)`` does the whole update), a cloned
    or selected source. Returns ``(result, None)`` when the update is done, else
    ``(None, source)`` for the collection to write."""
    if kwargs:
        td.update(other, inplace, clone=clone, keys_to_update=keys_to_update)
        return td.update(kwargs, inplace, clone=clone, keys_to_update=keys_to_update), None
    if other is None:
        return td, None
    if batch_sizes_clash(td, other):
        check_resize(td._call("update"), td, other, update_batch_size, inplace, keys_to_update)
        return resize(other), None
    if clone or keys_to_update is not None:
        other = update_source(other, clone, keys_to_update, td._call("update"))
    return None, other


def check_resize(
    call: str, td: Any, other: Any, update_batch_size: bool, inplace: bool, keys: Any
) -> None:
    """The errors upstream raises before an update across batch sizes."""
    if not update_batch_size:
        raise RuntimeError(
            f"{call}: update_batch_size must be set to True to be able to update a "
            f"TensorDict of batch_size {tuple(td.batch_size)} from one of batch_size "
            f"{tuple(other.batch_size)}"
        )
    if inplace:
        raise RuntimeError(
            f"{call}: the batch sizes differ, which inplace=True cannot achieve; drop inplace"
        )
    if keys is not None:
        raise RuntimeError(
            f"{call}: updating across batch sizes with keys_to_update is not supported"
        )
    if td.is_locked:
        raise RuntimeError(
            f"{call}: cannot change the batch size of a locked TensorDict (call unlock_() first)"
        )
    missing = set(td.keys(True)) - set(other.keys(True))
    if missing:
        raise RuntimeError(
            f"{call}: keys {sorted(map(str, missing))} are not in the source; an update "
            "across batch sizes replaces every entry"
        )


def resize_update(td: Any, other: Any, is_leaf: Callable[[type], bool] | None, call: str) -> Any:
    """``td`` made to hold ``other``'s batch size and entries; nested TensorDicts that
    both hold (and ``is_leaf`` does not call leaves) keep their identity."""
    kept: dict[str, Any] = {}
    for key, value in other.items():
        target = td._tensordict.get(key)
        nested = hasattr(target, "_tensordict") and hasattr(value, "_tensordict")
        if nested and not (is_leaf is not None and is_leaf(type(value))):
            kept[key] = resize_update(target, value, is_leaf, call)
    td._tensordict.clear()
    td._batch_size = torch.Size(other.batch_size)
    td._names = None
    td._tensordict.update(kept)
    for key, value in other.items():
        if key not in kept:  # a structural copy: td must not share other's nested levels
            shallow = value.clone(recurse=False) if hasattr(value, "_tensordict") else value
            td._set_path((key,), shallow, call)
    return td
