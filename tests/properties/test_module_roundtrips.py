"""Hypothesis properties of the module layer: from_module then to_module round trips."""

from __future__ import annotations

import copy

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tensordict import TensorDict


@st.composite
def module_trees(draw: st.DrawFn, depth: int = 2) -> nn.Module:
    """A random nn.Module tree of Linear / BatchNorm1d / parameterless leaves."""

    def node(level: int) -> nn.Module:
        kind = draw(st.sampled_from(["linear", "norm", "relu", "seq"] if level else ["seq"]))
        if kind == "linear":
            return nn.Linear(
                draw(st.integers(1, 3)), draw(st.integers(1, 3)), bias=draw(st.booleans())
            )
        if kind == "norm":
            return nn.BatchNorm1d(draw(st.integers(1, 3)))
        if kind == "relu" or level >= depth:
            return nn.ReLU()
        return nn.Sequential(*[node(level + 1) for _ in range(draw(st.integers(0, 3)))])

    return node(0)


@settings(max_examples=40, deadline=None)
@given(module_trees())
def test_to_module_of_from_module_swaps_every_tensor_and_restores(model: nn.Module) -> None:
    before = dict(model.state_dict(keep_vars=True))
    params = TensorDict.from_module(model)
    assert set(params.flatten_keys(".").keys()) == set(before)
    fresh = params.apply(lambda t: torch.full_like(t, 7))
    with fresh.to_module(model) as old:
        now = model.state_dict(keep_vars=True)
        assert all((now[k] == 7).all() for k in before)
        swapped_out = old.flatten_keys(".")
        assert set(swapped_out.keys()) == set(before)
        assert all(swapped_out[k] is before[k] for k in before)
    after = model.state_dict(keep_vars=True)
    assert all(after[k] is before[k] for k in before)  # the very same tensors came back


@settings(max_examples=30, deadline=None)
@given(module_trees(), st.integers(1, 3))
def test_from_modules_stacks_like_stack_module_state(model: nn.Module, n: int) -> None:
    copies = [model] + [copy.deepcopy(model) for _ in range(n - 1)]
    stacked = TensorDict.from_modules(*copies).flatten_keys(".")
    params, buffers = torch.func.stack_module_state(copies)
    expected = {**params, **buffers}
    assert set(stacked.keys()) == set(expected)
    for key, value in expected.items():
        torch.testing.assert_close(stacked[key], value)
        assert isinstance(stacked[key], nn.Parameter) == (key in params)
