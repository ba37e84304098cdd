"""torch.vmap, torch.func and torch.compile with TensorDicts (through pytree registration)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tensordict import TensorDict, lazy_stack


def _td() -> TensorDict:
    return TensorDict({"a": torch.randn(5, 3), "n": {"b": torch.randn(5)}, "s": "x"}, [5])


def test_vmap_removes_and_restores_the_batch_dim() -> None:
    td = _td()
    seen = []

    def f(t: TensorDict) -> TensorDict:
        seen.append(t.batch_size)
        return t.apply(lambda x: x * 2)

    out = torch.vmap(f)(td)
    assert seen == [torch.Size([])]
    assert out.batch_size == (5,) and out["s"] == "x"
    torch.testing.assert_close(out["a"], td["a"] * 2)
    torch.testing.assert_close(out["n", "b"], td["n", "b"] * 2)


def test_vmap_in_dims_and_out_dims() -> None:
    td = TensorDict({"a": torch.randn(4, 3, 2)}, [4, 3])
    out = torch.vmap(lambda t: t + 1, in_dims=1, out_dims=1)(td)
    assert out.batch_size == (4, 3)
    torch.testing.assert_close(out["a"], td["a"] + 1)
    moved = torch.vmap(lambda t: t, in_dims=0, out_dims=1)(td)
    assert moved.batch_size == (3, 4)
    x = torch.randn(7)
    mixed = torch.vmap(lambda x, t: t["a"].sum() * x, (None, 0))(x, td)
    assert mixed.shape == (4, 7)


def test_vmap_returning_tensors_and_nested_vmap() -> None:
    td = TensorDict({"a": torch.randn(4, 3, 2)}, [4, 3])
    out = torch.vmap(torch.vmap(lambda t: t["a"].sum()))(td)
    torch.testing.assert_close(out, td["a"].sum(-1))


def test_grad_with_respect_to_a_tensordict() -> None:
    td = _td().exclude("s")
    g = torch.func.grad(lambda t: (t["a"] ** 2).sum() + t["n", "b"].sum())(td)
    assert isinstance(g, TensorDict) and g.batch_size == (5,)
    torch.testing.assert_close(g["a"], 2 * td["a"])
    torch.testing.assert_close(g["n", "b"], torch.ones(5))
    jac = torch.func.jacrev(lambda t: t["n", "b"] * 3)(td)
    assert jac["n", "b"].shape == (5, 5)


def test_functional_call_with_stacked_params_under_vmap() -> None:
    model = nn.Linear(3, 4)
    params = TensorDict(dict(model.named_parameters()), []).detach()
    stacked = torch.stack([params, params.apply(lambda p: p * 0)])
    x = torch.randn(2, 3)

    def call(p: TensorDict, x: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(model, p.flatten_keys(".").to_dict(), (x,))

    y = torch.vmap(call, (0, None))(stacked, x)
    assert y.shape == (2, 2, 4)
    torch.testing.assert_close(y[0], model(x))
    torch.testing.assert_close(y[1], torch.zeros(2, 4))


def test_lazy_stacks_open_as_their_dense_form() -> None:
    same = lazy_stack([TensorDict({"a": torch.randn(3, 4)}, [3]) for _ in range(2)], 1)
    out = torch.vmap(lambda t: t["a"].sum())(same)
    torch.testing.assert_close(out, same.densify()["a"].sum((1, 2)))
    mixed = lazy_stack(
        [TensorDict({"x": torch.ones(2)}, [2]), TensorDict({"y": torch.zeros(2)}, [2])]
    )
    with pytest.raises(
        RuntimeError,
        match="pytree .* of a LazyStackedTensorDict: .* differ in structure: keys in some members only",
    ):
        torch.vmap(lambda t: t)(mixed)


def test_compile_fullgraph_matches_eager() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        td = TensorDict({"x": x, "n": {"y": y}}, batch_size=[4])
        td["z"] = td["x"] * 2 + td["n", "y"].unsqueeze(-1)
        sub = td[1:3]
        out = (sub + 1).apply(lambda t: t.sin())
        out["n", "w"] = out["n", "y"] * 3
        return out["z"].sum() + out["n", "w"].sum()

    x, y = torch.randn(4, 3), torch.randn(4)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, y), f(x, y))
