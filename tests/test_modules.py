"""from_module / from_modules / to_module: parameter swapping, ensembles, restores."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn, vmap

from tensordict import MemoryMappedTensor, TensorDict


def test_seed_functional_example() -> None:
    layer1 = nn.Linear(3, 4)
    layer2 = nn.Linear(4, 4)
    model = nn.Sequential(layer1, layer2)
    params = TensorDict.from_module(model)
    weights1 = TensorDict(layer1.state_dict(), []).unflatten_keys(".")
    weights2 = TensorDict(layer2.state_dict(), []).unflatten_keys(".")
    assert (params == TensorDict({"0": weights1, "1": weights2}, [])).all()
    x = torch.randn(10, 3)
    with params.to_module(model):
        out = model(x)
    torch.testing.assert_close(out, model(x))
    params_stack = torch.stack([params, params], 0)

    def func(x: torch.Tensor, params: TensorDict) -> torch.Tensor:
        with params.to_module(model):
            return model(x)

    y = vmap(func, (None, 0))(x, params_stack)
    assert y.shape == torch.Size([2, 10, 4])
    torch.testing.assert_close(y[0], model(x))


def test_ensemble_matches_a_loop_over_models() -> None:
    models = [nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2)) for _ in range(5)]
    stacked = TensorDict.from_modules(*models)
    assert stacked.batch_size == (5,) and isinstance(stacked["0", "weight"], nn.Parameter)
    assert stacked["0", "weight"].is_leaf and stacked["0", "weight"].requires_grad
    base = models[0]
    x = torch.randn(7, 3)

    def call(p: TensorDict) -> torch.Tensor:
        with p.to_module(base):
            return base(x)

    out = vmap(call)(stacked)
    for i, m in enumerate(models):
        torch.testing.assert_close(out[i], m(x))
    out.sum().backward()
    assert stacked["2", "bias"].grad is not None


def test_from_module_shares_tensors_and_buffers() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    td = TensorDict.from_module(model)
    assert td["0", "weight"] is model[0].weight
    assert td["1", "running_mean"] is model[1].running_mean
    assert (
        not TensorDict.from_module(model).is_locked
        and TensorDict.from_module(model, lock=True).is_locked
    )
    sd = TensorDict.from_module(model, use_state_dict=True)
    assert ("1", "num_batches_tracked") in sd.keys(True)


def test_to_module_restores_after_exceptions_and_reports_keys() -> None:
    model = nn.Linear(3, 4)
    original = model.weight
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    seen = []

    def body() -> None:
        with params.to_module(model):
            seen.append(bool((model.weight == 0).all()))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        body()
    assert seen == [True] and model.weight is original
    bad = TensorDict({"weight": torch.zeros(4, 3), "extra": torch.zeros(1)}, [])
    with pytest.raises(KeyError, match=r"missing keys \['bias'\], unexpected keys \['extra'\]"):
        bad.to_module(model)
    assert model.weight is original
    swap = bad.to_module(model, strict=False)
    assert (model.weight == 0).all() and model.bias is not None
    assert swap.swapped["weight"] is original
    assert list(swap.swapped.keys()) == ["weight"] and swap.swapped is swap.swapped
    swap.restore()
    assert model.weight is original


def test_inplace_and_swapped_out_tensors() -> None:
    model = nn.Linear(2, 2)
    weight = model.weight
    TensorDict.from_module(model).apply(torch.ones_like).to_module(model, inplace=True)
    assert model.weight is weight and (weight == 1).all()
    params = TensorDict.from_module(model).apply(torch.zeros_like)
    with params.to_module(model) as old:
        assert old["weight"] is weight
    assert model.weight is weight


def test_swap_dest_return_swap_and_state_dict_keys() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    original = model[0].weight
    zeros = TensorDict.from_module(model).apply(torch.zeros_like)
    dest = TensorDict()
    with zeros.to_module(model, swap_dest=dest) as old:
        assert old is dest and dest["0", "weight"] is original
        assert dest["1", "running_mean"] is not model[1].running_mean
    assert model[0].weight is original
    assert zeros.to_module(model, return_swap=False) is None
    assert (model[0].weight == 0).all()  # swapped and left in place: nothing to restore
    flat = TensorDict(
        {k: v.detach().clone() + 1 for k, v in model.state_dict().items()}, []
    )  # keys like "0.weight"
    with flat.to_module(model, use_state_dict=True):
        assert (model[0].weight == 1).all()
    assert (model[0].weight == 0).all()


def test_tied_weights_swap_once() -> None:
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    params = TensorDict.from_module(model)
    assert set(params.keys()) == {"0", "2"}
    zeros = params.apply(torch.zeros_like)
    with zeros.to_module(model):
        assert (model[2].weight == 0).all()
    assert model[0].weight is shared.weight


def test_gradients_through_swapped_params() -> None:
    model = nn.Linear(3, 1)
    params = TensorDict.from_module(model).detach().clone().requires_grad_()
    x = torch.randn(4, 3)
    with params.to_module(model):
        loss = model(x).pow(2).sum()
    loss.backward()
    assert params["weight"].grad is not None and model.weight.grad is None

    def loss_fn(p: TensorDict) -> torch.Tensor:
        with p.to_module(model):
            return model(x).pow(2).sum()

    g = torch.func.grad(loss_fn)(params.detach())
    torch.testing.assert_close(g["weight"], params["weight"].grad)
    jac = torch.func.jacrev(loss_fn)(params.detach())
    assert jac["bias"].shape == (1,)


def test_from_modules_validation() -> None:
    with pytest.raises(TypeError, match="module 1 is a Conv1d, module 0 a Linear"):
        TensorDict.from_modules(nn.Linear(2, 2), nn.Conv1d(2, 2, 1))
    with pytest.raises(
        ValueError, match=r"parameter 'weight' of module 1 differs in shape or dtype: \(3, 2\)"
    ):
        TensorDict.from_modules(nn.Linear(2, 2), nn.Linear(2, 3))
    other = nn.Linear(2, 2).eval()
    with pytest.raises(ValueError, match="module 1 is in eval mode"):
        TensorDict.from_modules(nn.Linear(2, 2), other)
    frozen = nn.Linear(2, 2).requires_grad_(False)
    with pytest.raises(ValueError, match="differs in requires_grad"):
        TensorDict.from_modules(nn.Linear(2, 2), frozen)
    with pytest.raises(ValueError, match="needs at least one module"):
        TensorDict.from_modules()
    seq_a = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    seq_b = nn.Sequential(nn.Linear(2, 2), nn.Conv1d(2, 2, 1))
    with pytest.raises(TypeError, match="submodule '1' of module 1 is a Conv1d, module 0 a Linear"):
        TensorDict.from_modules(seq_a, seq_b)
    with pytest.raises(ValueError, match=r"has submodules \['0'\], module 0 has \['0', '1'\]"):
        TensorDict.from_modules(seq_a, nn.Sequential(nn.Linear(2, 2)))
    no_bias = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2, bias=False))
    with pytest.raises(
        ValueError, match=r"submodule '1' of module 1 has other parameters .* missing \['bias'\]"
    ):
        TensorDict.from_modules(seq_a, no_bias)
    norm_a, norm_b = nn.BatchNorm1d(2), nn.BatchNorm1d(2, track_running_stats=False)
    with pytest.raises(
        ValueError, match=r"has other buffers than module 0: missing \['num_batches"
    ):
        TensorDict.from_modules(norm_a, norm_b)


def test_partial_loading_composes(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3))
    TensorDict.from_module(model).detach().memmap(tmp_path / "ckpt")
    fresh = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3))
    part = TensorDict.load_memmap(tmp_path / "ckpt" / "0")
    assert isinstance(part["weight"], MemoryMappedTensor)
    part.to_module(fresh[0], inplace=True)
    torch.testing.assert_close(fresh[0].weight, model[0].weight)
    assert not torch.equal(fresh[1].weight, model[1].weight)


def test_to_module_inplace_changes_nothing_unless_everything_fits() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    zeros = TensorDict.from_module(model).apply(torch.zeros_like)
    del zeros["1", "bias"]
    with pytest.raises(KeyError, match=r"missing keys \['1.bias'\]"):
        zeros.to_module(model, inplace=True)
    wrong = TensorDict.from_module(model).apply(torch.zeros_like)
    wrong["1", "weight"] = torch.zeros(2, 3)
    with pytest.raises(
        ValueError, match=r"key '1.weight' has shape \(2, 3\), the module's tensor \(1, 3\)"
    ):
        wrong.to_module(model, inplace=True)
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())  # nothing was written


def test_from_modules_keeps_tied_parameters_tied() -> None:
    def tied() -> nn.Module:
        m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
        m[1].weight = m[0].weight
        return m

    models = [tied() for _ in range(3)]
    stacked = TensorDict.from_modules(*models)
    assert stacked["0", "weight"] is stacked["1", "weight"]  # one Parameter, as in the models
    params, _ = torch.func.stack_module_state(models)
    torch.testing.assert_close(stacked["0", "weight"], params["0.weight"])
    untied = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3))
    with pytest.raises(
        ValueError, match="parameter '1.weight' is tied to another in module 0 but not in module 1"
    ):
        TensorDict.from_modules(tied(), untied)
    reordered = nn.Linear(2, 2)
    reordered._parameters = dict(reversed(list(reordered._parameters.items())))
    with pytest.raises(
        ValueError, match=r"module 1 has its parameters in another order: \['bias', 'weight'\]"
    ):
        TensorDict.from_modules(nn.Linear(2, 2), reordered)


def test_to_module_keeps_the_order_of_parameters() -> None:
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    before = list(model.state_dict())
    params = TensorDict.from_module(model).detach().clone()
    for preserve in (True, False):
        with params.to_module(model, preserve_module_state=preserve):
            pass
        assert list(model.state_dict()) == before
        assert list(model[0]._parameters) == ["weight", "bias"]


def test_to_module_without_preserving_state_swaps_in_plain_attributes() -> None:
    model = nn.Linear(3, 2)
    original = TensorDict.from_module(model)
    zeros = original.detach().clone().zero_()
    ones = original.detach().clone().apply(lambda x: x + 1)
    with zeros.to_module(model, preserve_module_state=False):
        # a plain tensor is a plain attribute: no parameter, no state_dict entry
        assert model.weight is zeros["weight"] and model.__dict__["weight"] is zeros["weight"]
        assert dict(model.named_parameters()) == {} and list(model.state_dict()) == []
        assert TensorDict.from_module(model).is_empty()
        with ones.to_module(model, preserve_module_state=False) as swapped:
            assert swapped["weight"] is zeros["weight"] and model.bias is ones["bias"]
        assert model.weight is zeros["weight"]
        with original.to_module(model, preserve_module_state=False):  # parameters register
            assert dict(model.named_parameters())["weight"] is original["weight"]
        assert model.weight is zeros["weight"] and "weight" not in model._parameters
    assert dict(model.named_parameters()) == {
        "weight": original["weight"],
        "bias": original["bias"],
    }
    assert "weight" not in model.__dict__ and "bias" not in model.__dict__


def test_plain_swap_into_a_tied_module_then_back() -> None:
    # one layer reached twice: swapped once; the plain values are out of from_module
    torch.manual_seed(0)
    shared = nn.Linear(4, 4)
    model = nn.Sequential(shared, nn.Linear(4, 4), nn.Sequential(shared))
    x = torch.randn(2, 4)
    params = TensorDict.from_module(model)
    zeros = params.clone().zero_()
    expected = model(x)
    zeros.to_module(model, preserve_module_state=False)
    assert (model(x) == 0).all() and shared.weight is zeros["0", "weight"]
    assert TensorDict.from_module(model).is_empty()
    params.to_module(model, preserve_module_state=False)
    for key, value in TensorDict.from_module(model).items(True, True):
        assert value is params[key], key
    torch.testing.assert_close(model(x), expected)


@pytest.mark.parametrize("as_module", [False, True])
def test_from_modules_expand_identical_is_a_view_gradients_reach(as_module: bool) -> None:
    if as_module:
        import tdnn  # noqa: F401  (registers TensorDictParams for as_module=True)
    shared = nn.Linear(3, 3)
    modules = [nn.Sequential(shared, nn.Linear(3, 2)) for _ in range(3)]
    params = TensorDict.from_modules(*modules, expand_identical=True, as_module=as_module)
    weight = params["0", "weight"]
    assert not isinstance(weight, nn.Parameter) and weight.shape == (3, 3, 3)
    assert weight.data_ptr() == shared.weight.data_ptr() and weight.stride(0) == 0
    assert isinstance(params["1", "weight"], nn.Parameter)
    assert params["1", "weight"].data_ptr() != modules[0][1].weight.data_ptr()
    base = nn.Sequential(nn.Linear(3, 3, device="meta"), nn.Linear(3, 2, device="meta"))

    def call(p: TensorDict, x: torch.Tensor) -> torch.Tensor:
        with p.to_module(base):
            return base(x)

    x = torch.randn(3)
    y = vmap(call, (0, None))(params, x)
    torch.testing.assert_close(y, torch.stack([m(x) for m in modules]).detach())
    y.sum().backward()
    assert shared.weight.grad is not None and modules[0][1].weight.grad is None
    assert params["1", "weight"].grad is not None


def test_from_modules_lazy_stack_refusals() -> None:
    import tdnn

    lazy = [nn.LazyLinear(4) for _ in range(2)]
    with pytest.raises(
        RuntimeError,
        match=r"from_modules: module 0 has uninitialized \(lazy\) tensors \['weight', 'bias'\]: "
        "lasy_stack=True is not compatible with lazy modules",
    ):
        TensorDict.from_modules(*lazy, lazy_stack=True)
    with pytest.raises(
        NotImplementedError,
        match=r"from_modules: parameter 'weight' of module 0 is uninitialized \(a lazy module\)",
    ):
        TensorDict.from_modules(*lazy)
    linears = [nn.Linear(2, 2) for _ in range(2)]
    with pytest.raises(RuntimeError, match="as_module=True with lazy_stack=True: a Lazy"):
        TensorDict.from_modules(*linears, lazy_stack=True, as_module=True)
    stack = TensorDict.from_modules(*linears, lazy_stack=True)
    with pytest.raises(RuntimeError, match="TensorDictParams: a LazyStackedTensorDict within"):
        tdnn.TensorDictParams(stack)
    assert stack.tensordicts[1]["weight"] is linears[1].weight


def test_tensordict_params_no_convert_keeps_autograd_history() -> None:
    from tdnn import TensorDictParams

    x = torch.ones(3, requires_grad=True)
    params = TensorDictParams(
        TensorDict(a=x * 2, n=torch.zeros(3, dtype=torch.long)), no_convert=True
    )
    assert params["a"].grad_fn is not None and not isinstance(params["a"], nn.Parameter)
    assert sorted(n for n, _ in params.named_buffers()) == ["a", "n"]
    params["a"].sum().backward()
    assert (x.grad == 2).all()
    converted = TensorDictParams(TensorDict(a=x * 2))
    assert isinstance(converted["a"], nn.Parameter) and converted["a"].grad_fn is None


def test_to_module_inplace_keeps_the_module_objects_and_copies_back() -> None:
    shared = nn.Linear(2, 2)
    model = nn.Sequential(shared, nn.ReLU(), shared)  # one submodule under two names
    model.register_buffer("steps", torch.zeros(()))
    slots = {name: id(t) for name, t in [*model.named_parameters(), *model.named_buffers()]}
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ones = TensorDict.from_module(model).apply(torch.ones_like)
    with ones.to_module(model, inplace=True) as originals:
        assert {n: id(t) for n, t in [*model.named_parameters(), *model.named_buffers()]} == slots
        assert all(bool((t == 1).all()) for t in model.state_dict().values())
        torch.testing.assert_close(originals["0", "weight"], before["0.weight"])
        torch.testing.assert_close(originals["2", "bias"], before["2.bias"])
        torch.testing.assert_close(originals["steps"], before["steps"])
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert {n: id(t) for n, t in [*model.named_parameters(), *model.named_buffers()]} == slots


def test_to_module_inplace_into_a_plain_attribute_of_an_enclosing_swap() -> None:
    model = nn.Linear(2, 2)
    plain = TensorDict({"weight": torch.zeros(2, 2), "bias": torch.zeros(2)}, [])
    fives = TensorDict({"weight": torch.full((2, 2), 5.0)}, [])
    with plain.to_module(model, preserve_module_state=False):
        attr = model.__dict__["weight"]  # a plain attribute now, as upstream
        fives.to_module(model, inplace=True)
        assert model.__dict__["weight"] is attr
        torch.testing.assert_close(attr, torch.full((2, 2), 5.0))
    assert isinstance(model.weight, nn.Parameter)
