"""The fast paths of consolidation (issue 17): shared plans, the one-walk locked rebuild,
the pickled template and the token wire description, each checked against plain torch."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import TensorClass, TensorDict, lazy_stack
from tensordict._consolidate import (
    Plan,
    explain_mismatch,
    locked_copy,
    walk,
    wire_description,
    wire_fill,
    wire_plan,
)
from tensordict._staging import _FREE, Staging, give_back, take
from tensordict._staging import _LIMIT as _STAGING_LIMIT
from tests.catalogue import CATALOGUE, assert_same


class Cell(TensorClass):
    """A tensorclass nested in the consolidation tests."""

    w: torch.Tensor
    tag: str


def _mixed() -> TensorDict:
    return TensorDict(
        {
            "a": torch.randn(3, 2),
            "b": torch.arange(3),
            "n": {"c": torch.randn(3, 2), "text": "hello", "d": torch.rand(3) > 0.5},
            "cell": Cell(w=torch.randn(3, 4), tag="x", batch_size=[3]),
        },
        [3],
    )


def _leaf_list(td: Any) -> list[torch.Tensor]:
    return list(td._tensor_leaves([]))


def test_plans_are_shared_by_structure_and_never_mixed() -> None:
    td = _mixed()
    first = Plan.of(_leaf_list(td))
    again = Plan.of(_leaf_list(td.clone()))
    assert again is first
    other = td.clone()
    other["a"] = torch.randn(3, 5)  # one shape differs: a new plan
    assert Plan.of(_leaf_list(other)) is not first
    cast = td.clone()
    cast["b"] = cast["b"].int()  # one dtype differs: a new plan
    assert Plan.of(_leaf_list(cast)) is not first
    for source in (td, other, cast):
        assert_same(source.consolidate(), source)


def test_a_uniform_run_is_one_range() -> None:
    leaves = [torch.full((2, 3), float(i)) for i in range(7)]
    plan = Plan.of(leaves)
    assert [(r[2], r[4]) for r in plan.runs] == [(7, list(range(7)))]
    storage = torch.empty(plan.nbytes, dtype=torch.uint8)
    plan.fill(storage, leaves)
    for view, leaf in zip(plan.views(storage), leaves, strict=True):
        torch.testing.assert_close(view, leaf, rtol=0, atol=0)


def test_interleaved_runs_put_every_view_in_its_place() -> None:
    leaves = [torch.full((2,) * (1 + i % 3), float(i)) for i in range(10)]
    leaves[4] = leaves[4].double()
    plan = Plan.of(leaves)
    storage = torch.empty(plan.nbytes, dtype=torch.uint8)
    plan.fill(storage, leaves)
    views = plan.views(storage)
    for view, leaf in zip(views, leaves, strict=True):
        assert view.dtype == leaf.dtype and view.shape == leaf.shape
        torch.testing.assert_close(view, leaf, rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_the_result_is_locked_like_lock_does(name: str) -> None:
    ctd = CATALOGUE[name]().consolidate()
    assert ctd.is_locked
    with ctd.unlock_():  # the context restores the lock on exit, as after lock_()
        assert not ctd.is_locked
    assert ctd.is_locked


def test_nested_collections_are_locked_and_keep_their_kind() -> None:
    ctd = _mixed().consolidate()
    assert ctd["n"].is_locked and ctd["cell"].is_locked
    assert type(ctd["cell"]) is Cell and ctd["cell"].tag == "x"
    with pytest.raises(RuntimeError, match="locked"):
        ctd["n"]["new"] = torch.zeros(3)


@pytest.mark.parametrize("kind", ["mixed", "stack", "tensorclass"])
def test_pickle_round_trip_against_the_source(kind: str) -> None:
    if kind == "mixed":
        td: Any = _mixed()
    elif kind == "stack":
        td = lazy_stack([TensorDict({"a": torch.randn(2), "s": str(i)}) for i in range(3)])
    else:
        td = Cell(w=torch.randn(4, 2), tag="t", batch_size=[4])
    ctd = td.consolidate()
    back = pickle.loads(pickle.dumps(ctd))
    assert type(back) is type(td) and back.is_consolidated() and back.is_locked
    got, want = _leaf_list(back), _leaf_list(td)
    assert len(got) == len(want)
    for x, y in zip(got, want, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    storage = back._consolidated["storage"]
    assert {x.untyped_storage().data_ptr() for x in got} == {storage.untyped_storage().data_ptr()}


def test_the_wire_description_is_reused_and_tells_the_differences() -> None:
    td = _mixed()
    raw, fps = wire_description(td, Plan.of(_leaf_list(td)))
    again = td.clone()
    assert wire_description(again, Plan.of(_leaf_list(again))) == (raw, fps)
    renamed = td.clone()
    renamed.rename_key_("b", "z")
    raw2, fps2 = wire_description(renamed, Plan.of(_leaf_list(renamed)))
    assert fps2 != fps
    text = explain_mismatch(raw2, raw)
    assert "keys only on the sender [('z',)]" in text and "keys only here [('b',)]" in text
    reshaped = td.clone()
    reshaped["n", "c"] = torch.zeros(3, 7)
    raw3, _ = wire_description(reshaped, Plan.of(_leaf_list(reshaped)))
    text = explain_mismatch(raw3, raw)
    assert "key ('n', 'c') is float32 (3, 7) on the sender, float32 (3, 2) here" in text
    no_text = td.clone()
    del no_text["n", "text"]
    raw4, _ = wire_description(no_text, Plan.of(_leaf_list(no_text)))
    assert explain_mismatch(raw4, raw) == (
        "the non-tensor entries and stacks differ (the sender's: [('cell', 'tag')])"
    )
    stack = lazy_stack([TensorDict({"a": torch.zeros(2)}) for _ in range(2)])
    raw5, _ = wire_description(stack, Plan.of(_leaf_list(stack)))
    three = lazy_stack([TensorDict({"a": torch.zeros(2)}) for _ in range(3)])
    raw6, _ = wire_description(three, Plan.of(_leaf_list(three)))
    assert "keys only on the sender [('#2', 'a')]" in explain_mismatch(raw6, raw5)
    assert "(the sender's: [('<stack 0 x 3>',)])" in explain_mismatch(raw6, raw5)
    assert explain_mismatch(b"not json", raw) == "the sender's description is unreadable"


def test_a_consolidated_collection_keeps_its_wire_description() -> None:
    ctd = _mixed().consolidate()
    record = ctd._consolidated
    first = wire_description(ctd, record.plan)
    assert record.wire is first and wire_description(ctd, record.plan) is first


def test_a_file_whose_run_lists_leaves_out_of_order_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "td.bin"
    TensorDict({"a": torch.zeros(2), "b": torch.ones(2), "c": torch.ones(2)}, [2]).consolidate(path)
    data = path.read_bytes()
    length = int.from_bytes(data[-8:], "little")
    meta = json.loads(data[-8 - length : -8])
    meta["runs"][0][4] = [0, 2, 1]
    raw = json.dumps(meta, separators=(",", ":")).encode()
    blob = data[: -8 - length] + raw + len(raw).to_bytes(8, "little")
    with pytest.raises(ValueError, match="from_consolidated: run .* lists its leaves out of"):
        TensorDict.from_consolidated(torch.frombuffer(bytearray(blob), dtype=torch.uint8))


def test_a_staging_buffer_writes_every_leaf_in_place() -> None:
    sources = [torch.randn(3, 2) if i % 2 else torch.arange(4.0).double() for i in range(9)]
    plan = Plan.of(sources)
    staging = take(plan, torch.device("cpu"))
    plan.fill(staging.storage, sources)
    targets = [torch.zeros_like(s) for s in sources]
    targets[1] = torch.zeros(2, 3).t()  # a non-contiguous leaf is written through its strides
    targets[3].requires_grad_()  # a parameter is written too (no autograd record)
    kept = [t.data_ptr() for t in targets]
    staging.copy_to(targets)
    assert [t.data_ptr() for t in targets] == kept
    assert targets[3].grad_fn is None
    for got, want in zip(targets, sources, strict=True):
        torch.testing.assert_close(got.detach(), want, rtol=0, atol=0)


def test_staging_buffers_are_reused_per_plan_and_owned_by_one_transfer() -> None:
    plan = Plan.of([torch.zeros(5, 3) for _ in range(4)])
    first = take(plan, torch.device("cpu"))
    views = first.views()
    second = take(plan, torch.device("cpu"))  # the first is in use: a new buffer
    assert second.storage.data_ptr() != first.storage.data_ptr()
    give_back(first)
    again = take(plan, torch.device("cpu"))
    assert again is first and again.views() is views  # the views are made once
    other = Plan.of([torch.zeros(7) for _ in range(2)])
    assert take(other, torch.device("cpu")).plan is other  # never another plan's buffer
    huge = Plan([(torch.uint8, torch.Size([1]), 1, 0, [0])], 1, _STAGING_LIMIT + 1)
    give_back(Staging(huge, torch.empty(0, dtype=torch.uint8)))  # too large to keep
    assert all(s.plan is not huge for s in _FREE)


def test_pickle_writes_a_repeated_structure_once() -> None:
    groups = {
        f"g{i}": {
            f"leaf{j}": torch.randn(2, 3) if j % 2 else torch.arange(2) + i for j in range(10)
        }
        for i in range(20)
    }
    td = TensorDict(groups, [2]).consolidate()  # two interleaved runs: index lists
    raw = pickle.dumps(td)
    back = pickle.loads(raw)
    assert back.is_consolidated()
    assert_same(back, td)
    # 20 nodes of 10 keys: each key tuple and batch size is written once (3,008 bytes when
    # every node wrote its own)
    assert len(raw) - td._consolidated.storage.numel() < 2000


def test_pickle_keeps_every_batch_size_a_size_next_to_an_empty_level() -> None:
    # an empty level's key tuple () equals an empty torch.Size: the pickle writes each
    # once, but never hands one out for the other
    td = TensorDict(
        {"e": TensorDict({}, []), "x": torch.zeros(2), "n": TensorDict({"y": torch.ones(1)}, [])},
        [],
    ).consolidate()
    back = pickle.loads(pickle.dumps(td))
    for level in (back, back["e"], back["n"]):
        assert type(level.batch_size) is torch.Size
        assert level.batch_size.numel() == 1
    assert list(back["e"].keys()) == [] and list(back["n"].keys()) == ["y"]
    assert_same(back, td)


def test_pickle_of_one_run_carries_its_first_index_only() -> None:
    td = TensorDict({f"k{i}": torch.full((3,), float(i)) for i in range(50)}, [3]).consolidate()
    runs = td.__reduce_ex__(2)[1][1]
    assert [r[4] for r in runs] == [0]
    back = pickle.loads(pickle.dumps(td))
    assert back._consolidated.plan.runs[0][4] == list(range(50))
    assert_same(back, td)


@pytest.mark.parametrize("changed", ["head", "later", "empty"])
def test_a_leaf_reshaped_in_place_is_planned_again(changed: str) -> None:
    # consolidate() reads one shape per run of a reused plan and lets torch.stack check
    # the others: a leaf whose shape changed in place (same object, same dtype) must
    # still get a new plan, whichever leaf of the run it is
    td = TensorDict(
        {"a": torch.randn(3, 2), "b": torch.randn(3, 2), "c": torch.randn(3, 2)}
        | {"e": torch.zeros(3, 0), "f": torch.zeros(3, 0)},
        [3],
    )
    td.consolidate()  # the plan is made and kept
    if changed == "head":
        td["a"].resize_(3, 4).copy_(torch.randn(3, 4))
    elif changed == "later":
        td["c"].resize_(3, 4).copy_(torch.randn(3, 4))
    else:
        td["f"].resize_(3, 0, 2)
    ctd = td.consolidate()
    for key in "abcef":
        assert ctd[key].shape == td[key].shape
        torch.testing.assert_close(ctd[key], td[key], rtol=0, atol=0)
    assert ctd.is_consolidated() and Plan.of(_leaf_list(td)) is ctd._consolidated.plan


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_the_wire_and_consolidate_walks_take_the_leaves_in_walk_order(name: str) -> None:
    td = CATALOGUE[name]()
    mixed = _mixed()
    for source in (td, lazy_stack([mixed, mixed.clone()]), TensorDict({"t": td, "m": mixed})):
        expected = _leaf_list(source)
        plan, storage, leaves, (raw, _) = wire_plan(source)
        assert storage is None and leaves is not None
        assert [id(x) for x in leaves] == [id(x) for x in expected]
        tokens = json.loads(raw)["tokens"]
        assert sum(1 for t in tokens if t[:1] not in "\x1b\x1c\x1d\x1e") == len(expected)
        assert plan is Plan.of(expected)
        # consolidate's walk: the same leaves, and one flag per dense node for its rebuild
        walked: list[torch.Tensor] = []
        whole: list[bool] = []
        walk(source, walked, whole)
        assert [id(x) for x in walked] == [id(x) for x in expected]
        flags = iter(whole)
        rebuilt, end = locked_copy(source, walked, 0, flags)
        assert end == len(expected) and next(flags, None) is None
        assert [id(x) for x in rebuilt._tensor_leaves([])] == [id(x) for x in expected]
        # a send's walk: the leaves stacked into a staging buffer, the same description
        filled, staging, sent, (sent_raw, _) = wire_fill(source, take, lambda plan: None)
        assert filled is plan and sent_raw == raw
        assert [id(x) for x in sent] == [id(x) for x in expected]
        for leaf, view in zip(expected, staging.views(), strict=True):
            torch.testing.assert_close(view, leaf, rtol=0, atol=0)
        give_back(staging)


def test_a_transfer_waited_from_two_threads_gives_its_buffer_back_once() -> None:
    import threading
    import time

    from tensordict._dist_wire import Pending

    class _SlowWork:
        def wait(self) -> bool:
            time.sleep(0.05)
            return True

    plan = Plan.of([torch.zeros(4) for _ in range(3)])
    staging = take(plan, torch.device("cpu"))
    finished: list[int] = []

    def finish() -> None:
        finished.append(1)
        give_back(staging)

    pending = Pending([_SlowWork()], finish)
    threads = [threading.Thread(target=pending.wait) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert finished == [1]  # the unpacking ran once
    give_back(staging)  # and a second give-back is ignored
    assert sum(kept is staging for kept in _FREE) == 1
    first, second = take(plan, torch.device("cpu")), take(plan, torch.device("cpu"))
    assert first is not second  # never one buffer for two transfers


def test_a_file_consolidation_rebuilds_every_level(tmp_path: Path) -> None:
    # levels that mix tensors and other entries, with leaves whose bytes are not zero:
    # the rebuild takes each level's kind from the walk, never from the file's bytes
    td = TensorDict(
        {"x": torch.full((2, 3), 7.0), "n": {"y": torch.full((2,), 5), "s": "text"}, "t": "top"},
        [2],
    )
    ctd = td.consolidate(tmp_path / "td.bin")
    back = TensorDict.from_consolidated(tmp_path / "td.bin")
    for out in (ctd, back):
        assert out["t"] == "top" and out["n", "s"] == "text"
        torch.testing.assert_close(out["x"], td["x"], rtol=0, atol=0)
        torch.testing.assert_close(out["n", "y"], td["n", "y"], rtol=0, atol=0)


def test_a_file_backed_collection_is_consolidated_in_memory(tmp_path: Path) -> None:
    pytest.importorskip("h5py")
    from tensordict import PersistentTensorDict

    td = TensorDict({"a": torch.arange(6.0).view(3, 2), "n": {"b": torch.arange(3)}}, [3])
    on_disk = PersistentTensorDict.from_dict(td, filename=str(tmp_path / "td.h5"))
    ctd = on_disk.consolidate()
    assert ctd.is_consolidated() and ctd.batch_size == td.batch_size
    assert len({v.untyped_storage().data_ptr() for v in ctd.values(True, True)}) == 1
    for key in (("a",), ("n", "b")):
        torch.testing.assert_close(ctd[key], td[key], rtol=0, atol=0)
    with pytest.raises(ValueError, match="consolidate: inplace=True needs the leaves in memory"):
        on_disk.consolidate(inplace=True)
