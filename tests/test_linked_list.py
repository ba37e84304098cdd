"""``tolist(as_linked_list=True)`` and ``tensordict.utils.LinkedList``; a lazy stack's
``valid_keys``."""

from __future__ import annotations

import gc
import pickle

import pytest
import torch

from tensordict import TensorDict, lazy_stack
from tensordict.utils import LinkedList


def _rows() -> tuple[TensorDict, LinkedList]:
    td = TensorDict(a=torch.zeros(3, 2), batch_size=[3])
    rows = td.tolist(convert_nodes=False, as_linked_list=True)
    assert isinstance(rows, LinkedList)
    return td, rows


def test_item_assignment_is_written_back() -> None:
    td, rows = _rows()
    rows[2] = TensorDict(a=torch.ones(2))
    assert td["a"].tolist() == [[0, 0], [0, 0], [1, 1]]
    rows[-3] = {"a": torch.full((2,), 5.0)}
    assert td["a"][0].eq(5).all()


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r.append(0),
        lambda r: r.insert(0, 0),
        lambda r: r.pop(),
        lambda r: r.clear(),
        lambda r: r.reverse(),
        lambda r: r.__delitem__(0),
        lambda r: r.extend([1]),
        lambda r: r.__iadd__([1]),
    ],
)
def test_a_change_of_length_or_order_unlinks(edit: object) -> None:
    td, rows = _rows()
    edit(rows)  # type: ignore[operator]
    if rows:
        rows[0] = TensorDict(a=torch.ones(2))
    assert td["a"].eq(0).all()


def test_the_link_does_not_keep_the_collection_alive() -> None:
    td, rows = _rows()
    del td
    gc.collect()
    rows[0] = "anything"  # nothing to write into: a plain item assignment
    assert rows[0] == "anything"


def test_pickle_repr_and_equality() -> None:
    _, rows = _rows()
    back = pickle.loads(pickle.dumps(rows))
    assert type(back) is list and len(back) == 3
    assert repr(rows).startswith("LinkedList([")
    assert rows == list(rows)


def test_converted_rows_and_no_batch_dims() -> None:
    td = TensorDict(a=torch.arange(2), batch_size=[2])
    rows = td.tolist(as_linked_list=True)
    assert isinstance(rows, LinkedList) and [r["a"].item() for r in rows] == [0, 1]
    scalar = TensorDict(a=torch.zeros(()))
    assert scalar.tolist(as_linked_list=True) == scalar.tolist()


def test_valid_keys_are_the_keys_every_member_has() -> None:
    stack = lazy_stack(
        [TensorDict(a=torch.zeros(()), b=torch.zeros(())), TensorDict(a=torch.ones(()))]
    )
    assert stack.valid_keys() == stack.keys() == ["a"]


def test_vmap_hooks_are_none_and_read_only() -> None:
    stack = lazy_stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))])
    assert stack.hook_in is None and stack.hook_out is None
    with pytest.raises(AttributeError):
        stack.hook_out = lambda x: x  # type: ignore[misc,assignment]
    out = torch.vmap(lambda t: t["a"] + 1)(stack)
    torch.testing.assert_close(out, torch.stack([torch.ones(2), torch.full((2,), 2.0)]))


def test_a_slice_of_the_same_length_writes_through_another_length_unlinks() -> None:
    td, rows = _rows()
    rows[0:2] = [TensorDict(a=torch.ones(2)), TensorDict(a=torch.full((2,), 2.0))]
    assert td["a"].tolist() == [[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]]
    rows[::2] = [TensorDict(a=torch.full((2,), 5.0))] * 2
    assert td["a"][:, 0].tolist() == [5.0, 2.0, 5.0]
    rows[0:2] = [TensorDict(a=torch.full((2,), 7.0))]  # shorter: the list unlinks
    assert len(rows) == 2 and rows._td() is None
    assert td["a"][:, 0].tolist() == [5.0, 2.0, 5.0]  # the collection is left as it was
    rows[0] = TensorDict(a=torch.full((2,), 9.0))  # and no longer written through
    assert td["a"][0, 0].item() == 5.0


def test_linked_list_tolist_is_a_plain_nested_list() -> None:
    from tensordict import NonTensorStack

    grid = NonTensorStack(NonTensorStack("a", "b"), NonTensorStack("c", "d"))
    linked = grid.tolist(as_linked_list=True)
    plain = linked.tolist()
    assert plain == [["a", "b"], ["c", "d"]]
    assert type(plain) is list and all(type(row) is list for row in plain)


def test_a_refused_row_leaves_both_as_they_were() -> None:
    td, rows = _rows()
    with pytest.raises(RuntimeError):
        rows[0] = TensorDict(a=torch.ones(5))  # the wrong shape for a row
    assert len(rows) == 3 and rows[0]["a"].tolist() == [0.0, 0.0]
    assert td["a"].eq(0).all()


def test_a_non_tensor_stack_entry_reads_as_a_list_writing_through() -> None:
    from tensordict import NonTensorStack

    td = TensorDict(
        a=NonTensorStack("foo", "bar"),
        x=torch.zeros(2),
        n={"b": NonTensorStack("u", "v")},
        batch_size=[2],
    )
    names = td["a"]
    assert isinstance(names, LinkedList) and isinstance(names, list)
    assert names == ["foo", "bar"] and str(names) == repr(names) == "LinkedList(['foo', 'bar'])"
    names[0] = "baz"
    names[1] = 3  # a number stays a value (not a tensor)
    assert td["a"] == ["baz", 3] and names == ["baz", 3]
    assert torch.equal(td["x"], torch.zeros(2))  # the other entries are left alone
    nested = td["n", "b"]
    nested[1] = ["a", "list"]  # one element's value
    assert td["n", "b"] == ["u", ["a", "list"]]
    grid = TensorDict(
        g=NonTensorStack(NonTensorStack("a", "b"), NonTensorStack("c", "d")), batch_size=[2, 2]
    )
    rows = grid["g"]
    rows[1] = ["p", "q"]  # a row of a two-dim batch: one value per element
    assert grid["g"] == [["a", "b"], ["p", "q"]]
    rows.append("x")  # a change of length unlinks it
    rows[0] = ["z", "z"]
    assert grid["g"] == [["a", "b"], ["p", "q"]]
    assert type(pickle.loads(pickle.dumps(names))) is list
    del td
    names[0] = "after"  # the collection is gone: a plain list write
    assert names[0] == "after"


def test_set_at_writes_one_element_of_a_non_tensor_entry() -> None:
    from tensordict import NonTensorStack

    td = TensorDict(
        a=NonTensorStack("foo", "bar"), x=torch.zeros(2), n={"s": "one"}, batch_size=[2]
    )
    td.set_at_("a", "x", 0)
    td.set_at_(("n", "s"), "two", 1)  # one shared value becomes a stack
    td.set_at_("a", 5, 1)  # a number stays a value
    assert td["a"] == ["x", 5] and td["n", "s"] == ["one", "two"]
    assert torch.equal(td["x"], torch.zeros(2))
    stacked = lazy_stack([TensorDict(s="p"), TensorDict(s="q")])
    stacked.set_at_("s", "r", 0)
    assert stacked["s"] == ["r", "q"]


def test_a_refused_row_in_a_slice_write_puts_back_the_rows_written() -> None:
    td, rows = _rows()
    with pytest.raises(RuntimeError):
        rows[0:2] = [TensorDict(a=torch.full((2,), 9.0)), TensorDict(a=torch.ones(5))]
    assert td["a"].eq(0).all()  # row 0 was written, then put back
    assert rows[0]["a"].tolist() == [0.0, 0.0] and len(rows) == 3
