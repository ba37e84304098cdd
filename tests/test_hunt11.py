"""Bugs found by a user's-eye hunt through the module layer and tensorclass, each pinned."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical, Normal

from tdnn import (
    CompositeDistribution,
    ProbabilisticTensorDictModule,
    set_composite_lp_aggregate,
)
from tensordict import TensorDict


def _composite_params() -> TensorDict:
    disc = TensorDict(logits=torch.zeros(3, 4), batch_size=[3])
    return TensorDict(
        cont=TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3]),
        disc=disc,
        n=TensorDict(disc=disc.clone(), batch_size=[3]),
        batch_size=[3],
    )


def _composite_module(out_keys: list[str], **kwargs: object) -> ProbabilisticTensorDictModule:
    return ProbabilisticTensorDictModule(
        in_keys=["params"],
        out_keys=out_keys,
        distribution_class=CompositeDistribution,
        distribution_kwargs={"distribution_map": {"cont": Normal, "disc": Categorical}},
        return_log_prob=True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_composite_module_naming_some_members_scores_every_member() -> None:
    # out_keys naming one member: every member is sampled, so every member's
    # log-probability is written, and the aggregated one sums them all (it summed the
    # named member only)
    params = _composite_params()
    dist = CompositeDistribution(params, {"cont": Normal, "disc": Categorical})
    sample = dist.deterministic_sample
    want_cont = dist.dists["cont"].log_prob(sample["cont"])
    want_disc = dist.dists["disc"].log_prob(sample["disc"])
    with set_composite_lp_aggregate(True):
        td = _composite_module(["cont"])(TensorDict(params=params, batch_size=[3]))
    torch.testing.assert_close(td["disc_log_prob"], want_disc)
    torch.testing.assert_close(td["sample_log_prob"], want_cont + want_disc)
    td = _composite_module(["disc"], log_prob_keys=["b"])(TensorDict(params=params, batch_size=[3]))
    torch.testing.assert_close(td["b"], want_disc)
    torch.testing.assert_close(td["cont_log_prob"], want_cont)
    assert "disc_log_prob" not in td.keys()


def test_composite_distribution_is_a_mapping_of_its_members() -> None:
    # upstream's dist["cont"], len, iteration and ``in`` (they raised TypeError)
    dist = CompositeDistribution(_composite_params(), {"cont": Normal, ("n", "disc"): Categorical})
    assert isinstance(dist["cont"], Normal)
    assert dist["n", "disc"] is dist.dists[("n", "disc")]
    assert len(dist) == 2
    assert list(dist) == ["cont", ("n", "disc")]
    assert ("n", "disc") in dist
    assert "disc" not in dist
    with pytest.raises(KeyError, match=r"CompositeDistribution\['zz'\]: no such member.*'cont'"):
        dist["zz"]


def test_composite_distribution_key_none_is_the_default() -> None:
    dist = CompositeDistribution(
        _composite_params(), {"cont": Normal}, log_prob_key=None, entropy_key=None
    )
    assert (dist.log_prob_key, dist.entropy_key) == ("sample_log_prob", "entropy")
    assert "sample_log_prob" in dist.log_prob_composite(dist.sample(), include_sum=True).keys()
    dist.entropy_key = None
    assert dist.entropy_key == "entropy"
