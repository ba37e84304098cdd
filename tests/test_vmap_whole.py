"""vmap takes a TensorDict argument whole (``tensordict/_vmap_whole.py``): what the
function sees and what comes out match the pytree route, leaf by leaf, and whatever the
whole route does not take still goes through pytree."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import TensorDict, lazy_stack, tensorclass
from tensordict._vmap_whole import prepare


def _td(locked: bool = False, names: bool = False) -> TensorDict:
    td = TensorDict({"a": torch.randn(3, 4, 2), "n": {"b": torch.randn(3, 4)}, "s": "text"}, [3, 4])
    if names:
        td.names = ["x", "y"]
    return td.lock_() if locked else td


def _seen(inner: Any) -> tuple[Any, ...]:
    """What the mapped function sees of its TensorDict argument."""
    return (
        inner.batch_size,
        inner.names if inner._names is not None else None,
        inner.is_locked,
        inner["n"].is_locked,
        inner["s"],
        sorted(inner.keys(True, True), key=str),
    )


@pytest.mark.parametrize("locked", [False, True])
@pytest.mark.parametrize("names", [False, True])
@pytest.mark.parametrize("in_dim", [0, 1, -1])
def test_whole_route_matches_the_pytree_route(locked: bool, names: bool, in_dim: int) -> None:
    td = _td(locked, names)
    whole: list[Any] = []
    opened: list[Any] = []

    def f(t: TensorDict, seen: list[Any]) -> TensorDict:
        seen.append(_seen(t))
        return t.apply(lambda x: x * 2)

    batch_dim = in_dim % 2  # a negative in_dim counts from the last batch dim, as upstream
    out = torch.vmap(lambda t: f(t, whole), in_dims=(in_dim,))(td)
    # a one-element tuple around it: vmap opens the tuple, then the TensorDict (pytree)
    ref = torch.vmap(lambda p: f(p[0], opened), in_dims=((batch_dim,),))((td,))
    assert whole == opened
    assert whole[0][0] == torch.Size([(3, 4)[1 - batch_dim]])
    assert (out == ref).all()
    for key in (("a",), ("n", "b")):  # against vmap of the plain leaf
        plain = torch.vmap(lambda x: x * 2, in_dims=batch_dim)(td[key])
        torch.testing.assert_close(out[key], plain)


def test_two_tensordicts_and_a_tensor_mapped_together() -> None:
    a, b = _td(), _td()
    x = torch.randn(4)

    def f(s: TensorDict, t: TensorDict, y: torch.Tensor) -> torch.Tensor:
        return s["a"].sum(-1) + t["n", "b"] + y

    out = torch.vmap(f, in_dims=(0, 0, None))(a, b, x)
    torch.testing.assert_close(out, a["a"].sum(-1) + b["n", "b"] + x)


def test_a_tensordict_with_no_mapped_dim_is_taken_as_it_is() -> None:
    td, x = _td(), torch.randn(5)
    out = torch.vmap(lambda t, y: t["n", "b"].sum() * y, in_dims=(None, 0))(td, x)
    torch.testing.assert_close(out, td["n", "b"].sum() * x)


def test_mapped_sizes_that_differ_are_refused() -> None:
    other = TensorDict({"a": torch.randn(5, 2)}, [5])
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        torch.vmap(lambda s, t: s["a"].sum() + t["a"].sum())(_td(), other)


def test_an_in_dim_outside_the_batch_dims_still_maps_the_leaves() -> None:
    td = TensorDict({"a": torch.randn(3, 4)}, [3])
    assert prepare(td, 1)[:2] == (None, 1)  # the pytree route: dim 1 of every leaf
    out = torch.vmap(lambda t: t["a"] * 2, in_dims=(1,))(td)
    torch.testing.assert_close(out, td["a"].T * 2)


@tensorclass
class _VmapPoint:
    x: torch.Tensor


def test_a_tensorclass_is_taken_whole_at_the_top_and_nested() -> None:
    point = _VmapPoint(x=torch.randn(3, 2), batch_size=[3])
    out = torch.vmap(lambda q: q.x * 2)(point)  # pytree alone would refuse it (not a node)
    torch.testing.assert_close(out, point.x * 2)
    td = TensorDict({"p": point}, [3])
    kinds: list[type] = []

    def f(t: TensorDict) -> torch.Tensor:
        kinds.append(type(t["p"]))
        return t["p"].x.sum()

    torch.testing.assert_close(torch.vmap(f)(td), point.x.sum(-1))
    assert kinds == [_VmapPoint]


def test_a_tensordict_holding_a_ragged_lazy_stack_goes_through_pytree() -> None:
    ragged = lazy_stack([TensorDict({"x": torch.ones(2)}), TensorDict({"y": torch.ones(2)})])
    held = TensorDict({"l": ragged}, [2])
    assert prepare(held, 0)[:2] == (None, 0)
    assert prepare(held, -1)[:2] == (None, 0)  # counted from the last batch dim on this route too


def test_chunked_vmap_takes_the_whole_tensordict_in_chunks() -> None:
    td = _td()
    out = torch.vmap(lambda t: t["a"].sum(-1), chunk_size=2)(td)
    torch.testing.assert_close(out, td["a"].sum(-1))


def test_nested_vmap_over_both_batch_dims() -> None:
    td = _td()
    out = torch.vmap(torch.vmap(lambda t: t["a"].sum() + t["n", "b"]))(td)
    torch.testing.assert_close(out, td["a"].sum(-1) + td["n", "b"])


def test_a_locked_level_under_an_unlocked_one_stays_locked_in_and_out() -> None:
    td = _td()
    td["n"].lock_()
    states: list[tuple[bool, bool]] = []

    def f(t: TensorDict) -> TensorDict:
        states.append((t.is_locked, t["n"].is_locked))
        return t

    out = torch.vmap(f)(td)
    assert states == [(False, True)]
    assert not out.is_locked and out["n"].is_locked


def test_writes_to_an_unmapped_tensordict_stay_inside_vmap() -> None:
    td, x = _td(), torch.randn(5)

    def f(t: TensorDict, y: torch.Tensor) -> torch.Tensor:
        t["y"] = y.expand(3, 4)  # a batched tensor: must not reach the caller's TensorDict
        return t["n", "b"].sum() * y

    torch.vmap(f, in_dims=(None, 0))(td, x)
    assert "y" not in td.keys()


def test_the_rebuilt_lock_still_protects_its_nested_levels() -> None:
    def f(t: TensorDict) -> torch.Tensor:
        with pytest.raises(RuntimeError, match="nested in a locked"):
            t["n"].unlock_()
        return t["a"].sum()

    torch.vmap(f)(_td(locked=True))


@pytest.mark.parametrize("out_dim", [0, 1])
@pytest.mark.parametrize("locked", [False, True])
def test_output_taken_whole_matches_the_pytree_route(out_dim: int, locked: bool) -> None:
    td = _td(locked, names=True)

    def f(t: TensorDict) -> TensorDict:
        out = t.apply(lambda x: x + 1)
        return out.lock_() if locked else out

    out = torch.vmap(f, out_dims=out_dim)(td)
    # a one-element tuple around the output: vmap opens the tuple, then the TensorDict
    (ref,) = torch.vmap(lambda t: (f(t),), out_dims=(out_dim,))(td)
    assert out.batch_size == ref.batch_size
    names: list[str | None] = ["y"]  # (vmap maps over the dim named "x")
    names.insert(out_dim, None)
    assert out.names == names and out.is_locked == ref.is_locked == locked
    assert out["s"] == "text" and (out == ref).all()
    for key in (("a",), ("n", "b")):  # against vmap of the plain leaf
        plain = torch.vmap(lambda x: x + 1, out_dims=out_dim)(td[key])
        torch.testing.assert_close(out[key], plain)


def test_an_unbatched_leaf_of_the_output_is_expanded_along_the_mapped_dim() -> None:
    fixed = torch.arange(2.0)
    out = torch.vmap(lambda t: TensorDict({"y": t["a"].sum(-1), "c": fixed}))(_td())
    assert out.batch_size == (3,)
    torch.testing.assert_close(out["c"], fixed.expand(3, 2))


def test_an_output_without_tensors_goes_through_pytree() -> None:
    from tensordict._vmap_whole import unbatch

    assert unbatch(TensorDict({"s": "text"}), 0, 1, 3) is None
    assert unbatch(TensorDict({"a": torch.zeros(2)}, [2]), 2, 1, 3) is None


def test_tensordict_params_are_taken_whole_as_the_tensordict_of_their_leaves() -> None:
    from torch import nn

    from tensordict.nn import TensorDictParams

    params = TensorDictParams(TensorDict.from_module(nn.Linear(3, 2)).expand(4).clone())
    standing, dim, _ = prepare(params, -1)
    assert standing is not None and standing.shape == (4,) and dim == 0
    kinds: list[type] = []

    def f(p: Any) -> torch.Tensor:
        kinds.append(type(p))
        return p["weight"].sum() + p["bias"].sum()

    out = torch.vmap(f)(params)
    assert kinds == [TensorDict]
    torch.testing.assert_close(out, params["weight"].sum((1, 2)) + params["bias"].sum(1))
