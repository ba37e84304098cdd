"""The dispatch rule of MemoryMappedTensor: torch runs ops as on a plain tensor, views stay mapped.

``__torch_function__`` is torch's disabled one, so no Python runs between an op and its
kernel: results are plain tensors (an op returning its input, like ``contiguous()`` or an
in-place op, returns the input itself). The Tensor *methods* that make views are wrapped
here, so a view of the mapping is still a MemoryMappedTensor; ``torch.*`` functions
(``torch.reshape(mm, ...)``) give plain tensors that view the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor

from tensordict._torch_compat import disable_subclass_dispatch, disabled_torch_function

# Tensor methods whose result always views the input.
_VIEWS = (
    "adjoint",
    "as_strided",
    "detach",
    "diagonal",
    "expand",
    "expand_as",
    "movedim",
    "moveaxis",
    "narrow",
    "permute",
    "select",
    "squeeze",
    "swapaxes",
    "swapdims",
    "t",
    "transpose",
    "unflatten",
    "unfold",
    "unsqueeze",
    "view",
    "view_as",
)
# ... and a tuple of views.
_VIEW_TUPLES = (
    "chunk",
    "dsplit",
    "hsplit",
    "split",
    "split_with_sizes",
    "tensor_split",
    "unbind",
    "vsplit",
)
# ... a view when the layout allows it, else a copy (which starts elsewhere).
_MAYBE_VIEWS = ("flatten", "ravel", "reshape", "reshape_as")
_VIEW_PROPERTIES = ("H", "T", "data", "mH", "mT")

_getitem = Tensor.__getitem__


def _mapped(out: Tensor, cls: type) -> Tensor:
    """``out``, a fresh view of the mapping, as ``cls`` (a zero-size one stays plain).

    The new tensor object changes class in place (one pointer): ``as_subclass`` would
    make a second alias of the view, which costs as much as the view itself.
    """
    if out.__class__ is Tensor and out.numel():
        out.__class__ = cls
    return out


# Whether a tensor class is mapped (a MappedViews), learned once per class: a dict read
# is cheaper than ``isinstance`` against a class whose metaclass is torch's _TensorMeta.
MAPPED_CLASS: dict[type, bool] = {Tensor: False}


def learn_mapped(cls: type) -> bool:
    """Whether ``cls`` is a mapped tensor class, recorded in ``MAPPED_CLASS``."""
    mapped = MAPPED_CLASS[cls] = issubclass(cls, MappedViews)
    return mapped


def index_mapped_into(entries: dict[str, Any], pairs: list[tuple[str, Tensor]], index: Any) -> None:
    """Set ``entries[key]`` to ``tensor[index]`` as ``MappedViews.__getitem__`` gives it,
    for each mapped ``(key, tensor)`` of ``pairs``, in one pass: no Python frame per
    tensor, and no per-argument ``__torch_function__`` lookup.

    A collection indexing many mapped leaves at once (``td[3]``) calls this.
    """
    kind = index.__class__
    basic = kind is int or kind is slice  # basic indexing: always a view
    with disable_subclass_dispatch():
        for key, tensor in pairs:
            out = _getitem(tensor, index)
            if out.numel() and (
                basic or out.untyped_storage().data_ptr() == tensor.untyped_storage().data_ptr()
            ):
                out.__class__ = tensor.__class__
            entries[key] = out


def _view(name: str) -> Callable[..., Any]:
    plain = getattr(Tensor, name)

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return _mapped(plain(self, *args, **kwargs), type(self))

    return method


def _view_tuple(name: str) -> Callable[..., Any]:
    plain = getattr(Tensor, name)

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        cls = type(self)
        return tuple([_mapped(o, cls) for o in plain(self, *args, **kwargs)])

    return method


def _maybe_view(name: str) -> Callable[..., Any]:
    plain = getattr(Tensor, name)

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        out = plain(self, *args, **kwargs)
        if out.data_ptr() == self.data_ptr():  # a copy is a new allocation
            return _mapped(out, type(self))
        return out

    return method


def _view_property(name: str) -> property:
    plain = getattr(Tensor, name)

    def get(self: Tensor) -> Any:
        return _mapped(plain.__get__(self), type(self))

    return property(get, plain.__set__ if name == "data" else None, doc=plain.__doc__)


class MappedViews(Tensor):
    """Base of MemoryMappedTensor: plain-tensor dispatch, and view methods that stay mapped."""

    __torch_function__ = disabled_torch_function

    def __getitem__(self, index: Any) -> Any:
        out = _getitem(self, index)
        kind = index.__class__
        if kind is int or kind is slice:  # basic indexing: always a view (``_mapped`` inlined)
            if out.__class__ is Tensor and out.numel():
                out.__class__ = type(self)
            return out
        if out.numel() and out.untyped_storage().data_ptr() == self.untyped_storage().data_ptr():
            return _mapped(out, type(self))
        return out  # advanced indexing copied

    def __format__(self, format_spec: str) -> str:
        # a one-element view is formatted as its value, as a plain tensor is (the repr of
        # a tensor formats its elements, which are views and so mapped)
        if self.dim() == 0:
            return format(self.item(), format_spec)
        return object.__format__(self, format_spec)


def _install() -> None:
    makers: list[tuple[tuple[str, ...], Callable[[str], Any]]] = [
        (_VIEWS, _view),
        (_VIEW_TUPLES, _view_tuple),
        (_MAYBE_VIEWS, _maybe_view),
        (_VIEW_PROPERTIES, _view_property),
    ]
    for names, make in makers:
        for name in names:
            attr = make(name)
            if not isinstance(attr, property):
                attr.__name__ = attr.__qualname__ = name
                attr.__doc__ = f"``Tensor.{name}``; a view of the mapping stays memory-mapped."
            setattr(MappedViews, name, attr)


_install()
