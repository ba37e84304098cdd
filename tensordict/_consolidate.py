"""Consolidation: every tensor leaf of a collection a view into one flat byte storage.

The storage holds the leaves grouped in *runs* of one dtype and shape (dtypes by
decreasing element size, so every run starts aligned for its dtype; shapes in the
order they first occur). A run is filled with one ``torch.stack(..., out=)`` and viewed
back with one ``view`` + ``unbind``, so the per-leaf Python work is a list lookup.

A consolidated collection is locked (its keys cannot change under the storage) and
remembers its storage and plan: pickling it moves the one storage (torch's
multiprocessing reducers pass it by file descriptor when it is shared) plus a small
description; ``to(device)`` moves the one buffer. With a ``filename`` the storage is a
memory-mapped file followed by its JSON description and the description's length (8
bytes, little endian): ``TensorDict.from_consolidated`` reads it back, validating the
description before viewing anything.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import json
import operator
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._convert import _parse_to
from tensordict._format import (
    DTYPE_NAMES,
    DTYPES,
    NON_TENSOR_TYPE,
    is_json_value,
    lookup_type,
    type_name,
)
from tensordict._jagged import (
    Jag,
    JaggedError,
    collapse,
    expand,
    jag_of,
    overwritten,
    strided_refusal,
)
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._nontensor_class import UnnamedClass, class_tag, entry_of
from tensordict._primitives import CollectionPrimitives
from tensordict._progress import progress_bar
from tensordict._unbatched import refuse_unbatched

if TYPE_CHECKING:
    from typing import Self

    from tensordict._future import TensorDictFuture

_VERSION = 1
_TRAILER = 8  # the int64 length of the JSON description at the end of a file

# a run: dtype, shape of one leaf, number of leaves, first byte, leaf indices (walk order)
Run = tuple[torch.dtype, torch.Size, int, int, list[int]]

_RECENT_MAX = 8
_TENSORS = itertools.repeat(Tensor)  # isinstance's second argument, for map


class _Recent:
    """The last few entries of a cache, most recent first; the tuple is replaced whole,
    never mutated, so a thread always reads a consistent one."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: tuple[Any, ...] = ()

    def add(self, entry: Any) -> None:
        self.items = (entry, *self.items[: _RECENT_MAX - 1])


_PLANS = _Recent()  # (shapes, dtypes, Plan._heads(), plan) of the last plans made
_DTYPE = operator.attrgetter("dtype")
_SHAPE = operator.attrgetter("shape")


_JAGGED = _Recent()  # (plan of the parts, jags, plan) of the last jagged plans made
# what a fill raises on leaves a stale plan does not fit (torch.stack: NotImplementedError
# for a nested tensor)
FILL_ERRORS = (RuntimeError, NotImplementedError)


def planned(td: Any, leaves: Sequence[Tensor], call: str, stacked: bool = False) -> Plan:
    """``Plan.of(leaves, stacked)`` for the leaves of ``td``. Nested tensor leaves are
    looked for only when that fails (their shapes have no size: no cost otherwise): a
    jagged one is planned as its parts (see ``_jagged``), a strided one is refused by its
    key with upstream's ``NotImplementedError``."""
    try:
        return Plan.of(leaves, stacked=stacked)
    except Exception as err:
        nested = [i for i, leaf in enumerate(leaves) if leaf.is_nested]
        if not nested:
            raise
        strided = [i for i in nested if leaves[i].layout is not torch.jagged]
        if strided:
            raise strided_refusal(call, leaf_path(td, strided[0])) from err
        return Plan.of_jagged(leaves, tuple(jag_of(i, leaves[i]) for i in nested))


def leaf_path(td: Any, index: int) -> str | tuple[str, ...]:
    """The key of ``td``'s tensor leaf number ``index`` in walk order (a lazy stack's
    members as ``#i``; a top-level key as a string); for error messages."""
    paths: list[tuple[str, ...]] = []
    _leaf_paths(td, (), paths)
    path = paths[index]
    return path[0] if len(path) == 1 else path


def _leaf_paths(td: Any, prefix: tuple[str, ...], out: list[tuple[str, ...]]) -> None:
    parts = td._stack_parts()
    if parts is not None:
        for i, member in enumerate(parts[1]):
            _leaf_paths(member, (*prefix, f"#{i}"), out)
        return
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            out.append((*prefix, key))
        elif not isinstance(value, NonTensor):
            _leaf_paths(value, (*prefix, key), out)


def _range_start(idx: list[int], count: int) -> int | None:
    """The first index of a run whose ``count`` leaf indices are consecutive (they
    ascend, so first and last tell), else None (also for an empty run)."""
    if count and idx[-1] - idx[0] == count - 1:
        return idx[0]
    return None


class Plan:
    """Where each leaf of a structure lies in its consolidated storage (immutable: plans
    are shared between collections of the same dtypes and shapes, see :meth:`of`)."""

    __slots__ = ("jagged", "nbytes", "nleaves", "runs")

    def __init__(
        self, runs: list[Run], nleaves: int, nbytes: int, jagged: tuple[Jag, ...] | None = None
    ) -> None:
        self.runs = runs
        self.nleaves = nleaves  # the runs' slots: with jagged leaves, their parts
        self.nbytes = nbytes
        self.jagged = jagged  # the jagged leaves, whose parts the runs hold (else None)

    @classmethod
    def of_jagged(cls, leaves: Sequence[Tensor], jags: tuple[Jag, ...]) -> Plan:
        """The plan of ``leaves`` whose leaves ``jags`` are jagged: the plan of their parts
        (see :func:`_jagged.expand`), kept apart from :meth:`of`'s (its runs' indices count
        parts, not leaves), the same object while the parts and ``jags`` match."""
        base = cls.of(expand(leaves, jags))
        for seen_base, seen_jags, seen in _JAGGED.items:
            if seen_base is base and seen_jags == jags:
                return seen  # type: ignore[no-any-return]
        plan = cls(base.runs, base.nleaves, base.nbytes, jags)
        _JAGGED.add((base, jags, plan))
        return plan

    @classmethod
    def of(cls, leaves: Sequence[Tensor], stacked: bool = False) -> Plan:
        """The plan of ``leaves`` (walk order); the last few plans are reused when the
        dtypes and shapes match, which costs one read of each leaf's dtype and shape.

        ``stacked=True`` reads each leaf's dtype but only the shape of the first leaf of
        each run: the caller then fills with :meth:`fill`, whose ``torch.stack`` refuses a
        run of unequal shapes, and asks again without ``stacked`` when it raises."""
        dtypes = list(map(_DTYPE, leaves))
        if stacked:
            for _, seen_dtypes, heads, seen in _PLANS.items:
                if seen_dtypes == dtypes and all(leaves[i].shape == s for i, s in heads):
                    return seen  # type: ignore[no-any-return]
        shapes = list(map(_SHAPE, leaves))
        for seen_shapes, seen_dtypes, _, seen in _PLANS.items:
            if seen_shapes == shapes and seen_dtypes == dtypes:
                return seen  # type: ignore[no-any-return]
        plan = cls._group(dtypes, shapes)
        _PLANS.add((shapes, dtypes, plan._heads(), plan))
        return plan

    def _heads(self) -> list[tuple[int, torch.Size]]:
        """The leaves whose shapes :meth:`of` reads with ``stacked``: the first of each run,
        and every leaf of a run without bytes (which :meth:`fill` skips)."""
        heads: list[tuple[int, torch.Size]] = []
        for dtype, shape, count, _, idx in self.runs:
            if count and shape.numel() * dtype.itemsize:
                heads.append((idx[0], shape))
            else:
                heads.extend((i, shape) for i in idx)
        return heads

    @classmethod
    def _group(cls, dtypes: list[torch.dtype], shapes: list[torch.Size]) -> Plan:
        n = len(shapes)
        groups: dict[tuple[torch.dtype, torch.Size], list[int]]
        if n and dtypes.count(dtypes[0]) == n and shapes.count(shapes[0]) == n:
            groups = {(dtypes[0], shapes[0]): list(range(n))}
        else:
            groups = {}
            for i, key in enumerate(zip(dtypes, shapes, strict=True)):
                run = groups.get(key)
                if run is None:
                    groups[key] = [i]
                else:
                    run.append(i)
        runs: list[Run] = []
        cursor = 0
        first: dict[torch.dtype, int] = {}
        for dtype, _ in groups:
            first.setdefault(dtype, len(first))
        # each dtype in one byte range (for reductions), larger elements first (alignment)
        order = sorted(groups.items(), key=lambda kv: (-kv[0][0].itemsize, first[kv[0][0]]))
        for (dtype, shape), idx in order:
            runs.append((dtype, shape, len(idx), cursor, idx))
            cursor += shape.numel() * dtype.itemsize * len(idx)
        return cls(runs, n, cursor)

    def fill(
        self,
        storage: Tensor,
        leaves: Sequence[Tensor],
        non_blocking: bool = False,
        bar: Any = None,
    ) -> None:
        """Copy ``leaves`` into their places in ``storage``: one stack per run (``bar``, a
        progress bar, advances by each run's leaves and is closed at the end)."""
        if self.jagged is not None:
            leaves = expand(leaves, self.jagged)
        try:
            self._fill(storage, leaves, non_blocking, bar)
        finally:
            if bar is not None:
                bar.close()

    def _fill(
        self, storage: Tensor, leaves: Sequence[Tensor], non_blocking: bool, bar: Any
    ) -> None:
        dev = storage.device
        with torch.no_grad():
            for dtype, shape, count, start, idx in self.runs:
                size = shape.numel() * dtype.itemsize * count
                if not size:
                    continue
                dst = storage[start : start + size].view(dtype).view(count, *shape)
                first = _range_start(idx, count)
                if first is not None:
                    parts = list(leaves[first : first + count])
                else:
                    parts = [leaves[i] for i in idx]
                if parts[0].device != dev or parts[-1].device != dev:
                    parts = [p.to(dev, non_blocking=non_blocking) for p in parts]
                if count == 1:
                    dst[0].copy_(parts[0], non_blocking=non_blocking)
                else:
                    torch.stack(parts, out=dst)
                if bar is not None:
                    bar.update(count)

    def views(self, storage: Tensor, check: str | None = None) -> list[Tensor]:
        """The leaves as views of ``storage``, in walk order (one ``unbind`` per run); a
        jagged leaf is rebuilt over its parts' views (validated first with ``check``, the
        call's name: see :func:`_jagged.collapse`)."""
        out = self.part_views(storage)
        return out if self.jagged is None else collapse(out, self.jagged, check)

    def part_views(self, storage: Tensor) -> list[Tensor]:
        """The views of the runs' slots (a jagged leaf's parts, not the leaf)."""
        out: list[Any] = [None] * self.nleaves
        for dtype, shape, count, start, idx in self.runs:
            size = shape.numel() * dtype.itemsize * count
            block = storage[start : start + size].view(dtype).view(count, *shape).unbind(0)
            first = _range_start(idx, count)
            if first is not None:
                out[first : first + count] = block
            else:
                for i, view in zip(idx, block, strict=True):
                    out[i] = view
        return out

    def dtype_spans(self) -> list[tuple[torch.dtype, int, int]]:
        """``(dtype, first byte, end byte)`` of each dtype's range of the storage."""
        spans: list[tuple[torch.dtype, int, int]] = []
        for dtype, shape, count, start, _ in self.runs:
            end = start + shape.numel() * dtype.itemsize * count
            if spans and spans[-1][0] == dtype:
                spans[-1] = (dtype, spans[-1][1], end)
            else:
                spans.append((dtype, start, end))
        return spans

    def to_json(self) -> list[Any]:
        return [[DTYPE_NAMES[d], list(s), c, b, idx] for d, s, c, b, idx in self.runs]

    @classmethod
    def from_json(cls, raw: Any, nbytes: int, call: str, jagged: Any = None) -> Plan:
        """A plan from an untrusted description: every field is checked against ``nbytes``
        (``jagged``, the description's list of :data:`Jag` entries, against the runs)."""
        if not isinstance(raw, list):
            raise ValueError(f"{call}: the description's runs are not a list")
        runs: list[Run] = []
        cursor = 0
        seen: list[int] = []
        for item in raw:
            if not (isinstance(item, list) and len(item) == 5):
                raise ValueError(f"{call}: malformed run {item!r}")
            name, shape, count, start, idx = item
            dtype = DTYPES.get(name) if isinstance(name, str) else None
            if dtype is None:
                raise ValueError(f"{call}: run {item[:4]!r} names an unknown dtype {name!r}")
            _check_ints(call, "shape", shape)
            _check_ints(call, "leaf indices", idx)
            if type(count) is not int or count != len(idx) or start != cursor:
                raise ValueError(f"{call}: run {item[:4]!r} does not follow the previous runs")
            if any(later <= earlier for earlier, later in itertools.pairwise(idx)):
                raise ValueError(f"{call}: run {item[:4]!r} lists its leaves out of walk order")
            size = torch.Size(shape)
            runs.append((dtype, size, count, start, idx))
            cursor += size.numel() * dtype.itemsize * count
            seen.extend(idx)
        if cursor != nbytes:
            raise ValueError(f"{call}: the runs cover {cursor} bytes, the storage has {nbytes}")
        if sorted(seen) != list(range(len(seen))):
            raise ValueError(f"{call}: the runs' leaf indices are not a permutation")
        jags = None if jagged is None else _jags_from_json(jagged, len(seen), call)
        return cls(runs, len(seen), cursor, jags)


def _jags_from_json(raw: Any, nparts: int, call: str) -> tuple[Jag, ...]:
    """The :data:`Jag` entries of an untrusted description, checked against ``nparts``."""
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{call}: the description's jagged leaves are not a list, got {raw!r}")
    jags: list[Jag] = []
    parts = 0  # the parts of the leaves before the current one
    for item in raw:
        _check_ints(call, "a jagged leaf", item)
        if len(item) != 3 or item[2] not in (2, 3) or item[1] < 1:
            raise ValueError(
                f"{call}: a jagged leaf is [leaf index, ragged dim >= 1, parts 2 or 3], "
                f"got {item!r}"
            )
        if jags and item[0] <= jags[-1][0]:
            raise ValueError(f"{call}: the jagged leaves are not in walk order at {item!r}")
        parts += item[2] - 1
        if item[0] + parts >= nparts:
            raise ValueError(f"{call}: jagged leaf {item!r} lies past the runs' {nparts} parts")
        jags.append((item[0], item[1], item[2]))
    return tuple(jags)


def _check_ints(call: str, what: str, value: Any) -> None:
    if type(value) is not list or not all(type(v) is int and 0 <= v < 2**62 for v in value):
        raise ValueError(f"{call}: {what} must be a list of non-negative ints, got {value!r}")


# ------------------------------------------------------------------ structure description
def describe(
    td: Any, call: str, prefix: tuple[str, ...] = (), *, as_json: bool = True
) -> dict[str, Any]:
    """The structure of ``td`` without its tensor data, as JSON for a consolidated file
    (leaves are taken in walk order; types by their registered names, non-tensor values
    as JSON). ``as_json=False`` (a description kept in memory only, ``metadata=True``)
    holds non-tensor values as they are. Pickling uses the lighter :func:`template`."""
    cls = type(td)
    node: dict[str, Any] = {
        "type": type_name(cls),
        "batch_size": list(td._batch_size),
        "device": None if td._device is None else str(td._device),
    }
    parts = td._stack_parts()
    if parts is not None:
        node["stack_dim"] = parts[0]
        node["members"] = [
            describe(m, call, (*prefix, f"#{i}"), as_json=as_json) for i, m in enumerate(parts[1])
        ]
        name = td.names[parts[0]]
        if name is not None:
            node["stack_dim_name"] = name
        return node
    node["names"] = td._names
    entries: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, Tensor):
            entries[key] = 0
        elif isinstance(value, NonTensor):
            entries[key] = _describe_nontensor(value, call, (*prefix, key), as_json)
        else:
            entries[key] = describe(value, call, (*prefix, key), as_json=as_json)
    node["entries"] = entries
    return node


def _importable(cls: type) -> bool:
    """Whether pickle can find ``cls`` by its module and qualified name."""
    obj: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


def _describe_nontensor(
    value: NonTensor, call: str, path: tuple[str, ...], as_json: bool = True
) -> Any:
    """A non-tensor entry as JSON that loads back as the same entry (class, value types);
    a ``TypeError`` naming the key for one JSON cannot hold (a tuple, a numpy scalar, an
    enum, a class of its own would come back as another type). ``as_json=False``: the
    values as they are (a description that is never written)."""
    if isinstance(value, NonTensorStack) and (not as_json or is_json_value(value.values)):
        return {"values": list(value.values), "positions": value.positions.tolist()}
    if isinstance(value, NonTensorData) and (not as_json or is_json_value(value.data)):
        record = {"data": value.data, "batch_size": list(value.batch_size)}
        try:
            tag = class_tag(value)
        except UnnamedClass:
            if not as_json:
                return record
        else:
            if tag is not None:
                record["class"] = tag
            return record
    held = value._values()
    bad = next((v for v in held if not is_json_value(v)), None)
    what = f"of class {type(value).__name__}" if bad is None else f"of type {type(bad).__name__}"
    raise TypeError(
        f"{call}: key {path!r} holds a non-tensor value {what}, which JSON cannot hold as it "
        "is; a consolidated file stores non-tensor entries as JSON: exactly str, int, finite "
        "float, bool, None, and lists and dicts (str keys) of those, in a NonTensorData, "
        "NonTensorStack or MetaData (save the collection with memmap, which pickles other "
        "values)"
    )


def build(node: Any, leaves: Iterator[Tensor], call: str, root: bool = True) -> Any:
    """The collection an untrusted file description stands for, its tensor leaves taken
    from ``leaves`` (every field checked); ``root``: ``node`` is the description's root."""
    if not isinstance(node, dict):
        raise ValueError(f"{call}: a node of the description is not a mapping")
    cls = node["type"]
    if isinstance(cls, str):
        cls = lookup_type(cls, call, "the description")
    if not (isinstance(cls, type) and issubclass(cls, CollectionPrimitives)):
        raise ValueError(f"{call}: the description names {cls!r}, not a tensor collection")
    bs = node["batch_size"]
    _check_ints(call, "batch_size", bs)
    size = torch.Size(bs)
    device = None if node["device"] is None else torch.device(node["device"])
    if "members" in node:
        members = [build(m, leaves, call, False) for m in node["members"]]
        name = node.get("stack_dim_name")
        return cls(*members, stack_dim=node["stack_dim"], stack_dim_name=name)  # type: ignore[call-arg]
    entries: dict[str, Any] = {}
    n = len(size)
    for key, entry in node["entries"].items():
        if entry == 0:
            leaf = next(leaves)
            if leaf.shape[:n] != size:
                raise ValueError(
                    f"{call}: key {key!r} has shape {tuple(leaf.shape)}, which does not start "
                    f"with batch_size {tuple(size)}"
                )
            if device is not None and leaf.device != device:
                device = leaf.device
            entries[key] = leaf
        elif "data" in entry:
            where = f"key {key!r}"
            entries[key] = entry_of(
                entry.get("class"), entry["data"], entry["batch_size"], call, where
            )
        elif "values" in entry:
            positions = torch.tensor(entry["positions"], dtype=torch.long)
            entries[key] = NonTensorStack._from_positions(entry["values"], positions)
        else:
            entries[key] = build(entry, leaves, call, False)
    if node["type"] == NON_TENSOR_TYPE:  # (a non-tensor entry consolidated on its own)
        from tensordict._nontensor_root import check_root

        if not root:
            raise ValueError(
                f"{call}: a nested node of the description has type {NON_TENSOR_TYPE!r}, "
                "which only the root has"
            )
        check_root(entries, call, "the description")
    names = node["names"]
    return cls._new_unsafe(entries, size, device, names)  # type: ignore[attr-defined]


# ------------------------------------------------------------------ the consolidated state
class Record:
    """What a consolidated collection remembers: its storage, plan and descriptions."""

    __slots__ = ("_pickled", "metadata", "plan", "storage", "wire")

    def __init__(self, storage: Tensor, plan: Plan, metadata: dict[str, Any] | None) -> None:
        self.storage = storage
        self.plan = plan
        self.metadata = metadata
        self._pickled: tuple[Any, ...] | None = None  # see _pickled
        self.wire: tuple[bytes, tuple[int, int, int]] | None = None  # see wire_description

    def __getitem__(self, key: str) -> Any:  # upstream reads ``_consolidated["storage"]``
        if key in ("storage", "metadata"):
            return getattr(self, key)
        raise KeyError(key)


def _set_device(td: Any, device: torch.device | None) -> None:
    td._device = device
    parts = td._stack_parts()
    for child in parts[1] if parts is not None else td._tensordict.values():
        if isinstance(child, CollectionPrimitives):
            _set_device(child, device)


def _replace_leaves(td: Any, leaves: Iterator[Tensor]) -> None:
    """Put ``leaves`` in place of ``td``'s tensor leaves, in walk order (``inplace=True``)."""
    parts = td._stack_parts()
    if parts is not None:
        for member in parts[1]:
            _replace_leaves(member, leaves)
        return
    store = td._tensordict
    for key, value in store.items():
        if isinstance(value, Tensor):
            store[key] = next(leaves)
        elif not isinstance(value, NonTensor):
            _replace_leaves(value, leaves)


def attach(td: Any, record: Record, locked: bool = False) -> Any:
    """Mark ``td`` consolidated on ``record`` and lock it (the keys must not change);
    ``locked`` says the caller built it locked already (see :func:`locked_copy`)."""
    if not locked:
        td.lock_()
    _SET_CONSOLIDATED(td, record)
    return td


# the slots every collection lays out (set through the descriptors: a tensorclass routes
# its own attribute writes to fields)
_SLOTS = CollectionPrimitives.__dict__
_SET_LOCKED = _SLOTS["_is_locked"].__set__
_SET_LAST_OP = _SLOTS["_last_op"].__set__
_SET_CONSOLIDATED = _SLOTS["_consolidated"].__set__
_LOCKED_BY = ("lock_", (), None)  # what lock_() records (see _context.record)


def _lock_one(td: Any) -> Any:
    """What ``lock_()`` does to one node whose children are locked already."""
    _SET_LOCKED(td, True)
    _SET_LAST_OP(td, _LOCKED_BY)
    return td


def walk(td: Any, leaves: list[Tensor], whole: list[bool]) -> None:
    """Append the tensor leaves of ``td`` to ``leaves`` in walk order (the order of
    ``_tensor_leaves``) and, for each dense node in the order :func:`locked_copy` meets
    them, whether all its entries are tensors (so that it need not test them again)."""
    parts = td._stack_parts()
    if parts is not None:
        for member in parts[1]:
            walk(member, leaves, whole)
        return
    values = td._tensordict.values()
    if all(map(isinstance, values, _TENSORS)):
        whole.append(True)
        leaves.extend(values)
        return
    whole.append(False)
    for value in values:
        if isinstance(value, Tensor):
            leaves.append(value)
        elif not isinstance(value, NonTensor):
            walk(value, leaves, whole)


def locked_copy(
    td: Any, views: list[Tensor], pos: int = 0, whole: Iterator[bool] | None = None
) -> tuple[Any, int]:
    """A locked collection of ``td``'s kind and structure whose tensor leaves are
    ``views[pos:]`` in walk order (one walk: the rebuild and the lock of a consolidate);
    returns it and the position after its leaves. ``whole``, from :func:`walk`, says for
    each dense node whether all its entries are tensors."""
    parts = td._stack_parts()
    if parts is not None:
        members = []
        for member in parts[1]:
            built, pos = locked_copy(member, views, pos, whole)
            members.append(built)
        return _lock_one(td._restack(members)), pos
    store = td._tensordict
    n = len(store)
    if whole is not None:
        all_tensors = next(whole)
    else:
        all_tensors = pos + n <= len(views) and all(map(isinstance, store.values(), _TENSORS))
    if all_tensors:
        entries = dict(zip(store, views[pos : pos + n], strict=True))
        pos += n
    else:
        entries = {}
        for key, value in store.items():
            if isinstance(value, Tensor):
                entries[key] = views[pos]
                pos += 1
            elif isinstance(value, NonTensor):
                entries[key] = value
            else:
                entries[key], pos = locked_copy(value, views, pos, whole)
    out = td._new_unsafe(entries, td._batch_size, td._device, td._names)
    return _lock_one(out), pos


def template(td: Any, memo: dict[Any, Any] | None = None) -> tuple[Any, ...]:
    """The structure of ``td`` for pickling, built from by :func:`from_template`: a dense
    node is ``("d", class, batch_size, device, names, keys, subs)`` with ``subs`` None
    when every entry is a tensor leaf, else per key None (a leaf), ``("v", value)`` (a
    non-tensor, carried as it is) or a node; a lazy stack is ``("s", class, dim, nodes)``,
    followed by its stack dim's name when it has one.
    A class pickle cannot import by name is given by its registered name. Equal key
    tuples and batch sizes are one object (``memo``), which pickle writes once."""
    memo = {} if memo is None else memo
    cls = type(td)
    kind: Any = cls if _importable(cls) else type_name(cls)
    parts = td._stack_parts()
    if parts is not None:
        nodes = tuple(template(m, memo) for m in parts[1])
        name = td.names[parts[0]]
        return ("s", kind, parts[0], nodes) if name is None else ("s", kind, parts[0], nodes, name)
    store = td._tensordict
    subs: tuple[Any, ...] | None = None
    if not all(map(isinstance, store.values(), _TENSORS)):
        subs = tuple(
            None
            if isinstance(v, Tensor)
            else ("v", v)
            if isinstance(v, NonTensor)
            else template(v, memo)
            for v in store.values()
        )
    keys = tuple(store)  # (memo keys tagged: an empty key tuple equals an empty Size)
    keys = memo.setdefault(("k", keys), keys)
    size = memo.setdefault(("b", td._batch_size), td._batch_size)
    return ("d", kind, size, td._device, td._names, keys, subs)


def _pickled(td: Any, record: Record) -> tuple[Any, ...]:
    """What a consolidated collection pickles besides its storage: the plan's runs (a run
    of consecutive leaves as its first index, not the list), the leaf count, the template
    (and the jagged leaves, when there are)."""
    plan = record.plan
    runs = [
        (d, s, c, b, idx if (first := _range_start(idx, c)) is None else first)
        for d, s, c, b, idx in plan.runs
    ]
    if plan.jagged is not None:
        return (runs, plan.nleaves, template(td), plan.jagged)
    return (runs, plan.nleaves, template(td))


def from_template(node: tuple[Any, ...], views: list[Tensor], pos: int) -> tuple[Any, int]:
    """The locked collection a :func:`template` stands for, its leaves ``views[pos:]``."""
    cls = node[1]
    if isinstance(cls, str):
        cls = lookup_type(cls, "pickle", "the pickled structure")
    if node[0] == "s":
        members = []
        for member in node[3]:
            built, pos = from_template(member, views, pos)
            members.append(built)
        name = node[4] if len(node) > 4 else None
        return _lock_one(cls(*members, stack_dim=node[2], stack_dim_name=name)), pos
    _, _, batch_size, device, names, keys, subs = node
    if subs is None:
        end = pos + len(keys)
        entries = dict(zip(keys, views[pos:end], strict=True))
        pos = end
    else:
        entries = {}
        for key, sub in zip(keys, subs, strict=True):
            if sub is None:
                entries[key] = views[pos]
                pos += 1
            elif sub[0] == "v":
                entries[key] = sub[1]
            else:
                entries[key], pos = from_template(sub, views, pos)
    return _lock_one(cls._new_unsafe(entries, batch_size, device, names)), pos


def _unpickle(
    storage: Tensor,
    runs: list[Any],
    nleaves: int,
    node: tuple[Any, ...],
    jagged: tuple[Jag, ...] | None = None,
) -> Any:
    full: list[Run] = [
        (d, s, c, b, list(range(idx, idx + c)) if type(idx) is int else idx)
        for d, s, c, b, idx in runs
    ]
    plan = Plan(full, nleaves, storage.numel(), jagged)
    td, _ = from_template(node, plan.views(storage), 0)
    return attach(td, Record(storage, plan, None), locked=True)


def _from_file_bytes(data: Tensor, call: str) -> Any:
    """The collection stored in ``data`` (a consolidated file's bytes), validated."""
    if data.dim() != 1 or data.dtype != torch.uint8 or data.numel() < _TRAILER:
        raise ValueError(
            f"{call}: expected a 1-d uint8 storage of at least {_TRAILER} bytes, got "
            f"{data.dtype} of shape {tuple(data.shape)}"
        )
    total = data.numel()
    length = int(data[-_TRAILER:].clone().view(torch.int64))
    if not 0 < length <= total - _TRAILER:
        raise ValueError(f"{call}: the description length {length} does not fit {total} bytes")
    end = total - _TRAILER - length
    try:
        meta = json.loads(bytes(data[end : total - _TRAILER].tolist()).decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError(f"{call}: the description is not valid JSON ({err!r})") from None
    if not isinstance(meta, dict) or meta.get("version") != _VERSION:
        raise ValueError(f"{call}: unknown description version {meta.get('version')!r}")
    storage = data[:end]
    plan = Plan.from_json(meta.get("runs"), end, call, meta.get("jagged"))
    try:
        try:
            views = plan.views(storage, check=call)
        except JaggedError as err:
            where = _described_leaf_key(meta.get("root"), err.leaf)
            raise ValueError(f"{call}: the jagged leaf {where}: {err}") from None
        leaves = iter(views)
        td = build(meta.get("root"), leaves, call)
        if next(leaves, None) is not None:
            raise ValueError("the runs hold more leaves than the structure uses")
    except (
        KeyError,
        TypeError,
        IndexError,
        AttributeError,
        StopIteration,
        ValueError,
        RuntimeError,  # torch refusing a device, a dtype or a shape the description names
        RecursionError,
        OverflowError,
    ) as err:
        if isinstance(err, ValueError) and str(err).startswith(call):
            raise
        raise ValueError(f"{call}: the description is malformed ({err!r})") from None
    from tensordict._nontensor_root import unwrap

    return unwrap(attach(td, Record(storage, plan, meta)))  # (a non-tensor: the entry)


def _described_leaf_key(root: Any, index: int) -> str:
    """The key of tensor leaf ``index`` (walk order) in a file's (untrusted) description,
    for an error message (``#index`` when the description does not say)."""
    keys: list[tuple[str, ...]] = []

    def visit(node: Any, prefix: tuple[str, ...]) -> None:
        if "members" in node:
            for i, member in enumerate(node["members"]):
                visit(member, (*prefix, f"#{i}"))
            return
        for key, entry in node["entries"].items():
            if entry == 0:
                keys.append((*prefix, key))
            elif "entries" in entry or "members" in entry:
                visit(entry, (*prefix, key))

    try:
        visit(root, ())
        return repr(keys[index])
    except (KeyError, TypeError, IndexError, AttributeError, RecursionError):
        return f"#{index}"


def storage_overwritten(td: Any, plan: Plan, call: str, check: bool = False) -> None:
    """After the storage of a consolidated ``td`` laid out by ``plan`` was overwritten
    (received): its jagged leaves forget their cached sequence lengths and, with
    ``check`` (bytes from an untrusted peer), are validated (a ``ValueError`` names the
    key). Nothing to do without jagged leaves."""
    if plan.jagged is None:
        return
    leaves: list[Tensor] = []
    walk(td, leaves, [])
    try:
        overwritten(leaves, plan.jagged, check)
    except JaggedError as err:
        raise ValueError(f"{call}: the jagged leaf {leaf_path(td, err.leaf)!r}: {err}") from None


def file_meta(td: Any, plan: Plan, call: str, as_json: bool = True) -> dict[str, Any]:
    """The JSON description after a consolidated storage in a file (or a pipe's frame);
    ``as_json=False``: kept in memory only (``metadata=True``), values as they are."""
    root = describe(td, call, as_json=as_json)
    meta = {"version": _VERSION, "root": root, "runs": plan.to_json()}
    if plan.jagged is not None:
        meta["jagged"] = [list(jag) for jag in plan.jagged]
    return meta


class ConsolidateOps(CollectionPrimitives):
    """``consolidate``, ``is_consolidated`` and ``from_consolidated``."""

    __slots__ = ()  # its attributes are slots of CollectionPrimitives

    def is_consolidated(self) -> bool:
        """Whether every tensor leaf is a view into one storage made by :meth:`consolidate`
        (and the keys are still locked).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3)}, [3])
        >>> td.is_consolidated(), td.consolidate().is_consolidated()
        (False, True)
        """
        return getattr(self, "_consolidated", None) is not None and self._is_locked

    def consolidate(
        self,
        filename: str | os.PathLike[str] | None = None,
        *,
        num_threads: int = 0,
        device: Any = None,
        non_blocking: bool = False,
        inplace: bool = False,
        return_early: bool = False,
        use_buffer: bool = False,
        share_memory: bool = False,
        pin_memory: bool = False,
        metadata: bool = False,
        pbar: bool = False,
    ) -> Any:
        """A locked copy whose tensor leaves are views into one flat ``uint8`` storage.

        The storage is in RAM, in shared memory (``share_memory=True``), on ``device``, or
        a memory-mapped file (``filename``; read it back with ``from_consolidated``).
        Writes to a leaf are writes to the storage. Nested, lazy-stacked and tensorclass
        content keeps its structure; non-tensor entries are carried along. An already
        consolidated collection is returned as it is. ``inplace=True`` puts the views in
        this collection's place; ``return_early=True`` with ``num_threads > 1`` returns a
        :class:`~tensordict.utils.TensorDictFuture` while the copy runs in a thread.
        ``metadata=True`` keeps the JSON description in ``_consolidated["metadata"]``.
        ``use_buffer`` is accepted for compatibility (the file is written in place);
        ``pin_memory=True`` pins the storage when CUDA is available. ``pbar=True`` shows a
        progress bar (``tqdm.auto``: a widget in notebooks) advancing as leaves are copied.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}}, [3])
        >>> ctd = td.consolidate()
        >>> storages = {v.untyped_storage().data_ptr() for v in ctd.values(True, True)}
        >>> len(storages), ctd.is_consolidated()
        (1, True)
        """
        call = self._call("consolidate")
        if self.is_consolidated():
            return self
        refuse_unbatched(self, call, "consolidated")
        if return_early and num_threads > 1 and (use_buffer or non_blocking):
            flag = "use_buffer" if use_buffer else "non_blocking"
            raise NotImplementedError(
                f"{call}: return_early=True cannot be combined with {flag}=True (the copy "
                "must be complete before the result is handed back)"
            )
        if file_backed(self):  # (PersistentTensorDict): consolidate its values in memory
            if inplace:
                raise ValueError(
                    f"{call}: inplace=True needs the leaves in memory, and a "
                    f"{type(self).__name__} reads them from its file; use inplace=False"
                )
            return self._as_dense(call).consolidate(
                filename,
                num_threads=num_threads,
                device=device,
                non_blocking=non_blocking,
                return_early=return_early,
                use_buffer=use_buffer,
                share_memory=share_memory,
                pin_memory=pin_memory,
                metadata=metadata,
                pbar=pbar,
            )
        leaves: list[Tensor] = []
        dense: list[bool] = []  # per dense node: all its entries are tensors
        walk(self, leaves, dense)
        # in memory, only one shape per run is read (see Plan.of): with a stale plan the
        # fill raises before anything is handed out, and the leaves are planned in full
        quick = filename is None and not inplace and not (return_early and num_threads > 1)
        plan = planned(self, leaves, call, stacked=quick)
        while True:
            bar = progress_bar(call, plan.nleaves, unit="leaf") if pbar else None
            dev = _storage_device(self, leaves, device)
            meta = None
            if filename is not None or metadata:
                meta = file_meta(self, plan, call, as_json=filename is not None)
            if filename is not None:
                if dev.type != "cpu":
                    raise ValueError(
                        f"{call}: a consolidated file lives on the CPU; got device={device!r} "
                        "with filename"
                    )
                raw = json.dumps(meta, separators=(",", ":")).encode()
                total = plan.nbytes + len(raw) + _TRAILER
                whole = torch.from_file(
                    os.fspath(filename), shared=True, size=total, dtype=torch.uint8
                )
                whole[plan.nbytes : total - _TRAILER] = torch.frombuffer(
                    bytearray(raw), dtype=torch.uint8
                )
                whole[total - _TRAILER :] = torch.tensor([len(raw)], dtype=torch.int64).view(
                    torch.uint8
                )
                storage = whole[: plan.nbytes]
            else:
                pin = pin_memory and dev.type == "cpu" and torch.cuda.is_available()
                storage = torch.empty(plan.nbytes, dtype=torch.uint8, device=dev, pin_memory=pin)
                if share_memory and dev.type == "cpu":
                    storage.share_memory_()  # type: ignore[no-untyped-call]
            views = plan.views(storage)
            if inplace:
                _replace_leaves(self, iter(views))
                out: Any = self
            else:
                out, _ = locked_copy(self, views, 0, iter(dense))
            # a file is on the CPU: a collection without a device gets it there, as upstream
            known = self._device is not None or device is not None or filename is not None
            if dev != self._device and known:
                _set_device(out, dev)
            record = Record(storage, plan, meta)
            if return_early and num_threads > 1:
                from tensordict._future import TensorDictFuture

                pool = concurrent.futures.ThreadPoolExecutor(1)
                job = pool.submit(plan.fill, storage, leaves, False, bar)
                pool.shutdown(wait=False)
                future: TensorDictFuture = TensorDictFuture([job], attach(out, record, not inplace))
                return future
            try:
                plan.fill(storage, leaves, non_blocking, bar)
            except FILL_ERRORS:
                full = planned(self, leaves, call)
                if not quick or full is plan:
                    raise
                plan, quick = full, False
                continue
            return attach(out, record, not inplace)

    @classmethod
    def from_consolidated(cls, filename: str | os.PathLike[str] | Tensor) -> Any:
        """The collection a ``consolidate(filename)`` call wrote, from the file (mapped, so
        writes reach it) or from its bytes as a 1-d ``uint8`` tensor.

        The JSON description at the end of the file is checked before any view is made;
        nothing is unpickled or imported (tensorclasses must be defined in this process).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/td.bin"
        >>> _ = TensorDict({"a": torch.arange(3), "n": "text"}, [3]).consolidate(path)
        >>> td = TensorDict.from_consolidated(path)
        >>> td["a"], td["n"]
        (tensor([0, 1, 2]), 'text')
        """
        return _from_file_bytes(_read(filename), f"{cls.__name__}.from_consolidated")

    def to(self, *args: Any, non_blocking: bool = False, **kwargs: Any) -> Self:
        """Move and/or cast every leaf (see :meth:`~tensordict.TensorDict.to`); a
        consolidated collection moved to another device moves its one storage.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.zeros(2)}, [2]).consolidate().to("cpu").is_consolidated()
        True
        """
        record = getattr(self, "_consolidated", None)
        if record is None or not self._is_locked:
            return super().to(*args, non_blocking=non_blocking, **kwargs)  # type: ignore[misc, no-any-return]
        device, dtype = _parse_to(self._call("to"), args, kwargs)
        if dtype is not None or device is None:
            return super().to(*args, non_blocking=non_blocking, **kwargs)  # type: ignore[misc, no-any-return]
        if device == record.storage.device:
            if self._device == device:
                return self
            out, _ = locked_copy(self, self._tensor_leaves([]))
            _set_device(out, device)
            return attach(out, record, True)  # type: ignore[no-any-return]
        storage = record.storage.to(device, non_blocking=non_blocking)
        out, _ = locked_copy(self, record.plan.views(storage))
        _set_device(out, device)
        return attach(out, Record(storage, record.plan, record.metadata), True)  # type: ignore[no-any-return]

    def __reduce_ex__(self, protocol: Any) -> Any:
        record = getattr(self, "_consolidated", None)
        if record is None or not self._is_locked:
            return self.__reduce__()
        if record._pickled is None:
            record._pickled = _pickled(self, record)
        return (_unpickle, (record.storage, *record._pickled))


def from_consolidated(filename: str | os.PathLike[str] | Tensor) -> Any:
    """The collection stored by ``consolidate(filename)``: see
    :meth:`TensorDict.from_consolidated <tensordict.TensorDict.from_consolidated>`.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_consolidated
    >>> path = tempfile.mkdtemp() + "/td.bin"
    >>> _ = TensorDict({"a": torch.ones(2)}, [2]).consolidate(path)
    >>> from_consolidated(path)["a"]
    tensor([1., 1.])
    """
    return _from_file_bytes(_read(filename), "from_consolidated")


def _read(filename: str | os.PathLike[str] | Tensor) -> Tensor:
    if isinstance(filename, Tensor):
        return filename
    path = os.fspath(filename)
    return torch.from_file(path, shared=True, size=os.path.getsize(path), dtype=torch.uint8)


def _storage_device(td: Any, leaves: Sequence[Tensor], device: Any) -> torch.device:
    if device is not None:
        return torch.device(device)
    if td._device is not None:
        return td._device  # type: ignore[no-any-return]
    return leaves[0].device if leaves else torch.device("cpu")


# ------------------------------------------------------------------ for the wire
def wire_description(td: Any, plan: Plan) -> tuple[bytes, tuple[int, int, int]]:
    """The structure of ``td`` as a receiver checks it (JSON: its entry tokens, see
    :func:`_tokens`, and the plan's dtype and shape runs) and three 64-bit fingerprints of
    it; kept on a consolidated collection's record, and the last few are reused when the
    tokens and plan match (a walk over the keys, no JSON, no hashing)."""
    record = getattr(td, "_consolidated", None)
    if record is not None and record.wire is not None and record.plan is plan and td._is_locked:
        return record.wire  # type: ignore[no-any-return]
    tokens: list[str] = []
    _tokens(td, tokens)
    desc = _described(plan, tokens)
    if record is not None and record.plan is plan and td._is_locked:
        record.wire = desc
    return desc


def wire_plan(
    td: Any,
) -> tuple[Plan, Tensor | None, list[Tensor] | None, tuple[bytes, tuple[int, int, int]]]:
    """The plan of ``td``, its storage (consolidated) or its tensor leaves, and its
    :func:`wire_description`; a collection that is not consolidated is walked once for
    its leaves and its tokens."""
    record = sent_record(td)
    if record is not None:
        return record.plan, record.storage, None, wire_description(td, record.plan)
    leaves: list[Tensor] = []
    tokens: list[str] = []
    refuse_unbatched(td, f"{type(td).__name__} (sent)", "sent")
    _tokens(td, tokens, leaves)
    plan = planned(td, leaves, f"{type(td).__name__} (sent)")
    return plan, None, leaves, _described(plan, tokens)


def sent_record(td: Any) -> Record | None:
    """The record of a consolidated ``td`` whose storage a transfer sends as it is (locked:
    its leaves are still the storage's views), or None."""
    record: Record | None = getattr(td, "_consolidated", None)
    return record if record is not None and td._is_locked else None


def leaf_device(leaves: Sequence[Tensor]) -> torch.device:
    """Where a buffer for ``leaves`` goes: the first leaf's device (the CPU for none)."""
    return leaves[0].device if leaves else torch.device("cpu")


def file_backed(td: Any) -> bool:
    """Whether ``td`` reads its leaves from a file on each access (a PersistentTensorDict:
    no in-memory store of entries)."""
    return td._stack_parts() is None and getattr(td, "_tensordict", None) is None


def in_memory(td: Any, call: str) -> Any:
    """``td``, or the values of a file-backed one (see :func:`file_backed`) read into memory."""
    return td._as_dense(call) if file_backed(td) else td


def wire_fill(
    td: Any,
    take: Callable[[Plan, torch.device], Any],
    check: Callable[[Plan], None],
    call: str = "send",
) -> tuple[Plan, Any, list[Tensor], tuple[bytes, tuple[int, int, int]]]:
    """For a collection that is not consolidated: its plan (passed to ``check`` first), a
    buffer from ``take(plan, device)`` (with a ``storage``) its leaves are stacked into,
    the leaves and the :func:`wire_description`. The plan is matched on each run's first
    shape only (``Plan.of(stacked=True)``): ``torch.stack`` refuses a run of unequal
    shapes, and the leaves are then planned in full and stacked again; an error that
    remains is raised before the caller posts anything. A file-backed collection (see
    :func:`file_backed`) sends its values, read into memory."""
    td = in_memory(td, call)
    refuse_unbatched(td, f"{type(td).__name__}.{call}", "sent")
    leaves: list[Tensor] = []
    tokens: list[str] = []
    _tokens(td, tokens, leaves)
    plan = planned(td, leaves, call, stacked=True)
    dev = leaf_device(leaves)
    while True:
        check(plan)
        buffer = take(plan, dev)
        try:
            plan.fill(buffer.storage, leaves)
        except FILL_ERRORS:
            full = planned(td, leaves, call)
            if full is plan:
                raise
            plan = full
            continue
        return plan, buffer, leaves, _described(plan, tokens)


def _described(plan: Plan, tokens: list[str]) -> tuple[bytes, tuple[int, int, int]]:
    desc = next((d for p, t, d in _WIRES.items if p is plan and t == tokens), None)
    if desc is None:
        runs = [[DTYPE_NAMES.get(d, str(d)), list(s), idx] for d, s, _, _, idx in plan.runs]
        wire: dict[str, Any] = {"tokens": tokens, "runs": runs}
        if plan.jagged is not None:
            wire["jagged"] = [list(jag) for jag in plan.jagged]
        raw = json.dumps(wire, separators=(",", ":")).encode()
        digest = hashlib.blake2b(raw, digest_size=24).digest()
        fps = tuple(int.from_bytes(digest[i : i + 8], "little", signed=True) for i in (0, 8, 16))
        desc = (raw, (fps[0], fps[1], fps[2]))
        _WIRES.add((plan, tokens, desc))
    return desc


_WIRES = _Recent()  # (plan, tokens, (raw, fingerprints)) of the last descriptions made
_LEAF_OTHER, _LEAF_STACK, _LEAF_CLOSE, _LEAF_OPEN = "\x1c", "\x1b", "\x1d", "\x1e"


def _tokens(td: Any, out: list[str], leaves: list[Tensor] | None = None) -> None:
    """The entries of ``td`` in walk order: a tensor leaf is its key; a non-tensor entry
    its key after ``\x1c``; a nested collection ``\x1e`` + key, its entries, ``\x1d``; a
    lazy stack ``\x1b`` + "dim x count", then each member as a nested ``#i``. With
    ``leaves``, the tensor leaves are appended to it (the order of ``_tensor_leaves``)."""
    parts = td._stack_parts()
    if parts is not None:
        out.append(f"{_LEAF_STACK}{parts[0]} x {len(parts[1])}")
        for i, member in enumerate(parts[1]):
            out.append(f"{_LEAF_OPEN}#{i}")
            _tokens(member, out, leaves)
            out.append(_LEAF_CLOSE)
        return
    store = td._tensordict
    if all(map(isinstance, store.values(), _TENSORS)):
        out.extend(store)
        if leaves is not None:
            leaves.extend(store.values())
        return
    for key, value in store.items():
        if isinstance(value, Tensor):
            out.append(key)
            if leaves is not None:
                leaves.append(value)
        elif isinstance(value, NonTensor):
            out.append(_LEAF_OTHER + key)
        else:
            out.append(_LEAF_OPEN + key)
            _tokens(value, out, leaves)
            out.append(_LEAF_CLOSE)


def _by_key(
    raw: bytes,
) -> tuple[dict[tuple[str, ...], tuple[str, tuple[int, ...]]], list[tuple[str, ...]]]:
    """The tensor leaves of a wire description by key path (with dtype name and shape),
    and the paths of the other entries (non-tensors, stacks as ``<stack dim x count>``)."""
    desc = json.loads(raw.decode())
    paths: list[tuple[str, ...]] = []
    others: list[tuple[str, ...]] = []
    prefix: list[str] = []
    for token in desc["tokens"]:
        head = token[:1]
        if head == _LEAF_CLOSE:
            prefix.pop()
        elif head == _LEAF_OPEN:
            prefix.append(token[1:])
        elif head == _LEAF_OTHER:
            others.append((*prefix, token[1:]))
        elif head == _LEAF_STACK:
            others.append((*prefix, f"<stack {token[1:]}>"))
        else:
            paths.append((*prefix, token))
    kinds: dict[int, tuple[str, tuple[int, ...]]] = {}
    for name, shape, idx in desc["runs"]:
        for i in idx:
            kinds[i] = (str(name), tuple(shape))
    leaves: list[tuple[str, tuple[int, ...]]] = []
    part = 0
    for index, ragged, nparts in desc.get("jagged", []):
        while len(leaves) < index:
            leaves.append(kinds[part])
            part += 1
        name, shape = kinds[part]
        rows = kinds[part + 1][1][0] - 1
        lengths = ", lengths" if nparts == 3 else ""
        leaves.append((f"jagged {name} (ragged dim {ragged}, {rows} rows{lengths})", shape))
        part += nparts
    while part < len(kinds):
        leaves.append(kinds[part])
        part += 1
    return dict(zip(paths, leaves, strict=True)), others


def explain_mismatch(
    theirs: bytes, mine: bytes, there: str = "the sender", here: str | None = None
) -> str:
    """Which keys differ between two wire descriptions, all of them, by name (``there``
    names the holder of ``theirs``; ``here`` the holder of ``mine``, else "here")."""
    at_here = "here" if here is None else f"on {here}"
    try:
        sender, sender_others = _by_key(theirs)
    except (UnicodeDecodeError, ValueError, TypeError, IndexError, KeyError, AttributeError):
        return "the sender's description is unreadable"
    mine_by_key, here_others = _by_key(mine)
    problems = []
    only_there = [k for k in sender if k not in mine_by_key]
    only_here = [k for k in mine_by_key if k not in sender]
    if only_there:
        problems.append(f"keys only on {there} {only_there}")
    if only_here:
        problems.append(f"keys only {at_here} {only_here}")
    for key, (kind, shape) in sender.items():
        mine_row = mine_by_key.get(key)
        if mine_row is not None and mine_row != (kind, shape):
            problems.append(
                f"key {key!r} is {kind} {shape} on {there}, {mine_row[0]} {mine_row[1]} {at_here}"
            )
    if sender_others != here_others:
        problems.append(f"the non-tensor entries and stacks differ ({there}'s: {sender_others})")
    if not problems:
        problems.append("the keys come in a different order")
    return "; ".join(problems)
