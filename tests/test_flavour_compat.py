"""Upstream behaviours the multi-flavour method tests rely on, checked leaf by leaf."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tensordict import TensorDict, lazy_stack


def _td() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(12.0).reshape(4, 3), "n": {"b": torch.ones(4, 3, 2)}}, [4, 3]
    )


def _stack() -> object:
    td = _td()
    return lazy_stack([td[0], td[1]], 0)


def test_shape_mismatch_is_both_value_and_runtime_error() -> None:
    td = _td()
    for error in (ValueError, RuntimeError):
        with pytest.raises(error, match=r"TensorDict.set: shape \(5, 10\) of key 'x' does not"):
            td.set("x", np.ones((5, 10)))
    with pytest.raises(RuntimeError, match=r"LazyStackedTensorDict.set: shape \(5,\) of key 'x'"):
        _stack().set("x", torch.ones(5))  # type: ignore[attr-defined]


@pytest.mark.parametrize("make", [_td, _stack])
def test_nested_tensordict_of_another_batch_size_is_fitted(make: object) -> None:
    td = make()  # type: ignore[operator]
    inner = TensorDict({"c": torch.randn(*td.batch_size, 1)}, [])
    td["inner"] = inner
    assert td["inner"].batch_size == td.batch_size
    assert inner.batch_size == torch.Size([])  # the value passed is left alone
    torch.testing.assert_close(td["inner", "c"], inner["c"])
    with pytest.raises(ValueError, match=r"shape \(\) of key 'bad' does not start with"):
        td["bad"] = TensorDict({"c": torch.randn(7)}, [])


def test_set_at_takes_a_numpy_array() -> None:
    td = _td()
    td.set_at_("a", np.full((3,), 42.0), 2)
    expected = torch.arange(12.0).reshape(4, 3)
    expected[2] = 42.0
    torch.testing.assert_close(td["a"], expected)


def test_missing_key_errors_say_where() -> None:
    with pytest.raises(KeyError, match=r"key 'zz' not found in the TensorDict"):
        _td().set_("zz", torch.zeros(4, 3))
    with pytest.raises(KeyError, match=r"key 'zz' not found in the LazyStackedTensorDict"):
        _stack().set_("zz", torch.zeros(2, 3))  # type: ignore[attr-defined]


def test_lazy_stack_set_inplace_converts_arrays_and_dicts() -> None:
    s = _stack()
    s.set_("a", np.zeros((2, 3), dtype=np.float32))  # type: ignore[attr-defined]
    torch.testing.assert_close(s["a"], torch.zeros(2, 3))  # type: ignore[index]
    s.set_("n", {"b": torch.full((2, 3, 2), 5.0)})  # type: ignore[attr-defined]
    torch.testing.assert_close(s["n", "b"], torch.full((2, 3, 2), 5.0))  # type: ignore[index]


@pytest.mark.parametrize("make", [_td, _stack])
def test_where_pad_fills_the_missing_side(make: object) -> None:
    td = make()  # type: ignore[operator]
    mask = torch.rand(td.batch_size) > 0.5
    empty = td.empty()
    out = td.where(mask, empty, pad=1)
    for key in td.keys(True, True):
        expected = torch.where(
            mask.reshape(*mask.shape, *[1] * (td[key].ndim - mask.ndim)), td[key], 1.0
        )
        torch.testing.assert_close(out[key], expected)
    out = empty.where(~mask, td, pad=2)
    for key in td.keys(True, True):
        expected = torch.where(
            (~mask).reshape(*mask.shape, *[1] * (td[key].ndim - mask.ndim)), 2.0, td[key]
        )
        torch.testing.assert_close(out[key], expected)
    target = td.empty()
    assert td.where(mask, empty, pad=1, out=target) is target
    torch.testing.assert_close(target["a"], torch.where(mask, td["a"], 1.0))
    with pytest.raises(KeyError, match="not found and no pad value provided"):
        td.where(mask, empty)
    with pytest.raises(KeyError, match="not found and no pad value provided"):
        empty.where(mask, td)
