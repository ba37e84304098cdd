"""Element-wise operations checked leaf by leaf against plain torch, over the catalogue."""

from __future__ import annotations

import operator

import pytest
import torch

from tensordict import TensorDict, is_leaf_nontensor, is_non_tensor
from tests.catalogue import assert_same, leaves

# (name, op on a TensorDict, the same op on one tensor)
UNARY = [
    ("neg", operator.neg, operator.neg),
    ("abs", abs, torch.abs),
    ("exp", lambda t: t.exp(), torch.exp),
    ("log", lambda t: t.abs().log(), lambda x: x.abs().log()),
    ("sqrt", lambda t: t.abs().sqrt(), lambda x: x.abs().sqrt()),
    ("sigmoid", lambda t: t.sigmoid(), torch.sigmoid),
    ("tanh", lambda t: t.tanh(), torch.tanh),
    ("sin", lambda t: t.sin(), torch.sin),
    ("cos", lambda t: t.cos(), torch.cos),
    ("floor", lambda t: t.floor(), torch.floor),
    ("ceil", lambda t: t.ceil(), torch.ceil),
    ("round", lambda t: t.round(), torch.round),
    ("trunc", lambda t: t.trunc(), torch.trunc),
    ("frac", lambda t: t.frac(), torch.frac),
    ("sign", lambda t: t.sign(), torch.sign),
    ("expm1", lambda t: t.expm1(), torch.expm1),
    ("log1p", lambda t: t.abs().log1p(), lambda x: x.abs().log1p()),
    ("reciprocal", lambda t: t.reciprocal(), torch.reciprocal),
    ("clamp", lambda t: t.clamp(-0.5, 0.5), lambda x: x.clamp(-0.5, 0.5)),
    ("clamp_min", lambda t: t.clamp_min(0), lambda x: x.clamp_min(0)),
    ("clamp_max", lambda t: t.clamp_max(0), lambda x: x.clamp_max(0)),
]

BINARY_SCALAR = [
    ("add", lambda t: t + 2, lambda x: x + 2),
    ("radd", lambda t: 2 + t, lambda x: 2 + x),
    ("sub", lambda t: t - 1.5, lambda x: x - 1.5),
    ("rsub", lambda t: 1.5 - t, lambda x: 1.5 - x),
    ("mul", lambda t: t * 3, lambda x: x * 3),
    ("rmul", lambda t: 3 * t, lambda x: 3 * x),
    ("div", lambda t: t / 2, lambda x: x / 2),
    ("rdiv", lambda t: 2 / (t.abs() + 1), lambda x: 2 / (x.abs() + 1)),
    ("pow", lambda t: t**2, lambda x: x**2),
    ("rpow", lambda t: 2**t, lambda x: 2**x),
    ("mod", lambda t: t % 3, lambda x: x % 3),
    ("floordiv", lambda t: t // 2, lambda x: x // 2),
    ("add_alpha", lambda t: t.add(1, alpha=2), lambda x: x.add(1, alpha=2)),
    ("maximum", lambda t: t.maximum(torch.tensor(0.0)), lambda x: x.maximum(torch.tensor(0.0))),
    ("eq", lambda t: t == 0, lambda x: x == 0),
    ("ne", lambda t: t != 0, lambda x: x != 0),
    ("lt", lambda t: t < 0, lambda x: x < 0),
    ("le", lambda t: t <= 0, lambda x: x <= 0),
    ("gt", lambda t: t > 0, lambda x: x > 0),
    ("ge", lambda t: t >= 0, lambda x: x >= 0),
]


def _numeric(td: TensorDict) -> TensorDict:
    """The float leaves only (bool/int leaves do not support every op)."""
    return td.apply(lambda x: x.detach() if x.is_floating_point() else None)


@pytest.mark.parametrize(("name", "td_op", "t_op"), UNARY, ids=[u[0] for u in UNARY])
def test_unary_matches_torch(example: TensorDict, name: str, td_op, t_op) -> None:  # type: ignore[no-untyped-def]
    td = _numeric(example)
    out = td_op(td)
    assert out.batch_size == td.batch_size
    expected = leaves(td)
    got = leaves(out)
    assert set(got) == set(expected)
    for key, x in expected.items():
        torch.testing.assert_close(got[key], t_op(x), equal_nan=True)


@pytest.mark.parametrize(
    ("name", "td_op", "t_op"), BINARY_SCALAR, ids=[b[0] for b in BINARY_SCALAR]
)
def test_binary_scalar_matches_torch(example: TensorDict, name: str, td_op, t_op) -> None:  # type: ignore[no-untyped-def]
    td = example.detach()
    expected = leaves(td)
    try:
        wanted = {key: t_op(x) for key, x in expected.items()}
    except (RuntimeError, TypeError) as err:  # torch refuses a dtype: so must we
        with pytest.raises(type(err)):
            td_op(td)
        return
    got = leaves(td_op(td))
    assert set(got) == set(expected)
    for key, want in wanted.items():
        assert got[key].dtype == want.dtype, (name, key)
        torch.testing.assert_close(got[key], want, equal_nan=True)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul, operator.eq, operator.lt])
def test_binary_td_td_matches_torch(example: TensorDict, op) -> None:  # type: ignore[no-untyped-def]
    a = _numeric(example)
    b = a.apply(lambda x: torch.ones_like(x) * 2)
    out = op(a, b)
    la, lb, lo = leaves(a), leaves(b), leaves(out)
    for key in la:
        torch.testing.assert_close(lo[key], op(la[key], lb[key]))


def test_binary_td_tensor_broadcasts() -> None:
    td = TensorDict({"a": torch.ones(4, 3), "b": torch.ones(4, 2, 3)}, [4])
    out = td * torch.arange(3.0)
    assert torch.equal(out["a"], torch.ones(4, 3) * torch.arange(3.0))
    assert torch.equal(out["b"], torch.ones(4, 2, 3) * torch.arange(3.0))


def test_inplace_operators_modify_leaves() -> None:
    a = torch.zeros(3)
    td = TensorDict({"a": a, "n": {"b": torch.ones(3)}}, [3])
    td += 1
    td *= torch.tensor(2.0)
    td -= TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3)}}, [3])
    assert torch.equal(a, torch.ones(3))
    assert torch.equal(td["n", "b"], torch.full((3,), 3.0))
    td.exp_().log_()
    torch.testing.assert_close(a, torch.ones(3))


def test_method_twins_are_inplace() -> None:
    td = TensorDict({"a": torch.tensor([-1.0, 4.0])}, [2])
    leaf = td["a"]
    for name in ["abs_", "sqrt_", "neg_", "clamp_min_"]:
        args = (0,) if name == "clamp_min_" else ()
        assert getattr(td, name)(*args) is td
        assert td["a"] is leaf
    assert torch.equal(leaf, torch.tensor([0.0, 0.0]))


def test_binary_with_mismatched_keys_names_them() -> None:
    a = TensorDict({"x": torch.ones(2), "y": torch.ones(2)}, [2])
    b = TensorDict({"x": torch.ones(2), "z": torch.ones(2)}, [2])
    with pytest.raises(
        KeyError, match=r"TensorDict.add: .*missing from the other: \['y'\].*\['z'\]"
    ):
        a + b


def test_binary_with_bad_operand_type() -> None:
    td = TensorDict({"x": torch.ones(2)}, [2])
    with pytest.raises(TypeError, match="TensorDict.add: the other operand must be"):
        td + "text"  # type: ignore[operator]
    assert (td == "text") is False


def test_broadcast_that_breaks_the_batch_raises() -> None:
    td = TensorDict({"x": torch.ones(3, 4)}, [3])
    # (2, 1, 4) does not line up with the batch dims; torch's own broadcast with the leaf
    # gives (2, 3, 4), which no longer starts with the batch size
    with pytest.raises(ValueError, match=r"TensorDict.add: shape \(2, 3, 4\) of key 'x'"):
        td + torch.ones(2, 1, 4)


def test_non_tensor_entries_carried_through_ops() -> None:
    td = TensorDict({"x": torch.ones(2)}, [2])
    td["s"] = "keep"
    out = (td + 1) * 2
    assert out["s"] == "keep"
    assert torch.equal(out["x"], torch.full((2,), 4.0))


def test_gradients_flow_through_ops() -> None:
    w = torch.randn(3, requires_grad=True)
    td = TensorDict({"w": w}, [3])
    ((td * 2 + 1).exp()["w"]).sum().backward()
    torch.testing.assert_close(w.grad, 2 * (2 * w + 1).exp().detach())


def test_zero_and_fill(example: TensorDict) -> None:
    td = example.detach().clone()
    td.zero_()
    assert all((x == 0).all() for x in leaves(td).values())
    td.fill_(1)
    assert all((x == 1).all() for x in leaves(td).values())


def test_all_any(example: TensorDict) -> None:
    td = example.detach()
    expected_all = all(bool(x.bool().all()) for x in leaves(td).values())
    assert (td != 0).all() == all(bool((x != 0).all()) for x in leaves(td).values())
    assert td.bool().all() == expected_all
    expected = td.apply(lambda x: x == x)
    for key in td.keys(include_nested=True, leaves_only=True, is_leaf=is_leaf_nontensor):
        value = td.get(key)
        if is_non_tensor(value):  # non-tensor entries compare equal: all True, as upstream
            expected.set(key, torch.ones(value.batch_size, dtype=torch.bool))
    assert_same(td == td, expected)


def test_invert_and_bitwise_on_bool_leaves() -> None:
    m = torch.tensor([True, False, True])
    td = TensorDict({"m": m, "n": {"k": ~m}}, [3])
    assert torch.equal((~td)["m"], ~m)
    assert torch.equal((td & td)["n", "k"], ~m)
    assert torch.equal((td | ~td)["m"], torch.ones(3, dtype=torch.bool))
    assert torch.equal((td ^ td)["m"], torch.zeros(3, dtype=torch.bool))
