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


def test_to_module_inplace_restores_the_values_on_exit_with_tied_weights() -> None:
    shared = nn.Linear(3, 3)
    model = nn.Sequential(shared, nn.Linear(3, 3), nn.Sequential(shared))
    x = torch.randn(2, 3)
    before = model(x)
    weight = model[0].weight
    bias = model[1].bias.detach().clone()
    zeros = TensorDict.from_module(model).apply(lambda t: torch.zeros_like(t.data))
    with zeros.to_module(model, inplace=True) as swapped:
        assert model[0].weight is weight  # written into, not replaced
        assert (model(x) == 0).all()
        torch.testing.assert_close(swapped["1", "bias"], bias)  # the values overwritten
    torch.testing.assert_close(model(x), before)
    assert zeros.to_module(model, inplace=True, return_swap=False) is None
    assert (model(x) == 0).all()


def test_tensordict_params_loads_a_tensordict_state_dict() -> None:
    params = TensorDictParams(TensorDict({"a": torch.ones(2), "n": {"b": torch.ones(3)}}, []))
    state = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(3)}}, []).state_dict()
    assert set(state) == {"a", "n.b"}  # the batch sizes are in state._metadata
    params.load_state_dict(state)
    torch.testing.assert_close(params["a"].data, torch.zeros(2))
    torch.testing.assert_close(params["n", "b"].data, torch.zeros(3))
    with pytest.raises(RuntimeError, match="Missing key"):
        params.load_state_dict({"a": torch.zeros(2)})


def test_tensordict_params_takes_keys_named_like_tensordict_methods() -> None:
    # nn.Transformer has submodules named "norm": a TensorDict method name
    net = nn.Module()
    net.norm = nn.LayerNorm(3)
    net.register_buffer("sum", torch.ones(2))
    params = TensorDict.from_module(net, as_module=True)
    assert isinstance(params, TensorDictParams)
    assert params["norm", "weight"] is net.norm.weight
    assert torch.equal(params["sum"], torch.ones(2))
    assert sorted(params.state_dict()) == sorted(net.state_dict())
    zeros = params.clone().zero_()
    with zeros.to_module(net):
        assert net.norm.weight.eq(0).all() and net.sum.eq(0).all()
    assert net.norm.weight.eq(1).all()


def test_from_module_keeps_a_held_tensordict_params_and_clone_keeps_batch_sizes() -> None:
    net = nn.Linear(2, 2)
    params = TensorDict.from_modules(net, net, as_module=True)
    holder = nn.Module()
    holder.params = params
    wrapped = TensorDict.from_module(holder, as_module=True)
    assert wrapped._modules["params"] is params
    assert TensorDict.from_module(params, as_module=True) is params
    zeros = wrapped.apply(lambda t: torch.zeros_like(t.data))
    with zeros.to_module(holder):
        assert (wrapped == 0).all() and (params == 0).all()
    assert not (params == 0).all()
    copy = wrapped.clone()
    assert copy["params"].batch_size == (2,) and copy["params", "weight"].shape == (2, 2, 2)


def test_non_tensor_inputs_reach_the_module_as_values() -> None:
    from tensordict import NonTensorData, NonTensorStack

    m = TensorDictModule(lambda s: s + "!", ["s"], ["out"])
    assert m(TensorDict(s="hi"))["out"] == "hi!"
    m = TensorDictModule(lambda xs: xs[0] + xs[1], ["xs"], ["n"])
    td = TensorDict(xs=NonTensorStack(NonTensorData(1), NonTensorData(2)))
    assert m(td)["n"] == 3


def test_device_of_a_sequence_is_deprecated_as_upstream() -> None:
    from tdnn import TensorDictSequential

    seq = TensorDictSequential(TensorDictModule(nn.Linear(2, 2), ["x"], ["y"]))
    with pytest.warns(DeprecationWarning, match=r"TensorDictSequential.device is deprecated"):
        assert seq.device == torch.device("cpu")
    empty = TensorDictSequential(TensorDictModule(lambda x: x, ["x"], ["y"]))
    with pytest.warns(DeprecationWarning, match="removed in TensorDict 0.17"):
        assert empty.device == torch.device("cpu")  # no parameter: cpu


def test_make_tensordict_is_reexported() -> None:
    import tdnn
    import tensordict

    assert tdnn.make_tensordict is tensordict.make_tensordict


def _params(value: float) -> TensorDictParams:
    tree = TensorDict(a=torch.full((3, 2), value), b={"c": torch.full((3,), value)}, batch_size=[3])
    return TensorDictParams(tree)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_a_lazy_stack_of_tensordict_params_reads_their_own_leaves(dim: int) -> None:
    from tensordict import LazyStackedTensorDict, lazy_stack

    p0, p1 = _params(0.0), _params(1.0)
    at = dim % 2  # the stack dim among the batch dims (3,) + 1
    for stack in (
        lazy_stack([p0, p1], dim),
        LazyStackedTensorDict(p0, p1, stack_dim=dim),
        LazyStackedTensorDict.lazy_stack([p0, p1], dim),
    ):
        assert stack.batch_size == torch.stack([torch.zeros(3), torch.zeros(3)], dim).shape
        expected = torch.stack([p0["a"], p1["a"]], at)
        torch.testing.assert_close(stack["a"], expected)
        torch.testing.assert_close(stack["b", "c"], torch.stack([p0["b", "c"], p1["b", "c"]], at))
        # the members are the parameters themselves (no copy): gradients reach them
        assert all(m["a"] is p["a"] for m, p in zip(stack.tensordicts, (p0, p1), strict=True))
    stack = lazy_stack([p0, p1], dim)
    stack["a"].sum().backward()
    assert p0["a"].grad is not None and (p0["a"].grad == 1).all()
    with torch.no_grad():
        stack.data.apply_(lambda x: x.add_(5))  # in place into the parameters
    assert (p1["a"] == 6).all() and isinstance(p1["a"], nn.Parameter)
    assert type(stack.clone()).__name__ == "LazyStackedTensorDict"


def test_a_lazy_stack_of_tensordict_params_with_ragged_leaves() -> None:
    from tensordict import lazy_stack

    p0, p1 = _params(0.0), _params(1.0)
    p0["r"] = torch.zeros(3, 2)
    p1["r"] = torch.zeros(3, 5)
    stack = lazy_stack([p0, p1])
    assert stack.get_item_shape("r") == (2, 3, -1)
    with pytest.raises(RuntimeError, match="r"):
        stack["r"]
    assert [x.shape[-1] for x in stack.get("r", as_list=True)] == [2, 5]


def test_a_lazy_stack_refuses_what_is_not_a_tensordict() -> None:
    from tensordict import LazyStackedTensorDict

    with pytest.raises(TypeError, match=r"LazyStackedTensorDict: member 1 is a Linear, not a"):
        LazyStackedTensorDict(_params(0.0), nn.Linear(2, 2))


def test_lazy_stack_into_out_of_another_batch_size_says_so() -> None:
    p0, p1 = _params(0.0), _params(1.0)
    out = TensorDict(a=torch.zeros(3, 2, 2), b={"c": torch.zeros(3, 2)}, batch_size=[3, 2])
    with pytest.raises(RuntimeError, match=r"lazy_stack: out.batch_size and stacked batch size"):
        TensorDict.lazy_stack([p0, p1], 0, out=out)
    done = TensorDict.lazy_stack([p0.data, p1.data], 1, out=out)
    assert done is out
    torch.testing.assert_close(out["a"], torch.stack([p0["a"], p1["a"]], 1).detach())


def test_vmap_over_tensordict_params_maps_their_leaves() -> None:
    params = _params(1.0)
    seen: list[tuple[type, torch.Size]] = []

    def double(td: TensorDict) -> TensorDict:
        seen.append((type(td), td.batch_size))
        return td * 2

    out = torch.vmap(double)(params)
    assert seen == [(TensorDict, torch.Size([]))]
    assert type(out) is TensorDict and out.batch_size == (3,)
    torch.testing.assert_close(out["a"], params["a"].detach() * 2)
    torch.testing.assert_close(out["b", "c"], params["b", "c"].detach() * 2)
    out["a"].sum().backward()  # through the parameters themselves
    assert params["a"].grad is not None and (params["a"].grad == 2).all()


def test_vmap_an_ensemble_of_tensordict_params_into_one_module() -> None:
    modules = [nn.Linear(3, 4) for _ in range(3)]
    params = TensorDict.from_modules(*modules, as_module=True)
    assert isinstance(params, TensorDictParams)
    base = nn.Linear(3, 4, device="meta")

    def call(p: TensorDict, x: torch.Tensor) -> torch.Tensor:
        with p.to_module(base):
            return base(x)

    x = torch.randn(3)
    y = torch.vmap(call, (0, None))(params, x)
    torch.testing.assert_close(y, torch.stack([m(x) for m in modules]).detach())
    y.sum().backward()
    assert all(leaf.grad is not None for leaf in params.values(True, True))


def test_a_tensordict_holds_tensordict_params_as_their_leaves() -> None:
    params = _params(1.0)
    copied = TensorDict(params, batch_size=[3])  # (as from a TensorDict)
    assert copied.batch_size == (3,) and copied["b", "c"] is params["b", "c"]
    outer = TensorDict({"p": params}, [3])
    assert type(outer["p"]) is TensorDict and outer["p", "a"] is params["a"]
    outer2 = TensorDict(batch_size=[3])
    outer2["p"] = params
    assert outer2["p", "b", "c"] is params["b", "c"]


def test_a_tensordict_nested_in_locked_params_stays_locked_while_they_are() -> None:
    import gc

    params = _params(1.0)
    params.set_non_tensor("note", "a non-tensor entry")
    params.lock_()
    sub = params.get("b")
    assert sub.is_locked and params.get("b") is sub and params["note"] == "a non-tensor entry"
    with pytest.raises(
        RuntimeError, match="TensorDict.unlock_: Cannot unlock .* this TensorDict is nested"
    ):
        sub.unlock_()
    params.unlock_()
    sub.unlock_()  # the parent is unlocked now
    params.lock_()
    sub = params.get("b")
    del params
    gc.collect()
    sub.unlock_()  # the parent is gone
    assert not sub.is_locked


def test_locked_params_read_what_is_swapped_into_them() -> None:
    params = _params(1.0)
    params.lock_()
    before = params["a"]
    zeros = TensorDict(a=torch.zeros(3, 2), b={"c": torch.zeros(3)}, batch_size=[3])
    with zeros.to_module(params):
        assert (params["a"] == 0).all() and (params["b", "c"] == 0).all()
    assert params["a"] is before and (params["a"] == 1).all()


def test_dense_stack_and_cat_take_tensordict_params() -> None:
    from tensordict import LazyStackedTensorDict

    p0, p1 = _params(0.0), _params(1.0)
    for stacked in (
        TensorDict.stack([p0, p1], 1),
        LazyStackedTensorDict.maybe_dense_stack([p0, p1], 1),
        torch.stack([p0, p1], 1),
    ):
        assert type(stacked) is TensorDict and stacked.batch_size == (3, 2)
        torch.testing.assert_close(stacked["a"], torch.stack([p0["a"], p1["a"]], 1))
    joined = TensorDict.cat([p0, p1])
    torch.testing.assert_close(joined["b", "c"], torch.cat([p0["b", "c"], p1["b", "c"]]))
    joined["a"].sum().backward()
    assert (p1["a"].grad == 1).all()
    with pytest.raises(
        TypeError, match="torch.stack: expected TensorDicts, got Linear at position 1"
    ):
        TensorDict.stack([p0, nn.Linear(2, 2)])


def test_a_get_hook_on_a_sub_module_applies_after_the_locked_tree_was_built() -> None:
    p = TensorDictParams(
        TensorDict({"a": torch.zeros(3, 2), "sub": {"x": torch.zeros(3, 4)}}, [3]), lock=True
    )
    assert p["sub", "x"].requires_grad  # (the locked tree is built and kept here)
    p.get_submodule("sub").register_get_post_hook(lambda _, x: x.data)
    assert not p["sub", "x"].requires_grad and not p.data["sub", "x"].requires_grad
    assert p["a"].requires_grad  # the root has no hook


def test_params_cast_to_another_dtype_stay_parameters_an_optimizer_sees() -> None:
    frozen = nn.Parameter(torch.zeros(2), requires_grad=False)
    params = TensorDictParams(
        TensorDict(w=nn.Parameter(torch.ones(3)), f=frozen, n=torch.zeros(2, dtype=torch.long)),
        no_convert=True,
    )
    cast = params.to(torch.float64)
    assert type(cast["w"]) is nn.Parameter and cast["w"].dtype == torch.float64
    assert cast["w"].is_leaf and cast["w"].requires_grad
    assert type(cast["f"]) is nn.Parameter and not cast["f"].requires_grad
    assert type(cast["n"]) is torch.Tensor and cast["n"].dtype == torch.float64  # as Tensor.to
    assert [p.shape for p in cast.parameters()] == [torch.Size([3]), torch.Size([2])]
    torch.optim.SGD(cast.parameters(), lr=0.1)  # accepted: leaf parameters
    assert params["w"].dtype == torch.float32  # the source is left alone
