"""Divergences from upstream tensordict.nn found by differential runs, each pinned down."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.distributions import Normal

from tdnn import (
    EnsembleModule,
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    WrapModule,
    composite_lp_aggregate,
    interaction_type,
    set_composite_lp_aggregate,
    set_interaction_type,
    set_skip_existing,
    skip_existing,
)
from tensordict import TensorDict, lazy_stack


def _ensemble() -> EnsembleModule:
    torch.manual_seed(0)
    return EnsembleModule(TensorDictModule(nn.Linear(3, 2), ["x"], ["y"]), num_copies=2)


def test_ensemble_state_dict_has_upstreams_keys_in_its_order() -> None:
    ensemble = _ensemble()
    assert list(ensemble.state_dict()) == [
        "module.module.weight",
        "module.module.bias",
        "params_td.module.weight",
        "params_td.module.bias",
    ]
    assert [n for n, _ in ensemble.named_parameters()] == list(ensemble.state_dict())
    # a checkpoint with upstream's keys loads strictly, values included
    other = _ensemble()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(1.0)
    checkpoint = dict(other.state_dict())
    assert str(ensemble.load_state_dict(checkpoint)) == "<All keys matched successfully>"
    for key, value in ensemble.state_dict().items():
        assert torch.equal(value, checkpoint[key]), key
    # forward uses the stacked copies, not the template module's own tensors
    td = TensorDict(x=torch.randn(4, 3), batch_size=[4])
    template = ensemble.module.module.weight
    out = ensemble(td)["y"]
    assert ensemble.module.module.weight is template  # put back after the call
    for i in range(2):
        w = ensemble.params_td["module", "weight"][i]
        b = ensemble.params_td["module", "bias"][i]
        torch.testing.assert_close(out[i], td["x"] @ w.T + b)


def test_ensemble_reset_parameters_recursive_resets_each_copy() -> None:
    ensemble = _ensemble()
    before = ensemble.params_td.data.clone()
    template = ensemble.module.module.weight.detach().clone()
    reset = ensemble.reset_parameters_recursive(ensemble.params_td)
    assert reset.batch_size == (2,)
    after = ensemble.params_td.data
    for i in range(2):
        assert not torch.equal(after["module", "weight"][i], before["module", "weight"][i])
    assert not torch.equal(after["module", "weight"][0], after["module", "weight"][1])
    assert torch.equal(ensemble.module.module.weight, template)  # the template is kept
    with pytest.raises(ValueError, match=r"reset_parameters_recursive: .*got None"):
        ensemble.reset_parameters_recursive()
    with pytest.raises(ValueError, match=r"leading dim of copies, got batch_size \(\)"):
        ensemble.reset_parameters_recursive(ensemble.params_td.data[0])


def test_get_kwargs_reach_tensordict_get() -> None:
    ragged = lazy_stack([TensorDict(a=torch.arange(2.0)), TensorDict(a=torch.arange(3.0))])
    module = TensorDictModule(
        lambda a: a * 2,
        in_keys=["a"],
        out_keys=["b"],
        get_kwargs={"as_padded_tensor": True, "padding_value": -1.0},
    )
    expected = ragged.get("a", as_padded_tensor=True, padding_value=-1.0) * 2
    assert torch.equal(module(ragged)["b"], expected)
    # through a sequence's fast path, and with keyword inputs
    summed = TensorDictModule(
        lambda x: x.sum(-1),
        in_keys={"x": "a"},
        out_keys=["s"],
        get_kwargs={"as_padded_tensor": True},
    )
    out = TensorDictSequential(summed)(ragged)
    assert torch.equal(out["s"], torch.tensor([1.0, 3.0]))
    with pytest.raises(RuntimeError, match="as_padded_tensor"):
        TensorDictModule(lambda a: a, in_keys=["a"], out_keys=["b"])(ragged)


def test_wrap_module_takes_upstreams_keywords() -> None:
    td = TensorDict(x=torch.ones(3, 4, 5), batch_size=[3, 4])
    flat = WrapModule(func=lambda t: t.reshape(-1))
    assert flat.in_keys == [] and flat.out_keys == [] and flat.inplace is False
    assert flat(td).batch_size == (12,)
    data = TensorDict(x=torch.ones(2))
    plus = WrapModule(
        lambda t: TensorDict(y=t["x"] + 1), inplace=True, in_keys=["x"], out_keys=["y"]
    )
    assert plus(data) is data and torch.equal(data["y"], torch.full((2,), 2.0))
    fresh = WrapModule(lambda t: TensorDict(y=t["x"] + 1))(TensorDict(x=torch.ones(2)))
    assert list(fresh.keys()) == ["y"]
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x * 2, ["x"], ["y"]), lambda t: t.reshape(-1)
    )
    assert type(seq.module[1]) is WrapModule  # as upstream
    out = seq(td.clone())
    assert out.batch_size == (12,) and torch.equal(out["y"], torch.full((12, 5), 2.0))


def _in_thread(read: Callable[[], Any]) -> Any:
    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(read()))
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.parametrize(
    ("switch", "read", "off"),
    [
        (lambda: set_interaction_type("random", thread_local=True), interaction_type, None),
        (lambda: set_skip_existing(True, thread_local=True), skip_existing, False),
        (
            lambda: set_composite_lp_aggregate(True, thread_local=True),
            composite_lp_aggregate,
            False,
        ),
    ],
)
def test_thread_local_switches_apply_to_their_thread_only(
    switch: Callable[[], Any], read: Callable[[], Any], off: Any
) -> None:
    with switch():
        on = read()
        assert on not in (None, False)
        assert _in_thread(read) == off
    assert read() == off


def test_thread_local_and_global_settings_nest() -> None:
    with set_interaction_type("mode"):
        with set_interaction_type("random", thread_local=True):
            assert interaction_type() == "random" and _in_thread(interaction_type) == "mode"
            with set_interaction_type("mean"):  # a global set while a local is active
                assert interaction_type() == "random" and _in_thread(interaction_type) == "mean"
            assert _in_thread(interaction_type) == "mode"
        assert interaction_type() == "mode"
    assert interaction_type() is None

    @set_interaction_type("median", thread_local=True)
    def decorated() -> Any:
        return interaction_type()

    assert decorated() is InteractionType.MEDIAN and interaction_type() is None


def test_skip_existing_thread_local_skips_modules() -> None:
    calls: list[int] = []
    module = TensorDictModule(lambda x: calls.append(1) or x + 1, ["x"], ["y"])
    td = TensorDict(x=torch.ones(2), y=torch.zeros(2))
    with set_skip_existing(True, thread_local=True):
        module(td)
        TensorDictSequential(module)(td)
    assert calls == [] and torch.equal(td["y"], torch.zeros(2))
    module(td)
    assert calls == [1]


def test_interaction_type_is_a_str_enum() -> None:
    assert InteractionType.RANDOM == "random" and isinstance(InteractionType.MODE, str)
    assert str(InteractionType.MEAN) == "mean" and f"{InteractionType.MEAN}" == "mean"
    assert InteractionType("MODE") is InteractionType.MODE
    assert {InteractionType.MODE: 1}["mode"] == 1
    with pytest.raises(ValueError, match="'foo' is not a valid InteractionType"):
        InteractionType("foo")


def _normal_module(generator: Any) -> Any:
    from torch.distributions import Normal

    from tdnn import ProbabilisticTensorDictModule

    return ProbabilisticTensorDictModule(
        ["loc", "scale"],
        ["x"],
        distribution_class=Normal,
        generator=generator,
        default_interaction_type="random",
    )


def test_probabilistic_generator_drives_the_draws() -> None:
    params = TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3])
    reference = torch.Generator().manual_seed(3)
    expected = [torch.randn(3, generator=reference) for _ in range(2)]
    torch.manual_seed(0)
    global_state = torch.get_rng_state()
    module = _normal_module(torch.Generator().manual_seed(3))
    drawn = [module(params.clone())["x"] for _ in range(2)]
    assert torch.equal(drawn[0], expected[0]) and torch.equal(drawn[1], expected[1])
    assert torch.equal(torch.get_rng_state(), global_state)  # the global RNG is untouched
    seeded = _normal_module(3)
    assert torch.equal(seeded(params.clone())["x"], expected[0])
    # a seed read from the input: used, then replaced by the next one drawn
    data = TensorDict(loc=torch.zeros(3), scale=torch.ones(3), seed=torch.tensor(3))
    out = _normal_module("seed")(data)
    assert torch.equal(out["x"], expected[0]) and int(out["seed"]) != 3
    with pytest.raises(TypeError, match="generator must be a torch.Generator.*got float"):
        _normal_module(1.5)
    data["seed"] = torch.tensor([1, 2])
    with pytest.raises(ValueError, match=r"generator key 'seed' holds a tensor of shape \(2,\)"):
        _normal_module("seed")(data)


def test_truncated_normal_takes_upstreams_arguments_and_statistics() -> None:
    from tensordict.nn.distributions import TruncatedNormal
    from tensordict.nn.distributions.truncated_normal import TruncatedStandardNormal

    loc, scale = torch.full((3,), 5.0), torch.ones(3)
    dist = TruncatedNormal(loc=loc, scale=scale, a=4.0, b=6.0)
    assert torch.allclose(dist.mean, loc)
    # variance of a standard normal truncated to [-1, 1]: 1 - 2 phi(1) / (2 Phi(1) - 1)
    phi1 = torch.exp(torch.tensor(-0.5)) / (2 * torch.pi) ** 0.5
    mass = torch.erf(torch.tensor(1.0 / 2**0.5))
    torch.testing.assert_close(dist.variance, (1 - 2 * phi1 / mass).expand(3))
    torch.testing.assert_close(dist.auc, mass.expand(3))
    torch.testing.assert_close(dist.a, torch.full((3,), -1.0))  # standardised, as upstream
    q = torch.tensor([0.1, 0.5, 0.9])
    torch.testing.assert_close(dist.cdf(dist.icdf(q)), q)
    # draws: the inverse CDF of uniform(eps, 1 - eps), so a seed gives upstream's values
    torch.manual_seed(0)
    drawn = dist.rsample()
    torch.manual_seed(0)
    u = torch.empty(3).uniform_(TruncatedNormal.eps, 1 - TruncatedNormal.eps)
    torch.testing.assert_close(drawn, dist.icdf(u))
    assert dist.sample((2,)).shape == (2, 3)
    # positionally: (loc, scale, a, b, validate_args), as upstream
    assert TruncatedNormal(loc, scale, 4.0, 6.0, False)._validate_args is False
    assert TruncatedNormal(0.0, 1e-9, -1.0, 1.0).scale == TruncatedNormal.eps
    with pytest.raises(ValueError, match=r"TruncatedNormal: expected a < b everywhere, got a=1.0"):
        TruncatedNormal(loc, scale, 1.0, -1.0)
    with pytest.raises(ValueError, match="within the support"):
        TruncatedNormal(loc, scale, 4.0, 6.0, True).log_prob(torch.full((3,), 7.0))
    torch.testing.assert_close(TruncatedStandardNormal(-1.0, 1.0).mean, torch.tensor(0.0))


def test_one_hot_categorical_rsample_is_upstreams_relaxed_draw() -> None:
    from tensordict.nn.distributions import OneHotCategorical

    logits = torch.randn(2, 4, requires_grad=True)
    torch.manual_seed(0)
    drawn = OneHotCategorical(logits=logits).rsample()
    torch.manual_seed(0)
    relaxed = torch.distributions.RelaxedOneHotCategorical(torch.tensor(1.0), logits=logits)
    soft = relaxed.rsample()
    expected = torch.nn.functional.one_hot(soft.argmax(-1), 4).float()
    assert torch.equal(drawn, expected)
    (drawn * torch.arange(4.0)).sum().backward()
    grad = torch.autograd.grad((soft * torch.arange(4.0)).sum(), logits)[0]
    torch.testing.assert_close(logits.grad, grad)  # the relaxed draw's gradient
    assert OneHotCategorical.num_params == 1


def _composite() -> Any:
    from torch.distributions import Categorical, Normal

    from tdnn import CompositeDistribution

    params = TensorDict(
        cont=TensorDict(loc=torch.zeros(3, 2), scale=torch.ones(3, 2), batch_size=[3]),
        disc=TensorDict(logits=torch.zeros(3, 4), batch_size=[3]),
        batch_size=[3],
    )
    return CompositeDistribution(params, {"cont": Normal, "disc": Categorical})


def test_composite_distribution_upstream_methods() -> None:
    dist = _composite()
    assert list(dist.keys()) == ["cont", "disc"] and dist.get("cont") is dist.dists["cont"]
    assert [k for k, _ in dist.items()] == ["cont", "disc"] and dist.get("nope") is None
    torch.manual_seed(0)
    sample, lp = dist.sample_and_log_prob((2,))
    torch.manual_seed(0)
    again = dist.sample((2,))
    assert sample.batch_size == (2, 3) and torch.equal(sample["cont"], again["cont"])
    cont_lp = dist.dists["cont"].log_prob(sample["cont"])
    disc_lp = dist.dists["disc"].log_prob(sample["disc"])
    assert torch.equal(lp["cont_log_prob"], cont_lp) and lp.batch_size == (2, 3)
    total = cont_lp.sum(-1) + disc_lp
    with set_composite_lp_aggregate(True):
        torch.testing.assert_close(dist.log_prob(sample), total)
        written = dist.log_prob_composite(sample)  # in place, as upstream
        assert written is sample
        torch.testing.assert_close(sample["sample_log_prob"], total)
        torch.testing.assert_close(
            dist.entropy(), dist.entropy_composite(include_sum=True)["entropy"]
        )
    composite = dist.log_prob_composite(again, include_sum=True)
    assert sorted(composite.keys()) == ["cont_log_prob", "disc_log_prob", "sample_log_prob"]
    torch.testing.assert_close(composite["sample_log_prob"], total)
    ent = dist.entropy(include_sum=True)
    expected = dist.dists["cont"].entropy().sum(-1) + dist.dists["disc"].entropy()
    torch.testing.assert_close(ent["entropy"], expected)
    assert dist.sample(None).batch_size == (3,)
    _, rlp = dist.rsample_and_log_prob()
    assert rlp.batch_size == (3,)


def test_composite_distribution_cdf_icdf_and_monte_carlo_entropy() -> None:
    from torch.distributions import Normal, TransformedDistribution
    from torch.distributions.transforms import ExpTransform

    from tdnn import CompositeDistribution

    normal = Normal(torch.zeros(3), torch.ones(3))
    dist = CompositeDistribution.from_distributions(TensorDict(batch_size=[3]), {"a": normal})
    sample = TensorDict(a=torch.tensor([-1.0, 0.0, 2.0]), batch_size=[3])
    assert dist.cdf(sample) is sample
    torch.testing.assert_close(sample["a_cdf"], normal.cdf(sample["a"]))
    dist.icdf(sample)
    torch.testing.assert_close(sample["a_icdf"], sample["a"])
    with pytest.raises(KeyError, match=r"icdf: neither 'a_cdf' nor 'a' is in the sample"):
        dist.icdf(TensorDict(b=torch.zeros(3), batch_size=[3]))
    log_normal = TransformedDistribution(normal, [ExpTransform()])  # no closed-form entropy
    mc = CompositeDistribution.from_distributions(TensorDict(batch_size=[3]), {"x": log_normal})
    torch.manual_seed(0)
    estimate = mc.entropy_composite(samples_mc=4)["x_entropy"]
    torch.manual_seed(0)
    draws = log_normal.rsample((4,))
    torch.testing.assert_close(estimate, -log_normal.log_prob(draws).mean(0))


def test_cuda_graph_module_state_dict_is_the_wrapped_modules() -> None:
    from tdnn import CudaGraphModule

    with (
        pytest.warns(UserWarning, match="no CUDA device")
        if not torch.cuda.is_available()
        else contextlib.nullcontext()
    ):
        graph = CudaGraphModule(TensorDictModule(nn.Linear(2, 2), ["x"], ["y"]))
    assert list(graph.state_dict()) == ["module.weight", "module.bias"]  # as upstream
    other = TensorDictModule(nn.Linear(2, 2), ["x"], ["y"])
    assert str(graph.load_state_dict(other.state_dict())) == "<All keys matched successfully>"
    assert torch.equal(graph.module.module.weight, other.module.weight)
    parent = nn.Sequential(graph)  # as a child it is saved and loaded like any other
    assert list(parent.state_dict()) == ["0.module.module.weight", "0.module.module.bias"]
    parent.load_state_dict(parent.state_dict())


def test_from_module_use_state_dict_gives_detached_tensors() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
    params = TensorDict.from_module(model, use_state_dict=True)
    weight = params["0", "weight"]
    assert type(weight) is torch.Tensor and not weight.requires_grad  # as upstream
    assert weight.data_ptr() == model[0].weight.data_ptr()  # no copy
    assert ("1", "num_batches_tracked") in params.keys(True)


def test_functional_modules_set_tensor_as_upstream() -> None:
    from tensordict.nn.distributions import utils  # upstream's path imports
    from tensordict.nn.functional_modules import set_tensor, set_tensor_dict

    assert utils.__all__ == []
    model = nn.Linear(1, 1)
    model.register_buffer("stat", torch.zeros(1))
    with pytest.warns(DeprecationWarning, match=r"set_tensor\(\) is deprecated"):
        set_tensor(model, "weight", torch.zeros(1, 1))  # a plain tensor: an attribute
    assert "weight" not in model._parameters and torch.equal(model.weight, torch.zeros(1, 1))
    with pytest.warns(DeprecationWarning, match=r"set_tensor\(\) is deprecated"):
        set_tensor(model, "stat", torch.ones(1))  # a buffer stays a buffer
    assert torch.equal(model._buffers["stat"], torch.ones(1))
    new = nn.Parameter(torch.ones(1))
    with pytest.warns(DeprecationWarning, match=r"set_tensor_dict\(\) is deprecated"):
        set_tensor_dict(model.__dict__, model, "bias", new)
    assert model._parameters["bias"] is new


def test_probabilistic_sequence_takes_tensordict_out_positionally() -> None:
    from torch.distributions import Normal

    from tdnn import (
        NormalParamExtractor,
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
    )

    torch.manual_seed(0)
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), ["obs"], ["loc", "scale"]
        ),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=Normal),
    )
    td = TensorDict(obs=torch.randn(5, 3), batch_size=[5])
    out = TensorDict(batch_size=[5])
    assert seq.get_dist_params(td, out) is out and sorted(out.keys()) == ["loc", "scale"]
    out = TensorDict(batch_size=[5])
    dist = seq.get_dist(td, out)
    assert torch.equal(dist.mean, out["loc"]) and "obs" not in out.keys()
    done = seq(td.clone())
    out = TensorDict(batch_size=[5])
    torch.testing.assert_close(seq.log_prob(done, out), dist.log_prob(done["action"]))
    assert sorted(out.keys()) == ["loc", "scale"]


def test_dispatch_defaults_as_upstream() -> None:
    from tdnn import dispatch

    assert (dispatch.DEFAULT_SEPARATOR, dispatch.DEFAULT_SOURCE, dispatch.DEFAULT_DEST) == (
        "_",
        "in_keys",
        "out_keys",
    )
    with pytest.warns(DeprecationWarning, match=r"get_source\(\) is deprecated"):
        assert dispatch(source=["a"]).get_source(None, None) == ["a"]


def test_upstream_deprecations_warn() -> None:
    from torch.distributions import Normal

    from tdnn import ProbabilisticTensorDictModule

    module = TensorDictModule(lambda x: x, ["x"], ["y"])
    with pytest.warns(DeprecationWarning, match="is_functional is deprecated"):
        assert module.is_functional is False
    with pytest.warns(DeprecationWarning, match="is_functional is deprecated"):
        assert TensorDictSequential(module).is_functional is False
    with pytest.warns(DeprecationWarning, match=r"cache_dist=True\) is deprecated"):
        ProbabilisticTensorDictModule(["loc"], ["x"], distribution_class=Normal, cache_dist=True)


def test_setting_out_keys_changes_what_is_written() -> None:
    td = TensorDict(x=torch.ones(2))
    module = TensorDictModule(lambda x: x + 1, ["x"], ["y"])
    module.out_keys = ["z"]
    assert module.out_keys_source == ["z"] and sorted(module(td.clone()).keys()) == ["x", "z"]
    pair = TensorDictModule(lambda x: (x, x * 2), ["x"], ["y", "w"]).select_out_keys("w")
    pair.out_keys = ["a", "b"]  # a selection made before is dropped, as upstream
    out = pair(td.clone())
    assert sorted(out.keys()) == ["a", "b", "x"] and torch.equal(out["b"], torch.full((2,), 2.0))
    assert sorted(pair.select_out_keys("b")(td.clone()).keys()) == ["b", "x"]
    seq = TensorDictSequential(module, TensorDictModule(lambda z: z * 2, ["z"], ["q"]))
    assert seq.in_keys == ["x"] and torch.equal(seq(td.clone())["q"], torch.full((2,), 4.0))


def test_ensemble_runs_its_module_so_eval_and_changes_apply() -> None:
    torch.manual_seed(0)
    ensemble = EnsembleModule(TensorDictModule(nn.Dropout(0.5), ["x"], ["y"]), num_copies=2)
    td = TensorDict(x=torch.ones(3, 4), batch_size=[3])
    ensemble.eval()
    assert torch.equal(ensemble(td.clone())["y"], torch.ones(2, 3, 4))
    ensemble.train()
    assert not torch.equal(ensemble(td.clone())["y"], torch.ones(2, 3, 4))
    ensemble.module.out_keys = ["z"]
    assert "z" in ensemble(td.clone()).keys()
    weight = ensemble.module.module
    assert isinstance(weight, nn.Dropout)  # the module given, restored after each call


def test_select_subsequence_follows_upstreams_rules() -> None:
    def same(x: torch.Tensor) -> torch.Tensor:
        return x

    def two(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x

    # a module is kept only if each of its inputs is given or computed
    seq = TensorDictSequential(
        TensorDictModule(same, ["a"], ["b"]),
        TensorDictModule(two, ["b", "z"], ["c"]),
        TensorDictModule(same, ["b"], ["d"]),
    )
    sub = seq.select_subsequence(in_keys=["a"])
    assert sub.out_keys == ["b", "d"] and sub[1] is seq[2]
    with pytest.raises(ValueError, match="select_subsequence: no module is selected"):
        TensorDictSequential(TensorDictModule(two, ["a", "z"], ["b"])).select_subsequence(
            in_keys=["a"]
        )
    # nested sequences are filtered, not flattened; the options are kept
    inner = TensorDictSequential(
        TensorDictModule(same, ["b"], ["d"]), TensorDictModule(same, ["d"], ["e"])
    )
    outer = TensorDictSequential(
        TensorDictSequential(TensorDictModule(same, ["a"], ["b"])),
        inner,
        partial_tolerant=True,
        inplace=False,
    )
    sub = outer.select_subsequence(in_keys=["b", "d"], out_keys=["e"])
    assert len(sub) == 1 and type(sub[0]) is TensorDictSequential
    assert sub[0].out_keys == ["d", "e"] and sub[0][0] is inner[0]
    assert sub.partial_tolerant is True and sub.inplace is False
    assert outer[0:1].inplace is False


def test_ensemble_vmapped_forward_takes_upstreams_arguments() -> None:
    ensemble = _ensemble()
    td = TensorDict(x=torch.randn(4, 3), batch_size=[4])
    out = ensemble.vmapped_forward(td.clone(), ensemble.params_td)
    torch.testing.assert_close(out["y"], ensemble(td.clone())["y"])
    out["y"].sum().backward()  # gradients reach the stacked parameters
    assert ensemble.params_td["module", "weight"].grad is not None
    with pytest.raises(TypeError, match=r"vmapped_forward: expected \(input, ..., params\)"):
        ensemble.vmapped_forward()


def test_one_hot_categorical_module_draws_are_samples() -> None:
    from tdnn import OneHotCategorical, ProbabilisticTensorDictModule

    module = ProbabilisticTensorDictModule(
        ["logits"], ["x"], distribution_class=OneHotCategorical, default_interaction_type="random"
    )
    logits = torch.randn(3, 4)
    torch.manual_seed(0)
    drawn = module(TensorDict(logits=logits, batch_size=[3]))["x"]
    torch.manual_seed(0)
    expected = torch.distributions.OneHotCategorical(logits=logits).sample().long()
    assert drawn.dtype == torch.long and torch.equal(drawn, expected)  # as upstream
    assert OneHotCategorical.has_rsample is False


def test_sequential_lists_a_key_written_twice_where_it_is_written_last() -> None:
    seq = TensorDictSequential(
        TensorDictModule(lambda a: a + 1, ["a"], ["x"]),
        TensorDictModule(lambda a: a * 2, ["a"], ["y"]),
        TensorDictModule(lambda x: x - 1, ["x"], ["x"]),
    )
    assert seq.out_keys == ["y", "x"]
    # called with tensors, the outputs come in that order
    y, x = seq(a=torch.ones(1))
    assert y.tolist() == [2.0] and x.tolist() == [1.0]


@pytest.mark.parametrize(
    ("out_keys", "fn"),
    [(["x"], lambda a: (a, a)), (["x", "y", "z"], lambda a: (a, a)), (["x", "y"], lambda a: a)],
)
def test_output_count_mismatch_is_also_upstreams_runtime_error(
    out_keys: list[str], fn: Callable[..., Any]
) -> None:
    module = TensorDictModule(fn, ["a"], out_keys)
    with pytest.raises(RuntimeError, match=r"returned \d outputs for \d out_keys"):
        module(TensorDict(a=torch.ones(2), batch_size=[2]))
    with pytest.raises(ValueError, match=r"returned \d outputs"):
        module(a=torch.ones(2))


def _two_draws(return_composite: bool | None) -> ProbabilisticTensorDictSequential:
    # act ~ Normal(x + 1, 1), then y ~ Normal(10 * act, 1)
    return ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: x + 1, ["x"], ["loc"]),
        ProbabilisticTensorDictModule(
            ["loc"], ["act"], distribution_class=Normal, distribution_kwargs={"scale": 1.0}
        ),
        TensorDictModule(lambda a: a * 10, ["act"], ["loc"]),
        ProbabilisticTensorDictModule(
            ["loc"], ["y"], distribution_class=Normal, distribution_kwargs={"scale": 1.0}
        ),
        return_composite=return_composite,
    )


def test_return_composite_false_keeps_the_last_distribution_beside_other_draws() -> None:
    assert _two_draws(None).return_composite and not _two_draws(False).return_composite
    dist = _two_draws(False).get_dist(TensorDict(x=torch.zeros(3), batch_size=[3]))
    assert isinstance(dist, Normal) and dist.mean.tolist() == [10.0] * 3


def test_distribution_parameters_draw_by_the_default_interaction_type() -> None:
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    torch.manual_seed(0)
    # the intermediate draw is the default (deterministic) one: act == loc == 1
    assert _two_draws(False).get_dist_params(td.clone())["act"].tolist() == [1.0] * 3
    assert _two_draws(True).get_dist(td.clone()).mean["y"].tolist() == [10.0] * 3
    with set_interaction_type(InteractionType.RANDOM):
        assert (_two_draws(False).get_dist_params(td.clone())["act"] != 1.0).all()


def test_get_dist_writes_the_parameters_into_its_input_as_upstream() -> None:
    seq = _two_draws(False)
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    seq.get_dist(td)
    assert sorted(td.keys()) == ["act", "loc", "x"]
    td = TensorDict(x=torch.zeros(3), y=torch.zeros(3), batch_size=[3])
    seq.log_prob(td)
    assert sorted(td.keys()) == ["act", "loc", "x", "y"]
    # given tensordict_out, the parameters go there and the input is left alone
    td, out = TensorDict(x=torch.zeros(3), batch_size=[3]), TensorDict(batch_size=[3])
    assert seq.get_dist_params(td, out) is out
    assert sorted(td.keys()) == ["x"] and sorted(out.keys()) == ["act", "loc"]


def test_selected_outputs_of_a_tensor_call_follow_the_selection_order() -> None:
    module = TensorDictModule(lambda a: (a, a * 2, a * 3), ["a"], ["x", "y", "z"])
    module.select_out_keys("z", "x")
    assert module.out_keys == ["z", "x"]
    z, x = module(a=torch.ones(1))
    assert z.tolist() == [3.0] and x.tolist() == [1.0]


def test_skip_existing_looks_at_the_selected_out_keys() -> None:
    module = TensorDictModule(lambda a: (a + 1, a + 2), ["a"], ["unused", "kept"])
    module.select_out_keys("kept")
    td = TensorDict(a=torch.zeros(1), kept=torch.full((1,), 9.0), batch_size=[1])
    with set_skip_existing(True):
        out = module(td)
    # the one out key it shows is there: the call is skipped, as upstream
    assert sorted(out.keys()) == ["a", "kept"] and out["kept"].tolist() == [9.0]
    with set_skip_existing(True):
        out = module.reset_out_keys()(td)
    assert out["kept"].tolist() == [2.0] and out["unused"].tolist() == [1.0]


def test_joint_log_prob_uses_the_modules_log_prob_keys() -> None:
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: x, ["x"], ["loc"]),
        ProbabilisticTensorDictModule(
            ["loc"],
            [("agent", "act")],
            distribution_class=Normal,
            distribution_kwargs={"scale": 1.0},
            return_log_prob=True,
            log_prob_key=("z", "lp"),
        ),
        ProbabilisticTensorDictModule(
            ["loc"], ["b"], distribution_class=Normal, distribution_kwargs={"scale": 1.0}
        ),
        return_composite=True,
    )
    td = seq(TensorDict(x=torch.zeros(2), batch_size=[2]))
    lp = seq.log_prob(td)
    # under the key forward wrote, as upstream (it was ("agent", "act_log_prob"))
    torch.testing.assert_close(lp["z", "lp"], td["z", "lp"])
    assert ("agent", "act_log_prob") not in lp.keys(True) and "b_log_prob" in lp.keys()
