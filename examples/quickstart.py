"""The quick-start tour: build a TensorDict, index and stack it, ensemble a small model
with vmap over stacked parameters, save a checkpoint and load one submodule back."""

from __future__ import annotations

import io
import os
import tempfile

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.utils import print_directory_tree


def main() -> None:
    torch.manual_seed(0)
    # A batch of 8 transitions: observations, actions, and a nested "next" step.
    data = TensorDict(
        {
            "obs": torch.randn(8, 4),
            "action": torch.randint(0, 2, (8,)),
            "next": {"obs": torch.randn(8, 4), "reward": torch.randn(8)},
        },
        batch_size=[8],
    )
    data["info"] = "cart-pole"  # non-tensor data rides along
    print(data)

    # Nested keys, indexing over the batch, element-wise maths.
    print("reward of step 3:", float(data["next", "reward"][3]))
    first_half = data[:4]
    print("first half batch size:", tuple(first_half.batch_size))
    normalised = data.select("obs", ("next", "obs")).apply(lambda x: (x - x.mean()) / x.std())
    print("normalised obs mean:", round(float(normalised["obs"].mean()), 6))
    print("total reward:", float(data["next", "reward"].sum()))

    # Stacking and shape ops act on the batch dims of every leaf; vmap maps over them.
    episodes = torch.stack([data, data.clone()], 0)
    print("stacked batch size:", tuple(episodes.batch_size))
    print("reshaped:", tuple(episodes.reshape(4, 4).batch_size))
    per_step = torch.vmap(lambda step: step["obs"].norm())(data)
    print("per-step obs norms:", tuple(per_step.shape))

    # Conversions act on every leaf at once.
    doubled = data.to(torch.float64)
    print("obs dtype after to(float64):", doubled["obs"].dtype)

    # Save with torch and restore, even with weights_only=True.
    buffer = io.BytesIO()
    torch.save(data.exclude("info"), buffer)
    buffer.seek(0)
    restored = torch.load(buffer, weights_only=True)
    print("restored equal:", bool((restored == data.exclude("info")).all()))

    # A state dict loads onto an empty TensorDict, structure and all.
    fresh = TensorDict().load_state_dict(data.exclude("info").state_dict())
    print("state_dict round trip keys:", sorted(map(str, fresh.keys(True, True))))

    # An ensemble: the parameters of 4 small models stacked, one vmap over them.
    models = [nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)) for _ in range(4)]
    stacked = TensorDict.from_modules(*models)
    base = models[0]

    def predict(params: TensorDict, obs: torch.Tensor) -> torch.Tensor:
        with params.to_module(base):
            return base(obs)

    ensemble_out = torch.vmap(predict, (0, None))(stacked, data["obs"])
    print("ensemble output:", tuple(ensemble_out.shape))

    # A checkpoint: one folder per submodule; load only the first layer into a new model.
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model")
        TensorDict.from_module(models[1]).detach().memmap(path)
        print_directory_tree(path)
        fresh_model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
        TensorDict.load_memmap(os.path.join(path, "0")).to_module(fresh_model[0], inplace=True)
        same = torch.equal(fresh_model[0].weight, models[1][0].weight)
        print("first layer loaded on its own:", same)


if __name__ == "__main__":
    main()
