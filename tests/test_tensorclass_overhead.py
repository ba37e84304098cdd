"""The lean paths of tensorclass construction and of torch.stack/torch.cat: each one gives
what the general path gives, and hands every other case to it."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorClass, TensorDict, tensorclass
from tensordict._tensorclass import _packer


@tensorclass
class _Pair:
    obs: torch.Tensor
    reward: torch.Tensor


@tensorclass(frozen=True)
class _Frozen:
    obs: torch.Tensor
    reward: torch.Tensor


@tensorclass
class _Post:
    obs: torch.Tensor
    reward: torch.Tensor

    def __post_init__(self) -> None:
        self.reward = self.reward * 2


class _Watched(TensorClass):
    obs: torch.Tensor
    reward: torch.Tensor

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._fields:
            vars(self).setdefault("_seen", []).append(name)
        super().__setattr__(name, value)


@tensorclass(shadow=True)
class _Shadow:
    obs: torch.Tensor
    names: torch.Tensor


def _same(a: Any, b: Any) -> None:
    """Same class, batch size, device, names, lock and leaves (compared with torch)."""
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size and a.device == b.device
    assert a._names == b._names and a.is_locked == b.is_locked  # a field may shadow names
    assert list(a.keys()) == list(b.keys())
    for key in a.keys():
        assert torch.equal(a.get(key), b.get(key)), key


def _fields(cls: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(3, 2), torch.randn(3)


@pytest.mark.parametrize("cls", [_Pair, _Frozen, _Post, _Shadow])
def test_positional_construction_matches_keywords(cls: Any) -> None:
    a, b = _fields(cls)
    names = cls._fields
    _same(cls(a, b, batch_size=[3]), cls(**{names[0]: a, names[1]: b}, batch_size=[3]))


def test_keyword_construction_stores_the_tensors_in_call_order() -> None:
    a, b = _fields(_Pair)
    x = _Pair(reward=b, obs=a, batch_size=[3])
    assert x.obs is a and x.reward is b and list(x.keys()) == ["reward", "obs"]
    y = _Pair(a, reward=b, batch_size=[3])  # mixed: the general path, fields' order
    assert list(y.keys()) == ["obs", "reward"] and y.reward is b


@pytest.mark.parametrize("batch_size", [[3], torch.Size([3]), (3,), 3])
def test_every_one_dim_batch_size_spelling_gives_the_same(batch_size: Any) -> None:
    a, b = _fields(_Pair)
    for x in (_Pair(a, b, batch_size=batch_size), _Pair(obs=a, reward=b, batch_size=batch_size)):
        assert x.batch_size == torch.Size([3]) and type(x.batch_size) is torch.Size
        assert x.obs is a and x.reward is b


@pytest.mark.parametrize(
    ("batch_size", "expected"),
    [([3, 2], [3, 2]), (torch.Size([3, 2]), [3, 2]), (None, []), ([], []), (3, [3])],
)
def test_other_batch_sizes_store_the_tensors_as_given(batch_size: Any, expected: Any) -> None:
    a, b = torch.randn(3, 2, 4), torch.randn(3, 2)
    for x in (_Pair(a, b, batch_size=batch_size), _Pair(obs=a, reward=b, batch_size=batch_size)):
        assert x.batch_size == torch.Size(expected)
        assert x.obs is a and x.reward is b


def test_other_batch_sizes_still_check_every_leaf() -> None:
    a = torch.zeros(3, 2, 4)
    with pytest.raises(ValueError, match="reward"):
        _Pair(a, torch.zeros(3, 5), batch_size=[3, 2])
    with pytest.raises(ValueError, match="reward"):
        _Pair(obs=a, reward=torch.tensor(1.0), batch_size=[3, 2])
    with pytest.raises(ValueError, match="_Pair.__init__: batch_size must not hold negative"):
        _Pair(a, torch.zeros(3, 2), batch_size=[3, -2])
    x = _Pair(torch.tensor(1.0), torch.tensor(2.0))  # no batch: 0-dim leaves are fine
    assert x.batch_size == torch.Size([]) and x.reward.item() == 2.0


def test_keyword_construction_still_checks_the_field_names_and_leaves() -> None:
    a, b = _fields(_Pair)
    with pytest.raises(TypeError, match="_Pair.__init__: unexpected field 'bogus'"):
        _Pair(obs=a, bogus=b, batch_size=[3])
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'reward'"):
        _Pair(obs=a, batch_size=[3])
    with pytest.raises(ValueError, match="reward"):
        _Pair(obs=a, reward=torch.zeros(4), batch_size=[3])
    with pytest.raises(ValueError, match=r"_Pair.__init__: batch_size must not hold negative"):
        _Pair(obs=a, reward=b, batch_size=torch.Size([-1]))
    optional = _Pair(obs=a, reward=None, batch_size=[3])
    assert optional.reward is None and list(optional.keys()) == ["obs"]


class _Auto(TensorClass["autocast"]):
    n: int
    x: torch.Tensor


def test_autocast_classes_keep_casting_tensors() -> None:
    for auto in (_Auto(torch.ones(()), torch.zeros(2)), _Auto(n=torch.ones(()), x=torch.zeros(2))):
        assert auto.n == 1 and isinstance(auto.n, int)
        assert torch.equal(auto.x, torch.zeros(2))


def test_positional_construction_keeps_each_class_option() -> None:
    a, b = _fields(_Pair)
    assert _Frozen(a, b, batch_size=[3]).is_locked
    assert _Frozen(obs=a, reward=b, batch_size=[3]).is_locked
    assert not _Frozen(a, b, batch_size=[3], lock=False).is_locked
    assert torch.equal(_Post(obs=a, reward=b, batch_size=[3]).reward, b * 2)
    assert torch.equal(_Post(a, b, batch_size=[3]).reward, b * 2)
    watched = _Watched(a, b, batch_size=[3])
    assert vars(watched)["_seen"] == ["obs", "reward"]
    shadow = _Shadow(a, b, batch_size=[3])
    assert shadow.batch_size == torch.Size([3]) and torch.equal(shadow.names, b)


@pytest.mark.parametrize(
    ("kwargs", "check"),
    [
        ({"device": "cpu"}, lambda x: x.device == torch.device("cpu")),
        ({"names": ["t"]}, lambda x: x.names == ["t"]),
        ({"lock": True}, lambda x: x.is_locked),
        ({"lock": False}, lambda x: not x.is_locked),
    ],
)
def test_positional_construction_with_other_keywords(kwargs: Any, check: Any) -> None:
    a, b = _fields(_Pair)
    x = _Pair(a, b, batch_size=[3], **kwargs)
    assert check(x)
    assert torch.equal(x.obs, a) and torch.equal(x.reward, b)


def test_positional_construction_still_reports_bad_leaves() -> None:
    with pytest.raises(ValueError, match="reward"):
        _Pair(torch.zeros(3, 2), torch.zeros(4), batch_size=[3])
    with pytest.raises(ValueError, match="reward"):
        _Pair(torch.zeros(3, 2), torch.tensor(1.0), batch_size=[3])
    with pytest.raises(TypeError, match="takes 3 positional arguments but 4 were given"):
        _Pair(torch.zeros(3, 2), torch.zeros(3), torch.zeros(3), batch_size=[3])


def test_packer_writes_field_names_as_literals() -> None:
    pack = _packer(("a", "b'\"c", "d\\n"))
    assert pack(1, 2, 3) == {"a": 1, "b'\"c": 2, "d\\n": 3}
    assert _packer(())() == {}


class _OwnDispatch(TensorDict):
    @classmethod
    def __torch_function__(
        cls,
        func: Any,
        types: tuple[type, ...],
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        return "own"


class _Inherits(_OwnDispatch):
    pass


@pytest.mark.parametrize("cls", [TensorDict, LazyStackedTensorDict, _Pair, _Inherits])
def test_every_class_holds_its_own_torch_function(cls: type) -> None:
    assert "__torch_function__" in vars(cls)


def test_a_subclass_dispatches_through_its_bases_override() -> None:
    x = _Inherits({"a": torch.zeros(2)}, [2])
    assert torch.stack([x, x]) == "own"
    assert vars(_Inherits)["__torch_function__"] is vars(_OwnDispatch)["__torch_function__"]


def test_stack_of_two_classes_with_one_structure_is_lazy() -> None:
    a, b = _fields(_Pair)
    x = _Pair(a, b, batch_size=[3])
    td = TensorDict({"obs": a, "reward": b}, [3])
    out = torch.stack([x, td])
    assert isinstance(out, LazyStackedTensorDict)
    assert torch.equal(out.get("obs"), torch.stack([a, a]))


def test_stack_of_one_class_is_dense_and_of_that_class() -> None:
    xs = [_Pair(*_fields(_Pair), batch_size=[3]) for _ in range(4)]
    for dim in (0, 1, -1, -2):
        out = torch.stack(xs, dim)
        assert type(out) is _Pair
        assert torch.equal(out.obs, torch.stack([x.obs for x in xs], dim if dim >= 0 else dim - 1))
        assert torch.equal(out.reward, torch.stack([x.reward for x in xs], dim))


def test_stack_keeps_a_common_device_only() -> None:
    a = TensorDict({"x": torch.zeros(2)}, [2], device="cpu")
    b = TensorDict({"x": torch.zeros(2)}, [2])
    assert torch.stack([a, a]).device == torch.device("cpu")
    assert torch.stack([a, b]).device is None


def test_stack_errors_after_the_one_pass_attempt() -> None:
    a = _Pair(torch.zeros(2, 2), torch.zeros(2), batch_size=[2])
    b = _Pair(torch.zeros(3, 2), torch.zeros(3), batch_size=[3])
    with pytest.raises(RuntimeError, match=r"got \(2,\) at position 0 and \(3,\) at position 2"):
        torch.stack([a, a, b])
    with pytest.raises(TypeError, match="got Tensor at position 1"):
        torch.stack([a, torch.zeros(2)])
    with pytest.raises(IndexError, match="dim 2 is out of range for 2 dims"):
        torch.stack([a, a], 2)


def test_stack_of_ragged_members_is_lazy_and_keeps_them() -> None:
    a = TensorDict({"x": torch.zeros(2, 3)}, [2])
    b = TensorDict({"x": torch.ones(2, 4)}, [2])
    out = torch.stack([a, b])
    assert isinstance(out, LazyStackedTensorDict)
    assert out.tensordicts[0] is a and out.tensordicts[1] is b


def test_cat_of_one_class_two_classes_and_a_lazy_stack() -> None:
    xs = [_Pair(*_fields(_Pair), batch_size=[3]) for _ in range(3)]
    out = torch.cat(xs)
    assert type(out) is _Pair and out.batch_size == torch.Size([9])
    assert torch.equal(out.obs, torch.cat([x.obs for x in xs]))
    td = TensorDict({"obs": torch.ones(2, 2), "reward": torch.ones(2)}, [2])
    mixed = torch.cat([xs[0], td])
    assert type(mixed) is _Pair
    assert torch.equal(mixed.reward, torch.cat([xs[0].reward, td["reward"]]))
    lazy = LazyStackedTensorDict(td, td, stack_dim=0)
    both = torch.cat([td.unsqueeze(0), lazy])
    assert isinstance(both, LazyStackedTensorDict) and both.batch_size == torch.Size([3, 2])


def test_cat_reports_a_member_that_is_not_a_tensordict() -> None:
    td = TensorDict({"x": torch.zeros(2)}, [2])
    with pytest.raises(TypeError, match="torch.cat: expected TensorDicts, got int at position 2"):
        TensorDict.cat([td, td, 3])
    with pytest.raises(TypeError, match="got list at position 0"):
        TensorDict.cat([[], td])
    with pytest.raises(ValueError, match="expected a non-empty sequence"):
        TensorDict.cat([])


def test_cat_reports_keys_before_batch_sizes() -> None:
    a = TensorDict({"x": torch.zeros(2, 3)}, [2, 3])
    bad_bs = TensorDict({"x": torch.zeros(2, 4)}, [2, 4])
    bad_keys = TensorDict({"y": torch.zeros(2, 3), "z": torch.zeros(2, 3)}, [2, 3])
    with pytest.raises(KeyError, match="TensorDict 2 has keys"):
        torch.cat([a, bad_bs, bad_keys])


def test_tensorclass_subclass_of_a_tensorclass_keeps_the_lean_path() -> None:
    class Base(TensorClass):
        obs: torch.Tensor

    class Child(Base):
        reward: torch.Tensor

    a, b = _fields(Child)
    child = Child(a, b, batch_size=[3])
    assert child._tensordict == {"obs": a, "reward": b}
    assert type(torch.stack([child, child])) is Child
