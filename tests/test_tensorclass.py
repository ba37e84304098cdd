"""tensorclass: fields, construction rules, class identity through every operation."""

from __future__ import annotations

import copy
import dataclasses
import io
import pickle
from collections.abc import Callable
from typing import Any, Optional

import numpy as np
import pytest
import torch

from tensordict import (
    NonTensorStack,
    TensorAttrs,
    TensorClass,
    TensorDict,
    is_tensorclass,
    set_capture_non_tensor_stack,
    set_printoptions,
    tensorclass,
)


@tensorclass
class MyData:
    image: torch.Tensor
    mask: torch.Tensor
    label: torch.Tensor

    def mask_image(self):  # type: ignore[no-untyped-def]
        return self.image[self.mask.expand_as(self.image)].view(*self.batch_size, -1)

    def select_label(self, label):  # type: ignore[no-untyped-def]
        return self[self.label == label]


@tensorclass
class Item:
    obs: torch.Tensor
    name: str = "anon"
    extra: Optional[TensorDict] = None  # noqa: UP045


@tensorclass
class Node:
    value: torch.Tensor
    child: Optional[Node] = None  # noqa: UP045


def _seed_data() -> Any:
    images = torch.randn(100, 3, 64, 64)
    label = torch.randint(10, (100,))
    mask = torch.zeros(1, 64, 64, dtype=torch.bool).bernoulli_().expand(100, 1, 64, 64)
    return MyData(images, mask, label=label, batch_size=[100]), images, label, mask


def test_seed_example() -> None:
    data, images, label, mask = _seed_data()
    selected = data.select_label(1)
    n = int((label == 1).sum())
    assert type(selected) is MyData and selected.batch_size == (n,)
    assert torch.equal(selected.image, images[label == 1])
    assert repr(selected) == (
        f"MyData(batch_size=[{n}], fields={{\n    image: f32[3,64,64],\n    label: i64[],\n"
        "    mask: bool[1,64,64]})"
    )
    with set_printoptions(compact=False):
        verbose = repr(selected)
    assert verbose.startswith(
        f"MyData(\n    image=Tensor(shape=torch.Size([{n}, 3, 64, 64]), device=cpu, "
        "dtype=torch.float32, is_shared=False),\n    label=Tensor(shape=torch.Size"
    )
    assert verbose.endswith(
        f"    batch_size=torch.Size([{n}]),\n    device=None,\n    is_shared=False)"
    )
    assert data.mask_image().shape == (100, int(mask[0].sum()) * 3)
    reshaped = data.reshape(10, 10)
    assert type(reshaped) is MyData and reshaped.image.shape == (10, 10, 3, 64, 64)
    assert reshaped.mask.shape == (10, 10, 1, 64, 64)


def test_prototype_alias_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="use `from tensordict import tensorclass`"):
        from tensordict.prototype import tensorclass as old
    assert old is tensorclass


def _item() -> Any:
    return Item(torch.arange(12.0).reshape(4, 3), name="cat", batch_size=[4])


OPS: list[tuple[str, Callable[[Any], Any]]] = [
    ("index_int", lambda x: x[1]),
    ("index_slice", lambda x: x[1:3]),
    ("index_mask", lambda x: x[torch.tensor([True, False, True, False])]),
    ("index_tensor", lambda x: x[torch.tensor([3, 0])]),
    ("reshape", lambda x: x.reshape(2, 2)),
    ("view", lambda x: x.view(2, 2)),
    ("unsqueeze", lambda x: x.unsqueeze(0)),
    ("permute", lambda x: x.reshape(2, 2).permute(1, 0)),
    ("flip", lambda x: x.flip(0)),
    ("expand", lambda x: x[0].expand(3)),
    ("clone", lambda x: x.clone()),
    ("to", lambda x: x.to(torch.float64)),
    ("apply", lambda x: x.apply(lambda t: t * 2)),
    ("add", lambda x: x + 1),
    ("eq", lambda x: x == x),
    ("detach", lambda x: x.detach()),
    ("stack", lambda x: torch.stack([x, x], 0)),
    ("cat", lambda x: torch.cat([x, x], 0)),
    ("zeros_like", torch.zeros_like),
    ("copy", copy.copy),
    ("deepcopy", copy.deepcopy),
    ("pickle", lambda x: pickle.loads(pickle.dumps(x))),
]


@pytest.mark.parametrize(("name", "op"), OPS, ids=[o[0] for o in OPS])
def test_class_identity_and_non_tensor_fields_through_ops(
    name: str, op: Callable[[Any], Any]
) -> None:
    out = op(_item())
    assert type(out) is Item, name
    if name == "eq":  # non-tensor fields are compared too, as upstream: a bool per element
        assert torch.equal(out.name, torch.ones(4, dtype=torch.bool))
    else:
        names = out.name if isinstance(out.name, list) else [out.name]
        flat = [v for row in names for v in (row if isinstance(row, list) else [row])]
        assert set(flat) == {"cat"}  # one value, or one per element
    assert isinstance(out.obs, torch.Tensor)


def test_unbind_split_and_torch_save() -> None:
    x = _item()
    assert all(type(p) is Item for p in x.unbind(0))
    assert all(type(p) is Item for p in x.split(2))
    buf = io.BytesIO()
    torch.save(x, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=False)
    assert type(back) is Item and back.name == "cat"


def test_non_tensor_stacking_rule() -> None:
    a = Item(torch.zeros(2, 3), name="a", batch_size=[2])
    b = Item(torch.zeros(2, 3), name="b", batch_size=[2])
    same = torch.stack([a, a.clone()])
    assert same.name == [["a", "a"], ["a", "a"]]  # one value per element, as upstream
    with set_capture_non_tensor_stack(True):
        assert torch.stack([a, a.clone()]).name == "a"  # equal values kept as one
    diff = torch.stack([a, b])
    assert isinstance(diff.get("name"), NonTensorStack)
    assert diff.name == [["a", "a"], ["b", "b"]]
    # a member taken whole is that member's one value, as upstream
    assert diff[1].name == "b" and diff[:, 0].name == ["a", "b"]


def test_fields_defaults_and_writes() -> None:
    x = Item(torch.zeros(2, 3), batch_size=[2])
    assert x.name == "anon" and x.extra is None
    x.extra = TensorDict({"e": torch.ones(2)}, [2])
    assert isinstance(x.extra, TensorDict) and x.extra.batch_size == (2,)
    x.obs = torch.ones(2, 5)
    assert x.obs.shape == (2, 5)
    x.extra = None
    assert x.extra is None and "extra" not in x.keys()
    with pytest.raises(
        ValueError,
        match=r"Item.obs: shape \(3,\) of key 'obs' does not start with batch_size \(2,\)",
    ):
        x.obs = torch.zeros(3)
    with pytest.raises(
        AttributeError, match=r"Item has no field 'nope'; fields are \['obs', 'name', 'extra'\]"
    ):
        x.nope = 1


def test_construction_errors() -> None:
    with pytest.raises(
        TypeError, match=r"Item.__init__: missing 1 required positional argument: 'obs'"
    ):
        Item(batch_size=[2])
    with pytest.raises(TypeError, match="unexpected field 'bogus'"):
        Item(torch.zeros(2), bogus=1, batch_size=[2])
    with pytest.raises(TypeError, match="takes 4 positional arguments but 5 were given"):
        Item(1, 2, 3, 4)
    with pytest.raises(TypeError, match="field 'obs' given twice"):
        Item(torch.zeros(2), obs=torch.zeros(2), batch_size=[2])
    assert Item("text", batch_size=[]).obs == "text"  # no autocast: kept as a value
    with pytest.raises(
        ValueError,
        match=r"Item.__init__|shape \(3,\) of key 'obs' does not start with batch_size \(2,\)",
    ):
        Item(torch.zeros(3), batch_size=[2])
    with pytest.raises(
        AttributeError, match=r"field name\(s\) \['batch_size'\] are TensorDict attributes"
    ):

        @tensorclass
        class Bad:
            batch_size: int


def test_nesting_and_self_reference() -> None:
    leaf = Node(torch.zeros(3), batch_size=[3])
    root = Node(torch.ones(3), child=leaf, batch_size=[3])
    assert type(root.child) is Node
    sub = root[1:]
    assert type(sub) is Node and type(sub.child) is Node and sub.child.batch_size == (2,)
    assert root.get(("child", "value")).shape == (3,)


def test_inheritance_form_post_init_and_factories() -> None:
    class Base(TensorClass):
        x: torch.Tensor

    class Derived(Base):
        y: torch.Tensor
        tags: list = dataclasses.field(default_factory=list)  # type: ignore[type-arg]

        def __post_init__(self) -> None:
            self.y = self.y * 2

    d = Derived(torch.zeros(2), torch.ones(2), batch_size=[2])
    assert d._fields == ("x", "y", "tags")
    assert torch.equal(d.y, torch.full((2,), 2.0))
    assert (
        d.tags == [] and Derived(torch.zeros(2), torch.ones(2), batch_size=[2]).tags is not d.tags
    )
    assert is_tensorclass(d) and is_tensorclass(Derived) and not is_tensorclass(TensorDict())
    assert type(d[0]) is Derived


def test_autocast_nocast_frozen() -> None:
    @tensorclass(autocast=True)
    class Auto:
        n: int
        t: torch.Tensor

    a = Auto("3", [1.0, 2.0], batch_size=[2])
    assert a.n == 3 and torch.equal(a.t, torch.tensor([1.0, 2.0]))

    @tensorclass(nocast=True)
    class Raw:
        t: torch.Tensor

    assert Raw(5, batch_size=[]).t == 5

    @tensorclass(frozen=True)
    class Frozen:
        t: torch.Tensor

    f = Frozen(torch.zeros(2), batch_size=[2])
    with pytest.raises(dataclasses.FrozenInstanceError, match="frozen"):
        f.t = torch.ones(2)
    assert f.is_locked
    with pytest.raises(TypeError, match="autocast and nocast exclude each other"):

        @tensorclass(autocast=True, nocast=True)
        class Both:
            t: torch.Tensor


def test_state_dict_and_update() -> None:
    x = _item()
    sd = x.state_dict()
    y = Item(torch.zeros(4, 3), name="cat", batch_size=[4])
    y.load_state_dict(sd)
    assert torch.equal(y.obs, x.obs)
    y.update({"obs": torch.ones(4, 3)})
    assert type(y) is Item and (y.obs == 1).all()


# ---------------------------------------------------------------- options and storage


def test_subscript_options_and_inheritance() -> None:
    class Raw(TensorClass["nocast"]):
        n: int

    class AutoFrozen(TensorClass["autocast", "frozen"]):
        n: int

    class Sub(AutoFrozen, frozen=False):
        m: float

    assert isinstance(Raw(3).n, int) and Raw._nocast and not TensorClass._nocast
    a = AutoFrozen(torch.ones(()))
    assert a.n == 1 and isinstance(a.n, int) and a.is_locked
    assert TensorClass["frozen", "autocast"] is TensorClass["autocast", "frozen"]
    s = Sub(1.0, 2)
    assert Sub._autocast and not Sub._frozen and isinstance(s.m, float) and s.m == 2.0
    with pytest.raises(TypeError, match=r"TensorClass\[...\]: unknown option 'nocst'"):
        TensorClass["nocst"]
    with pytest.raises(TypeError, match="tensor_only excludes autocast and nocast"):

        class Bad(TensorClass["tensor_only", "nocast"]):
            x: torch.Tensor


def test_default_casting_follows_values() -> None:
    @tensorclass
    class C:
        n: int
        s: str
        a: Any

    c = C(1, "x", np.zeros(2))
    assert torch.equal(c.n, torch.tensor(1)) and c.s == "x"
    assert torch.equal(c.a, torch.zeros(2, dtype=torch.float64))
    c.a = {"k": 1}  # a dict under a non-collection annotation stays a value
    assert c.a == {"k": 1}


def test_autocast_mapping_builds_annotated_class() -> None:
    @tensorclass(autocast=True)
    class Tree:
        x: torch.Tensor
        child: Tree = None  # type: ignore[assignment]  # a union would not build a Tree
        td: Optional[TensorDict] = None  # noqa: UP045

    t = Tree(torch.zeros(3), child={"x": torch.ones(3)}, td={"a": torch.ones(3)}, batch_size=[3])
    assert type(t.child) is Tree and t.child.batch_size == (3,)
    assert torch.equal(t.child.x, torch.ones(3)) and type(t.td) is TensorDict

    @tensorclass(autocast=True)
    class Loose:
        child: Optional[Loose] = None  # noqa: UP045

    assert Loose(child={"k": 1}).child == {"k": 1}  # a union keeps the dict
    with pytest.raises(TypeError, match=r"Tree.x: expects Tensor, got str 'no'"):
        t.x = "no"


def test_shadow_allows_reserved_names() -> None:
    @tensorclass(shadow=True)
    class S:
        device: Any

    assert S(device="gpu-ish").device == "gpu-ish"


def test_class_attribute_written_in_a_method_stays_out_of_the_data() -> None:
    class Pixels(TensorClass):
        x: torch.Tensor
        _cache = None

        def norm(self) -> torch.Tensor:
            if self._cache is None:
                self._cache = self.x.norm()
            return self._cache

    p = Pixels(torch.ones(4, 2), batch_size=[4])
    assert torch.equal(p.norm(), torch.ones(4, 2).norm())
    assert list(p.keys()) == ["x"] and Pixels._cache is None
    assert torch.equal(p[0].x, torch.ones(2)) and p[0]._cache is None
    p._scratch = 3  # private names are ordinary attributes too
    assert list(p.keys()) == ["x"] and p._scratch == 3
    with pytest.raises(AttributeError, match=r"Pixels has no field 'other'; fields are \['x'\]"):
        p.other = 1
    with pytest.raises(AttributeError, match="'y' is not a field of Pixels"):
        p.set("y", torch.zeros(4))


def test_signature_from_dict_and_to_tensordict() -> None:
    import inspect

    assert list(inspect.signature(Item).parameters) == [
        "obs",
        "name",
        "extra",
        "batch_size",
        "device",
        "names",
    ]
    x = Item.from_dict({"obs": torch.zeros(4, 3), "name": "n"}, auto_batch_size=True)
    assert x.batch_size == (4, 3) and x.name == "n"
    td = x.to_tensordict()
    assert type(td) is TensorDict and torch.equal(td["obs"], x.obs)
    assert td["obs"] is not x.obs  # to_tensordict copies, as upstream's does
    back = Item.from_tensordict(td)
    assert type(back) is Item and back.obs is td["obs"]
    assert [f.name for f in Item.fields()] == ["obs", "name", "extra"]
    assert dataclasses.is_dataclass(Item)
    with pytest.raises(TypeError, match="Item.from_dict: expected a mapping, got list"):
        Item.from_dict([1])
    with pytest.raises(ValueError, match="Item.from_dict: pass batch_size or auto_batch_size"):
        Item.from_dict({"obs": torch.zeros(1)}, batch_size=[1], auto_batch_size=True)


def test_custom_setattr_sees_construction() -> None:
    seen: list[str] = []

    class Watched(TensorClass):
        a: torch.Tensor

        def __setattr__(self, name: str, value: Any) -> None:
            seen.append(name)
            super().__setattr__(name, value)

    w = Watched(torch.zeros(()))
    w.a = torch.ones(())
    assert seen == ["a", "a"] and w.a == 1


def test_setitem_from_another_class() -> None:
    @tensorclass
    class A:
        x: torch.Tensor
        y: torch.Tensor

    @tensorclass
    class B:
        y: torch.Tensor
        x: torch.Tensor

    @tensorclass
    class C:
        x: torch.Tensor
        z: torch.Tensor

    a = A(torch.zeros(3), torch.zeros(3), batch_size=[3])
    a[:2] = B(torch.ones(2), torch.ones(2), batch_size=[2])
    assert torch.equal(a.x, torch.tensor([1.0, 1.0, 0.0]))
    with pytest.raises(ValueError, match=r"A.__setitem__: .* got C with fields \['x', 'z'\]"):
        a[:2] = C(torch.ones(2), torch.ones(2), batch_size=[2])


def test_tensor_only_checks_annotations() -> None:
    class T(TensorClass["tensor_only"]):
        a: torch.IntTensor
        b: Optional[TensorDict] = None  # noqa: UP045

    assert torch.equal(T(1).a, torch.tensor(1))
    with pytest.raises(TypeError, match="field 'b' is annotated Any; tensor_only requires"):

        class U(TensorClass["tensor_only"]):
            b: Any


def test_tensor_attrs() -> None:
    t = torch.zeros(2, 3, dtype=torch.float64)
    a = TensorAttrs.from_tensor(t)
    assert (a.tgt_device, a.tgt_dtype, a.tgt_shape) == (t.device, t.dtype, t.shape)
    assert a.batch_size == () and is_tensorclass(a)
    only = TensorAttrs.from_tensor(t, fields=("dtype",))
    assert only.tgt_dtype == torch.float64 and only.tgt_device is None and only.tgt_shape is None
    with pytest.raises(ValueError, match=r"TensorAttrs.from_tensor: unknown field\(s\) \['size'\]"):
        TensorAttrs.from_tensor(t, fields=("size",))


def test_number_in_scalar_annotated_field_with_batch_dims() -> None:
    # an int/float/bool field keeps a Python number when the instance has batch dims (a
    # 0-d tensor would not fit the batch); a 0-dim batch still stores a tensor
    class S(TensorClass):
        x: torch.Tensor
        count: int = 3
        rate: Optional[float] = None  # noqa: UP045
        flag: bool = False
        other: Any = None

    s = S(x=torch.zeros(2, 3), rate=1, batch_size=[2, 3])
    assert (s.count, s.rate, s.flag) == (3, 1, False) and type(s.count) is int
    s.count = 5
    s.update({"rate": 0.5})
    assert (s[1, 2].count, s.rate) == (5, 0.5)
    assert torch.stack([s, s])[1, 0, 2].count == 5
    with pytest.raises(ValueError, match="batch"):  # not an annotated number field
        S(x=torch.zeros(2), other=1, batch_size=[2])
    with pytest.raises(ValueError, match="batch"):  # a float is not a bool
        S(x=torch.zeros(2), flag=1.5, batch_size=[2])
    assert torch.equal(S(x=torch.zeros(()), count=4).get("count"), torch.tensor(4))


def test_update_with_a_key_that_is_not_a_field_is_a_value_error_too() -> None:
    # upstream's update raises ValueError; an attribute write keeps the AttributeError
    data = MyData(image=torch.zeros(2, 3), mask=None, label=torch.zeros(2), batch_size=[2])
    with pytest.raises(ValueError, match="MyData.update: 'extra' is not a field of MyData"):
        data.update({"extra": torch.zeros(2)})
    with pytest.raises(AttributeError, match="'extra' is not a field of MyData"):
        data.update({"extra": torch.zeros(2)})
    assert "extra" not in data.keys()
