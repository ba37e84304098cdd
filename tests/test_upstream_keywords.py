"""Keywords of upstream 0.15.3's signatures that code written for it passes: each one
does what upstream's does (or what is documented where it cannot)."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict


def _td() -> TensorDict:
    return TensorDict(
        a=torch.arange(6.0).view(3, 2),
        n=TensorDict(b=torch.arange(3), batch_size=[3]),
        batch_size=[3],
        names=["x"],
    )


def test_new_constructors_take_layout_and_pin_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    td = _td()
    for name, args in (("new_zeros", (2,)), ("new_ones", (2,)), ("new_empty", (2,))):
        out = getattr(td, name)(*args, layout=torch.strided, pin_memory=False)
        assert out["a"].shape == (2, 2) and out["n", "b"].dtype == torch.int64
    out = td.new_full([4], 7, layout=torch.strided, pin_memory=None, empty_lazy=False)
    assert out["a"].tolist() == [[7.0, 7.0]] * 4
    assert td.new_zeros(2, layout=torch.sparse_coo)["a"].layout == torch.sparse_coo
    seen: list[dict[str, object]] = []
    real = torch.Tensor.new_zeros

    def spy(self: torch.Tensor, *args: object, **kw: object) -> torch.Tensor:
        seen.append(dict(kw))
        kw.pop("pin_memory", None)  # no accelerator here: pinning itself cannot run
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.Tensor, "new_zeros", spy)
    td.new_zeros(2, pin_memory=True)
    assert seen and all(kw.get("pin_memory") is True for kw in seen)


def test_setdefault_inplace_and_rename_keys_strict() -> None:
    td = _td()
    a = td["a"]
    assert td.setdefault("a", torch.ones(3, 2), inplace=True) is a  # present: unchanged
    assert td.setdefault("c", torch.ones(3), inplace=True).tolist() == [1.0, 1.0, 1.0]
    out = td.rename_keys(mapping={"a": "z", "missing": "y"}, strict=False)
    assert "z" in out.keys() and "a" not in out.keys() and "y" not in out.keys()
    assert out["z"] is a
    with pytest.raises(KeyError, match="missing"):
        td.rename_keys({"missing": "y"})


def test_masked_select_inplace_keeps_identity() -> None:
    td = _td()
    nested = td["n"]
    mask = torch.tensor([True, False, True])
    expected = td.masked_select(mask)
    assert td.masked_select(mask, inplace=True) is td
    assert td.batch_size == (2,) and td["n"] is nested
    assert torch.equal(td["a"], expected["a"]) and torch.equal(td["n", "b"], torch.tensor([0, 2]))


def test_empty_with_batch_size_device_and_names() -> None:
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4], names=["x", "y"])
    out = td.empty(batch_size=[3])
    assert (out.batch_size, out.names, list(out.keys())) == (torch.Size([3]), ["x"], [])
    out = td.empty(batch_size=[5, 2], names=["p", "q"], device="cpu")
    assert (out.batch_size, out.names, out.device) == (
        torch.Size([5, 2]),
        ["p", "q"],
        torch.device("cpu"),
    )
    assert td.empty(device=None).device is None
    deep = TensorDict(n=TensorDict(b=torch.zeros(3, 4), batch_size=[3, 4]), batch_size=[3, 4])
    out = deep.empty(recurse=True, batch_size=[3])
    assert out.batch_size == (3,) and out["n"].batch_size == (3, 4) and not list(out["n"].keys())
    assert td.batch_size == (3, 4) and td.names == ["x", "y"]  # the source is untouched


def test_attrs_takes_num_threads() -> None:
    spec = _td().attrs(fields=("dtype",), num_threads=2)
    assert spec["n", "b"].tgt_dtype == torch.int64


def test_lazy_stack_constructor_keywords() -> None:
    members = [TensorDict(a=torch.zeros(2), batch_size=[2], names=["t"]) for _ in range(3)]
    s = LazyStackedTensorDict(*members, stack_dim_name="env", strict_shape=True)
    assert s.names == ["env", "t"]
    with pytest.raises(ValueError, match="stack_dim_name 't' is already the name"):
        LazyStackedTensorDict(*members, stack_dim_name="t")
    with pytest.warns(FutureWarning, match="names is ignored when members are given"):
        s = LazyStackedTensorDict(*members, names=["a", "b"])
    assert s.names == [None, "t"]
    empty = LazyStackedTensorDict(batch_size=[0, 2], names=["env", None])
    assert empty.names == ["env", None]
    with pytest.raises(ValueError, match="an empty stack keeps only the stack dim's name"):
        LazyStackedTensorDict(batch_size=[0, 2], names=["env", "t"])  # not dropped silently
    with pytest.raises(RuntimeError, match=r"batch sizes in tensordicts differs \(strict_shape"):
        LazyStackedTensorDict(
            TensorDict(batch_size=[2]), TensorDict(batch_size=[3]), strict_shape=True
        )
    with pytest.raises(NotImplementedError, match="hook_out / hook_in"):
        LazyStackedTensorDict(*members, hook_out=lambda x: x)


def test_set_non_blocking_and_float32_cast_filter() -> None:
    td = _td()
    td.set_("a", torch.ones(3, 2), non_blocking=True)
    assert td["a"].eq(1).all()
    lazy = LazyStackedTensorDict(_td(), _td())
    lazy.set_("a", torch.full((2, 3, 2), 2.0), non_blocking=False)
    assert lazy["a"].eq(2).all()
    ints = TensorDict(i=torch.arange(2), j=torch.arange(2), batch_size=[2])
    out = ints.float32(cast_filter=lambda key, value: key == ("i",))
    assert (out["i"].dtype, out["j"].dtype) == (torch.float32, torch.int64)


def test_review_findings() -> None:
    from torch import nn

    import tensordict.nn  # noqa: F401  (as_module=True needs the module layer)

    assert TensorDict.from_modules(nn.Linear(2, 2), nn.Linear(2, 2), as_module=True).is_locked
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4], names=["x", "y"])
    assert td.empty(batch_size=[3, 4, 5]).names == ["x", "y", None]
    lazy = LazyStackedTensorDict(*(TensorDict(a=torch.zeros(3), batch_size=[3]) for _ in range(2)))
    same = lazy.empty(batch_size=[2, 3])
    assert isinstance(same, LazyStackedTensorDict) and same.batch_size == (2, 3)
    members = lazy.empty(batch_size=[2])  # the members take the rest, less the stack dim
    assert isinstance(members, LazyStackedTensorDict) and members.tensordicts[0].batch_size == ()
    other = lazy.empty(batch_size=[5, 3])
    assert type(other) is TensorDict and other.batch_size == (5, 3) and not list(other.keys())
    locked = TensorDict(a=torch.arange(4.0), batch_size=[4]).lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict with inplace=True"):
        locked.masked_select(torch.tensor([True, False, True, False]), inplace=True)
    assert locked.batch_size == (4,)
    assert locked.contiguous(inplace=True) is locked  # nothing would change: allowed
