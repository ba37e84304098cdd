"""The quick-start tour: build a TensorDict, index it, compute on it, save and restore it.

The tour grows with the library; ensembles and checkpoints join it with their issues.
"""

from __future__ import annotations

import io

import torch

from tensordict import TensorDict


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


if __name__ == "__main__":
    main()
