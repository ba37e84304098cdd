"""The second round of per-call fast paths answers what the general paths answer."""

from __future__ import annotations

import copy
import gc
import pickle
import weakref
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from tensordict import TensorDict, tensorclass

_SOURCES: list[Any] = [
    {},
    {"a": torch.randn(4, 2), "b": torch.randn(4)},
    {"a": torch.randn(4), "nested": {"x": torch.randn(4, 3)}},
    {"a": torch.randn(4), "arr": np.arange(4), "text": "hi"},
    {"a": torch.randn(4), ("n", "x"): torch.randn(4)},
    {"p": torch.nn.Parameter(torch.randn(4))},
]


def _same(x: TensorDict, y: TensorDict) -> None:
    assert x.batch_size == y.batch_size and x.device == y.device and x.names == y.names
    assert x.is_locked == y.is_locked
    assert list(x.keys(True, True)) == list(y.keys(True, True))
    for key, value in x.items(True, True):
        other = y.get(key)
        if isinstance(value, torch.Tensor):
            assert type(value) is type(other) and torch.equal(value, other), key
        else:
            assert value == other, key


@pytest.mark.parametrize("source", _SOURCES, ids=range(len(_SOURCES)))
@pytest.mark.parametrize(
    "options", [{}, {"names": ["b"]}, {"lock": True}, {"names": ["b"], "lock": True}], ids=repr
)
def test_construction_with_a_list_batch_size_matches_a_torch_size(
    source: dict[Any, Any], options: dict[str, Any]
) -> None:
    _same(TensorDict(source, [4], **options), TensorDict(source, torch.Size([4]), **options))


@pytest.mark.parametrize(
    ("batch_size", "error", "match"),
    [
        ([-1], ValueError, "TensorDict"),
        ([4.0], TypeError, "TensorDict"),
    ],
)
def test_construction_rejects_bad_one_dim_batch_sizes(
    batch_size: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        TensorDict({"a": torch.zeros(4)}, batch_size)


def test_construction_with_a_one_dim_batch_past_the_cached_sizes() -> None:
    big = TensorDict({"a": torch.zeros(2000)}, [2000])
    assert big.batch_size == torch.Size([2000]) and big["a"].shape == (2000,)
    with pytest.raises(ValueError, match="'a'"):
        TensorDict({"a": torch.zeros(3)}, [2000])


def test_construction_with_source_keywords_and_device_takes_the_general_path() -> None:
    td = TensorDict({"a": torch.zeros(4)}, [4], device="cpu")
    assert td.device == torch.device("cpu")
    td = TensorDict(batch_size=[4], a=torch.zeros(4))
    assert list(td.keys()) == ["a"]
    with pytest.raises(ValueError, match="not both"):
        TensorDict({"a": torch.zeros(4)}, [4], b=torch.zeros(4))


def test_keys_view_is_kept_and_stays_live() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    view = td.keys()
    assert td.keys() is view
    td["b"] = torch.ones(2)
    assert list(view) == ["a", "b"] and len(view) == 2 and "b" in view
    del td["a"]
    assert list(td.keys()) == ["b"] and "a" not in view


def test_keys_view_follows_a_second_init() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    assert list(td.keys()) == ["a"]
    td.__init__({"z": torch.zeros(3)}, [3])  # type: ignore[misc]
    assert list(td.keys()) == ["z"] and "a" not in td.keys()


@tensorclass
class _Pair:
    x: torch.Tensor
    y: torch.Tensor


def test_tensorclass_keys_view_follows_its_storage() -> None:
    pair: Any = _Pair(torch.zeros(2), torch.ones(2), batch_size=[2])
    assert sorted(pair.keys()) == ["x", "y"]
    pair.__init__(torch.zeros(3), torch.ones(3), batch_size=[3])
    assert pair.keys()._store is pair._tensordict and sorted(pair.keys()) == ["x", "y"]


@pytest.mark.parametrize(
    "key", ["a", "n", ("a",), (("a",),), ("n", "b"), "zz", ("n", "zz"), 3, "", (), None]
)
def test_flat_keys_contains_matches_the_general_view(key: Any) -> None:
    from tensordict._views import KeysView

    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2])
    assert (key in td.keys()) == (key in KeysView(td, False, False, None))


def test_keys_view_makes_no_reference_cycle() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    td.keys()
    ref = weakref.ref(td)
    gc.disable()
    try:
        del td
        assert ref() is None  # freed by reference counting, not by the cycle collector
    finally:
        gc.enable()


@pytest.mark.parametrize(
    "clone",
    [pickle.loads, copy.deepcopy, copy.copy],
    ids=["pickle", "deepcopy", "copy"],
)
def test_copies_get_their_own_keys_view(clone: Any) -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    td.keys()
    other = clone(pickle.dumps(td)) if clone is pickle.loads else clone(td)
    other["b"] = torch.ones(2)
    assert list(other.keys()) == ["a", "b"]
    assert list(td.keys()) == ["a"]


class _Logged(torch.Tensor):
    """A tensor subclass with a real ``__torch_function__``: indexing must still reach it."""

    calls: ClassVar[list[str]] = []

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        cls.calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize(
    "index", [3, slice(1, 5), slice(4, 4), (slice(None), 1), torch.tensor([0, 2]), ..., None]
)
def test_index_keeps_every_leaf_class(index: Any) -> None:
    from tensordict import MemoryMappedTensor

    class _MyMapped(MemoryMappedTensor):
        pass

    base = {k: torch.randn(8, 3) for k in ("plain", "mapped", "sub", "logged", "param")}
    td = TensorDict(
        {
            "plain": base["plain"],
            "mapped": MemoryMappedTensor.from_tensor(base["mapped"]),
            "sub": MemoryMappedTensor.from_tensor(base["sub"]).as_subclass(_MyMapped),
            "logged": base["logged"].as_subclass(_Logged),
            "param": torch.nn.Parameter(base["param"]),
            "nested": {"logged": base["logged"].as_subclass(_Logged)},
        },
        [8, 3],
    )
    _Logged.calls.clear()
    out = td[index]
    assert _Logged.calls  # the subclass's own dispatch ran
    for key, value in out.items(True, True):
        expected = td[key][index]
        assert type(value) is type(expected), key
        assert torch.equal(value, base[key[-1] if isinstance(key, tuple) else key][index]), key
    # basic indexing of a mapped leaf is a view of the mapping, of the leaf's own class
    if isinstance(index, int):
        assert type(out["mapped"]) is MemoryMappedTensor and type(out["sub"]) is _MyMapped
        assert out["mapped"].data_ptr() == td["mapped"][index].data_ptr()


def test_keys_view_is_kept_without_the_class_setattr() -> None:
    from tensordict import TensorClass

    seen: list[str] = []

    class Watched(TensorClass):
        x: torch.Tensor

        def __setattr__(self, name: str, value: Any) -> None:
            seen.append(name)
            super().__setattr__(name, value)

    obj = Watched(torch.zeros(2), batch_size=[2])
    seen.clear()
    assert list(obj.keys()) == ["x"] and obj.keys() is obj.keys()
    assert seen == []
