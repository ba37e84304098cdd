"""Collections as context managers: ``with td.unlock_():`` and ``with td.permute(1, 0) as t:``.

``lock_``/``unlock_`` and the batch-shape views record on their result what produced it
(:func:`record`); entering the result remembers that record, and leaving undoes it: the
lock state is restored, and a view writes its entries (new ones included) back to the
collection it came from, through the inverse shape operation (a ``to()`` result: back to
the devices, and the dtypes if it cast, of the collection's leaves).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

import torch

from tensordict._primitives import CollectionPrimitives

if TYPE_CHECKING:
    from typing import Self

#: (operation, normalised arguments, source collection or None)
LastOp = tuple[str, tuple[Any, ...], Any]
T = TypeVar("T")


def record(out: T, op: str, args: tuple[Any, ...], source: Any) -> T:
    """Note on ``out`` that it is ``source.<op>(*args)``; returns ``out``."""
    out._last_op = (op, args, source)  # type: ignore[attr-defined]
    return out


def _squeezed_dims(before: tuple[int, ...], after: tuple[int, ...]) -> list[int]:
    """The dims of ``before`` (all of size one) that a squeeze dropped to give ``after``."""
    dropped, j = [], 0
    for i, size in enumerate(before):
        if j < len(after) and after[j] == size:
            j += 1
        else:
            dropped.append(i)
    return dropped


def _undo(view: Any, op: str, args: tuple[Any, ...], source: Any) -> Any:
    """``view`` brought back to the batch shape of ``source`` by the inverse of ``op``."""
    if op in ("view", "reshape"):
        return view.view(source.batch_size)
    if op == "unsqueeze":
        return view.squeeze(args[0])
    if op == "squeeze":
        out = view
        for d in _squeezed_dims(tuple(source.batch_size), tuple(view.batch_size)):
            out = out.unsqueeze(d)
        return out
    if op == "permute":
        order = args[0]
        inverse = [order.index(i) for i in range(len(order))]
        return view.permute(*inverse)
    if op == "transpose":
        return view.transpose(*args)
    if op == "flatten":
        start, end = args
        if not source.batch_size:
            return view.squeeze(0)
        return view.unflatten(start, tuple(source.batch_size[start : end + 1]))
    if op == "unflatten":
        dim, sizes = args
        return view.flatten(dim, dim + len(sizes) - 1)
    raise NotImplementedError(f"{type(view).__name__}.__exit__: cannot undo {op!r}")


def _moved_back(moved: Any, source: Any, restore_dtype: bool) -> Any:
    """The leaves of ``moved`` (a ``to()`` of ``source``) on the device (and, if that
    ``to()`` cast, with the dtype) of ``source``'s leaf of the same key; a new leaf stays
    as it is."""

    def back(new: Any, old: Any) -> Any:
        if old is None or not isinstance(new, torch.Tensor):
            return new
        return new.to(old.device, old.dtype) if restore_dtype else new.to(old.device)

    return moved.apply(back, source, default=None)


def adopt(td: Any, out: Any, call: str) -> Any:
    """``td`` made, in place, what ``out`` is (entries, batch size, names): the
    ``inplace=True`` of shape operations. Nested collections keep their identity, and a
    lazy stack adopts member by member (a result that is a stack of as many members
    along the same dim, of the same batch size). Every member is checked before any
    is changed, so a refusal leaves ``td`` as it was."""
    _check_adoptable(td, out, call)
    _adopt_any(td, out)
    return td


def _check_adoptable(td: Any, out: Any, call: str) -> None:
    parts = td._stack_parts()
    if parts is not None:
        if not _stacks_alike(td, out):
            raise NotImplementedError(
                f"{call}: inplace=True is not supported on a {type(td).__name__} where "
                "the result is not a stack of as many members along the same dim and of "
                "the same batch size; call it without inplace and use the result"
            )
        for member, new in zip(parts[1], out._stack_parts()[1], strict=True):
            _check_adoptable(member, new, call)
        return
    if td._is_locked and not _same_leaves(td, out):  # leaves or batch size would change
        raise RuntimeError(
            f"{call}: Cannot modify locked TensorDict with inplace=True (it replaces every "
            "entry and the batch size); call unlock_() first, or use the result without "
            "inplace"
        )


def _stacks_alike(td: Any, out: Any) -> bool:
    """Whether ``out`` is a stack of as many members as the stack ``td``, along the same
    dim and of the same batch size (``td`` can take it member by member)."""
    mine = td._stack_parts()
    theirs = out._stack_parts() if hasattr(out, "_stack_parts") else None
    return (
        mine is not None
        and theirs is not None
        and theirs[0] == mine[0]
        and len(theirs[1]) == len(mine[1])
        and out.batch_size == td.batch_size
    )


def _adopt_any(td: Any, out: Any) -> None:
    parts = td._stack_parts()
    if parts is None:
        _adopt_dense(td, out)
        return
    for member, new in zip(parts[1], out._stack_parts()[1], strict=True):
        _adopt_any(member, new)


def _same_leaves(td: Any, out: Any) -> bool:
    """Whether ``out`` holds ``td``'s own leaves at its batch size (adopting it changes
    nothing: ``contiguous(inplace=True)`` of a contiguous collection)."""
    if out is td:
        return True
    if out._batch_size != td._batch_size:
        return False
    mine, theirs = td._tensor_leaves([]), out._tensor_leaves([])
    return len(mine) == len(theirs) and all(a is b for a, b in zip(mine, theirs, strict=True))


def _adopt_dense(td: Any, out: Any) -> None:
    store = td._tensordict
    entries = {}
    for key, value in out._tensordict.items():
        current = store.get(key)
        if hasattr(value, "_tensordict") and hasattr(current, "_tensordict"):
            _adopt_dense(current, value)
            value = current
        elif (  # a nested lazy stack keeps its identity too
            hasattr(current, "_stack_parts")
            and current._stack_parts() is not None
            and _stacks_alike(current, value)
        ):
            _adopt_any(current, value)
            value = current
        entries[key] = value
    store.clear()
    store.update(entries)
    td._batch_size = out._batch_size
    td._names = out._names


class ContextOps(CollectionPrimitives):
    """``__enter__``/``__exit__``: undo the recorded lock change or write a view back."""

    __slots__ = ()  # its attributes are slots of CollectionPrimitives
    _last_op: LastOp | None
    _op_stack: list[LastOp | None]

    def __enter__(self) -> Self:
        stack: list[LastOp | None] | None = getattr(self, "_op_stack", None)
        if stack is None:
            stack = []
            self._op_stack = stack
        stack.append(getattr(self, "_last_op", None))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        last = self._op_stack.pop()
        if exc_type is not None or last is None:  # as upstream: an error leaves things as
            return False  # they are (locked after lock_(), a view's changes not written back)
        op, args, source = last
        if op in ("lock_", "unlock_"):  # back to the state before (args: (was_locked,))
            was = bool(args[0]) if args else op == "unlock_"
            if was != self._is_locked:
                self.lock_() if was else self.unlock_()
        else:
            if op == "to":  # (held weakly: gone, nothing is left to write back into)
                source = source()
                if source is None:
                    return False
            back = (
                _moved_back(self, source, args[0]) if op == "to" else _undo(self, op, args, source)
            )
            if source.is_locked:
                source.update_(back)
            else:
                source.update(back)
        return False
