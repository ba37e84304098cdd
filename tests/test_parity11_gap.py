"""Parity with upstream 0.15 outside the conformance tiers: typed containers over lazy
stacks, UnbatchedTensor under pytree."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.utils._pytree as pytree
from torch import Tensor

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    PersistentTensorDict,
    TensorClass,
    TensorDict,
    TypedTensorDict,
    UnbatchedTensor,
    lazy_stack,
)


class Pair(TypedTensorDict):
    a: Tensor
    b: Tensor


class PairTC(TensorClass):
    a: Tensor
    b: Tensor


def _stack(n: int = 4) -> LazyStackedTensorDict:
    members = [TensorDict(a=torch.randn(3), b=torch.randn(5)) for _ in range(n)]
    return LazyStackedTensorDict(*members, stack_dim=0)


# ------------------------------------------------- TypedTensorDict over a lazy stack
def test_typed_from_lazy_stack_is_an_instance() -> None:
    stack = _stack()
    typed = Pair.from_tensordict(stack)
    assert isinstance(typed, Pair)
    assert isinstance(typed, TypedTensorDict)
    assert typed.batch_size == torch.Size([4])
    assert typed.a.shape == (4, 3)
    assert torch.equal(typed.b, stack["b"])


def test_typed_from_lazy_stack_operations_keep_the_class() -> None:
    typed = Pair.from_tensordict(_stack())
    assert type(typed[0]) is Pair
    assert isinstance(typed[0:2], Pair) and typed[0:2].batch_size == torch.Size([2])
    assert isinstance(typed.clone(), Pair)
    items = list(typed)
    assert len(items) == 4 and all(type(item) is Pair for item in items)
    stacked = torch.stack([typed, Pair.from_tensordict(_stack())])
    assert isinstance(stacked, Pair)
    assert stacked.batch_size == torch.Size([2, 4])


def test_typed_from_lazy_stack_writes_reach_the_source() -> None:
    stack = _stack()
    typed = Pair.from_tensordict(stack)
    typed.a = torch.ones(4, 3)
    assert (stack["a"] == 1).all()
    typed.update({"b": torch.zeros(4, 5)})
    assert (stack["b"] == 0).all()


def test_typed_from_lazy_stack_checks_the_fields() -> None:
    stack = LazyStackedTensorDict(TensorDict(a=torch.zeros(3)), TensorDict(a=torch.zeros(3)))
    with pytest.raises(
        TypeError, match=r"Pair.from_tensordict: missing required field\(s\) \['b'\]"
    ):
        Pair.from_tensordict(stack)
    unchecked = Pair.from_tensordict(stack, check=False)
    assert isinstance(unchecked, Pair)


def test_a_stack_is_an_instance_only_when_every_member_is() -> None:
    typed = Pair(a=torch.zeros(3), b=torch.zeros(5))
    plain = TensorDict(a=torch.zeros(3), b=torch.zeros(5))
    assert not isinstance(LazyStackedTensorDict(typed, plain), Pair)
    assert not isinstance(LazyStackedTensorDict(), Pair)
    assert not isinstance(plain, Pair)
    nested = LazyStackedTensorDict(
        LazyStackedTensorDict(typed, typed.clone()), LazyStackedTensorDict(typed, typed)
    )
    assert isinstance(nested, Pair)


# ------------------------------------------------- field writes on a stack of instances
def test_tensorclass_over_lazy_stack_field_write() -> None:
    stack = PairTC.from_tensordict(_stack())
    stack.a = torch.ones(4, 3)
    assert (stack.a == 1).all()
    assert all((member.a == 1).all() for member in stack.tensordicts)


def test_stack_attributes_are_not_taken_for_fields() -> None:
    stack = PairTC.from_tensordict(_stack())
    stack.names = ["n"]
    assert stack.names == ["n"]
    with pytest.raises(AttributeError, match="'LazyStackedTensorDict' object has no attribute"):
        stack.c = torch.zeros(4)  # not a field: no such attribute on a lazy stack


# ------------------------------------------------- sources that cannot be shared
def test_typed_from_tensordict_refuses_an_h5_collection(tmp_path: Path) -> None:
    source = TensorDict(a=torch.zeros(4, 3), b=torch.zeros(4, 5), batch_size=[4])
    h5 = PersistentTensorDict.from_dict(source, filename=str(tmp_path / "x.h5"))
    with pytest.raises(
        TypeError,
        match=r"Pair.from_tensordict: expected a TensorDict or a lazy stack of them "
        r"\(shared without a copy\), got PersistentTensorDict; densify it first",
    ):
        Pair.from_tensordict(h5)
    assert Pair.from_tensordict(h5.to_tensordict()).a.shape == (4, 3)
    h5.close()


# ------------------------------------------------- UnbatchedTensor under pytree
def test_unbatched_tensor_is_a_pytree_leaf() -> None:
    td = TensorDict(a=UnbatchedTensor(torch.ones(10)), b=torch.ones(3), batch_size=[3])
    leaves, spec = pytree.tree_flatten(td)
    assert [tuple(leaf.shape) for leaf in leaves] == [(10,), (3,)]
    assert spec.num_leaves == 2
    doubled = pytree.tree_map(lambda x: x * 2, td)
    assert doubled.batch_size == torch.Size([3])
    assert type(doubled.get("a")) is UnbatchedTensor
    assert doubled.get("a").batch_size == torch.Size([3])
    assert torch.equal(doubled.get("a"), torch.full((10,), 2.0))
    assert torch.equal(doubled["b"], torch.full((3,), 2.0))


def test_unbatched_tensor_gets_its_gradient_through_torch_func() -> None:
    td = TensorDict(a=UnbatchedTensor(torch.ones(4)), b=torch.ones(3), batch_size=[3])
    grads = torch.func.grad(lambda t: (t["a"] * 3).sum() + t["b"].sum())(td)
    assert type(grads.get("a")) is UnbatchedTensor
    assert torch.equal(grads.get("a"), torch.full((4,), 3.0))
    assert grads.batch_size == torch.Size([3])


def test_vmap_over_a_lazy_stack_holding_an_unbatched_tensor() -> None:
    td = TensorDict(a=UnbatchedTensor(torch.ones(10)), b=torch.arange(3.0), batch_size=[3])
    stack = lazy_stack([td[0], td[1]])
    out = torch.vmap(lambda t: t.apply(lambda x: x + 1))(stack)
    assert out.batch_size == torch.Size([2])
    assert torch.equal(out["b"], torch.tensor([1.0, 2.0]))


# ------------------------------------------------- in-place writes of the wrong kind
def test_set_inplace_of_a_str_into_a_tensor_names_the_key() -> None:
    td = TensorDict(v=torch.ones(3, 4), batch_size=[3])
    with pytest.raises(
        TypeError, match=r"TensorDict.set: key 'v' holds a tensor; cannot write a str into it"
    ):
        td.set("v", "les chaussettes", inplace=True)
    assert torch.equal(td["v"], torch.ones(3, 4))


# ------------------------------------------------- a stack of instances runs their methods
class Scored(TensorClass):
    x: Tensor
    LABEL = "scored"

    def total(self) -> Tensor:
        return self.x.sum()

    @property
    def doubled(self) -> Tensor:
        return self.x * 2

    @classmethod
    def kind(cls) -> str:
        return cls.__name__


def test_a_stack_of_instances_runs_their_methods() -> None:
    stack = lazy_stack([Scored(x=torch.ones(3)), Scored(x=torch.full((3,), 2.0))])
    assert stack.total() == 9.0
    assert torch.equal(stack.doubled, torch.tensor([[2.0] * 3, [4.0] * 3]))
    assert stack.LABEL == "scored"
    assert stack.kind() == "Scored"
    assert torch.equal(stack[1].doubled, torch.full((3,), 4.0))  # (a member: its own)
    with pytest.raises(AttributeError, match="'LazyStackedTensorDict' object has no attribute"):
        stack.nothing_of_the_kind
    plain = lazy_stack([TensorDict(x=torch.ones(3)), TensorDict(x=torch.ones(3))])
    with pytest.raises(AttributeError, match="no attribute 'total'"):
        plain.total()  # (members of no user class: nothing to find)


# ------------------------------------------------- state_dict metadata
class Named(TensorClass):
    x: Tensor
    z: str


def test_a_tensorclass_state_dict_names_its_class() -> None:
    tc = Named(x=torch.randn(3), z="label", batch_size=[3])
    sd = tc.state_dict()
    assert sd._metadata[""]["_type"] == "Named"  # type: ignore[attr-defined]
    assert sd._metadata[""]["_non_tensor"] == {"z": "label"}  # type: ignore[attr-defined]
    plain = TensorDict(x=torch.zeros(3), batch_size=[3]).state_dict()
    assert "_type" not in plain._metadata[""]  # type: ignore[attr-defined]
    back = Named(x=torch.zeros(3), z="other", batch_size=[3]).load_state_dict(sd)
    assert torch.equal(back.x, tc.x) and back.z == "label"


# ------------------------------------------------- in-place non-tensor writes reach the checkpoint
def test_inplace_non_tensor_writes_reach_the_saved_checkpoint(tmp_path: Path) -> None:
    path = str(tmp_path / "ckpt")
    td = TensorDict(
        val=NonTensorData("a"), x=torch.zeros(2), nested={"s": "deep", "y": torch.ones(1)}
    ).memmap_(path)
    td.set_("val", "b")
    assert td["val"] == "b" and TensorDict.load_memmap(path)["val"] == "b"
    td.update_({"val": [1, "two"]})
    assert TensorDict.load_memmap(path)["val"] == [1, "two"]
    td.set(("nested", "s"), "deeper", inplace=True)
    assert TensorDict.load_memmap(path)["nested", "s"] == "deeper"
    assert TensorDict.load_memmap(path, subpath="nested")["s"] == "deeper"  # its own meta.json


def test_inplace_non_tensor_write_json_cannot_hold_is_refused_whole(tmp_path: Path) -> None:
    path = str(tmp_path / "ckpt")
    td = TensorDict(val=NonTensorData("a"), x=torch.zeros(2)).memmap_(path)
    with pytest.raises(
        RuntimeError,
        match=r"TensorDict.set_: key 'val' of the collection saved at .* holds JSON data in "
        r"its meta.json; the new NonTensorData cannot be written there in place",
    ):
        td.set_("val", object())
    assert td["val"] == "a" and TensorDict.load_memmap(path)["val"] == "a"


def test_threads_writing_non_tensor_entries_of_one_checkpoint_take_turns(tmp_path: Path) -> None:
    import threading

    td = TensorDict({f"k{i}": "old" for i in range(4)}, []).memmap(tmp_path / "c")
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for j in range(15):
                td.set_(f"k{i}", f"v{j}")
        except BaseException as err:  # collected: a thread's error would be lost
            errors.append(err)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors
    loaded = TensorDict.load_memmap(tmp_path / "c")
    assert {k: loaded[k] for k in loaded.keys()} == {f"k{i}": "v14" for i in range(4)}
    assert {k: td[k] for k in td.keys()} == {f"k{i}": "v14" for i in range(4)}
