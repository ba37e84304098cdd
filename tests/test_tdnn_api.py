"""tdnn module API details: wrappers, TensorDictParams deletion, method keyword arguments."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tdnn import TensorDictModule, TensorDictModuleWrapper, TensorDictParams
from tensordict import TensorDict


def test_wrapper_keys_are_the_wrapped_modules_and_can_be_set() -> None:
    inner = TensorDictModule(lambda x: x + 1, ["x"], ["y"])
    wrapped = TensorDictModuleWrapper(inner)
    wrapped.in_keys = ["z"]
    assert inner.in_keys == ["z"] and wrapped.in_keys == ["z"] and wrapped.out_keys == ["y"]
    out = wrapped(TensorDict(z=torch.zeros(2)))
    torch.testing.assert_close(out["y"], torch.ones(2))


def test_tensordict_params_delitem_nested_and_missing() -> None:
    params = TensorDictParams(TensorDict.from_module(nn.Sequential(nn.Linear(2, 3))))
    del params["0", "bias"]
    assert sorted(n for n, _ in params.named_parameters()) == ["0.weight"]
    with pytest.raises(KeyError, match=r"TensorDictParams.__delitem__: no sub-TensorDict 'b'"):
        del params["b", "c"]


def test_method_kwargs_without_call_kwargs() -> None:
    class Scale(nn.Module):
        def forward(self, x: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
            return x * factor

    m = TensorDictModule(Scale(), ["x"], ["y"], method_kwargs={"factor": 3.0})
    out = m(TensorDict(x=torch.ones(2)))
    torch.testing.assert_close(out["y"], torch.full((2,), 3.0))
    out = m(TensorDict(x=torch.ones(2)), factor=2.0)  # method_kwargs win, as upstream
    torch.testing.assert_close(out["y"], torch.full((2,), 3.0))
