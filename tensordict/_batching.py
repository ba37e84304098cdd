"""Batches of samples: a DataLoader collate function, grouping rows by an entry, unpadding."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._functional import maybe_dense_stack
from tensordict._keys import NestedKey, key_path
from tensordict._lazy import LazyStackedTensorDict
from tensordict._mapping import is_plain_mapping
from tensordict._nontensor import NonTensor, NonTensorData
from tensordict._td import TensorDict, is_tensor_collection
from tensordict._views import with_non_tensor

__all__ = ["collate", "group_by", "unpad_sequence"]


def group_by(tensordict: Any, key: NestedKey) -> tuple[Tensor | list[Any], tuple[Any, ...]]:
    """Split the rows (first batch dim) of ``tensordict`` by the value of entry ``key``.

    Returns ``(values, groups)``: the sorted distinct values (a tensor, or a list for a
    non-tensor entry) and, for each, the rows holding it, in their original order.

    >>> import torch
    >>> from tensordict import TensorDict, group_by
    >>> td = TensorDict({"k": torch.tensor([2, 1, 2]), "x": torch.arange(3)}, [3])
    >>> values, groups = group_by(td, "k")
    >>> values.tolist(), [g["x"].tolist() for g in groups]
    ([1, 2], [[1], [0, 2]])
    """
    call = "group_by"
    if tensordict.ndim == 0:
        raise ValueError(f"{call}: the tensordict needs at least one batch dim")
    entry = tensordict.get(key)
    if isinstance(entry, NonTensor):
        raw = entry.tolist()
        rows = [tuple(r) if isinstance(r, list) else r for r in raw]
        distinct: list[Any] = sorted(set(rows))
        position = {v: i for i, v in enumerate(distinct)}
        inverse = torch.tensor([position[r] for r in rows], dtype=torch.long)
        values: Tensor | list[Any] = distinct
        count = len(distinct)
    elif isinstance(entry, Tensor):
        values, inverse = torch.unique(entry, dim=0, return_inverse=True)
        count = len(values)
    else:
        raise TypeError(f"{call}: entry {key!r} is a nested tensordict, not a leaf")
    order = torch.sort(inverse, stable=True).indices
    sizes = torch.bincount(inverse, minlength=count).tolist()
    gathered = tensordict[order]
    return values, tuple(gathered.split(sizes, 0))


def _valid_span(mask: Tensor, dim: int) -> tuple[int, int]:
    """The first valid position and the number of valid ones along ``dim`` of ``mask``."""
    line = mask.movedim(dim, 0).reshape(mask.shape[dim], -1).any(1)
    where = line.nonzero().flatten().tolist()
    if not where:
        return 0, 0
    if where[-1] - where[0] + 1 != len(where):
        raise ValueError("unpad_sequence: the valid positions of a row are not contiguous")
    return where[0], len(where)


def unpad_sequence(padded: Any, mask: Any = None, *, pad_dim: int = 0) -> LazyStackedTensorDict:
    """Split a padded batch (as ``pad_sequence(..., return_mask=True)`` makes) back into its
    variable-length samples, stacked lazily. Where ``pad_dim`` is a batch dim, the samples
    keep only the batch dims before it (their lengths differ there).

    Without ``mask``, the masks come from the ``"masks"`` entry (and leave the result); a
    bool tensor ``mask`` of shape ``[len(padded), max_len]`` applies to every entry.

    >>> import torch
    >>> from tensordict import TensorDict, pad_sequence, unpad_sequence
    >>> tds = [TensorDict({"a": torch.arange(n)}, [n]) for n in (1, 3)]
    >>> back = unpad_sequence(pad_sequence(tds, return_mask=True))
    >>> [back[i]["a"].tolist() for i in range(2)]
    [[0], [0, 1, 2]]
    """
    call = "unpad_sequence"
    if mask is None:
        if "masks" not in padded:
            raise KeyError(f"{call}: no mask given and no 'masks' entry in the padded batch")
        mask = padded.get("masks")
        padded = padded.exclude("masks")
    samples = []
    keys = list(padded.keys(include_nested=True, leaves_only=True, is_leaf=with_non_tensor))
    sample_ndim = padded.ndim - 1
    for i in range(padded.batch_size[0]):
        row = padded[i]
        spans: dict[Any, tuple[int, int]] = {}
        for key in keys:
            value = row.get(key)
            if isinstance(value, NonTensor):
                continue
            m = mask.get(key)[i] if is_tensor_collection(mask) else mask[i]
            spans[key] = _valid_span(m, pad_dim if m.ndim > pad_dim else 0)
        # where pad_dim is a batch dim, the samples keep only the batch dims before it, so
        # that they share one batch size (a lazy stack needs it)
        batch_size = list(row.batch_size)[: min(pad_dim, sample_ndim)]
        sample = TensorDict({}, batch_size=batch_size, device=padded.device)
        for key in keys:
            value = row.get(key)
            if isinstance(value, NonTensor):
                if pad_dim < sample_ndim and spans and pad_dim == 0:
                    # the pad slots of the row leave; the values are one entry of the sample
                    start, length = next(iter(spans.values()))
                    kept = value.tolist()[start : start + length]
                    value = NonTensorData(kept, batch_size=batch_size, device=value.device)
                sample.set(key, value)
                continue
            start, length = spans[key]
            sample.set(key, value.narrow(pad_dim, start, length))
        samples.append(sample)
    return LazyStackedTensorDict(*samples)


def _path_in(key: NestedKey, keys: Sequence[NestedKey]) -> bool:
    return key_path(key, "collate") in {key_path(k, "collate") for k in keys}


def collate(
    batch: Any,
    *,
    pad_keys: Mapping[NestedKey, float] | None = None,
    nested_keys: Sequence[NestedKey] | None = None,
    mask_key: NestedKey | None = None,
) -> Any:
    """A ``collate_fn`` for ``torch.utils.data.DataLoader``: stack a list of samples.

    Tensor collections are stacked densely when they share one structure (lazily otherwise,
    a tensorclass keeps its type), tensors with ``torch.stack``, mappings and tuples entry by
    entry, anything else by ``default_collate``. ``pad_keys`` names variable-length entries
    (along their first dim) to pad, with the pad value; ``mask_key`` then receives their
    bool masks. ``nested_keys`` names entries to stack as jagged nested tensors instead.
    Anything but a non-empty list is returned as is.

    >>> import torch
    >>> from tensordict import TensorDict, collate
    >>> samples = [TensorDict({"x": torch.ones(n), "y": torch.tensor(n)}) for n in (1, 2)]
    >>> out = collate(samples, pad_keys={"x": 0.0}, mask_key="mask")
    >>> out["x"].tolist(), out["mask", "x"].tolist(), out["y"].tolist()
    ([[1.0, 0.0], [1.0, 1.0]], [[True, False], [True, True]], [1, 2])
    """
    if not isinstance(batch, list) or not batch:
        return batch
    first = batch[0]
    if is_tensor_collection(first):
        padded, nested = list(pad_keys or {}), list(nested_keys or ())
        if mask_key is not None and not padded:
            raise ValueError("collate: mask_key holds the masks of pad_keys; pass pad_keys too")
        both = [k for k in nested if k in padded]
        if both:
            raise ValueError(f"collate: keys {both} are in both pad_keys and nested_keys")
        if not padded and not nested:
            return maybe_dense_stack(batch)
        rest = maybe_dense_stack([sample.exclude(*padded, *nested) for sample in batch])
        for key, value in (pad_keys or {}).items():
            seqs = [sample.get(key) for sample in batch]
            rest.set(
                key,
                torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=value),
            )
            if mask_key is not None:
                lengths = torch.tensor([len(s) for s in seqs])
                valid = torch.arange(int(lengths.max())) < lengths[:, None]
                rest.set((*key_path(mask_key, "collate"), *key_path(key, "collate")), valid)
        for key in nested:  # ragged first dim: a jagged nested tensor
            seqs = [sample.get(key) for sample in batch]
            rest.set(key, torch.nested.as_nested_tensor(seqs, layout=torch.jagged))
        return rest
    if isinstance(first, Tensor):
        return torch.stack(batch)
    if is_plain_mapping(first):
        return {k: collate([s[k] for s in batch]) for k in first}
    if isinstance(first, tuple):
        columns = [collate(list(col)) for col in zip(*batch, strict=True)]
        return type(first)(*columns) if hasattr(type(first), "_fields") else tuple(columns)
    from torch.utils.data import default_collate

    return default_collate(batch)
