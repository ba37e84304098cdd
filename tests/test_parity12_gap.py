"""Parity with upstream 0.15 outside the conformance tiers, round 2: the words of
upstream's errors that code written for it matches (a nested TensorDict that cannot take
the batch size, a write into an index of another batch size, a tensorclass attribute that
is not a field)."""

from __future__ import annotations

import re

import pytest
import torch
from torch import Tensor

from tensordict import TensorClass, TensorDict


class Holder(TensorClass):
    x: Tensor
    z: TensorDict


def _holder() -> Holder:
    return Holder(x=torch.ones(3, 4, 5), z=TensorDict({}, [3, 4]), batch_size=[3, 4])


# ------------------------------------------- a nested TensorDict of a misfit batch size
def test_set_nested_misfit_names_the_tensor_as_upstream() -> None:
    """``set`` of a TensorDict whose leaf cannot take the batch size names that leaf in
    upstream's words, after ours."""
    wording = re.escape("the Tensor smth has shape torch.Size([1]) which")
    data = _holder()
    with pytest.raises(RuntimeError, match=wording):
        data.set("z", TensorDict({"smth": torch.zeros(1)}, []))
    with pytest.raises(RuntimeError, match=wording):
        data.z = TensorDict({"smth": torch.zeros(1)}, [])
    td = TensorDict({}, [3, 4])
    with pytest.raises(RuntimeError, match=r"\('z', 'smth'\) \(1,\) do not start with it"):
        td.set("z", TensorDict({"smth": torch.zeros(1)}, []))
    assert data.z.batch_size == (3, 4) and list(data.z.keys()) == []


def test_batch_size_misfit_names_the_first_tensor() -> None:
    td = TensorDict(a=torch.zeros(4), b={"c": torch.zeros(3)})
    with pytest.raises(
        RuntimeError,
        match=re.escape("the Tensor c has shape torch.Size([3]) which is incompatible with "),
    ):
        td.batch_size = [4]
    assert td.batch_size == ()


# --------------------------------------------- a write into an index of another size
def test_setitem_of_other_batch_size_says_indexed_destination() -> None:
    data = _holder()
    with pytest.raises(RuntimeError, match="indexed destination TensorDict batch size is"):
        data[:, [1, 2]] = data.clone()
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4])
    with pytest.raises(
        RuntimeError,
        match=re.escape("batch size is torch.Size([3, 2]), which differs from the source"),
    ):
        td[:, [1, 2]] = td.clone() + 1
    assert (td["a"] == 0).all()


# ---------------------------------------------- a tensorclass attribute not a field
def test_tensorclass_non_field_says_cannot_set_the_attribute() -> None:
    data = _holder()
    with pytest.raises(AttributeError, match=re.escape("Cannot set the attribute 'newattr'")):
        data.set("newattr", TensorDict({"smth": torch.zeros(1)}, []))
    with pytest.raises(AttributeError, match=re.escape("Cannot set the attribute 'newattr'")):
        data.newattr = 1
    assert "newattr" not in data.to_tensordict().keys()


# --------------------------------------------------- load_state_dict of an extra key
class Tree(TensorClass):
    x: Tensor
    z: str
    y: Tree | None = None


def test_load_state_dict_unexpected_key_in_upstream_words() -> None:
    """An unexpected key, among the tensors or the non-tensor values of ``_metadata``, is
    refused with upstream's sentence naming it; nothing is loaded."""
    tree = Tree(x=torch.zeros(3), z="s", y=Tree(x=torch.zeros(3), z="s"))
    wording = "Key 'a' wasn't expected in the state-dict"
    state = tree.state_dict()
    state["x"] = torch.ones(3)
    state["a"] = None
    with pytest.raises(KeyError, match=wording):
        tree.load_state_dict(state)
    del state["a"]
    state._metadata[""]["_non_tensor"]["a"] = None  # type: ignore[attr-defined]
    with pytest.raises(KeyError, match=wording):
        tree.load_state_dict(state)
    assert (tree.x == 0).all()


def test_load_state_dict_missing_key_only() -> None:
    """A state that only lacks a key is refused naming it, without the unexpected-key
    sentence."""
    tree = Tree(x=torch.zeros(3), z="s")
    state = tree.state_dict()
    del state["x"]
    with pytest.raises(KeyError, match=r"missing keys \['x'\], unexpected keys \[\]\D*$"):
        tree.load_state_dict(state)
