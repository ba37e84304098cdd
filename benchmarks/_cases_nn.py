"""Cases for the module layer, part 2 (issue 14): a probabilistic policy head."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Normal

from benchmarks._harness import Case, Fn
from tdnn import (
    InteractionType,
    NormalParamExtractor,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from tensordict import TensorDict


def prob_module() -> tuple[Fn, Fn]:
    """NormalParamExtractor + Normal: forward, rsample and log_prob, against the same few
    lines of plain torch."""
    linear = nn.Linear(16, 8)
    extractor = NormalParamExtractor()
    policy = ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Sequential(linear, extractor), ["obs"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(
            ["loc", "scale"],
            ["action"],
            distribution_class=Normal,
            return_log_prob=True,
            default_interaction_type=InteractionType.RANDOM,
        ),
    )
    obs = torch.randn(32, 16)
    td = TensorDict({"obs": obs}, [32])

    def base() -> torch.Tensor:
        loc, scale = extractor(linear(obs))
        dist = Normal(loc, scale)
        action = dist.rsample()
        return dist.log_prob(action)

    return (lambda: policy(td)), base


CASES = [
    Case(
        "ProbabilisticTensorDictSequential: Linear, NormalParamExtractor, Normal rsample + "
        "log_prob, batch 32",
        "the same lines of plain torch",
        1.3,
        prob_module,
    ),
]
