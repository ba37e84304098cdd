"""state_dict round trips, pickling, copies, torch.save/torch.load (weights_only) and repr."""

from __future__ import annotations

import copy
import io
import pickle
from collections import OrderedDict
from typing import Any

import pytest
import torch

from tensordict import TensorDict, is_tensorclass, set_printoptions
from tests.catalogue import assert_same, assert_shares, leaves


def _tensor_only(td: TensorDict) -> TensorDict:
    return td.apply(lambda x: x)  # non-tensor entries are carried; tensors kept


def test_state_dict_round_trip_onto_empty(example: TensorDict) -> None:
    sd = example.state_dict()
    target = TensorDict()
    target.load_state_dict(sd)
    assert_same(target, example)
    assert all(not x.requires_grad for x in sd.values() if isinstance(x, torch.Tensor))


def test_state_dict_nested_form() -> None:
    td = TensorDict({"a": torch.ones(2), "n": {"b": torch.zeros(2)}}, [2])
    sd = td.state_dict(flatten=False)
    assert set(sd) == {"a", "n"} and set(sd["n"]) == {"b"}
    assert sd._metadata[""] == {"batch_size": torch.Size([2]), "device": None}
    assert sd["n"]._metadata[""] == {"batch_size": torch.Size([2]), "device": None}
    assert_same(TensorDict().load_state_dict(sd), td)


def test_state_dict_metadata_per_level_as_a_module_keeps_it() -> None:
    td = TensorDict({"a": torch.ones(2, 3), "n": {"b": torch.zeros(2, 3, 4)}}, [2])
    td["n"].batch_size = [2, 3]
    td["e"] = TensorDict({}, [2, 3, 5])  # a level with no leaves
    sd = td.state_dict()
    assert list(sd) == ["a", "n.b"]
    assert {k: tuple(v["batch_size"]) for k, v in sd._metadata.items()} == {
        "": (2,),
        "n": (2, 3),
        "e": (2, 3, 5),
    }
    back = TensorDict().load_state_dict(sd)
    assert back["n"].batch_size == (2, 3) and back["e"].batch_size == (2, 3, 5)
    assert_same(back, td)
    into = TensorDict(device="cpu")
    assert into.load_state_dict(sd).device == torch.device("cpu")
    buffer = io.BytesIO()  # the metadata survives torch.save / a weights-only load
    torch.save(sd, buffer)
    buffer.seek(0)
    assert TensorDict().load_state_dict(torch.load(buffer, weights_only=True))["e"].batch_size == (
        2,
        3,
        5,
    )


def test_older_state_dict_layout_still_loads() -> None:
    # __batch_size / __device entries per level, flat and nested, as written before
    flat = OrderedDict(
        [
            ("a", torch.ones(2)),
            ("n.b", torch.zeros(2, 3)),
            ("n.__batch_size", torch.Size([2, 3])),
            ("n.__device", None),
            ("__batch_size", torch.Size([2])),
            ("__device", None),
        ]
    )
    nested = {
        "a": torch.ones(2),
        "n": {"b": torch.zeros(2, 3), "__batch_size": torch.Size([2, 3]), "__device": None},
        "__batch_size": torch.Size([2]),
        "__device": None,
    }
    for sd in (flat, nested):
        back = TensorDict().load_state_dict(sd)
        assert back.batch_size == (2,) and back["n"].batch_size == (2, 3)
        assert set(back.keys(True, True)) == {"a", ("n", "b")}


def test_a_module_loads_the_state_dict_of_a_tensordict_of_its_parameters() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    params = TensorDict.from_module(model).detach().clone().apply(lambda x: x + 1)
    model.load_state_dict(params.state_dict())  # strict: no key of ours is unexpected
    for key, value in params.items(True, True):
        torch.testing.assert_close(model.get_parameter(".".join(key)).data, value)
    model.load_state_dict(params.flatten_keys(".").to_dict())


def test_load_state_dict_copies_in_place() -> None:
    src = TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3)}}, [3])
    dst = TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(3)}}, [3])
    a = dst["a"]
    dst.load_state_dict(src.state_dict())
    assert dst["a"] is a and (a == 1).all()
    dst.load_state_dict(
        TensorDict({"a": torch.full((3,), 5.0), "n": {"b": torch.ones(3)}}, [3]).state_dict(),
        assign=True,
    )
    assert dst["a"] is not a


def test_load_state_dict_strict_names_all_keys() -> None:
    dst = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3)}, [3])
    sd = TensorDict({"a": torch.ones(3), "c": torch.ones(3)}, [3]).state_dict()
    with pytest.raises(KeyError, match=r"missing keys \['b'\], unexpected keys \['c'\]"):
        dst.load_state_dict(sd)
    dst.load_state_dict(sd, strict=False)
    assert (dst["a"] == 1).all() and "c" in dst


def test_keep_vars_gives_live_tensors() -> None:
    td = TensorDict({"a": torch.zeros(2, requires_grad=True)}, [2])
    sd = td.state_dict(keep_vars=True)
    assert sd["a"] is td["a"]
    assert td.state_dict()["a"] is not td["a"]


def test_state_dict_refuses_dotted_keys() -> None:
    td = TensorDict({"a.b": torch.zeros(1)}, [1])
    with pytest.raises(ValueError, match=r"key 'a.b' contains '.'.*pass flatten=False"):
        td.state_dict()
    assert "a.b" in td.state_dict(flatten=False)


def test_pickle_round_trip(example: TensorDict) -> None:
    td = example.detach()
    back = pickle.loads(pickle.dumps(td))
    assert_same(back, td)
    assert type(back) is type(td) and back.device == td.device


def test_pickle_keeps_lock_names_and_non_tensor() -> None:
    td = TensorDict({"a": torch.zeros(2, 3), "s": "text"}, [2, 3], names=["x", "y"], lock=True)
    back = pickle.loads(pickle.dumps(td))
    assert back.is_locked and back.names == ["x", "y"] and back["s"] == "text"


def test_copy_and_deepcopy(example: TensorDict) -> None:
    shallow = copy.copy(example)
    assert_shares(shallow, example)
    deep = copy.deepcopy(example)
    for key, x in leaves(example).items():
        assert deep.get(key) is not x
        torch.testing.assert_close(deep.get(key), x)
    key = "obs" if is_tensorclass(example) else "new"  # (a tensorclass takes its fields)
    new = torch.zeros(example.batch_size)
    shallow[key] = new
    assert example.get(key, None) is not new


@pytest.mark.parametrize("weights_only", [False, True])
def test_torch_save_load(weights_only: bool) -> None:
    td = TensorDict({"a": torch.randn(3, 2), "n": {"b": torch.arange(3)}}, [3], device="cpu")
    buf = io.BytesIO()
    torch.save(td, buf)
    buf.seek(0)
    back = torch.load(buf, weights_only=weights_only)
    assert_same(back, td)
    assert back.device == torch.device("cpu")


def test_weights_only_load_validates() -> None:
    """A pickle naming a bad batch size is refused by the constructor, not trusted."""
    from tensordict._state import _from_plain

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (_from_plain, (TensorDict, (5,), None, {"a": torch.zeros(3)}))

    buf = io.BytesIO()
    torch.save(Evil(), buf)
    buf.seek(0)
    with pytest.raises(ValueError, match="does not start with batch_size"):
        torch.load(buf, weights_only=True)


def test_repr_matches_seed_format() -> None:
    td = TensorDict({"b": torch.zeros(10), "a": torch.zeros(10, 2)}, [10])
    td["n", "c"] = torch.zeros(10, dtype=torch.long)
    td["s"] = "hi"
    assert repr(td) == (
        "TensorDict(batch_size=[10], fields={\n    a: f32[2],\n    b: f32[],\n"
        "    n: {c: i64[]},\n    s: 'hi'})"
    )
    with set_printoptions(compact=False):
        verbose, empty = repr(td), repr(TensorDict())
    assert verbose == (
        "TensorDict(\n"
        "    fields={\n"
        "        a: Tensor(shape=torch.Size([10, 2]), device=cpu, dtype=torch.float32, is_shared=False),\n"
        "        b: Tensor(shape=torch.Size([10]), device=cpu, dtype=torch.float32, is_shared=False),\n"
        "        n: TensorDict(\n"
        "            fields={\n"
        "                c: Tensor(shape=torch.Size([10]), device=cpu, dtype=torch.int64, is_shared=False)},\n"
        "            batch_size=torch.Size([10]),\n"
        "            device=None,\n"
        "            is_shared=False),\n"
        "        s: NonTensorData(data=hi, batch_size=torch.Size([10]), device=None)},\n"
        "    batch_size=torch.Size([10]),\n"
        "    device=None,\n"
        "    is_shared=False)"
    )
    assert empty == (
        "TensorDict(\n    fields={\n    },\n    batch_size=torch.Size([]),\n"
        "    device=None,\n    is_shared=False)"
    )


def test_a_tensorclass_keeps_its_non_tensor_fields_in_the_metadata() -> None:
    from tensordict import tensorclass

    @tensorclass
    class _Sample:
        x: torch.Tensor
        tag: str
        inner: Any = None

    tc = _Sample(
        x=torch.randn(3),
        tag="t",
        inner=_Sample(x=torch.randn(3), tag="u", batch_size=[]),
        batch_size=[],
    )
    for flatten in (True, False):
        sd = tc.state_dict(flatten=flatten)
        assert set(sd) == ({"x", "inner.x"} if flatten else {"x", "inner"})
        assert sd._metadata[""]["_non_tensor"] == {"tag": "t"}
        other = tc.clone()
        other.x, other.inner.x, other.tag, other.inner.tag = (
            torch.zeros(3),
            torch.zeros(3),
            "no",
            "no",
        )
        other.load_state_dict(sd)
        assert torch.equal(other.x, tc.x) and torch.equal(other.inner.x, tc.inner.x)
        assert (other.tag, other.inner.tag) == ("t", "u")
    plain = TensorDict({"s": "in the metadata", "a": torch.ones(1)}, [1]).state_dict()
    assert list(plain) == ["a"] and plain._metadata[""]["_non_tensor"] == {"s": "in the metadata"}
