"""Cases for per-call overhead (issue 19): iteration, memory-mapped tensors, in-place update."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from benchmarks._harness import Case, Fn
from tensordict import LazyStackedTensorDict, MemoryMappedTensor, TensorDict, tensorclass


def _flat(n: int = 100) -> dict[str, torch.Tensor]:
    return {f"k{i}": torch.randn(4) for i in range(n)}


def _tree() -> dict[str, Any]:
    """3 levels, 4 keys a level: 64 leaves under 20 nested dicts."""
    return {
        f"a{i}": {f"b{j}": {f"c{k}": torch.randn(4) for k in range(4)} for j in range(4)}
        for i in range(4)
    }


def _dict_walk(
    d: dict[str, Any], leaves_only: bool, prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """The plain-dict baseline: a recursive generator of (path, value)."""
    for k, v in d.items():
        if type(v) is dict:
            if not leaves_only:
                yield (*prefix, k), v
            yield from _dict_walk(v, leaves_only, (*prefix, k))
        else:
            yield (*prefix, k), v


def _dict_keys(d: dict[str, Any], leaves_only: bool) -> Iterator[Any]:
    return (p[0] if len(p) == 1 else p for p, _ in _dict_walk(d, leaves_only))


def _dict_values(d: dict[str, Any], leaves_only: bool) -> Iterator[Any]:
    return (v for _, v in _dict_walk(d, leaves_only))


def _dict_items(d: dict[str, Any], leaves_only: bool) -> Iterator[Any]:
    return ((p[0] if len(p) == 1 else p, v) for p, v in _dict_walk(d, leaves_only))


def _flat_view(kind: str) -> tuple[Fn, Fn]:
    d = _flat()
    td = TensorDict(d, [4])
    view = {
        "keys": (td.keys, d.keys),
        "values": (td.values, d.values),
        "items": (td.items, d.items),
    }
    lib_view, base_view = view[kind]
    return (lambda: list(lib_view())), (lambda: list(base_view()))


def _flat_loop(kind: str) -> tuple[Fn, Fn]:
    d = _flat()
    td = TensorDict(d, [4])
    lib_view = getattr(td, kind)
    base_view = getattr(d, kind)

    def lib() -> None:
        for _ in lib_view():
            pass

    def base() -> None:
        for _ in base_view():
            pass

    return lib, base


_DICT_VIEWS = {"keys": _dict_keys, "values": _dict_values, "items": _dict_items}


def _nested_view(kind: str, leaves_only: bool, source: str = "td") -> tuple[Fn, Fn]:
    d = _tree()
    td: Any = TensorDict(d, [4])
    if source == "locked":
        td.lock_()
    elif source == "lazy":
        td = LazyStackedTensorDict(td.clone(), td.clone(), stack_dim=0)
    lib_view = getattr(td, kind)
    base_view = _DICT_VIEWS[kind]
    if source == "lazy":  # the keys common to both members, in the first one's order
        other = _tree()

        def common() -> list[Any]:
            theirs = set(_dict_keys(other, leaves_only))
            return [k for k in _dict_keys(d, leaves_only) if k in theirs]

        return (lambda: lib_view(True, leaves_only)), common
    return (lambda: list(lib_view(True, leaves_only))), (lambda: list(base_view(d, leaves_only)))


def _memmap_pair() -> tuple[MemoryMappedTensor, torch.Tensor]:
    plain = torch.randn(32, 8)
    return MemoryMappedTensor.from_tensor(plain), plain.clone()


def mm_contiguous() -> tuple[Fn, Fn]:
    mm, t = _memmap_pair()
    return (lambda: mm.contiguous()), (lambda: t.contiguous())


def mm_add() -> tuple[Fn, Fn]:
    mm, t = _memmap_pair()
    return (lambda: mm + 1), (lambda: t + 1)


def mm_stack() -> tuple[Fn, Fn]:
    pairs = [_memmap_pair() for _ in range(10)]
    mms = [m for m, _ in pairs]
    ts = [t for _, t in pairs]
    return (lambda: torch.stack(mms)), (lambda: torch.stack(ts))


def mm_index() -> tuple[Fn, Fn]:
    mm, t = _memmap_pair()
    return (lambda: mm[3]), (lambda: t[3])


class _Bare(torch.Tensor):
    """The floor of any tensor subclass: no Python between an op and its kernel."""

    __torch_function__ = torch._C._disabled_torch_function_impl


def bare_contiguous() -> tuple[Fn, Fn]:
    t = torch.randn(32, 8)
    bare = t.clone().as_subclass(_Bare)
    return (lambda: bare.contiguous()), (lambda: t.contiguous())


def bare_stack() -> tuple[Fn, Fn]:
    ts = [torch.randn(32, 8) for _ in range(10)]
    bares = [t.clone().as_subclass(_Bare) for t in ts]
    return (lambda: torch.stack(bares)), (lambda: torch.stack(ts))


def mm_td_index(index: Any) -> tuple[Fn, Fn]:
    plain = TensorDict({f"k{i}": torch.randn(32, 8) for i in range(10)}, [32])
    mapped = plain.clone().memmap_()
    return (lambda: mapped[index]), (lambda: plain[index])


def update_inplace() -> tuple[Fn, Fn]:
    d = {f"k{i}": torch.randn(32, 8) for i in range(50)}
    o = {k: torch.randn(32, 8) for k in d}
    td = TensorDict(d, [32])
    other = TensorDict(o, [32])

    def base() -> None:
        for k, v in o.items():
            d[k].copy_(v)

    return (lambda: td.update_(other)), base


@tensorclass
class _Pair:
    obs: torch.Tensor
    reward: torch.Tensor


def tc_stack() -> tuple[Fn, Fn]:
    xs = [_Pair(torch.randn(8, 3), torch.randn(8), batch_size=[8]) for _ in range(50)]
    obs = [x.obs for x in xs]
    rew = [x.reward for x in xs]
    return (lambda: torch.stack(xs)), (lambda: (torch.stack(obs), torch.stack(rew)))


def tc_cat() -> tuple[Fn, Fn]:
    xs = [_Pair(torch.randn(8, 3), torch.randn(8), batch_size=[8]) for _ in range(10)]
    obs = [x.obs for x in xs]
    rew = [x.reward for x in xs]
    return (lambda: torch.cat(xs)), (lambda: (torch.cat(obs), torch.cat(rew)))


def td_stack() -> tuple[Fn, Fn]:
    """The tensorclass stack row with TensorDicts: the same shapes, the same baseline."""
    tds = [
        TensorDict(obs=torch.randn(8, 3), reward=torch.randn(8), batch_size=[8]) for _ in range(50)
    ]
    obs = [td["obs"] for td in tds]
    rew = [td["reward"] for td in tds]
    return (lambda: torch.stack(tds)), (lambda: (torch.stack(obs), torch.stack(rew)))


def td_cat() -> tuple[Fn, Fn]:
    tds = [
        TensorDict(obs=torch.randn(8, 3), reward=torch.randn(8), batch_size=[8]) for _ in range(10)
    ]
    obs = [td["obs"] for td in tds]
    rew = [td["reward"] for td in tds]
    return (lambda: torch.cat(tds)), (lambda: (torch.cat(obs), torch.cat(rew)))


_TREE = "3 levels, 64 leaves"
_REC = "recursive dict generator"

CASES = [
    Case("list(td.keys()), 100 keys", "list(d.keys())", 1.5, lambda: _flat_view("keys")),
    Case("list(td.values()), 100 keys", "list(d.values())", 1.5, lambda: _flat_view("values")),
    Case("list(td.items()), 100 keys", "list(d.items())", 1.5, lambda: _flat_view("items")),
    Case(
        "for v in td.values(), 100 keys", "for v in d.values()", 1.5, lambda: _flat_loop("values")
    ),
    Case("for kv in td.items(), 100 keys", "for kv in d.items()", 1.5, lambda: _flat_loop("items")),
    Case(f"keys(True, True), {_TREE}", _REC, 1.5, lambda: _nested_view("keys", True)),
    Case(f"keys(True), {_TREE}", _REC, 1.5, lambda: _nested_view("keys", False)),
    Case(f"values(True, True), {_TREE}", _REC, 1.5, lambda: _nested_view("values", True)),
    Case(f"items(True, True), {_TREE}", _REC, 1.5, lambda: _nested_view("items", True)),
    Case(
        f"locked keys(True, True), {_TREE}", _REC, 1.5, lambda: _nested_view("keys", True, "locked")
    ),
    Case(
        f"lazy stack of 2: keys(True, True), {_TREE}",
        "common keys of 2 nested dicts",
        1.5,
        lambda: _nested_view("keys", True, "lazy"),
    ),
    Case("MemoryMappedTensor.contiguous()", "Tensor.contiguous()", 1.1, mm_contiguous),
    Case("MemoryMappedTensor + 1, [32,8]", "Tensor + 1", 1.1, mm_add),
    Case("torch.stack of 10 MemoryMappedTensor [32,8]", "torch.stack of Tensor", 1.1, mm_stack),
    Case("MemoryMappedTensor[3] (a mapped view)", "Tensor[3]", None, mm_index),
    Case("floor: bare Tensor subclass .contiguous()", "Tensor.contiguous()", None, bare_contiguous),
    Case("floor: torch.stack of 10 bare Tensor subclass", "torch.stack", None, bare_stack),
    Case("memmapped td[3], 10 leaves [32,8]", "td[3], plain leaves", 1.1, lambda: mm_td_index(3)),
    Case(
        "memmapped td[index tensor], 10 leaves",
        "same, plain leaves",
        1.1,
        lambda: mm_td_index(torch.tensor([0, 3, 5, 7])),
    ),
    Case("td.update_(other), 50 leaves [32,8]", "per-key copy_", 1.0, update_inplace),
    # no target: torch's own parsing of a list of 50 TensorDicts before __torch_function__
    # (about 8 us, measured with a handler that returns at once) rivals the two stacks
    Case("torch.stack of 50 tensorclass (2 fields)", "per-field torch.stack", None, tc_stack),
    Case("torch.cat of 10 tensorclass (2 fields)", "per-field torch.cat", None, tc_cat),
    # the same two rows with TensorDicts: a tensorclass costs what a TensorDict costs; the
    # floor of both is torch's own __torch_function__ lookup on each member (about 0.35x
    # of the baseline for 50 members) plus one Python check per member
    Case("torch.stack of 50 TDs (2 leaves [8])", "per-key torch.stack", None, td_stack),
    Case("torch.cat of 10 TDs (2 leaves [8])", "per-key torch.cat", None, td_cat),
]
