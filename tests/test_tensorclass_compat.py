"""Tensorclass behaviours upstream code relies on: keywords, errors, state and nesting."""

from __future__ import annotations

import collections
import inspect
import pickle
from collections import UserDict
from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorClass,
    TensorDict,
    TensorDictBase,
    lazy_stack,
    tensorclass,
)


@tensorclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


@tensorclass
class Labelled:
    obs: torch.Tensor
    label: str


@tensorclass
class Words:
    a: str
    b: str


def test_device_cannot_be_assigned() -> None:
    p = Pair(a=torch.zeros(2), b=torch.zeros(2), batch_size=[2])
    with pytest.raises(RuntimeError, match=r"Pair.device: device cannot be set using"):
        p.device = torch.device("cpu")


def test_update_and_update__take_keyword_entries() -> None:
    p = Pair(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
    p.update(a=torch.ones(3))
    p.update_(b=torch.full((3,), 2.0))
    assert p.a.tolist() == [1.0] * 3 and p.b.tolist() == [2.0] * 3
    other = Pair(a=torch.full((3,), 5.0), b=torch.full((3,), 7.0), batch_size=[3])
    p.update(other, b=torch.full((3,), 9.0))  # the keywords win
    assert p.a.tolist() == [5.0] * 3 and p.b.tolist() == [9.0] * 3


def test_select_as_tensordict_drops_the_class() -> None:
    t = Labelled(obs=torch.randn(4), label="cat", batch_size=[])
    kept = t.select("obs")
    assert type(kept) is Labelled and kept.label is None
    plain = t.select("obs", as_tensordict=True)
    assert type(plain) is TensorDict and list(plain.keys()) == ["obs"]
    assert torch.equal(plain["obs"], t.obs)


def test_from_dict_infers_nested_batch_sizes() -> None:
    @tensorclass
    class Holder:
        a: TensorDictBase

    d = TensorDict({("a", "b", "c"): 1, ("a", "d"): 2}, []).expand(10).to_dict()
    h = Holder.from_dict(d, auto_batch_size=True)
    assert h.batch_size == (10,) and h.a.batch_size == (10,) and h.a["b"].batch_size == (10,)


def test_legacy_state_dict_loads() -> None:
    p = Pair(a=torch.zeros(3), b=torch.zeros(3), batch_size=[])
    legacy: collections.OrderedDict[str, Any] = collections.OrderedDict()
    legacy["_tensordict"] = {"a": torch.ones(3), "b": torch.full((3,), 2.0)}
    legacy["_non_tensordict"] = {}
    p.load_state_dict(legacy)
    assert p.a.tolist() == [1.0] * 3 and p.b.tolist() == [2.0] * 3


def test_batch_mismatch_is_a_runtime_error_too() -> None:
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        Pair(a=torch.zeros(3, 4), b=torch.zeros(3, 4), batch_size=[4])
    with pytest.raises(ValueError, match=r"shape \(3, 4\) of key 'a' does not start with"):
        Pair(a=torch.zeros(3, 4), b=torch.zeros(3, 4), batch_size=[4])


def test_non_tensor_fields_compare_and_bitwise_ops_reflect() -> None:
    x = Labelled(obs=torch.ones(3), label="cat", batch_size=[3])
    y = Labelled(obs=torch.ones(3), label="dog", batch_size=[3])
    assert torch.equal((x == x).label, torch.ones(3, dtype=torch.bool))
    assert torch.equal((x == y).label, torch.zeros(3, dtype=torch.bool))
    flags = x.obs.bool()
    t = Pair(a=flags, b=~flags, batch_size=[3])
    assert torch.equal((True ^ t).a, ~flags) and torch.equal((False | t).b, ~flags)


def test_pickle_keeps_a_nested_tensorclass() -> None:
    stacked = torch.stack([Words(a="a", b="b"), Words(a="c", b="d")])
    holder = TensorDict(tc=stacked)
    back = pickle.loads(pickle.dumps(holder))
    assert type(back["tc"]) is Words and back["tc"].a == ["a", "c"]


def test_from_tensordict_of_a_lazy_stack() -> None:
    stack = lazy_stack([TensorDict(obs=torch.ones(3)), TensorDict(obs=torch.ones(2) * 2)])
    out = Labelled.from_tensordict(stack)
    assert isinstance(out, LazyStackedTensorDict)
    assert all(type(m) is Labelled for m in out.tensordicts)
    padded = out.get("obs", as_padded_tensor=True)
    assert padded.tolist() == [[1.0, 1.0, 1.0], [2.0, 2.0, 0.0]]
    holder = TensorDict(b=out)
    assert set(holder.keys(include_nested=True)) == {"b", ("b", "obs")}


def test_tensor_only_non_tensor_annotation_keeps_a_mapping() -> None:
    class Meta(TensorClass["tensor_only"]):
        data: NonTensorData

    value = UserDict({"k": "v"})
    m = Meta(data=value)
    assert isinstance(m.data, NonTensorData) and m.data.data is value  # the wrapper: asked for


class Outer:
    @tensorclass
    class Inner:
        a: str
        b: torch.Tensor


def test_a_class_nested_in_a_class_pickles() -> None:
    assert Outer.Inner.__qualname__ == "Outer.Inner"
    td = TensorDict(a=TensorDict(b=Outer.Inner(a="s", b=torch.arange(3.0))))
    back = pickle.loads(pickle.dumps(td))
    assert type(back["a", "b"]) is Outer.Inner and torch.equal(back["a", "b"].b, torch.arange(3.0))


def test_replace_keeps_the_original_whole() -> None:
    @tensorclass
    class Node:
        x: torch.Tensor
        z: str
        y: Any = None

    inner = Node(x=torch.ones(2), z="in", batch_size=[2])
    data = Node(x=torch.ones(2), y=inner, z="out", batch_size=[2])
    other = data.clone().zero_()
    other.z = "new"
    other.y.z = "new"
    out = data.replace(other)
    assert type(out) is Node and out.z == "new" and out.y.z == "new"
    assert data.z == "out" and data.y.z == "in" and data.y.x.tolist() == [1.0, 1.0]
    td = TensorDict({"a": {"b": torch.zeros(1)}}, [])
    merged = td.replace({"a": {"c": torch.ones(1)}})
    assert ("a", "c") in merged.keys(include_nested=True)
    assert ("a", "c") not in td.keys(include_nested=True)


def test_backward_needs_gradients_of_differentiable_leaves_only() -> None:
    x = torch.randn(3, requires_grad=True)
    TensorDict(a=x * 2, b=torch.ones(4)).backward(TensorDict(a=torch.ones(3)))
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    with pytest.raises(KeyError, match="Missing gradient entry for key 'a'"):
        TensorDict(a=x * 2).backward(TensorDict(b=torch.ones(3)))
    with pytest.raises(TypeError, match="gradient must be a TensorDictBase"):
        TensorDict(a=x * 2).backward(torch.ones(3))
    with pytest.raises(RuntimeError, match="no leaf tensor requiring gradients"):
        TensorDict(a=torch.randn(3)).backward()


def test_deleted_field_is_gone_until_assigned() -> None:
    @tensorclass
    class Opt:
        a: torch.Tensor
        c: torch.Tensor | None = None

    x = Opt(a=torch.zeros(()))
    assert x.c is None  # unset: None, as the default says
    x.c = torch.ones(())
    del x.c
    assert not hasattr(x, "c")
    with pytest.raises(AttributeError, match=r"Opt.c: the field was deleted"):
        _ = x.c
    x.c = torch.full((), 2.0)
    assert x.c.item() == 2.0


class _CtorPair(TensorClass):
    foo: Any
    bar: Any


class _CtorPairChild(_CtorPair):
    pass


@pytest.mark.parametrize("cls", [_CtorPair, _CtorPairChild])
def test_td_constructors_on_a_tensorclass_give_an_instance(cls: Any, tmp_path: Any) -> None:
    rows = cls.from_list([{"foo": 1, "bar": 2}, {"foo": 3, "bar": 4}])
    assert type(rows) is cls
    assert rows.foo.tolist() == [1, 3] and rows.bar.tolist() == [2, 4]
    keys = cls.fromkeys(["foo", "bar"], 0)
    assert type(keys) is cls and keys.foo == 0
    plain = TensorDict({"foo": torch.zeros(3), "bar": torch.ones(3)}, [3])
    assert type(cls.from_any({"foo": torch.zeros(3), "bar": torch.ones(3)})) is cls
    plain.memmap(tmp_path / "plain")
    loaded = cls.load_memmap(tmp_path / "plain")  # a TensorDict's folder, read as this class
    assert type(loaded) is cls
    torch.testing.assert_close(loaded.bar, torch.ones(3))
    consolidated = plain.consolidate(tmp_path / "c.bin")
    assert type(cls.from_consolidated(tmp_path / "c.bin")) is cls
    assert consolidated.is_consolidated()


def test_td_constructors_keep_what_already_is_a_tensorclass(tmp_path: Any) -> None:
    inst = _CtorPair(foo=torch.zeros(2), bar=torch.ones(2), batch_size=[2])
    inst.memmap(tmp_path / "inst")
    assert type(_CtorPairChild.load_memmap(tmp_path / "inst")) is _CtorPair  # the saved class
    members = [inst, inst.clone()]
    stack = _CtorPair.lazy_stack(members)  # a lazy stack of instances (no lazy tensorclass)
    assert isinstance(stack, LazyStackedTensorDict)
    assert all(type(m) is _CtorPair for m in stack.tensordicts)


def test_to_dict_keeps_unset_fields_as_none_in_declaration_order() -> None:
    @tensorclass
    class Sample:
        x: torch.Tensor
        meta: str | None = None
        other: torch.Tensor | None = None

    s = Sample(x=torch.zeros(2), batch_size=[2])
    assert list(s.to_dict()) == ["x", "meta", "other"]
    assert s.to_dict()["meta"] is None and s.to_dict()["other"] is None
    assert list(s.to_dict(retain_none=False)) == ["x"]
    assert s.to_dict(convert_tensors=True) == {"x": [0.0, 0.0], "meta": None, "other": None}
    nested = TensorDict(n=s, batch_size=[2]).to_dict()
    assert list(nested["n"]) == ["x", "meta", "other"]
    back = Sample.from_dict(s.to_dict())
    assert back.meta is None and back.other is None and torch.equal(back.x, s.x)


def _dtypes(td: Any) -> dict[Any, torch.dtype]:
    return {k: v.dtype for k, v in td.items(True, True) if isinstance(v, torch.Tensor)}


def test_cast_filter_selects_the_leaves_a_cast_applies_to() -> None:
    td = TensorDict(
        a=torch.zeros(2),
        b=TensorDict(c=torch.zeros(2), d=torch.zeros(2, dtype=torch.int64), batch_size=[2]),
        batch_size=[2],
    )
    seen: list[Any] = []

    def not_c(key: tuple[str, ...], value: torch.Tensor) -> bool:
        seen.append(key)
        return key[-1] != "c"

    expect = {"a": torch.float64, ("b", "c"): torch.float32, ("b", "d"): torch.float64}
    for out in (
        td.to(torch.float64, cast_filter=not_c),
        td.to("cpu", torch.float64, cast_filter=not_c),
        td.to(dtype=torch.float64, cast_filter=not_c),
        td.double(cast_filter=not_c),
        td.float64(cast_filter=not_c),
        td.type(torch.float64, cast_filter=not_c),
        td.to(torch.zeros(1, dtype=torch.float64), cast_filter=not_c),
    ):
        assert _dtypes(out) == expect
    assert set(seen) == {("a",), ("b", "c"), ("b", "d")}  # keys as tuples of str
    lazy = LazyStackedTensorDict(td.clone(), td.clone())
    assert _dtypes(lazy.half(cast_filter=not_c)) == {
        "a": torch.float16,
        ("b", "c"): torch.float32,
        ("b", "d"): torch.float16,
    }
    assert td.to("cpu", cast_filter=not_c)["a"] is td["a"]  # a move alone casts nothing
    with pytest.raises(TypeError, match=r"TensorDict.to: cast_filter must be a callable"):
        td.to(torch.float64, cast_filter=3)


def test_tensorclass_cast_filter_is_the_default_of_its_instances() -> None:
    @tensorclass(cast_filter=lambda key, value: key != ("keep",))
    class Mixed:
        x: torch.Tensor
        keep: torch.Tensor

    class Child(Mixed):  # inherited
        y: torch.Tensor

    m = Mixed(x=torch.zeros(2), keep=torch.zeros(2), batch_size=[2])
    assert (m.double().x.dtype, m.double().keep.dtype) == (torch.float64, torch.float32)
    assert m.to(torch.float16).keep.dtype == torch.float32
    assert m.double(cast_filter=None).keep.dtype == torch.float64  # None: every leaf
    assert m.to(torch.float16, cast_filter=lambda k, v: True).keep.dtype == torch.float16
    c = Child(x=torch.zeros(2), keep=torch.zeros(2), y=torch.zeros(2), batch_size=[2])
    assert _dtypes(c.half()) == {"x": torch.float16, "keep": torch.float32, "y": torch.float16}
    outer = TensorDict(m=m, batch_size=[2]).double()  # inside another collection: all cast
    assert outer["m"].keep.dtype == torch.float64
    with pytest.raises(TypeError, match="cast_filter must be a callable"):

        @tensorclass(cast_filter=3)  # type: ignore[arg-type]
        class Bad:
            x: torch.Tensor


def test_tensorclass_kw_only() -> None:
    @tensorclass(kw_only=True)
    class K:
        x: torch.Tensor
        y: torch.Tensor

    with pytest.raises(TypeError, match=r"K.__init__: takes 1 positional arguments but 2"):
        K(torch.zeros(1))
    assert torch.equal(K(x=torch.zeros(1), y=torch.ones(1)).y, torch.ones(1))
    params = inspect.signature(K).parameters
    assert params["x"].kind is inspect.Parameter.KEYWORD_ONLY

    class Sub(K):  # not inherited: the subclass's own field is positional
        z: torch.Tensor

    s = Sub(torch.full((1,), 2.0), x=torch.zeros(1), y=torch.ones(1))
    assert s.z.item() == 2.0
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3"):
        Sub(torch.zeros(1), torch.zeros(1))


def test_post_init_runs_on_construction_not_on_rebuilds() -> None:
    calls: list[tuple[int, ...]] = []

    for skip in (False, True):  # the flag is accepted; rebuilds never run __post_init__

        @tensorclass(skip_post_init_on_rebuild=skip)
        class P:
            x: torch.Tensor

            def __post_init__(self) -> None:
                calls.append(tuple(self.batch_size))

        calls.clear()
        p = P(torch.zeros(4, 2), batch_size=[4])
        P.from_dict({"x": torch.zeros(3)}, batch_size=[3])
        assert calls == [(4,), (3,)]
        p[0], p.clone(), p.to(torch.float64), torch.stack([p, p])
        assert calls == [(4,), (3,)]


@pytest.mark.parametrize("skip", [False, True])
def test_upstream_private_from_tensordict_spelling(skip: bool) -> None:
    calls: list[tuple[int, ...]] = []

    @tensorclass(skip_post_init_on_rebuild=skip)
    class P:
        x: torch.Tensor

        def __post_init__(self) -> None:
            calls.append(tuple(self.batch_size))

    td = TensorDict({"x": torch.zeros(3)}, [3])
    p = P._from_tensordict(td)
    assert type(p) is P and p.x is td["x"] and calls == ([] if skip else [(3,)])
    P._from_tensordict(td, rebuild=False)  # outside data: __post_init__ runs (as upstream)
    assert calls == ([(3,)] if skip else [(3,), (3,)])
    with pytest.raises(ValueError, match=r"P._from_tensordict: keys \['y'\] are not fields"):
        P._from_tensordict(TensorDict({"y": torch.zeros(3)}, [3]))
