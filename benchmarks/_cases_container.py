"""Cases for the TensorDict container (foundation issue): construction, access, element-wise."""

from __future__ import annotations

from typing import Any

import torch

from benchmarks._harness import Case, Fn
from tensordict import TensorDict


def _leaves(n: int, shape: tuple[int, ...] = (32, 8)) -> dict[str, torch.Tensor]:
    return {f"k{i}": torch.randn(shape) for i in range(n)}


def _nested(levels: int, per_level: int) -> dict[str, Any]:
    """``levels`` nested dicts, each with ``per_level`` tensor leaves."""
    d: dict[str, Any] = {f"l{i}": torch.randn(32, 8) for i in range(per_level)}
    for level in range(levels - 1):
        d = {**{f"x{level}_{i}": torch.randn(32, 8) for i in range(per_level)}, "sub": d}
    return d


def _copy_nested(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _copy_nested(v) if isinstance(v, dict) else v for k, v in d.items()}


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def _unflatten(d: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        *parents, last = k.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[last] = v
    return out


def construct_flat() -> tuple[Fn, Fn]:
    d = _leaves(10)
    return (lambda: TensorDict(d, batch_size=[32])), (lambda: dict(d))


def construct_nested() -> tuple[Fn, Fn]:
    d = _nested(3, 4)
    return (lambda: TensorDict(d, batch_size=[32])), (lambda: _copy_nested(d))


def getitem() -> tuple[Fn, Fn]:
    d = _leaves(10)
    td = TensorDict(d, [32])
    return (lambda: td["k3"]), (lambda: d["k3"])


def get() -> tuple[Fn, Fn]:
    d = _leaves(10)
    td = TensorDict(d, [32])
    return (lambda: td.get("k3")), (lambda: d["k3"])


def setitem() -> tuple[Fn, Fn]:
    d = _leaves(10)
    td = TensorDict(d, [32])
    t = torch.randn(32, 8)

    def lib() -> None:
        td["k3"] = t

    def base() -> None:
        d["k3"] = t

    return lib, base


def nested_get() -> tuple[Fn, Fn]:
    d = {"a": {"b": {"c": torch.randn(32, 8)}}}
    td = TensorDict(d, [32])
    return (lambda: td["a", "b", "c"]), (lambda: d["a"]["b"]["c"])


def nested_set() -> tuple[Fn, Fn]:
    d = {"a": {"b": {"c": torch.randn(32, 8)}}}
    td = TensorDict(d, [32])
    t = torch.randn(32, 8)

    def lib() -> None:
        td["a", "b", "c"] = t

    def base() -> None:
        d["a"]["b"]["c"] = t

    return lib, base


def apply_add() -> tuple[Fn, Fn]:
    d = _leaves(50)
    td = TensorDict(d, [32])

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x + 1

    return (lambda: td.apply(fn)), (lambda: {k: fn(v) for k, v in d.items()})


def add_scalar() -> tuple[Fn, Fn]:
    d = _leaves(50)
    td = TensorDict(d, [32])
    return (lambda: td + 1), (lambda: {k: v + 1 for k, v in d.items()})


def clone() -> tuple[Fn, Fn]:
    d = _leaves(50)
    td = TensorDict(d, [32])
    return (lambda: td.clone()), (lambda: {k: v.clone() for k, v in d.items()})


def to_double() -> tuple[Fn, Fn]:
    d = _leaves(50)
    td = TensorDict(d, [32])
    return (
        lambda: td.to(torch.float64),
        lambda: {k: v.to(torch.float64) for k, v in d.items()},
    )


def _three_levels_64() -> dict[str, Any]:
    return {
        f"a{i}": {f"b{j}": {f"c{k}": torch.randn(32) for k in range(4)} for j in range(4)}
        for i in range(4)
    }


def flatten_keys() -> tuple[Fn, Fn]:
    d = _three_levels_64()
    td = TensorDict(d, [32])
    return (lambda: td.flatten_keys(".")), (lambda: _flatten(d))


def unflatten_keys() -> tuple[Fn, Fn]:
    flat = _flatten(_three_levels_64())
    td = TensorDict(flat, [32])
    return (lambda: td.unflatten_keys(".")), (lambda: _unflatten(flat))


CASES = [
    Case("construct 10 leaves [32,8], batch [32]", "dict(d)", 20, construct_flat),
    Case("construct 3-level nested, 12 leaves", "nested dict copy", 4, construct_nested),
    Case('td["k"]', 'd["k"]', 2, getitem),
    Case('td.get("k")', 'd["k"]', 4, get),
    Case('td["k"] = t (existing key)', 'd["k"] = t', 8, setitem),
    Case('td["a","b","c"] get', 'd["a"]["b"]["c"]', 6, nested_get),
    Case('td["a","b","c"] = t', 'd["a"]["b"]["c"] = t', 12, nested_set),
    Case("apply(lambda x: x + 1), 50 leaves [32,8]", "dict comprehension", 1.15, apply_add),
    Case("td + 1, 50 leaves [32,8]", "dict comprehension", 1.0, add_scalar),
    Case("clone(), 50 leaves [32,8]", "dict comprehension", 1.05, clone),
    Case("to(torch.float64), 50 leaves [32,8]", "dict comprehension", 0.9, to_double),
    Case("flatten_keys, 3 levels, 64 leaves", "recursive dict version", 1.5, flatten_keys),
    Case("unflatten_keys, 3 levels, 64 leaves", "recursive dict version", 1.5, unflatten_keys),
]
