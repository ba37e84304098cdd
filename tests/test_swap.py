"""to_module's swap engine: one walk that swaps as it matches, undone on errors and on exit."""

from __future__ import annotations

import functools
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tensordict import TensorDict, _swap
from tests.properties.test_module_roundtrips import module_trees


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Sequential(nn.Linear(4, 2))
    )


def _state(model: nn.Module) -> list[tuple[str, str, int, Any]]:
    """Every slot of every submodule, in order: (module path, store, name, tensor id)."""
    out: list[tuple[str, str, int, Any]] = []
    for path, sub in model.named_modules(remove_duplicate=False):
        for kind in ("_parameters", "_buffers"):
            out.extend((path, kind, name, id(t)) for name, t in getattr(sub, kind).items())
        out.append((path, "non_persistent", 0, sorted(sub._non_persistent_buffers_set)))
    return out


def _read(model: nn.Module, key: str | tuple[str, ...]) -> Any:
    """What the module reads under ``key`` (a plain attribute too: from_module skips those)."""
    return functools.reduce(getattr, (key,) if isinstance(key, str) else key, model)


@pytest.mark.parametrize("preserve", [True, False])
def test_a_swap_restores_every_slot_store_order_and_flag(preserve: bool) -> None:
    shared = nn.Linear(2, 2)
    for model in (_model(), nn.Sequential(shared, nn.ReLU(), shared), nn.LSTM(3, 3)):
        before = _state(model)
        originals = TensorDict.from_module(model)
        params = originals.apply(torch.zeros_like)
        with params.to_module(model, preserve_module_state=preserve) as old:
            assert set(old.keys(True, True)) == set(originals.keys(True, True))
            assert all(old[k] is v for k, v in originals.items(True, True))
            for key in originals.keys(True, True):
                torch.testing.assert_close(_read(model, key), params[key], rtol=0, atol=0)
        assert _state(model) == before  # the same tensors, stores, orders and flags
        assert not any(
            isinstance(v, torch.Tensor) for m in model.modules() for v in vars(m).values()
        )


def test_the_kinds_swapped_in_follow_preserve_module_state() -> None:
    model = _model()
    model[3].requires_grad_(False)
    params = TensorDict.from_module(model).detach().clone()
    with params.to_module(model):
        assert type(model[0].weight) is nn.Parameter and model[0].weight.requires_grad
        assert type(model[3][0].weight) is nn.Parameter and not model[3][0].weight.requires_grad
        assert model[0].weight.data_ptr() == params["0", "weight"].data_ptr()
        assert list(model.state_dict()) == list(_model().state_dict())
    with params.to_module(model, preserve_module_state=False):
        # a plain tensor in a parameter slot is a plain attribute meanwhile (as upstream);
        # a buffer slot keeps a buffer
        assert "weight" not in model[0]._parameters and "weight" not in model[0]._buffers
        assert model[0].__dict__["weight"] is params["0", "weight"]
        assert "0.weight" not in model.state_dict() and "1.running_mean" in model.state_dict()
        assert model[0].weight is params["0", "weight"]
        assert model[1]._buffers["running_mean"] is params["1", "running_mean"]
    assert list(model.state_dict()) == list(_model().state_dict())
    other = _model()
    other[3].requires_grad_(False)
    stacked = TensorDict.from_modules(model, other)  # (it compares the stores' key orders)
    assert stacked["1", "running_mean"].shape == (2, 4)


@pytest.mark.parametrize("preserve", [True, False])
def test_a_mismatch_found_late_leaves_the_module_untouched(preserve: bool) -> None:
    model = _model()
    before = _state(model)
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    lacking = params.clone()
    del lacking["3", "0", "bias"]
    with pytest.raises(KeyError, match=r"missing keys \['3.0.bias'\], unexpected keys \[\]"):
        lacking.to_module(model, preserve_module_state=preserve)
    assert _state(model) == before
    extra = params.clone()
    extra["3", "0", "scale"] = torch.ones(1)
    with pytest.raises(KeyError, match=r"missing keys \[\], unexpected keys \['3.0.scale'\]"):
        extra.to_module(model, preserve_module_state=preserve)
    assert _state(model) == before
    nested = params.clone()
    nested["3", "0", "bias"] = TensorDict({"x": torch.zeros(2)}, [])
    with pytest.raises(KeyError, match=r"unexpected keys \['3.0.bias'\]"):
        nested.to_module(model, preserve_module_state=preserve)
    assert _state(model) == before
    with lacking.to_module(model, strict=False, preserve_module_state=preserve) as old:
        assert (model[3][0].weight == 0).all() and model[3][0].bias is not None
        assert ("3", "0", "bias") not in old.keys(True)
    assert _state(model) == before


def test_the_module_or_the_keys_changing_between_calls() -> None:
    model = _model()
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    with params.to_module(model):
        pass
    model[3][0].register_parameter("scale", nn.Parameter(torch.ones(1)))
    with pytest.raises(KeyError, match=r"missing keys \['3.0.scale'\]"):
        params.to_module(model)
    with_scale = TensorDict.from_module(model).apply(torch.zeros_like)
    with with_scale.to_module(model):
        assert (model[3][0].scale == 0).all()
    del model[3][0].scale
    with pytest.raises(KeyError, match=r"unexpected keys \['3.0.scale'\]"):
        with_scale.to_module(model)
    model[3][0].bias = None  # (a None slot holds nothing to swap)
    with pytest.raises(KeyError, match=r"unexpected keys \['3.0.bias'\]"):
        params.to_module(model)
    model[3] = nn.ReLU()
    with pytest.raises(KeyError, match=r"missing keys \[\], unexpected keys \['3.0'\]"):
        params.to_module(model)  # (a submodule with no tensors, given some)
    before = _state(model)
    with params.exclude("3").to_module(model):
        assert (model[0].weight == 0).all()
    assert _state(model) == before


@pytest.mark.parametrize("preserve", [True, False])
@pytest.mark.parametrize("where", ["walk", "body"])
def test_an_error_midway_or_in_the_body_puts_everything_back(
    monkeypatch: pytest.MonkeyPatch, preserve: bool, where: str
) -> None:
    model = _model()
    before = _state(model)
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    if where == "walk":
        name = "_make_subclass" if preserve else "_is_param"
        real = getattr(_swap, name)
        seen: list[int] = []

        def fails_third(*args: Any) -> Any:
            seen.append(1)
            if len(seen) == 3:
                raise RuntimeError("interrupted")
            return real(*args)

        monkeypatch.setattr(_swap, name, fails_third)
        with pytest.raises(RuntimeError, match="interrupted"):
            params.to_module(model, preserve_module_state=preserve)
    else:
        inside: list[bool] = []

        def body() -> None:
            with params.to_module(model, preserve_module_state=preserve):
                inside.append(bool((model[1].running_mean == 0).all()))
                raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            body()
        assert inside == [True]
    assert _state(model) == before


def test_restore_is_idempotent_and_return_swap_false_keeps_the_swap() -> None:
    model = _model()
    before = _state(model)
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    swap = params.to_module(model)
    assert (model[0].weight == 0).all()
    swap.restore()
    swap.restore()
    assert _state(model) == before
    dest = TensorDict()
    original = model[3][0].weight
    with params.to_module(model, swap_dest=dest) as old:
        assert old is dest and dest["3", "0", "weight"] is original
    assert params.to_module(model, return_swap=False) is None
    assert (model[0].weight == 0).all() and model[0].weight is not params["0", "weight"]


@settings(max_examples=40, deadline=None)
@given(module_trees(), st.booleans(), st.integers(0, 50))
def test_a_swap_restores_every_slot_in_order_or_changes_nothing(
    model: nn.Module, preserve: bool, drop: int
) -> None:
    before = _state(model)
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    keys = list(params.keys(True, True))
    if keys and drop < len(keys):  # one key missing: refused, nothing changes
        del params[keys[drop]]
        with pytest.raises(KeyError, match="missing keys"):
            params.to_module(model, preserve_module_state=preserve)
    else:
        with params.to_module(model, preserve_module_state=preserve):
            assert all((_read(model, k) == 0).all() for k in keys)
    assert _state(model) == before


def test_originals_are_the_modules_own_when_a_key_is_unexpected() -> None:
    # a parameter moved to a plain attribute is still a slot of the module, not an extra
    lin = nn.Linear(2, 2)
    weight, bias = lin.weight, lin.bias
    params = TensorDict(
        {"weight": torch.zeros(2, 2), "bias": torch.zeros(2), "extra": torch.ones(1)}, []
    )
    for preserve in (True, False):
        with params.to_module(lin, strict=False, preserve_module_state=preserve) as old:
            assert old["weight"] is weight and old["bias"] is bias
            assert set(old.keys()) == {"weight", "bias"}
        assert lin.weight is weight and lin.bias is bias
        assert list(lin._parameters) == ["weight", "bias"]


def test_the_swap_reads_as_the_tensordict_of_the_originals_as_upstream() -> None:
    # upstream's to_module(return_swap=True) returns that TensorDict: code written for it
    # puts the originals back with to_module on the result
    model = nn.Linear(3, 2)
    before = model.weight
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    swap = params.to_module(model, return_swap=True)
    assert (model.weight == 0).all()
    assert torch.equal(swap["weight"], before) and "bias" in swap
    assert sorted(swap.keys()) == ["bias", "weight"]
    swap.to_module(model, return_swap=False)
    assert model.weight is before
    with pytest.raises(AttributeError, match="'_hidden'"):
        swap._hidden
