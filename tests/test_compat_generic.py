"""Upstream-compatible semantics of generic TensorDict methods (issue 13, tier-A generic/misc)."""

from __future__ import annotations

import pytest
import torch
from torch.func import hessian, jacfwd, jacrev

from tensordict import TensorDict


def _nested() -> TensorDict:
    return TensorDict(
        a=torch.randn(3, 4, 5, 6),
        b=TensorDict(c=torch.randn(3, 4, 5, 6, 7), d=torch.randn(3, 4, 5), batch_size=(3, 4, 5)),
        f=torch.randn(3, 4),
        batch_size=(3, 4),
    )


@pytest.mark.parametrize("op", ["sum", "mean", "nansum", "nanmean", "amax"])
def test_feature_reduction_keeps_nested_batch(op: str) -> None:
    td = _nested()
    out = getattr(td, op)(dim="feature")
    assert out.batch_size == (3, 4) and out["b"].batch_size == (3, 4, 5)
    fn = getattr(torch, op)
    torch.testing.assert_close(out["a"], fn(td["a"].flatten(2), dim=-1))
    torch.testing.assert_close(out["b", "c"], fn(td["b", "c"].flatten(3), dim=-1))
    torch.testing.assert_close(out["b", "d"], fn(td["b", "d"].unsqueeze(-1), dim=-1))
    torch.testing.assert_close(out["f"], fn(td["f"].unsqueeze(-1), dim=-1))


def test_feature_quantile_keeps_nested_batch() -> None:
    td = _nested()
    out = td.quantile(0.5, dim="feature")
    assert out["b"].batch_size == (3, 4, 5)
    torch.testing.assert_close(out["b", "c"], td["b", "c"].flatten(3).quantile(0.5, -1))


@pytest.mark.parametrize("op", ["sum", "mean", "std", "amin"])
def test_reduce_true_over_a_batch_dim_keeps_features(op: str) -> None:
    a, c = torch.randn(3, 4, 5), torch.randn(3, 4, 5)
    td = TensorDict(a=a, b=TensorDict(c=c, batch_size=(3, 4, 5)), batch_size=(3, 4))
    out = getattr(td, op)(dim=1, reduce=True)
    want = getattr(torch, op)(torch.cat([a, c], 1), dim=1)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(
        td.quantile(0.5, dim=1, reduce=True), torch.cat([a, c], 1).quantile(0.5, 1)
    )


def test_reduce_true_over_a_batch_dim_needs_matching_features() -> None:
    td = TensorDict(a=torch.zeros(3, 4, 5), b=torch.zeros(3, 4, 2), batch_size=(3, 4))
    with pytest.raises(ValueError, match=r"TensorDict\.sum: reduce=True over batch dims joins"):
        td.sum(dim=1, reduce=True)


def _f(td: TensorDict) -> TensorDict:
    return TensorDict(x=td["a"] ** 2, y=td["b"] ** 3, batch_size=td.batch_size)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch's jacfwd uses jit.script
@pytest.mark.parametrize("transform", [jacrev, jacfwd])
@pytest.mark.parametrize("bs", [(2,), (2, 3)])
def test_jacobian_keeps_the_batch_size(transform: object, bs: tuple[int, ...]) -> None:
    td = TensorDict(a=torch.randn(*bs, 2), b=torch.randn(*bs, 2), batch_size=bs)
    jac = transform(_f)(td)  # type: ignore[operator]
    assert jac.batch_size == bs and jac["x"].batch_size == bs
    shape = td["a"].shape
    for key, factor in (("a", 2 * td["a"]), ("b", 3 * td["b"] ** 2)):
        out = "x" if key == "a" else "y"
        assert jac[out, key].shape == (*shape, *shape)
        torch.testing.assert_close(
            jac[out, key].reshape(shape.numel(), -1), torch.diag(factor.flatten())
        )
        other = "b" if key == "a" else "a"
        assert not jac[out, other].any()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_hessian_keeps_the_batch_size() -> None:
    td = TensorDict(a=torch.randn(2, 3), b=torch.randn(2, 3), batch_size=(2,))
    hess = hessian(_f)(td)
    assert hess.batch_size == (2,)
    assert hess["x", "a", "a"].shape == (2, 3, 2, 3, 2, 3)
    want = torch.zeros(6, 6, 6)  # d2 x_i / da_j da_k is 2 where i == j == k
    idx = torch.arange(6)
    want[idx, idx, idx] = 2.0
    torch.testing.assert_close(hess["x", "a", "a"].reshape(6, 6, 6), want)


def test_vmap_output_still_gains_the_mapped_dim() -> None:
    td = TensorDict(a=torch.randn(3, 3, 2), batch_size=(3, 3))
    out = torch.vmap(lambda t: t * 2)(td)
    assert out.batch_size == (3, 3)
    inner = torch.vmap(lambda t: TensorDict(a=t["a"], batch_size=t.batch_size), (0,))(
        TensorDict(a=torch.randn(3, 3), batch_size=(3, 3))
    )
    assert inner.batch_size == (3, 3)
