"""A shared catalogue of example TensorDicts, crossed with operations by the tests."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import torch

from tensordict import LazyStackedTensorDict, TensorClass, TensorDict, lazy_stack


def flat() -> TensorDict:
    return TensorDict({"a": torch.randn(4, 3), "b": torch.randn(4)}, batch_size=[4])


def nested() -> TensorDict:
    return TensorDict(
        {"a": torch.randn(4, 3), "n": {"b": torch.randn(4, 2), "m": {"c": torch.randn(4)}}},
        batch_size=[4],
    )


def empty_batch() -> TensorDict:
    return TensorDict({"a": torch.randn(3), "b": torch.randn(())}, batch_size=[])


def two_dims() -> TensorDict:
    return TensorDict({"a": torch.randn(2, 3, 5), "b": torch.randn(2, 3)}, batch_size=[2, 3])


def non_contiguous() -> TensorDict:
    return TensorDict({"a": torch.randn(3, 4).t(), "b": torch.randn(4, 6)[:, ::2]}, batch_size=[4])


def bool_int() -> TensorDict:
    return TensorDict(
        {
            "f": torch.randn(4),
            "i": torch.randint(1, 5, (4, 2)),
            "m": torch.rand(4) > 0.5,
        },
        batch_size=[4],
    )


def requires_grad() -> TensorDict:
    return TensorDict(
        {"w": torch.randn(4, 3, requires_grad=True), "v": torch.randn(4)}, batch_size=[4]
    )


def with_non_tensor() -> TensorDict:
    td = TensorDict({"a": torch.randn(4, 2)}, batch_size=[4])
    td["text"] = "hello"
    return td


def longer_nested_batch() -> TensorDict:
    inner = TensorDict({"x": torch.randn(4, 5, 2)}, batch_size=[4, 5])
    return TensorDict({"a": torch.randn(4), "inner": inner}, batch_size=[4])


def zero_size() -> TensorDict:
    return TensorDict({"a": torch.randn(0, 3), "b": torch.randn(0)}, batch_size=[0])


class CatalogueSample(TensorClass):
    """A tensorclass entry of the catalogue: a tensor field, a nested collection, a string.
    (Its name is its own in the suite: a class is registered by name for saving and
    sending, and other test files define classes called ``Sample``.)"""

    obs: torch.Tensor
    extra: TensorDict
    label: str


Sample = CatalogueSample


def tensorclass() -> Sample:
    extra = TensorDict({"r": torch.randn(4, 2)}, batch_size=[4])
    return Sample(torch.randn(4, 3), extra, "cat", batch_size=[4])


def lazy_same() -> Any:
    """A lazy stack of members sharing one structure (densifiable)."""
    return lazy_stack(list(nested().unbind(0)), 0)


def lazy_ragged() -> Any:
    """A lazy stack whose members differ in a leaf's feature size (not densifiable)."""
    return lazy_stack(
        [
            TensorDict({"x": torch.randn(3, 2), "y": torch.randn(3)}, [3]),
            TensorDict({"x": torch.randn(3, 5), "y": torch.randn(3)}, [3]),
        ],
        1,
    )


def memmapped() -> TensorDict:
    """A TensorDict whose leaves are memory-mapped files."""
    return nested().memmap(tempfile.mkdtemp(prefix="catalogue-") + "/td")


CATALOGUE: dict[str, Callable[[], Any]] = {
    "flat": flat,
    "nested": nested,
    "empty_batch": empty_batch,
    "two_dims": two_dims,
    "non_contiguous": non_contiguous,
    "bool_int": bool_int,
    "requires_grad": requires_grad,
    "with_non_tensor": with_non_tensor,
    "longer_nested_batch": longer_nested_batch,
    "zero_size": zero_size,
    "tensorclass": tensorclass,
    "lazy_same": lazy_same,
    "memmapped": memmapped,
}

# Collections that refuse the operations needing one dense tensor per key (each has its own
# crossing test: every operation either works member by member or names the differing key).
RAGGED: dict[str, Callable[[], Any]] = {"lazy_ragged": lazy_ragged}


def leaves(td: TensorDict) -> dict[object, torch.Tensor]:
    """Tensor leaves by nested key."""
    return {
        k: v
        for k, v in td.items(include_nested=True, leaves_only=True)
        if isinstance(v, torch.Tensor)
    }


def assert_same(a: TensorDict, b: TensorDict) -> None:
    """Same structure, batch size and leaf values (dtype included)."""
    assert a.batch_size == b.batch_size
    assert set(a.keys(include_nested=True)) == set(b.keys(include_nested=True))
    la, lb = leaves(a), leaves(b)
    for key, x in la.items():
        y = lb[key]
        assert x.dtype == y.dtype, key
        assert x.shape == y.shape, key
        torch.testing.assert_close(x, y, equal_nan=True, rtol=0, atol=0)


def assert_shares(a: Any, b: Any, keys: list[Any] | None = None) -> None:
    """``a`` holds the very tensors ``b`` holds at ``keys`` (all of ``a``'s leaves by default).

    A lazy stack's ``get`` stacks its members' tensors into a new one, so two lazy stacks
    share when their members do, member by member.
    """
    if isinstance(a, LazyStackedTensorDict) and isinstance(b, LazyStackedTensorDict):
        assert a.stack_dim == b.stack_dim and len(a.tensordicts) == len(b.tensordicts)
        for x, y in zip(a.tensordicts, b.tensordicts, strict=True):
            assert_shares(x, y, keys)
        return
    for key in leaves(a) if keys is None else keys:
        assert a.get(key) is b.get(key), key
