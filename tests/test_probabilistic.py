"""Probabilistic modules and distributions, checked against torch.distributions directly."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from tdnn import (
    AddStateIndependentNormalScale,
    CompositeDistribution,
    InteractionType,
    NormalParamExtractor,
    OneHotCategorical,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
    TruncatedNormal,
    biased_softplus,
    set_composite_lp_aggregate,
    set_interaction_type,
)
from tensordict import TensorDict


def _params(batch: int = 5, dim: int = 3) -> TensorDict:
    torch.manual_seed(0)
    return TensorDict(
        loc=torch.randn(batch, dim), scale=torch.rand(batch, dim) + 0.1, batch_size=[batch]
    )


def _normal_module(**kwargs: object) -> ProbabilisticTensorDictModule:
    return ProbabilisticTensorDictModule(
        ["loc", "scale"], ["x"], distribution_class=Normal, **kwargs
    )


def _policy(obs: int = 3, act: int = 2) -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(obs, 2 * act), NormalParamExtractor()),
            ["obs"],
            ["loc", "scale"],
        ),
        ProbabilisticTensorDictModule(
            ["loc", "scale"], ["action"], distribution_class=Normal, return_log_prob=True
        ),
    )


def test_random_samples_match_torch_draw_for_draw() -> None:
    td = _params()
    module = _normal_module(return_log_prob=True)
    ref = Normal(td["loc"], td["scale"])
    for seed in range(3):
        torch.manual_seed(seed)
        with set_interaction_type(InteractionType.RANDOM):
            out = module(td.clone())
        torch.manual_seed(seed)
        expected = ref.rsample()
        torch.testing.assert_close(out["x"], expected)
        torch.testing.assert_close(out["x_log_prob"], ref.log_prob(expected))


@pytest.mark.parametrize(
    ("kind", "attr"),
    [
        (InteractionType.MODE, "mode"),
        (InteractionType.MEAN, "mean"),
        (InteractionType.MEDIAN, "median"),
        (InteractionType.DETERMINISTIC, "mean"),  # real support: the mean
    ],
)
def test_interaction_types_of_a_normal(kind: InteractionType, attr: str) -> None:
    td = _params()
    with set_interaction_type(kind):
        out = _normal_module()(td.clone())
    dist = Normal(td["loc"], td["scale"])
    expected = dist.loc if attr == "median" else getattr(dist, attr)
    torch.testing.assert_close(out["x"], expected)


def test_deterministic_on_a_discrete_support_is_the_mode() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 0.0]])
    module = ProbabilisticTensorDictModule(["logits"], ["a"], distribution_class=Categorical)
    out = module(TensorDict(logits=logits, batch_size=[2]))  # default: deterministic
    torch.testing.assert_close(out["a"], Categorical(logits=logits).mode)
    assert out["a"].tolist() == [1, 0]


def test_log_prob_of_a_sequence_matches_torch_and_sums() -> None:
    torch.manual_seed(1)
    policy = _policy()
    td = TensorDict(obs=torch.randn(4, 3), batch_size=[4])
    with set_interaction_type("random"):
        out = policy(td)
    linear = policy.module[0].module[0]
    loc, scale = NormalParamExtractor()(linear(td["obs"]))
    ref = Normal(loc, scale)
    torch.testing.assert_close(out["action_log_prob"], ref.log_prob(out["action"]))
    torch.testing.assert_close(policy.log_prob(out), ref.log_prob(out["action"]))
    torch.testing.assert_close(policy.log_prob(out).sum(), ref.log_prob(out["action"]).sum())
    torch.testing.assert_close(policy.get_dist(td).mean, loc)


def test_gradients_flow_through_rsample_as_in_plain_torch() -> None:
    policy = _policy()
    twin = copy.deepcopy(policy)
    obs = torch.randn(6, 3)
    torch.manual_seed(3)
    with set_interaction_type("random"):
        action = policy(TensorDict(obs=obs, batch_size=[6]))["action"]
    action.pow(2).sum().backward()

    linear = twin.module[0].module[0]
    torch.manual_seed(3)
    loc, scale = NormalParamExtractor()(linear(obs))
    Normal(loc, scale).rsample().pow(2).sum().backward()
    mine = policy.module[0].module[0]
    assert mine.weight.grad is not None and linear.weight.grad is not None
    torch.testing.assert_close(mine.weight.grad, linear.weight.grad)
    torch.testing.assert_close(mine.bias.grad, linear.bias.grad)


def test_normal_param_extractor_and_state_independent_scale() -> None:
    x = torch.randn(4, 6)
    loc, scale = NormalParamExtractor()(x)
    torch.testing.assert_close(loc, x[:, :3])
    expected = nn.functional.softplus(x[:, 3:] + math.log(math.expm1(1.0 - 0.01))) + 0.01
    torch.testing.assert_close(scale, expected.clamp_min(1e-4))
    torch.testing.assert_close(
        biased_softplus(1.0)(x), nn.functional.softplus(x + 0.5254) + 0.01, atol=1e-4, rtol=0
    )
    head = AddStateIndependentNormalScale(3, init_value=0.5)
    loc2, scale2 = head(x[:, :3])
    torch.testing.assert_close(loc2, x[:, :3])
    torch.testing.assert_close(scale2, torch.full((4, 3), math.exp(0.5)))
    with pytest.raises(RuntimeError, match=r"AddStateIndependentNormalScale: the last dims"):
        head(torch.zeros(4, 2))


def test_composite_distribution_matches_its_members() -> None:
    torch.manual_seed(0)
    params = TensorDict(
        cont=TensorDict(loc=torch.randn(3, 2), scale=torch.ones(3, 2), batch_size=[3]),
        disc=TensorDict(logits=torch.randn(3, 4), batch_size=[3]),
        batch_size=[3],
    )
    dist = CompositeDistribution(params, {"cont": Normal, "disc": Categorical})
    cont = Normal(params["cont", "loc"], params["cont", "scale"])
    disc = Categorical(logits=params["disc", "logits"])
    torch.manual_seed(5)
    sample = dist.sample()
    torch.manual_seed(5)
    torch.testing.assert_close(sample["cont"], cont.sample())
    torch.testing.assert_close(sample["disc"], disc.sample())
    lp = dist.log_prob(sample)
    torch.testing.assert_close(lp["cont_log_prob"], cont.log_prob(sample["cont"]))
    torch.testing.assert_close(lp["disc_log_prob"], disc.log_prob(sample["disc"]))
    with set_composite_lp_aggregate(True):
        total = dist.log_prob(sample)
    expected = cont.log_prob(sample["cont"]).sum(-1) + disc.log_prob(sample["disc"])
    torch.testing.assert_close(total, expected)
    torch.testing.assert_close(dist.mode["disc"], disc.mode)


def test_composite_module_writes_every_sample_and_log_prob() -> None:
    params = TensorDict(
        params=TensorDict(
            cont=TensorDict(loc=torch.zeros(3, 2), scale=torch.ones(3, 2), batch_size=[3]),
            disc=TensorDict(logits=torch.zeros(3, 4), batch_size=[3]),
            batch_size=[3],
        ),
        batch_size=[3],
    )
    module = ProbabilisticTensorDictModule(
        {"params": "params"},
        distribution_class=CompositeDistribution,
        distribution_kwargs={"distribution_map": {"cont": Normal, "disc": Categorical}},
        return_log_prob=True,
    )
    with set_interaction_type("random"):
        out = module(params)
    assert out["cont"].shape == (3, 2) and out["disc"].shape == (3,)
    torch.testing.assert_close(
        out["disc_log_prob"], Categorical(logits=torch.zeros(3, 4)).log_prob(out["disc"])
    )
    with pytest.raises(KeyError, match="distribution_kwargs needs a 'distribution_map'"):
        ProbabilisticTensorDictModule(["p"], distribution_class=CompositeDistribution)


def _composite_params() -> TensorDict:
    logits = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 1.0], [0.0, 5.0, 1.0]])
    leaves = TensorDict(
        p=TensorDict(loc=torch.arange(3.0), scale=torch.ones(3), batch_size=[3]),
        q=TensorDict(logits=logits, batch_size=[3]),
        batch_size=[3],
    )
    return TensorDict(params=leaves, batch_size=[3])


def _composite_module(**kwargs: Any) -> ProbabilisticTensorDictModule:
    return ProbabilisticTensorDictModule(
        in_keys=["params"],
        out_keys=["p", "q"],
        distribution_class=CompositeDistribution,
        distribution_kwargs={"distribution_map": {"p": Normal, "q": Categorical}},
        **kwargs,
    )


def test_composite_deterministic_sample_is_the_mode_of_a_discrete_member() -> None:
    td = _composite_params()
    out = _composite_module()(td.clone())  # DETERMINISTIC by default
    assert out["q"].tolist() == [2, 0, 1] and out["q"].dtype == torch.int64
    torch.testing.assert_close(out["p"], torch.arange(3.0))  # a real support: the mean
    dist = _composite_module().get_dist(td)
    assert dist.deterministic_sample["q"].tolist() == [2, 0, 1]


def test_composite_log_probs_per_member_and_their_sum_under_aggregation() -> None:
    td = _composite_params()
    with set_interaction_type("mode"):
        per_member = _composite_module(return_log_prob=True)(td.clone())
        with set_composite_lp_aggregate(True):
            module = _composite_module(return_log_prob=True)
            summed = module(td.clone())
            named = _composite_module(return_log_prob=True, log_prob_key="lp")(td.clone())
    normal = Normal(torch.arange(3.0), torch.ones(3)).log_prob(torch.arange(3.0))
    logits = td["params", "q", "logits"]
    categorical = Categorical(logits=logits).log_prob(logits.argmax(-1))
    for out in (per_member, summed):
        torch.testing.assert_close(out["p_log_prob"], normal)
        torch.testing.assert_close(out["q_log_prob"], categorical)
    assert "sample_log_prob" not in per_member.keys()
    torch.testing.assert_close(summed["sample_log_prob"], normal + categorical)
    torch.testing.assert_close(named["lp"], normal + categorical)
    with set_composite_lp_aggregate(True):  # the setting it was built under
        assert module.log_prob_keys == ["sample_log_prob"]
        assert module.log_prob_key == "sample_log_prob"
    with pytest.raises(RuntimeError, match="several log-prob keys"):
        _ = _composite_module(return_log_prob=True).log_prob_key
    with pytest.raises(RuntimeError, match="pass log_prob_keys instead"):
        _composite_module(log_prob_key="lp")
    with set_composite_lp_aggregate(True), pytest.raises(RuntimeError, match="pass log_prob_key"):
        _composite_module(log_prob_keys=["a", "b"])


def test_a_single_sample_under_aggregation_writes_sample_log_prob_as_upstream() -> None:
    td = TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3])
    with set_composite_lp_aggregate(True):
        module = ProbabilisticTensorDictModule(
            ["loc", "scale"], ["x"], distribution_class=Normal, return_log_prob=True
        )
    out = module(td)
    with set_composite_lp_aggregate(True):
        assert module.log_prob_key == "sample_log_prob" and "x_log_prob" not in out.keys()
    torch.testing.assert_close(out["sample_log_prob"], Normal(0.0, 1.0).log_prob(torch.zeros(3)))


@pytest.mark.parametrize("built_under", [False, True])
def test_log_prob_keys_are_refused_under_another_aggregation_than_at_build(
    built_under: bool,
) -> None:
    with set_composite_lp_aggregate(built_under):
        module = _composite_module(return_log_prob=True)
        keys = module.out_keys
        log_prob_keys = module.log_prob_keys
    assert keys[:2] == ["p", "q"] and keys[2:] == log_prob_keys
    assert log_prob_keys == (["sample_log_prob"] if built_under else ["p_log_prob", "q_log_prob"])
    with set_composite_lp_aggregate(not built_under):
        for attr in ("out_keys", "log_prob_keys", "log_prob_key"):
            with pytest.raises(RuntimeError, match=f"{attr}: composite_lp_aggregate"):
                getattr(module, attr)
        assert "out_keys=['p', 'q'" in repr(module)  # repr still answers
        # without log-prob outputs the out keys do not depend on the setting
        assert _composite_module().out_keys == ["p", "q"]


def test_one_hot_categorical_mode_and_straight_through_gradient() -> None:
    logits = torch.tensor([[0.0, 4.0, 1.0]], requires_grad=True)
    dist = OneHotCategorical(logits=logits)
    torch.testing.assert_close(dist.mode, torch.tensor([[0, 1, 0]]))  # torch.long, as upstream
    assert dist.deterministic_sample.dtype == torch.long
    torch.manual_seed(0)
    drawn = dist.sample((2,))
    torch.manual_seed(0)
    plain = torch.distributions.OneHotCategorical(logits=logits).sample((2,))
    assert drawn.dtype == torch.long and torch.equal(drawn, plain.long())
    torch.testing.assert_close(dist.log_prob(drawn), dist.log_prob(plain))
    torch.manual_seed(0)
    sample = dist.rsample()
    torch.manual_seed(0)
    torch.testing.assert_close(
        sample, torch.distributions.OneHotCategorical(logits=logits).sample()
    )
    (sample * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and logits.grad.abs().sum() > 0


def test_truncated_normal_against_a_renormalised_normal() -> None:
    loc, scale = torch.tensor([0.2, -0.5]), torch.tensor([1.0, 0.5])
    dist = TruncatedNormal(loc, scale, low=-1.0, high=1.0)
    torch.manual_seed(0)
    x = dist.rsample((1000,))
    assert bool(((x >= -1) & (x <= 1)).all())
    base = Normal(loc, scale)
    mass = base.cdf(torch.tensor(1.0)) - base.cdf(torch.tensor(-1.0))
    value = torch.tensor([0.3, 0.1])
    torch.testing.assert_close(dist.log_prob(value), base.log_prob(value) - mass.log())


def test_ensemble_of_probabilistic_policies_under_vmap_matches_a_loop() -> None:
    torch.manual_seed(0)
    policies = [_policy() for _ in range(3)]
    params = TensorDict.from_modules(*policies)
    base = copy.deepcopy(policies[0])
    obs = torch.randn(4, 3)

    def call(p: TensorDict, o: torch.Tensor) -> torch.Tensor:
        with p.to_module(base):
            return base(TensorDict(obs=o, batch_size=[4]))["action"]

    with set_interaction_type("deterministic"):
        stacked = torch.vmap(call, (0, None))(params, obs)
        looped = torch.stack([p(TensorDict(obs=obs, batch_size=[4]))["action"] for p in policies])
    torch.testing.assert_close(stacked, looped)


def test_export_round_trip_of_modules_and_a_deterministic_policy() -> None:
    x = torch.randn(5, 3)
    module = TensorDictModule(nn.Linear(3, 4), ["x"], ["y"])
    exported = torch.export.export(module, args=(), kwargs={"x": x}).module()
    torch.testing.assert_close(exported(x=x), module(x=x))

    seq = TensorDictSequential(
        TensorDictModule(lambda v: v + 1, [("some", "key")], ["hidden"]),
        TensorDictModule(nn.Linear(3, 2), ["hidden"], [("some", "output")]),
    ).select_out_keys(("some", "output"))
    exported = torch.export.export(seq, args=(), kwargs={"some_key": x}).module()
    torch.testing.assert_close(exported(some_key=x), seq(some_key=x))

    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(
            nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), ["x"], ["loc", "scale"]
        ),
        ProbabilisticTensorDictModule(
            ["loc", "scale"],
            ["action"],
            distribution_class=Normal,
            distribution_kwargs={"validate_args": False},  # validation reads the values
            return_log_prob=True,
        ),
    )
    with set_interaction_type("deterministic"):
        exported = torch.export.export(policy, args=(), kwargs={"x": x}, strict=False).module()
        expected = policy(x=x)
    got = exported(x=x)
    assert len(got) == len(expected) == 4  # loc, scale, action, action_log_prob
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)


def test_error_messages() -> None:
    module = _normal_module()
    with pytest.raises(KeyError, match=r"get_dist: parameter keys \['scale'\] are missing"):
        module.get_dist(TensorDict(loc=torch.zeros(2)))
    several = ProbabilisticTensorDictModule(
        ["p"], ["a", "b"], distribution_class=CompositeDistribution
    )
    with pytest.raises(RuntimeError, match="log_prob_key: there are several log-prob keys"):
        _ = several.log_prob_key
    with pytest.raises(ValueError, match="inplace must be None, True, False or 'empty'"):
        TensorDictSequential(module, inplace="sometimes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="set_interaction_type: expected an InteractionType"):
        set_interaction_type(3)  # type: ignore[arg-type]


def test_appending_to_a_probabilistic_sequence_refreshes_what_depends_on_members() -> None:
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: (x, x.abs() + 1), ["obs"], ["loc", "scale"])
    )
    assert seq.det_part is None
    seq.append(ProbabilisticTensorDictModule(["loc", "scale"], ["act"], distribution_class=Normal))
    assert seq.det_part is not None and seq.det_part.out_keys == ["loc", "scale"]
    out = seq(TensorDict(obs=torch.zeros(3), batch_size=[3]))
    torch.testing.assert_close(out["act"], torch.zeros(3))  # DETERMINISTIC: the mean
    assert seq.dist_sample_keys == ["act"]


def test_more_out_keys_than_one_distribution_samples_are_refused() -> None:
    module = ProbabilisticTensorDictModule(
        ["loc", "scale"], ["act", "other"], distribution_class=Normal
    )
    td = TensorDict(loc=torch.zeros(2), scale=torch.ones(2), batch_size=[2])
    with pytest.raises(ValueError, match=r"Normal gives one sample, for 2 out_keys"):
        module(td)
    assert "act" not in td.keys()


def test_composite_entropy_takes_upstreams_deprecated_switch_with_a_warning() -> None:
    dist = _composite_module().get_dist(_composite_params())
    with pytest.warns(DeprecationWarning, match="aggregate_probabilities=...\\) has no effect"):
        warned = dist.entropy(aggregate_probabilities=False)
    plain = dist.entropy()
    assert warned.keys() == plain.keys()
    for key in plain.keys():
        torch.testing.assert_close(warned[key], plain[key])


def test_a_composite_is_a_torch_distribution() -> None:
    dist = _composite_module().get_dist(_composite_params())
    assert isinstance(dist, torch.distributions.Distribution)
    assert dist.batch_shape == (3,) and dist.event_shape == ()
    built = CompositeDistribution.from_distributions(
        TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)}
    )
    assert isinstance(built, torch.distributions.Distribution) and built.batch_shape == (2,)
    assert built.sample((4,))["x"].shape == (4, 2)


@pytest.mark.parametrize("outer", [[], [3]])
def test_aggregated_log_prob_keeps_the_distributions_batch_dims(outer: list[int]) -> None:
    params = _composite_params()["params"]  # batch [3]
    with set_composite_lp_aggregate(True), set_interaction_type("mode"):
        module = _composite_module(return_log_prob=True)
        out = module(TensorDict(params=params, batch_size=outer))
    assert out["sample_log_prob"].shape == (3,)
    torch.testing.assert_close(out["sample_log_prob"], out["p_log_prob"] + out["q_log_prob"])


def test_a_composite_module_run_under_another_aggregation_setting_says_so() -> None:
    module = _composite_module(return_log_prob=True)  # built with aggregation off
    with (
        set_composite_lp_aggregate(True),
        pytest.raises(
            RuntimeError, match=r"composite_lp_aggregate\(\) is True but was False when the module"
        ),
    ):
        module(_composite_params())
