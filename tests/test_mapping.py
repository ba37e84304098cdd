"""Collections as virtual MutableMappings (as upstream), and the paths that must still tell
a plain dict from a collection: each pins what a collection did before it became a Mapping."""

from __future__ import annotations

import pickle
from collections import OrderedDict
from collections.abc import Mapping, MutableMapping
from typing import Any

import pytest
import torch
from torch import nn

import tensordict.nn
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    PersistentTensorDict,
    TensorClass,
    TensorDict,
    TensorDictBase,
    TypedTensorDict,
    lazy_stack,
    tensorclass,
)
from tests.catalogue import assert_same


class Inner(TensorClass):
    x: torch.Tensor
    inner: TensorDict


class Cast(TensorClass["autocast"]):
    inner: TensorDict


class Typed(TypedTensorDict):
    inner: TensorDict


@tensorclass
class Decorated:
    x: torch.Tensor


def _td() -> TensorDict:
    return TensorDict(
        a=torch.zeros(2), sub=TensorDict(x=torch.ones(2), batch_size=[2]), batch_size=[2]
    )


def _stack() -> LazyStackedTensorDict:
    return lazy_stack(
        [TensorDict(a=torch.zeros(()), sub=TensorDict(x=torch.ones(()))) for _ in range(2)]
    )


# ------------------------------------------------------------------ the isinstance facts
def test_collections_are_mutable_mappings() -> None:
    params = tensordict.nn.TensorDictParams(_td())
    for obj in (_td(), _stack(), params):
        assert isinstance(obj, Mapping) and isinstance(obj, MutableMapping)
    for cls in (TensorDictBase, TensorDict, LazyStackedTensorDict, PersistentTensorDict):
        assert issubclass(cls, MutableMapping)


def test_tensorclasses_are_not_mappings() -> None:
    """As upstream, where a tensorclass is no TensorDictBase."""
    tc = Inner(x=torch.zeros(2), inner=TensorDict(batch_size=[2]), batch_size=[2])
    dec = Decorated(x=torch.zeros(2), batch_size=[2])
    for obj in (tc, dec, NonTensorData("text")):
        assert not isinstance(obj, Mapping)
    assert not issubclass(TensorClass, Mapping) and not issubclass(Inner, MutableMapping)


def test_plain_mappings_stay_mappings() -> None:
    for obj in ({}, OrderedDict(), type("M", (dict,), {})()):
        assert isinstance(obj, MutableMapping)
    assert not isinstance(torch.zeros(1), Mapping)


MIXINS = ("__eq__", "__ne__", "__contains__", "__iter__", "__len__", "get", "pop", "popitem")
MIXINS += ("update", "keys", "values", "items", "setdefault", "clear")


@pytest.mark.parametrize("name", MIXINS)
def test_no_mixin_method_is_inherited(name: str) -> None:
    """A virtual registration: every Mapping method is the collection's own."""
    assert Mapping not in TensorDict.__mro__ and MutableMapping not in TensorDict.__mro__
    for cls in (TensorDict, LazyStackedTensorDict):
        assert getattr(cls, name) is not getattr(MutableMapping, name, None)


def test_eq_stays_elementwise_and_iter_stays_over_the_batch() -> None:
    td = _td()
    eq = td == td.clone()
    assert isinstance(eq, TensorDict) and eq["a"].tolist() == [True, True]
    assert [tuple(t.batch_size) for t in td] == [(), ()]
    assert len(td) == 2 and "a" in td and ("sub", "x") in td


def test_pickle_keeps_the_type() -> None:
    back = pickle.loads(pickle.dumps(_td()))
    assert type(back) is TensorDict and isinstance(back, MutableMapping)


# ------------------------------------------------------------------ torch's load_state_dict
def test_module_load_state_dict_takes_a_flattened_tensordict() -> None:
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    params = TensorDict.from_module(net)
    new = params.apply(lambda t: torch.randn_like(t) if t.is_floating_point() else t + 3)
    flat = new.flatten_keys(".")
    net.load_state_dict(flat)
    state = net.state_dict()
    assert sorted(state) == sorted(flat.keys())
    for key, value in state.items():
        torch.testing.assert_close(value, flat[key], rtol=0, atol=0)


def test_module_load_state_dict_with_parameter_free_submodules() -> None:
    """``from_module(filter_empty=False)`` keeps empty levels; ``flatten_keys`` drops them."""
    net = nn.Sequential(nn.Linear(3, 4), nn.Dropout(), nn.ReLU(), nn.Linear(4, 2))
    params = TensorDict.from_module(net, filter_empty=False)
    assert params["1"].is_empty()
    new = params.apply(torch.randn_like)
    flat = new.flatten_keys(".")
    assert sorted(flat.keys()) == sorted(net.state_dict())
    net.load_state_dict(flat)
    for key, value in net.state_dict().items():
        torch.testing.assert_close(value, flat[key], rtol=0, atol=0)


def test_module_load_state_dict_refuses_a_tensorclass() -> None:
    """Not a Mapping, as upstream: torch's own check refuses it."""
    net = nn.Linear(2, 2)
    tc = Decorated(x=torch.zeros(1), batch_size=[])
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        net.load_state_dict(tc)  # type: ignore[arg-type]


# ------------------------------------------------------------------ set: nested identity
def test_setting_a_tensordict_stores_it_itself() -> None:
    td, sub = _td(), TensorDict(y=torch.ones(2, 3), batch_size=[2])
    td["n"] = sub
    assert td["n"] is sub
    td.set("m", sub)
    assert td.get("m") is sub


def test_setting_a_dict_builds_a_tensordict() -> None:
    td = _td()
    td["n"] = {"y": torch.ones(2)}
    assert type(td["n"]) is TensorDict and td["n"].batch_size == torch.Size([2])


def test_setting_a_lazy_stack_into_a_lazy_stack_splits_it() -> None:
    ls = _stack()
    value = lazy_stack([TensorDict(q=torch.full((), float(i))) for i in range(2)])
    ls.set("n", value)
    assert type(ls.get("n")) is LazyStackedTensorDict
    assert [type(m["n"]) for m in ls.tensordicts] == [TensorDict, TensorDict]
    assert [m["n", "q"].item() for m in ls.tensordicts] == [0.0, 1.0]


def test_lazy_set_in_place_takes_a_tensordict() -> None:
    ls = _stack()
    ls.set_("sub", TensorDict(x=torch.tensor([3.0, 4.0]), batch_size=[2]))
    assert ls["sub", "x"].tolist() == [3.0, 4.0]


def test_lazy_index_write_takes_a_lazy_stack() -> None:
    ls = lazy_stack([TensorDict(a=torch.zeros(())) for _ in range(3)])
    ls[0:2] = lazy_stack([TensorDict(a=torch.full((), float(i + 1))) for i in range(2)])
    assert ls["a"].tolist() == [1.0, 2.0, 0.0]


def test_index_write_takes_a_tensordict() -> None:
    td = _td()
    td[0] = TensorDict(a=torch.tensor(5.0), sub=TensorDict(x=torch.tensor(7.0)))
    assert td["a"].tolist() == [5.0, 0.0] and td["sub", "x"].tolist() == [7.0, 1.0]


# ------------------------------------------------------------------ update
def test_update_with_a_tensordict_or_its_dict_gives_the_same_leaves() -> None:
    other = TensorDict(
        a=torch.full((2,), 2.0), sub=TensorDict(y=torch.ones(2), batch_size=[2]), batch_size=[2]
    )
    by_td, by_dict = _td().update(other), _td().update(other.to_dict())
    assert_same(by_td, by_dict)
    assert set(by_td.keys(True, True)) == {"a", ("sub", "x"), ("sub", "y")}


def test_update_with_a_dict_holding_a_lazy_stack() -> None:
    td = _td()
    td.update({"sub": _stack().get("sub")})
    assert type(td["sub"]) is TensorDict and sorted(td["sub"].keys()) == ["x"]


def test_lazy_update_a_dict_replaces_a_level_a_tensordict_merges() -> None:
    """As before: a nested TensorDict in a dict replaces the level; a TensorDict merges."""
    replaced = _stack().update({"sub": TensorDict(y=torch.ones(2), batch_size=[2])})
    assert sorted(replaced["sub"].keys()) == ["y"]
    merged = _stack().update(
        TensorDict(sub=TensorDict(y=torch.ones(2), batch_size=[2]), batch_size=[2])
    )
    assert sorted(merged["sub"].keys()) == ["x", "y"]


def test_lazy_update_in_place_takes_a_tensordict() -> None:
    ls = _stack()
    ls.update_(TensorDict(a=torch.tensor([1.0, 2.0]), batch_size=[2]))
    assert ls["a"].tolist() == [1.0, 2.0]


def test_replace_with_an_empty_tensordict_is_a_copy() -> None:
    td = _td()
    out = td.replace(TensorDict(batch_size=[2]))
    assert out is not td
    assert_same(out, td)


# ------------------------------------------------------------------ construction
def test_from_dict_keeps_a_collection_as_an_entry() -> None:
    out = TensorDict.from_dict({"a": _stack(), "b": {"c": torch.zeros(2)}}, batch_size=[2])
    assert type(out["a"]) is TensorDict and out["a", "sub", "x"].tolist() == [1.0, 1.0]
    assert set(out.keys(True, True)) == {("a", "a"), ("a", "sub", "x"), ("b", "c")}


def test_from_dict_instance_keeps_a_lazy_stack_entry() -> None:
    value = lazy_stack([TensorDict(x=torch.ones(())), TensorDict(x=torch.zeros(()))])
    out = _td().from_dict_instance({"sub": value}, batch_size=[2])
    assert type(out["sub"]) is TensorDict and out["sub", "x"].tolist() == [1.0, 0.0]


def test_from_any_and_from_list() -> None:
    out = TensorDict.from_any({"a": _stack()})
    assert type(out["a"]) is TensorDict
    td = _td()
    listed = TensorDict.from_list([td[0], td[1]])
    assert_same(listed, td)


def test_pytree_round_trip_gives_plain_containers() -> None:
    tree = {"a": {"b": torch.zeros(2)}, "c": [torch.ones(1)]}
    back = TensorDict.from_pytree(tree).to_pytree()
    assert type(back) is dict and type(back["a"]) is dict and type(back["c"]) is list
    torch.testing.assert_close(back["a"]["b"], tree["a"]["b"])  # type: ignore[index]


def test_state_dict_round_trip() -> None:
    td = _td()
    back = TensorDict().load_state_dict(td.state_dict())
    assert_same(back, td)


# ------------------------------------------------------------------ tensorclass and typed
def test_tensorclass_field_given_a_tensordict_stores_it() -> None:
    sub = TensorDict(x=torch.ones(2), batch_size=[2])
    assert Inner(x=torch.zeros(2), inner=sub, batch_size=[2]).inner is sub
    assert Cast(inner=sub, batch_size=[2]).inner is sub


def test_tensorclass_autocast_densifies_a_lazy_stack() -> None:
    ls = _stack()
    out = Cast(inner=ls, batch_size=[2]).inner
    assert type(out) is TensorDict and out is not ls
    assert_same(out, ls.to_tensordict())


def test_tensorclass_from_dict_takes_a_tensordict() -> None:
    """A TensorDict is a mapping now, as upstream: ``from_dict`` reads its fields."""
    source = TensorDict(x=torch.zeros(2), inner=TensorDict(batch_size=[2]), batch_size=[2])
    out, from_plain = Inner.from_dict(source), Inner.from_dict(source.to_dict())
    assert torch.equal(out.x, source["x"]) and out.batch_size == from_plain.batch_size
    assert out.inner.is_empty() and out.inner.batch_size == torch.Size([2])  # kept as given


def test_tensorclass_from_dict_still_refuses_a_non_mapping() -> None:
    with pytest.raises(TypeError, match=r"Inner.from_dict: expected a mapping, got list"):
        Inner.from_dict([1, 2])  # type: ignore[arg-type]


def test_typed_field_and_source() -> None:
    sub = TensorDict(x=torch.ones(2), batch_size=[2])
    assert Typed(inner=sub, batch_size=[2]).inner is sub
    assert Typed(TensorDict(inner=sub, batch_size=[2]), batch_size=[2]).inner is sub
    with pytest.raises(TypeError, match=r"Typed.__init__: source must be a mapping"):
        Typed([1], batch_size=[2])  # type: ignore[arg-type]


# ------------------------------------------------------------------ TensorDictParams
def test_params_entries_stay_params_and_stored_tensordicts_plain() -> None:
    params = tensordict.nn.TensorDictParams(_td())
    params["n"] = TensorDict(y=torch.ones(2), batch_size=[2])
    assert type(params._modules["n"]).__name__ == "TensorDictParams"
    td = TensorDict(batch_size=[2])
    td["p"] = params
    assert type(td["p"]) is TensorDict
    assert type(TensorDict.from_dict({"p": params})["p"]) is TensorDict


def test_params_update_into_a_tensordict() -> None:
    params = tensordict.nn.TensorDictParams(_td())
    target = _td().zero_()
    target.update(params)
    assert target["sub", "x"].tolist() == [1.0, 1.0]
    nested: Any = _td()
    nested.update({"n": params})
    assert type(nested["n"]) is TensorDict and sorted(nested["n"].keys()) == ["a", "sub"]
