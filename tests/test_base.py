"""TensorDictBase: one set of operations over every kind of collection, checked by oracles."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorClass, TensorDict, TensorDictBase, lazy_stack
from tests.catalogue import RAGGED
from tests.test_index import _positions, _td, check_against_oracle
from tests.test_shape_ops import MULTI, SINGLE

BS = (4, 3)


class Pos(TensorClass):
    """The positional example as a tensorclass."""

    a: torch.Tensor
    nested: TensorDict
    inner: TensorDict
    text: str


def _as_tensorclass(td: TensorDict) -> Pos:
    return Pos(td["a"], td["nested"], td["inner"], td["text"], batch_size=td.batch_size)


def _memmapped(td: TensorDict) -> TensorDict:
    return td.memmap(tempfile.mkdtemp() + "/td")


# Each kind of collection holding the positional example of shape BS.
KINDS: dict[str, Callable[[TensorDict], Any]] = {
    "dense": lambda td: td,
    "lazy_dim0": lambda td: lazy_stack(list(td.unbind(0)), 0),
    "lazy_dim1": lambda td: lazy_stack(list(td.unbind(1)), 1),
    "tensorclass": _as_tensorclass,
    "memmap": _memmapped,
}


def test_every_collection_is_a_tensordictbase() -> None:
    td = _td(BS)
    for kind, make in KINDS.items():
        assert isinstance(make(td), TensorDictBase), kind


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("name", "op"), SINGLE, ids=[s[0] for s in SINGLE])
def test_shape_oracle_on_every_kind(kind: str, name: str, op: Callable[[Any], Any]) -> None:
    td = _td(BS)
    check_against_oracle(td, op(KINDS[kind](td)), op(_positions(BS)))


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("name", "op"), MULTI, ids=[m[0] for m in MULTI])
def test_multi_shape_oracle_on_every_kind(kind: str, name: str, op: Callable[[Any], Any]) -> None:
    td = _td(BS)
    outs, poss = op(KINDS[kind](td)), op(_positions(BS))
    assert len(outs) == len(poss)
    for out, pos in zip(outs, poss, strict=True):
        check_against_oracle(td, out, pos)


POINTWISE: list[tuple[str, Callable[[Any], Any], Callable[[torch.Tensor], torch.Tensor]]] = [
    ("neg", lambda t: -t, lambda x: -x),
    ("abs", lambda t: t.abs(), torch.abs),
    ("exp", lambda t: t.exp(), torch.exp),
    ("add", lambda t: t + 2, lambda x: x + 2),
    ("rsub", lambda t: 1 - t, lambda x: 1 - x),
    ("mul_self", lambda t: t * t, lambda x: x * x),
    ("clamp", lambda t: t.clamp(1.0, 5.0), lambda x: x.clamp(1.0, 5.0)),
    ("to_double", lambda t: t.to(torch.float64), lambda x: x.to(torch.float64)),
    ("clone", lambda t: t.clone(), lambda x: x.clone()),
    ("apply", lambda t: t.apply(lambda x: x * 3), lambda x: x * 3),
]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize(("name", "td_op", "t_op"), POINTWISE, ids=[p[0] for p in POINTWISE])
def test_pointwise_oracle_on_every_kind(
    kind: str,
    name: str,
    td_op: Callable[[Any], Any],
    t_op: Callable[[torch.Tensor], torch.Tensor],
) -> None:
    dense = _td(BS).apply(lambda x: x.float())
    coll = KINDS[kind](dense)
    out = td_op(coll)
    assert type(out) is type(coll) or (kind == "memmap" and type(out) is TensorDict)
    assert out.batch_size == dense.batch_size
    for key in dense.keys(True, True):
        if isinstance(dense.get(key), torch.Tensor):
            torch.testing.assert_close(out.get(key), t_op(dense.get(key)))


def test_binary_ops_pair_dense_and_lazy_either_way() -> None:
    dense = _td(BS).apply(lambda x: x.float())
    lazy = lazy_stack(list(dense.unbind(1)), 1)
    for out in (lazy + dense, dense + lazy, lazy + lazy):
        torch.testing.assert_close(out.get(("nested", "b")), 2 * dense.get(("nested", "b")))
    assert (lazy == dense).all()


def _ragged() -> LazyStackedTensorDict:
    return lazy_stack(
        [
            TensorDict({"x": torch.zeros(3, 2), "only": torch.ones(3)}, [3]),
            TensorDict({"x": torch.ones(3, 4)}, [3]),
        ]
    )


def test_ragged_stack_keeps_member_ops_and_refuses_dense_ones() -> None:
    s = _ragged()
    assert s.unsqueeze(0).batch_size == (1, 2, 3)
    assert s.permute(1, 0).batch_size == (3, 2)
    assert s.select("x").partial_keys() == []
    assert (s + 1)[1]["x"].sum() == 24
    s.masked_fill_(torch.tensor([[True, False, False], [False, False, False]]), 7.0)
    assert s[0]["x"][0].tolist() == [7.0, 7.0] and s[0]["x"][1].tolist() == [0.0, 0.0]
    for name, op in [
        ("reshape", lambda t: t.reshape(-1)),
        ("view", lambda t: t.view(6)),
        ("flatten", lambda t: t.flatten()),
        ("state_dict", lambda t: t.state_dict()),
    ]:
        with pytest.raises(
            RuntimeError,
            match=rf"LazyStackedTensorDict\.{name}: .* keys in some members only \['only'\], "
            r"leaf shapes that differ \{'x': \[\(3, 2\), \(3, 4\)\]\}",
        ):
            op(s)
    dense = s.densify()  # upstream's answer: nested tensors, no rows where a key is missing
    assert dense["x"].is_nested and dense["x"].unbind(0)[1].shape == (3, 4)
    only = dense["only"].unbind(0)
    assert only[0].tolist() == [7.0, 1.0, 1.0] and only[1].shape == (0,)  # (the fill above)


# (name, the op on the ragged stack, the same op on one member): the stack's result,
# unbound along its stack dim, equals the op applied to each member.
MEMBERWISE: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("index_dim0", lambda t: t[1], lambda m: m[1]),
    ("unsqueeze_front", lambda t: t.unsqueeze(0), lambda m: m.unsqueeze(0)),
    ("select", lambda t: t.select("x"), lambda m: m.select("x")),
    ("exclude", lambda t: t.exclude("x"), lambda m: m.exclude("x")),
    ("rename_key", lambda t: t.rename_key_("y", "z"), lambda m: m.rename_key_("y", "z")),
    ("apply", lambda t: t.apply(lambda x: x * 2), lambda m: m.apply(lambda x: x * 2)),
    ("add", lambda t: t + 1, lambda m: m + 1),
    ("to_double", lambda t: t.to(torch.float64), lambda m: m.to(torch.float64)),
    ("clone", lambda t: t.clone(), lambda m: m.clone()),
    ("flatten_keys", lambda t: t.flatten_keys(), lambda m: m.flatten_keys()),
    ("exp", lambda t: t.exp(), lambda m: m.exp()),
]


@pytest.mark.parametrize("name", sorted(RAGGED))
@pytest.mark.parametrize(("op_name", "op", "member_op"), MEMBERWISE, ids=[m[0] for m in MEMBERWISE])
def test_ragged_catalogue_member_ops_match_members(
    name: str, op_name: str, op: Callable[[Any], Any], member_op: Callable[[Any], Any]
) -> None:
    stack = RAGGED[name]()
    expected = [member_op(m.clone()) for m in stack.unbind(stack.stack_dim)]
    out = op(stack.clone())
    assert isinstance(out, LazyStackedTensorDict), op_name
    got = out.unbind(out.stack_dim)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.batch_size == e.batch_size and set(g.keys(True)) == set(e.keys(True))
        for key in e.keys(True, True):
            torch.testing.assert_close(g.get(key), e.get(key), rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(RAGGED))
@pytest.mark.parametrize(
    ("op_name", "op"),
    [
        ("reshape", lambda t: t.reshape(-1)),
        ("view", lambda t: t.view(-1)),
        ("densify", lambda t: t.densify()),
        ("state_dict", lambda t: t.state_dict()),
        ("get", lambda t: t.get("x")),
    ],
)
def test_ragged_catalogue_dense_ops_name_the_key(
    name: str, op_name: str, op: Callable[[Any], Any]
) -> None:
    with pytest.raises(RuntimeError, match=rf"LazyStackedTensorDict\.{op_name}: .*'x'"):
        op(RAGGED[name]())


def test_inherited_operations_that_lazy_stacks_lacked() -> None:
    """Methods that raised AttributeError on a lazy stack before the shared base."""
    dense = _td(BS).apply(lambda x: x.float())
    lazy = lazy_stack(list(dense.unbind(0)), 0)
    mask = torch.zeros(BS, dtype=torch.bool)
    mask[1, 2] = True
    torch.testing.assert_close(
        lazy.masked_fill(mask, 5.0).get("a"), dense.masked_fill(mask, 5.0).get("a")
    )
    assert lazy.expand_as(torch.zeros(2, *BS)).batch_size == (2, *BS)
    assert lazy.broadcast_to((2, *BS)).batch_size == (2, *BS)
    lazy.del_(("nested", "b"))
    assert ("nested", "b") not in lazy.keys(True)
    renamed = lazy.rename_key_("a", "z")
    assert renamed is lazy and "z" in lazy.keys()
    assert lazy.flatten_keys(inplace=True) is lazy and "inner.c" in lazy.keys()


def test_errors_name_the_real_class() -> None:
    td = _td(BS)
    with pytest.raises(RuntimeError, match=r"^Pos\.reshape: "):
        _as_tensorclass(td).reshape(5)
    with pytest.raises(RuntimeError, match=r"^TensorDict\.reshape: "):
        td.reshape(5)
    with pytest.raises(RuntimeError, match=r"^LazyStackedTensorDict\.reshape: "):
        lazy_stack(list(td.unbind(0))).reshape(5)
    with pytest.raises(KeyError, match=r"Pos\.select: keys not found"):
        _as_tensorclass(td).select("nope")
    with pytest.raises(KeyError, match=r"LazyStackedTensorDict\.pop: "):
        lazy_stack(list(td.unbind(0))).pop("nope")


def test_a_subclass_missing_a_primitive_fails_when_defined() -> None:
    with pytest.raises(
        TypeError, match=r"Half: a TensorDictBase subclass must implement .*'_rebuild'"
    ):

        class Half(TensorDictBase):
            pass

    class Declared(TensorDictBase):  # declared abstract: allowed
        _abstract = True

    assert issubclass(Declared, TensorDictBase)


# Names one surface has and the others may lack, each with its reason.
ALLOWED: dict[str, str] = {
    "append": "stack membership: only a stack has members to add",
    "extend": "stack membership",
    "insert": "stack membership",
    "partial_keys": "keys present in some members only: only a stack has members",
    "hook_in": "upstream's vmap hook on a lazy stack's tensors: only a stack has one (None)",
    "hook_out": "upstream's vmap hook on a lazy stack's tensors: only a stack has one (None)",
    "valid_keys": "upstream's name for the keys every member has: only a stack has members",
    "stack_dim": "the stack's own dim",
    "tensordicts": "the stack's members",
    "get_nestedtensor": "a stack's ragged entry as a nested tensor: only a stack has members",
    "fields": "a tensorclass's dataclass fields (dataclasses.fields); collections have keys",
    "from_tensordict": "wraps a TensorDict's entries in a tensorclass: a tensorclass constructor",
}


def _public(obj: Any) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


def test_parity_of_the_three_surfaces() -> None:
    td = _td(BS)
    surfaces = {
        "TensorDict": _public(td),
        "LazyStackedTensorDict": _public(lazy_stack(list(td.unbind(0)))),
        "tensorclass": _public(_as_tensorclass(td)) - set(Pos._fields),
    }
    every = set.union(*surfaces.values())
    for name, names in surfaces.items():
        missing = sorted(every - names - set(ALLOWED))
        assert missing == [], f"{name} lacks {missing}"
    assert set(ALLOWED) <= every  # no stale entries in the allow-list
