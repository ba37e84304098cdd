"""A shared catalogue of example TensorDicts, crossed with operations by the tests."""

from __future__ import annotations

from collections.abc import Callable

import torch

from tensordict import TensorDict


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


CATALOGUE: dict[str, Callable[[], TensorDict]] = {
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
}


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
