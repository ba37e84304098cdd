"""Upstream behaviours found by running upstream's test functions outside the conformance
tiers: ``logsumexp(out=)``, ``apply(out=)`` replacing entries, the ``is_locked`` setter."""

from __future__ import annotations

import pytest
import torch

from tdnn import TensorDictParams
from tensordict import TensorDict, lazy_stack


def _td() -> TensorDict:
    return TensorDict(
        a=torch.randn(2, 3, 4), n={"b": torch.randn(2, 3)}, s="text", batch_size=[2, 3]
    )


@pytest.mark.parametrize("dim", [1, (1,), (0, -1), None])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_out_writes_into_existing_leaves(dim: object, keepdim: bool) -> None:
    td = _td()
    expected = td.logsumexp(dim, keepdim)
    out = expected.clone().zero_()
    leaves = {k: out[k] for k in (("a",), ("n", "b"))}
    assert td.logsumexp(dim, keepdim, out=out) is out
    for key, leaf in leaves.items():
        assert out[key] is leaf  # written in place
        given = (0, 1) if dim is None else (dim,) if isinstance(dim, int) else dim
        dims = tuple(d % 2 for d in given)  # type: ignore[union-attr]  # batch dims
        torch.testing.assert_close(leaf, torch.logsumexp(td[key], dims, keepdim))


def test_logsumexp_out_sets_missing_leaves_and_checks_its_batch_size() -> None:
    td = _td()
    empty = td.logsumexp(1).empty()
    assert td.logsumexp(1, out=empty) is empty
    torch.testing.assert_close(empty["a"], torch.logsumexp(td["a"], (1,)))
    torch.testing.assert_close(empty["n", "b"], torch.logsumexp(td["n", "b"], (1,)))
    with pytest.raises(RuntimeError, match=r"logsumexp: out has batch size \(2, 3\)"):
        td.logsumexp(1, out=td.clone())


def test_apply_out_replaces_entries_as_upstream() -> None:
    td = TensorDict(a=torch.ones(2, dtype=torch.long), n={"b": torch.ones(2, 1)}, batch_size=[2])
    old_a = td["a"]
    assert td.apply(lambda x: x.float() + 0.5, out=td) is td
    assert td["a"].dtype == torch.float32 and td["a"].tolist() == [1.5, 1.5]
    assert old_a.tolist() == [1, 1]  # the old leaf is replaced, not written into
    assert td["n", "b"].tolist() == [[1.5], [1.5]]
    named = td.named_apply(lambda k, x: x * 0, out=TensorDict(batch_size=[2]))
    assert named["a"].tolist() == [0.0, 0.0]


def test_apply_out_locked_raises() -> None:
    td = TensorDict(a=torch.ones(2), batch_size=[2]).lock_()
    with pytest.raises(RuntimeError, match=r"TensorDict.apply: out is locked"):
        td.apply(lambda x: x + 1, out=td)
    with pytest.raises(RuntimeError, match=r"TensorDict.named_apply: out is locked"):
        td.named_apply(lambda k, x: x + 1, out=td)
    assert td["a"].tolist() == [1.0, 1.0]


def test_is_locked_setter_locks_and_unlocks_every_kind() -> None:
    td = TensorDict(a={"b": torch.zeros(1)}, batch_size=[1])
    td.is_locked = True
    assert td.is_locked and td["a"].is_locked
    with pytest.raises(RuntimeError):
        td["c"] = torch.zeros(1)
    td.is_locked = False
    assert not td.is_locked and not td["a"].is_locked
    stack = lazy_stack([td.clone(), td.clone()])
    stack.is_locked = True
    assert stack.is_locked and all(m.is_locked for m in stack.tensordicts)
    stack.is_locked = False
    assert not stack.is_locked
    params = TensorDictParams(TensorDict(w=torch.zeros(2)))
    params.is_locked = False
    assert not params.is_locked
    params.is_locked = True
    assert params.is_locked


def test_to_module_use_state_dict_runs_the_load_pre_hooks_with_prefixes() -> None:
    from torch import nn

    model = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    seen: list[str] = []

    def rename_legacy(state: dict[str, torch.Tensor], prefix: str, *rest: object) -> None:
        seen.append(prefix)
        if prefix + "w" in state:  # a checkpoint written before the attribute was renamed
            state[prefix + "weight"] = state.pop(prefix + "w")

    model[1]._register_load_state_dict_pre_hook(rename_legacy)
    legacy = TensorDict.from_module(model).clone().apply(torch.ones_like)
    legacy["1", "w"] = legacy["1"].pop("weight")
    with legacy.to_module(model, use_state_dict=True):
        assert seen == ["1."]
        assert (model[1].weight == 1).all() and isinstance(model[1].weight, nn.Parameter)
    with pytest.raises(KeyError, match=r"unexpected keys \['1.w'\]"):
        legacy.to_module(model)  # without the hooks the legacy key does not fit

    def refuse(state: dict[str, torch.Tensor], prefix: str, *rest: object) -> None:
        rest[-1].append("bad checkpoint")  # type: ignore[attr-defined]

    model[0]._register_load_state_dict_pre_hook(refuse)
    with pytest.raises(RuntimeError, match=r"to_module: a load-state-dict pre-hook reported"):
        legacy.to_module(model, use_state_dict=True)


@pytest.mark.parametrize("metadata", [False, True])
def test_consolidate_holds_a_jagged_leaf_and_refuses_a_strided_one_by_its_key(
    metadata: bool,
) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype warning for nested tensors
        ragged = torch.nested.nested_tensor([torch.zeros(1), torch.ones(2)], layout=torch.jagged)
        strided = torch.nested.nested_tensor([torch.zeros(1), torch.ones(2)])
    td = TensorDict({"x": torch.zeros(2, 3), "n": {"a": ragged}, "s": "text"}, batch_size=[2])
    out = td.consolidate(metadata=metadata)
    assert out.is_consolidated() and out["n", "a"].layout is torch.jagged
    assert torch.equal(out["n", "a"].values(), ragged.values())
    assert torch.equal(out["n", "a"].offsets(), ragged.offsets())
    td = TensorDict({"x": torch.zeros(3), "n": {"a": strided}, "s": "text"}, batch_size=[])
    with pytest.raises(NotImplementedError, match=r"consolidate: the entry \('n', 'a'\) is a"):
        td.consolidate(metadata=metadata)
    assert not td.is_consolidated() and td["n", "a"] is strided


def test_to_none_returns_self_as_upstream() -> None:
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    stack = lazy_stack([td.clone(), td.clone()])
    assert td.to(None) is td and stack.to(None) is stack
    assert td.to(None, torch.float64)["a"].dtype == torch.float64
    with pytest.raises(TypeError, match=r"TensorDict.to: cannot convert to 1.5"):
        td.to(None, 1.5)


def test_to_does_not_keep_its_source_alive() -> None:
    import gc
    import weakref

    x = TensorDict({"a": torch.zeros(10)}, [])
    earlier = []
    for i in range(6):
        earlier.append(weakref.ref(x))
        x = x.to(torch.float64 if i % 2 == 0 else torch.float32)
    gc.collect()
    assert [r() for r in earlier] == [None] * 6


def test_with_to_own_device_writes_nothing_into_an_older_source() -> None:
    base = TensorDict({"a": torch.zeros(3)}, [3], device="cpu")
    cast = base.to(torch.float64)
    with cast.to("cpu") as same:
        same["a"] += 5
    assert base["a"].tolist() == [0.0, 0.0, 0.0] and cast["a"].tolist() == [5.0, 5.0, 5.0]
    with base.to(torch.float64) as wide:  # a real move still writes back, cast back
        wide["a"] += 1
    assert base["a"].tolist() == [1.0, 1.0, 1.0] and base["a"].dtype == torch.float32


def test_apply_out_with_another_batch_size_raises_before_writing() -> None:
    td = TensorDict(a=torch.ones(2), batch_size=[2])
    out = TensorDict(a=torch.zeros(2), batch_size=[2])
    with pytest.raises(RuntimeError, match=r"apply: batch_size \(\) and out.batch_size \(2,\)"):
        td.apply(lambda x: x + 1, out=out, batch_size=[])
    assert out["a"].tolist() == [0.0, 0.0]
    assert td.apply(lambda x: x + 1, out=out, batch_size=[2]) is out


def test_a_slice_of_a_non_tensor_stack_writes_back_only_what_was_written() -> None:
    from tensordict import NonTensorData, NonTensorStack

    s = NonTensorStack("a", "b", "c")
    part = s[0:2]
    s[0] = NonTensorData("q")  # the stack changes after the slice was read
    part[1] = NonTensorData("w")
    assert s.tolist() == ["q", "w", "c"]  # the newer "q" is kept
    grid = NonTensorStack(NonTensorStack("a", "b"), NonTensorStack("c", "d"))
    column = grid[:, 1]
    grid[0, 1] = "new"
    column[1] = "z"
    assert grid.tolist() == [["a", "new"], ["c", "z"]]
