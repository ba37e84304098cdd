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
    with pytest.raises(
        ValueError, match=r"key 'bad' \(batch_size \(\)\) cannot take .*'c'\) \(7,\)"
    ):
        td["bad"] = TensorDict({"c": torch.randn(7)}, [])


def test_set_at_takes_a_numpy_array() -> None:
    td = _td()
    td.set_at_("a", np.full((3,), 42.0), 2)
    expected = torch.arange(12.0).reshape(4, 3)
    expected[2] = 42.0
    torch.testing.assert_close(td["a"], expected)


def test_missing_key_errors_say_where() -> None:
    with pytest.raises(KeyError, match=r"key 'zz' was not found in TensorDict with keys"):
        _td().set_("zz", torch.zeros(4, 3))
    with pytest.raises(KeyError, match=r"key 'zz' was not found in the LazyStackedTensorDict"):
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


# ------------------------------------------------------------ TensorDictParams as a TensorDict
def _params() -> object:
    from tdnn import TensorDictParams

    return TensorDictParams(
        TensorDict(
            {
                "a": torch.randn(4, 3),
                "c": torch.ones(4, dtype=torch.long),
                "n": {"b": torch.ones(4)},
            },
            [4],
        )
    )


def test_params_data_is_detached_and_shares_storage() -> None:
    p = _params()
    data = p.data  # type: ignore[attr-defined]
    assert not data["a"].requires_grad and p["a"].requires_grad  # type: ignore[index]
    data[1:] = data[1:].zero_()  # in-place writes reach the parameters
    torch.testing.assert_close(p["a"][1:].detach(), torch.zeros(3, 3))  # type: ignore[index]
    data.fill_("a", 2.0)
    torch.testing.assert_close(p["a"].detach(), torch.full((4, 3), 2.0))  # type: ignore[index]


def test_params_lock_and_unlock_are_context_managers() -> None:
    p = _params()
    with p.lock_():  # type: ignore[attr-defined]
        assert p.is_locked  # type: ignore[attr-defined]
        with pytest.raises(
            RuntimeError,
            match="TensorDictParams.set: Cannot modify locked TensorDictParams: cannot add, remove or",
        ):
            p.set("a", torch.zeros(4, 3))  # type: ignore[attr-defined]
        with pytest.raises(
            RuntimeError,
            match="TensorDictParams.__setitem__: Cannot modify locked TensorDictParams: cannot add",
        ):
            p["new"] = torch.zeros(4)  # type: ignore[index]
        with p.unlock_():  # type: ignore[attr-defined]
            p["x"] = torch.zeros(4)  # type: ignore[index]
        assert p.is_locked  # type: ignore[attr-defined]
    assert not p.is_locked  # type: ignore[attr-defined]
    assert "x" in dict(p.named_parameters())  # type: ignore[attr-defined]


def test_params_structural_methods_write_back() -> None:
    p = _params()
    before = p["a"]  # type: ignore[index]
    popped = p.pop("c")  # type: ignore[attr-defined]
    assert popped.dtype == torch.long and "c" not in p  # type: ignore[operator]
    assert sorted(name for name, _ in p.named_buffers()) == []  # type: ignore[attr-defined]
    p.rename_key_("a", "z")  # type: ignore[attr-defined]
    assert p["z"] is before  # type: ignore[index]  # the same Parameter, renamed
    assert "z" in dict(p.named_parameters())  # type: ignore[attr-defined]
    assert p.clear() is p and p.is_empty()  # type: ignore[attr-defined]
    assert list(p.parameters()) == []  # type: ignore[attr-defined]


def test_params_keep_insertion_order_and_any_key_name() -> None:
    p = _params()
    p["x"] = torch.zeros(4)  # type: ignore[index]
    p["numpy"] = torch.zeros(4)  # type: ignore[index]  # a method's name is a fine key
    assert list(p.keys()) == ["a", "c", "n", "x", "numpy"]  # type: ignore[attr-defined]
    p["text"] = "some words"  # type: ignore[index]
    assert p["text"] == "some words"  # type: ignore[index]
    with pytest.raises(RuntimeError, match=r"shape \(5, 10\) of key 'bad' does not start"):
        p["bad"] = torch.zeros(5, 10)  # type: ignore[index]


def test_params_torch_functions_and_casts_act_on_the_leaves() -> None:
    p = _params()
    tree = p.data  # type: ignore[attr-defined]
    torch.testing.assert_close(torch.stack([p, p])["a"].detach(), torch.stack([tree["a"]] * 2))
    torch.testing.assert_close(torch.mean(p.float(), 0)["a"].detach(), tree["a"].mean(0))  # type: ignore[attr-defined]
    assert torch.clone(p)["a"] is not p["a"]  # type: ignore[index]
    assert p.float()["c"].dtype == torch.float32  # type: ignore[attr-defined]
    moved = p.to(torch.int32)  # type: ignore[attr-defined]
    assert type(moved).__name__ == "TensorDictParams" and moved["a"].dtype == torch.int32
    assert p["a"].dtype == torch.float32  # type: ignore[index]
    with pytest.raises(ValueError, match="TensorDictParams.apply: Failed to update"):
        p.apply(lambda x: x + 1, inplace=True)  # type: ignore[attr-defined]


def test_params_memmap_in_place_is_refused() -> None:
    with pytest.raises(RuntimeError, match="Cannot build a memmap TensorDict in-place"):
        _params().memmap_()  # type: ignore[attr-defined]


@pytest.mark.parametrize("make", [_td, _stack])
def test_view_as_dtype(make: object) -> None:
    td = make()  # type: ignore[operator]
    out = td.view(torch.uint8, batch_size=[])
    assert out.batch_size == torch.Size([])
    for key in td.keys(True, True):
        torch.testing.assert_close(out[key], td[key].view(torch.uint8))


@pytest.mark.parametrize("make", [_td, _stack])
def test_transpose_out_of_range_is_index_and_value_error(make: object) -> None:
    td = make()  # type: ignore[operator]
    for error in (IndexError, ValueError):
        with pytest.raises(error, match="dim0 and dim1 must be within the range"):
            td.transpose(-5, -6)


@pytest.mark.parametrize("make", [_td, _stack])
def test_strict_state_dict_mismatch_is_key_and_runtime_error(make: object) -> None:
    td = make()  # type: ignore[operator]
    sd = td.state_dict()
    del sd["a"]
    for error in (KeyError, RuntimeError):
        with pytest.raises(error, match=r"load_state_dict: missing keys \['a'\]"):
            td.clone().load_state_dict(sd, strict=True)


@pytest.mark.parametrize("make", [_td, _stack])
def test_to_another_collection_takes_its_device_and_common_dtype(make: object) -> None:
    td = make()  # type: ignore[operator]
    half = TensorDict({"x": torch.zeros(3, dtype=torch.half)}, [], device="cpu")
    out = td.to(other=half)
    for key in td.keys(True, True):
        torch.testing.assert_close(out[key], td[key].half())
    mixed = TensorDict({"x": torch.zeros(3), "y": torch.zeros(3, dtype=torch.long)}, [])
    out = td.to(mixed)  # no common dtype: the dtypes are kept
    for key in td.keys(True, True):
        assert out[key].dtype == td[key].dtype


def test_to_with_batch_size() -> None:
    td = _td()
    out = td.to(torch.int32, batch_size=[4])
    assert out.batch_size == torch.Size([4]) and td.batch_size == torch.Size([4, 3])
    torch.testing.assert_close(out["a"], td["a"].int())
    assert td.to(batch_size=[]).batch_size == torch.Size([])
    with pytest.raises(TypeError, match="LazyStackedTensorDict.to: Cannot pass batch-size to"):
        _stack().to(batch_size=[])  # type: ignore[attr-defined]


@pytest.mark.parametrize("make", [_td, _stack])
def test_reshape_of_a_locked_collection_is_locked(make: object) -> None:
    td = make()  # type: ignore[operator]
    assert not td.reshape(-1).is_locked
    td.lock_()
    out = td.reshape(-1)
    assert out.is_locked
    torch.testing.assert_close(out["a"], td["a"].reshape(-1))


def test_grad_is_none_without_gradients() -> None:
    td = TensorDict({"a": torch.ones(2, requires_grad=True), "b": torch.ones(2)}, [2])
    assert td.grad is None
    (td["a"] * 3).sum().backward()
    torch.testing.assert_close(td.grad["a"], torch.full((2,), 3.0))  # type: ignore[index]
    assert "b" not in td.grad.keys()  # type: ignore[union-attr]
    td.zero_grad(set_to_none=True)
    assert td.grad is None


# ------------------------------------------------------------------------ names
def test_names_survive_tensor_indexing_and_reductions() -> None:
    td = TensorDict(batch_size=[3, 4, 5, 6], names=["a", "b", "c", "d"])
    assert td[0, ..., torch.tensor([-1])].names == ["b", "c", "d"]
    assert td[0, ..., torch.tensor(-1)].names == ["b", "c"]
    assert td[torch.ones(3, dtype=torch.bool)].names == ["a", "b", "c", "d"]
    assert td[:, torch.tensor([True, False, True, True])].names == ["a", "b", "c", "d"]
    assert td[torch.ones(3, 4, dtype=torch.bool)].names == [None, "c", "d"]
    # one name, two dims: both unnamed, the other dims keep theirs
    assert td[:, torch.tensor([[0, 1]])].names == ["a", None, None, "c", "d"]
    assert td.all(2).names == ["a", "b", "d"]
    assert td.any(2).names == ["a", "b", "d"]


def test_batch_size_change_keeps_the_names_of_kept_dims() -> None:
    td = TensorDict(batch_size=[3, 4, 1, 6], names=["a", "b", "c", "z"])
    td.batch_size = [3, 4, 1, 6, 1]
    assert td.names == ["a", "b", "c", "z", None]
    td.batch_size = [3, 4]
    assert td.names == ["a", "b"]
    with pytest.raises(ValueError, match="the length of the dimension names must equate"):
        td.names = ["a"]


def test_nested_tensordicts_share_the_leading_names() -> None:
    td = TensorDict(batch_size=[3, 4], names=["a", "b"])
    td["n"] = TensorDict(batch_size=[3, 4, 2])
    assert td["n"].names == ["a", "b", None]
    td.rename_(a="x")
    assert td["n"].names == ["x", "b", None]
    plain = TensorDict({}, [3])
    plain["m"] = TensorDict({}, [3, 4], names=["p", "q"])
    assert plain.names == ["p"] and plain["m"].names == ["p", "q"]


def test_lazy_stack_names_live_on_the_members() -> None:
    members = [TensorDict(batch_size=[3, 4], names=["a", "b"]) for _ in range(2)]
    s = lazy_stack(members, 1)
    assert s.names == ["a", None, "b"]
    s.names = ["x", "y", "z"]
    assert s.names == ["x", "y", "z"] and members[0].names == ["x", "z"]
    with pytest.raises(ValueError, match="names must be unique"):
        s.names = ["x", "x", "z"]


def test_masked_fill_with_a_mask_over_the_leading_dims() -> None:
    td = TensorDict({"a": torch.zeros(3, 4, 2)}, [3, 4])
    mask = torch.tensor([True, False, True])
    out = td.masked_fill(mask, 1.0)
    torch.testing.assert_close(out["a"], torch.zeros(3, 4, 2).masked_fill(mask[:, None, None], 1.0))
    td.masked_fill_(mask, 2.0)
    torch.testing.assert_close(td["a"], torch.zeros(3, 4, 2).masked_fill(mask[:, None, None], 2.0))


def test_gather_out_refuses_autograd_as_torch_does() -> None:
    td = TensorDict({"a": torch.randn(3, 4, requires_grad=True)}, [3, 4])
    index = torch.zeros(3, 2, dtype=torch.long)
    out = td.gather(1, index).detach()
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        torch.gather(td, 1, index, out=out)
    with torch.no_grad():
        got = torch.gather(td, 1, index, out=out)
    torch.testing.assert_close(got["a"], td["a"].detach().gather(1, index))


def test_params_compare_stack_and_where_like_a_tensordict() -> None:
    from tensordict import assert_close

    p = _params()
    assert assert_close(p, p.data)
    mask = torch.tensor([True, False, True, False])
    empty = p.empty()  # type: ignore[attr-defined]
    with pytest.raises(KeyError, match="not found and no pad value provided"):
        empty.where(mask, p)
    target = p.clone()  # type: ignore[attr-defined]
    got = torch.where(mask, p, torch.zeros_like(p), out=target)
    assert got is target
    expected = torch.where(mask[:, None], p.data["a"], 0.0)  # type: ignore[attr-defined]
    torch.testing.assert_close(target["a"].detach(), expected)  # type: ignore[index]
    with pytest.raises(RuntimeError, match=r"shape \(5, 10\) of key 'k' does not start"):
        p.set("k", np.ones((5, 10)))  # type: ignore[attr-defined]


def test_params_nested_tuple_keys_split_keys_and_batch_size() -> None:
    p = _params()
    p[" a ", ("little", "story"), ("me",)] = torch.zeros(4)  # type: ignore[index]
    torch.testing.assert_close(p[" a ", "little", "story", "me"].detach(), torch.zeros(4))  # type: ignore[index]
    picked, rest = p.split_keys(["a"], inplace=True)  # type: ignore[attr-defined]
    assert rest is p and "a" not in p and list(picked.keys()) == ["a"]  # type: ignore[operator]
    assert "a" not in dict(p.named_parameters())  # type: ignore[attr-defined]
    p.batch_size = []  # type: ignore[attr-defined]
    assert p.batch_size == torch.Size([])  # type: ignore[attr-defined]
    p.auto_batch_size_()  # type: ignore[attr-defined]
    assert p.batch_size == torch.Size([4])  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="cannot set batch_size"):
        p.batch_size = [5]  # type: ignore[attr-defined]


def test_params_truth_value_is_ambiguous_as_a_tensordicts() -> None:
    with pytest.raises(RuntimeError, match="Converting a tensordict to boolean value"):
        bool(_params())


def test_refine_names_with_ellipsis_and_its_error_types() -> None:
    td = TensorDict(batch_size=[3, 4, 5, 6])
    assert td.refine_names(None, None, "c", "d").names == [None, None, "c", "d"]
    assert td.refine_names("a", ..., "d").names == ["a", None, "c", "d"]
    for error in (ValueError, RuntimeError):
        with pytest.raises(error, match="refine_names: cannot coerce TensorDict"):
            td.refine_names(None, None, "d", "d")


def test_permute_of_a_locked_collection_is_locked() -> None:
    td = TensorDict({"sub": {}}, [3, 4], names=["a", "b"]).lock_()
    out = td.permute(1, 0)
    assert out.names == ["b", "a"] and out.is_locked and out["sub"].is_locked


def test_lazy_stack_keeps_its_stack_dim_name_through_elementwise_ops() -> None:
    s = lazy_stack([TensorDict({"x": torch.zeros(3)}, [3], names=["a"])] * 2, 1)
    s.names = ["a", "copies"]
    out = s + 1
    assert out.names == ["a", "copies"]
    torch.testing.assert_close(out["x"], torch.ones(3, 2))


def test_a_params_module_written_at_an_index_of_a_tensordict() -> None:
    p = _params()
    target = p.data.clone()  # type: ignore[attr-defined]
    target[:] = p.clone()  # type: ignore[attr-defined]  # the module itself, as upstream allows
    torch.testing.assert_close(target["a"], p.data["a"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("make", [_td, _stack])
def test_attrs_and_to_attrs(make: object) -> None:
    from tensordict import TensorAttrs

    td = make()  # type: ignore[operator]
    spec = td.attrs()
    for key in td.keys(True, True):
        assert isinstance(spec[key], TensorAttrs)
        assert spec[key].tgt_dtype == td[key].dtype and spec[key].tgt_shape == td[key].shape
    only_device = td.attrs(fields=("device",))
    assert only_device["a"].tgt_dtype is None and only_device["a"].tgt_device == td["a"].device
    cast = td.to(TensorDict({"a": TensorAttrs(tgt_dtype=torch.int32, batch_size=())}, []))
    torch.testing.assert_close(cast["a"], td["a"].int())
    torch.testing.assert_close(cast["n", "b"], td["n", "b"])  # not in the spec: kept
    torch.testing.assert_close(td.double().to(spec)["a"], td["a"])
    with pytest.raises(TypeError, match="does not accept additional positional"):
        td.to(spec, "cpu")
    with pytest.raises(NotImplementedError, match="non_blocking_pin"):
        td.to(spec, non_blocking_pin=True)


def test_dense_copy_of_a_named_lazy_stack_keeps_every_name() -> None:
    s = lazy_stack([TensorDict({"x": torch.zeros(3)}, [3], names=["a"])] * 2, 1)
    s.names = ["a", "copies"]
    dense = s.contiguous()
    assert type(dense).__name__ == "TensorDict" and dense.names == ["a", "copies"]
    torch.testing.assert_close(dense["x"], torch.zeros(3, 2))


def test_a_nested_write_refuses_conflicting_dim_names() -> None:
    td = TensorDict(batch_size=[2, 3], names=["p", "q"])
    other = TensorDict({"x": torch.zeros(2, 3)}, [2, 3], names=["u", "v"])
    with pytest.raises(ValueError, match=r"key 'm' holds a TensorDict whose dim names") as info:
        td.set("m", other)
    assert isinstance(info.value, RuntimeError)  # upstream's type
    assert other.names == ["u", "v"] and "m" not in td.keys()  # neither was changed
    td["m"] = TensorDict({"x": torch.zeros(2, 3, 4)}, [2, 3, 4], names=[None, "q", "z"])
    assert td["m"].names == ["p", "q", "z"]  # an unnamed dim takes the parent's name
