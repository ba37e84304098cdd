"""``to_dict`` and ``tolist`` with upstream's options: tensors as lists, nodes as dicts."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from torch import Tensor

from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack


def _leaf(value: Tensor, convert_tensors: bool | str) -> Any:
    if convert_tensors == "numpy":
        return value.detach().cpu().numpy()
    return value.tolist() if convert_tensors else value


def with_unset_fields(td: Any, out: dict[str, Any]) -> dict[str, Any]:
    """``out`` with a tensorclass's unset (None) fields put back, in declaration order, as
    upstream's ``to_dict`` keeps them (they hold no entry here)."""
    fields = getattr(type(td), "_fields", None)
    if not fields or all(name in out for name in fields):
        return out
    ordered = {name: out.get(name) for name in fields}
    ordered.update(out)
    return ordered


def to_dict(
    td: Any,
    *,
    retain_none: bool,
    convert_tensors: bool | str,
    tolist_first: bool,
    unset_fields: bool = True,
) -> dict[str, Any]:
    """Nested dicts of a dense TensorDict's entries (see ``TensorDict.to_dict``);
    ``unset_fields=False`` leaves a tensorclass's unset fields out of this level (and of
    the levels below with ``tolist_first``), as upstream's ``tolist`` does (its
    ``to_dict`` lists them as None)."""
    out: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, NonTensor):
            public = value._public()
            if public is None and not retain_none:
                continue
            out[key] = public
        elif isinstance(value, Tensor):
            out[key] = _leaf(value, convert_tensors)
        elif tolist_first and len(value.batch_size) > len(td.batch_size):
            out[key] = tolist(
                value,
                convert_nodes=True,
                convert_tensors=convert_tensors,
                tolist_first=True,
                retain_none=retain_none,
                skip=len(td.batch_size),
            )
        else:
            out[key] = to_dict(
                value._as_dense("to_dict"),
                retain_none=retain_none,
                convert_tensors=convert_tensors,
                tolist_first=tolist_first,
                unset_fields=unset_fields or not tolist_first,
            )
    return with_unset_fields(td, out) if retain_none and unset_fields else out


def tolist(
    td: Any,
    *,
    convert_nodes: bool,
    convert_tensors: bool | str,
    tolist_first: bool,
    retain_none: bool = True,
    skip: int = 0,
) -> Any:
    """A nested list over the batch dims (after the first ``skip``) of ``td``'s elements."""
    if convert_tensors and not convert_nodes:
        raise TypeError(
            f"{type(td).__name__}.tolist: convert_tensors=True needs convert_nodes=True "
            "(a TensorDict element keeps its tensors)"
        )
    if len(td.batch_size) == skip:
        if not convert_nodes:
            return td
        return to_dict(
            td._as_dense("tolist"),
            retain_none=retain_none,
            convert_tensors=convert_tensors,
            tolist_first=tolist_first,
            unset_fields=False,
        )
    return [
        tolist(
            part,
            convert_nodes=convert_nodes,
            convert_tensors=convert_tensors,
            tolist_first=tolist_first,
            retain_none=retain_none,
            skip=skip,
        )
        for part in td.unbind(skip)
    ]


class LinkedList(list):  # type: ignore[type-arg]
    """The list ``tolist(as_linked_list=True)`` returns: ``ll[i] = value`` also writes
    ``td[i] = value`` into the collection it came from (while that collection lives).

    A change of length or order (``append``, ``insert``, ``pop``, ``sort``, ...) cannot be
    mirrored in a batch of fixed size: it unlinks the list, which is a plain list from
    then on. Only the outer list is linked.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict(a=torch.zeros(3), batch_size=[3])
    >>> rows = td.tolist(convert_nodes=False, as_linked_list=True)
    >>> rows[1] = TensorDict(a=torch.ones(()))
    >>> td["a"]
    tensor([0., 1., 0.])
    """

    def __init__(self, *args: Any, td: Any) -> None:
        super().__init__(*args)
        self._td: Callable[[], Any] = weakref.ref(td)
        if type(td) is _EntryRows:
            self._rows = td  # (nothing else holds it: the collection is held weakly by it)

    def __setitem__(self, index: Any, value: Any) -> None:
        td = self._td()
        if td is not None:
            if isinstance(index, slice):
                value = list(value)
                rows = range(*index.indices(len(self)))
                if len(rows) != len(value):  # the length changes: it cannot be mirrored
                    self._unlink()
                else:
                    _write_rows(td, rows, value, [self[row] for row in rows])
            else:
                td[index] = value  # first: a row the collection refuses leaves the list as is
        super().__setitem__(index, value)

    def tolist(self) -> list[Any]:
        """A plain (unlinked) copy, nested linked lists included.

        >>> from tensordict import NonTensorStack, TensorDict
        >>> td = TensorDict(a=NonTensorStack("x", "y"), batch_size=[2])
        >>> td["a"].tolist()
        ['x', 'y']
        """
        return [item.tolist() if isinstance(item, LinkedList) else item for item in self]

    def _unlink(self) -> None:
        self._td = _dead

    def __repr__(self) -> str:
        return f"LinkedList({super().__repr__()})"

    def __reduce__(self) -> tuple[Any, ...]:  # the link is to this process's object
        return (list, (list(self),))


def _write_rows(td: Any, rows: range, values: list[Any], before: list[Any]) -> None:
    """``td[row] = value`` for each pair, all or nothing: a row the collection refuses
    puts back the rows already written (``before``: the list's values, or copies of a
    collection's rows, taken before any write)."""
    saved = [old.clone() if hasattr(old, "clone") else old for old in before]
    done = 0
    try:
        for row, item in zip(rows, values, strict=True):
            td[row] = item
            done += 1
    except BaseException:
        for row, old in zip(rows[:done], saved[:done], strict=True):
            td[row] = old
        raise


def _dead() -> None:
    return None


class _EntryRows:
    """The rows of one non-tensor entry of a collection, as a :class:`LinkedList` writes
    them: ``rows[i] = value`` is ``td[i] = {key: value}``, with ``key`` nested as given."""

    __slots__ = ("__weakref__", "_nested", "_path", "_td")

    def __init__(self, td: Any, path: tuple[str, ...], nested: bool) -> None:
        self._td: Callable[[], Any] = weakref.ref(td)
        self._path = path
        self._nested = nested  # rows are lists themselves (a batch of several dims)

    def __setitem__(self, index: Any, value: Any) -> None:
        td = self._td()
        if td is not None:  # (else the collection is gone: the list is a plain list)
            write_value_at(td, self._path, index, value, self._nested)


def write_value_at(td: Any, path: tuple[str, ...], index: Any, value: Any, row: bool) -> None:
    """Write ``value`` into the non-tensor entry ``path`` of ``td`` at batch ``index`` (an
    index write of that entry alone). With ``row``, a list is one value per element of the
    row; otherwise a number or a list stays one value (not a tensor)."""
    if row and isinstance(value, list):
        value = NonTensorStack.from_list(value, None)
    elif not isinstance(value, (NonTensorData, NonTensorStack)):
        value = NonTensorData(value)
    for part in reversed(path):
        value = {part: value}
    td._set_at_index(index, value)


def linked_entry(td: Any, path: tuple[str, ...], stack: Any) -> LinkedList:
    """What ``td[path]`` gives for a stack of non-tensor values (as upstream): the values
    as a :class:`LinkedList` whose ``ll[i] = value`` also writes row ``i`` of the entry.

    >>> from tensordict import NonTensorStack, TensorDict
    >>> td = TensorDict(a=NonTensorStack("x", "y"), batch_size=[2])
    >>> names = td["a"]
    >>> names[1] = "z"
    >>> names, td["a"]
    (LinkedList(['x', 'z']), LinkedList(['x', 'z']))
    """
    return LinkedList(stack.tolist(), td=_EntryRows(td, path, stack.batch_dims > 1))


def _unlinking(name: str) -> Callable[..., Any]:
    method = getattr(list, name)

    def unlink_then(self: LinkedList, *args: Any, **kwargs: Any) -> Any:
        self._unlink()
        return method(self, *args, **kwargs)

    unlink_then.__name__ = name
    unlink_then.__doc__ = f"``list.{name}``; unlinks the list from its collection."
    return unlink_then


for _name in (
    "append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
    "__delitem__", "__iadd__", "__imul__",
):  # fmt: skip
    setattr(LinkedList, _name, _unlinking(_name))
