"""Train an ensemble of small regressors at once: their parameters stacked in one
TensorDict, one torch.vmap over the stack for the forward pass, one optimiser over the
stacked leaves. Each member sees its own bootstrap sample of the data."""

from __future__ import annotations

import torch
from torch import nn

from tensordict import TensorDict

NUM_MEMBERS = 5
STEPS = 80


def make_model() -> nn.Module:
    return nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 1))


def main() -> None:
    torch.manual_seed(0)
    # Toy data: y = sin(3x) + noise on [-1, 1]; every member gets a bootstrap resample.
    x = torch.linspace(-1, 1, 128).unsqueeze(-1)
    y = torch.sin(3 * x) + 0.05 * torch.randn_like(x)
    resample = torch.randint(0, x.shape[0], (NUM_MEMBERS, x.shape[0]))
    batches = TensorDict({"x": x[resample], "y": y[resample]}, batch_size=[NUM_MEMBERS])
    print("per-member data:", batches)

    # Independently initialised members, stacked: fresh leaves an optimiser can own.
    params = TensorDict.from_modules(*[make_model() for _ in range(NUM_MEMBERS)])
    base = make_model().to("meta")  # the structure only: its tensors are swapped in per call
    print("stacked parameters:", sorted(params.flatten_keys().keys()), tuple(params.batch_size))

    def forward(member_params: TensorDict, inputs: torch.Tensor) -> torch.Tensor:
        with member_params.to_module(base):
            return base(inputs)

    ensemble = torch.vmap(forward, (0, 0))  # member i runs on batch i
    optimizer = torch.optim.Adam(list(params.values(True, True)), lr=5e-2)

    def losses() -> torch.Tensor:
        prediction = ensemble(params, batches["x"])
        return (prediction - batches["y"]).pow(2).mean(dim=(-2, -1))  # one loss per member

    first = losses().detach()
    for _ in range(STEPS):
        optimizer.zero_grad()
        losses().sum().backward()  # members are independent: a sum trains each one
        optimizer.step()
    last = losses().detach()
    print("loss per member, before:", [round(v, 4) for v in first.tolist()])
    print("loss per member, after: ", [round(v, 4) for v in last.tolist()])
    if not bool((last < first).all()):
        raise SystemExit("training did not reduce every member's loss")

    # The ensemble's mean and spread on held-out points (the same inputs for everyone).
    with torch.no_grad():
        grid = torch.tensor([[-0.9], [0.0], [0.9]])
        predictions = torch.vmap(forward, (0, None))(params, grid).squeeze(-1)
    for point, mean, std in zip(
        grid.squeeze(-1).tolist(),
        predictions.mean(0).tolist(),
        predictions.std(0).tolist(),
        strict=True,
    ):
        target = float(torch.sin(torch.tensor(3 * point)))
        print(f"x={point:+.1f}: ensemble {mean:+.3f} +- {std:.3f} (target {target:+.3f})")


if __name__ == "__main__":
    main()
