"""The text form of a collection: the compact form by default, the verbose one on request."""

from __future__ import annotations

import functools
import reprlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import Tensor

from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._printoptions import OPTIONS
from tensordict._unbatched import UnbatchedTensor

_INDENT = "    "
VALUE_WIDTH = 40  # characters of a non-tensor value in the compact form
_CPU = torch.device("cpu")

# bounded reprs: a 2-million-item list is cut after a few items, never built whole


class _Short(reprlib.Repr):
    def repr_instance(self, x: Any, level: int) -> str:
        try:
            text = repr(x)
        except Exception as err:  # a user's __repr__ may raise anything
            return f"<{type(x).__name__}: repr raised {type(err).__name__}>"
        if len(text) > self.maxother:
            half = max(0, (self.maxother - 3) // 2)
            return text[:half] + "..." + text[len(text) - half :]
        return text


_SHORT = _Short()
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxfrozenset = 8
_SHORT.maxdict = _SHORT.maxdeque = _SHORT.maxarray = 8
_SHORT.maxstring = _SHORT.maxother = 200
_SHORT.maxlevel = 3


def short_value(value: Any, width: int = 200) -> str:
    """``repr(value)`` cut to ``width`` characters, built without the whole repr of a large
    container; a repr that raises gives a placeholder naming the error.

    >>> short_value(list(range(10**6)), 30)
    '[0, 1, 2, 3, 4, 5, 6, 7, ...]'
    >>> class Bad:
    ...     def __repr__(self):
    ...         raise ValueError("no")
    >>> short_value(Bad())
    '<Bad: repr raised ValueError>'
    """
    try:
        text = _SHORT.repr(value)
    except Exception as err:  # a user's __repr__ may raise anything
        return f"<{type(value).__name__}: repr raised {type(err).__name__}>"
    return text if len(text) <= width else text[: width - 1] + "…"


def data_text(value: Any, width: int = 200) -> str:
    """``str`` of a non-tensor value (as upstream's ``data=`` shows it), cut the same way."""
    if isinstance(value, str):
        return value if len(value) <= width else value[: width - 1] + "…"
    return short_value(value, width)


def members(td: Any) -> list[Any] | None:
    """The members of a lazy stack, None for a dense collection."""
    parts = td._stack_parts()
    return None if parts is None else list(parts[1])


def first_value(td: Any, key: str) -> Any:
    """The value at ``key`` of the first dense member (``td`` itself when dense)."""
    while (ms := members(td)) is not None:
        if not ms:
            return None
        td = ms[0]
    return td._tensordict.get(key)


def leaf_info(td: Any, key: str) -> tuple[list[int], torch.dtype, set[torch.device]] | None:
    """Full shape (-1 where members differ), promoted dtype and devices of the tensor at
    ``key``, read from the members of a lazy stack without stacking; None unless every
    member holds a tensor there."""
    ms = members(td)
    if ms is None:
        value = td._tensordict.get(key)
        if not isinstance(value, Tensor):
            return None
        return list(_shape(value)), value.dtype, {value.device}
    shapes: list[list[int]] = []
    dtypes: list[torch.dtype] = []
    devices: set[torch.device] = set()
    for m in ms:
        info = leaf_info(m, key)
        if info is None:
            return None
        shapes.append(info[0])
        dtypes.append(info[1])
        devices |= info[2]
    if not shapes:
        return None
    shape = list(shapes[0])
    for other in shapes[1:]:
        if len(other) != len(shape):
            shape = [-1] * max(len(shape), len(other))
            break
        shape = [s if s == o else -1 for s, o in zip(shape, other, strict=True)]
    shape.insert(td._stack_parts()[0], len(ms))
    return shape, functools.reduce(torch.promote_types, dtypes), devices


def sorted_lines(lines: list[tuple[str, str]]) -> list[str]:
    """``key: text`` lines ordered by the ``sort_keys`` option."""
    joined = [f"{key}: {text}" for key, text in lines]
    order = OPTIONS["sort_keys"]
    if order == "alphabetical":
        return sorted(joined)
    if callable(order):
        return sorted(joined, key=order)
    return joined


def common_keys(td: Any) -> list[str]:
    """The top-level keys of a collection (of every member, for a lazy stack)."""
    ms = members(td)
    if ms is None:
        return list(td._tensordict)
    return list(td.keys()) if ms else []


def exclusive_keys(td: Any, ms: list[Any]) -> list[list[str]]:
    """Per member, its top-level keys that some other member lacks."""
    common = set(common_keys(td))
    return [[k for k in m.keys() if k not in common] for m in ms]  # noqa: SIM118


# ------------------------------------------------------------------ verbose form
def _plain_summary(t: Tensor) -> str:
    if t.numel() == 0:
        return "[]"
    if t.is_floating_point() or t.is_complex():
        t64 = t.detach().to(torch.complex128 if t.is_complex() else torch.float64)
        std = t64.std().item() if t.numel() > 1 else float("nan")
        return f"mean={t64.mean().item():.4g}, std={std:.4g}"
    return f"min={t.min().item()}, max={t.max().item()}"


def _tensor_fields(
    shape: Any, device: Any, dtype: Any, shared: Callable[[], bool], t: Tensor | None
) -> list[str]:
    o = OPTIONS
    out = []
    if o["show_shape"]:
        out.append(f"shape={shape}")
    if o["show_field_device"]:
        out.append(f"device={device}")
    if o["show_dtype"]:
        out.append(f"dtype={dtype}")
    if o["show_field_is_shared"]:
        out.append(f"is_shared={shared()}")
    if t is not None:
        if o["show_grad"]:
            out.append(f"requires_grad={t.requires_grad}")
        if o["show_is_contiguous"]:
            out.append(f"is_contiguous={t.is_contiguous()}")
        if o["show_is_view"]:
            out.append(f"is_view={t._base is not None}")
        if o["show_storage_size"]:
            out.append(f"storage_size={t.untyped_storage().nbytes()}")
        if o["plain"]:
            out.append(_plain_summary(t))
    return out


def tensor_line(t: Tensor) -> str:
    """``Tensor(shape=..., device=..., dtype=..., is_shared=...)`` as the options pick."""
    name = "Tensor" if type(t) is Tensor else type(t).__name__
    fields = _tensor_fields(_shape(t), t.device, t.dtype, t.is_shared, t)
    return f"{name}({', '.join(fields)})"


def _entry(value: Any) -> str:
    if isinstance(value, Tensor):
        return tensor_line(value)
    return repr(value)


def _lazy_entry(td: Any, key: str) -> str:
    info = leaf_info(td, key)
    if info is None:
        return _entry(td.get(key))
    shape, dtype, devices = info
    needs_data = any(
        OPTIONS[k]
        for k in ("show_grad", "show_is_contiguous", "show_is_view", "show_storage_size", "plain")
    )
    if needs_data and -1 not in shape:
        return tensor_line(td.get(key))
    device = next(iter(devices)) if len(devices) == 1 else "mixed"
    shared = isinstance(device, torch.device) and device.type == "cuda"
    fields = _tensor_fields(torch.Size(shape), device, dtype, lambda: shared, None)
    return f"Tensor({', '.join(fields)})"


def _fields_block(lines: list[tuple[str, str]]) -> str:
    body = ",\n".join(sorted_lines(lines))
    return "{\n" + _indent(body) + "}" if body else "{\n}"


def _tail(td: Any) -> list[str]:
    o = OPTIONS
    out = []
    if o["show_batch_size"]:
        out.append(f"batch_size={td.batch_size}")
        names = td.names if td.batch_dims else []
        if any(n is not None for n in names):
            out.append(f"names={names}")
    if o["show_device"]:
        out.append(f"device={td.device}")
    if o["show_is_shared"]:
        out.append(f"is_shared={td.is_shared()}")
    return out


def verbose_repr(td: Any) -> str:
    """``TensorDict(fields={...}, batch_size=..., device=..., is_shared=...)`` indented; a
    lazy stack adds its exclusive fields and stack dim."""
    ms = members(td)
    if ms is None:
        lines = [(k, _entry(v)) for k, v in td._tensordict.items()]
        parts = [f"fields={_fields_block(lines)}", *_tail(td)]
    else:
        lines = [(k, _lazy_entry(td, k)) for k in common_keys(td)]
        blocks = []
        for i, own in enumerate(exclusive_keys(td, ms)):
            if own:
                sub = ",\n".join(sorted_lines([(k, _entry(ms[i]._tensordict[k])) for k in own]))
                blocks.append(f"{i} ->\n" + _indent(sub))
        excl = "{\n" + _indent(",\n".join(blocks)) + "}" if blocks else "{\n}"
        parts = [f"fields={_fields_block(lines)}", f"exclusive_fields={excl}", *_tail(td)]
        parts.append(f"stack_dim={td.stack_dim}")
    return f"{type(td).__name__}(\n" + _indent(",\n".join(parts)) + ")"


def verbose_tc_repr(obj: Any) -> str:
    """The verbose form of a tensorclass: ``field=...`` lines, ``None`` fields included."""
    lines = []
    for name, value in obj._tensordict.items():
        text = data_text(value.data) if type(value) is NonTensorData else _entry(value)
        lines.append(f"{name}={text}")
    lines += [f"{name}=None" for name in none_fields(obj)]
    order = OPTIONS["sort_keys"]
    if order == "alphabetical":
        lines.sort()
    elif callable(order):
        lines.sort(key=order)
    shadowed = type(obj)._shadowed  # fields named batch_size/device print as fields
    o = OPTIONS
    if o["show_batch_size"]:
        lines.append(
            f"shape={obj._batch_size}"
            if "batch_size" in shadowed
            else f"batch_size={obj._batch_size}"
        )
    if o["show_device"] and "device" not in shadowed:
        lines.append(f"device={obj._device}")
    if o["show_is_shared"]:
        lines.append(f"is_shared={obj.is_shared()}")
    return f"{type(obj).__name__}(\n" + _indent(",\n".join(lines)) + ")"


def none_fields(obj: Any) -> list[str]:
    """The fields of a tensorclass instance that hold ``None`` (they store nothing)."""
    shadowed = type(obj)._shadowed
    return [f for f in type(obj)._fields if f not in obj._tensordict and f not in shadowed]


def nontensor_repr(value: NonTensor) -> str:
    """``NonTensorData(data=..., batch_size=..., device=...)`` with the data cut."""
    if isinstance(value, NonTensorStack):
        text = short_value(value.tolist()) if value.batch_size.numel() <= 4096 else "..."
        return f"NonTensorStack({text}, batch_size={value.batch_size}, device={value.device})"
    assert isinstance(value, NonTensorData)
    return (
        f"{type(value).__name__}(data={data_text(value.data)}, batch_size={value.batch_size}, "
        f"device={value.device})"
    )


# ------------------------------------------------------------------ compact form
def dtype_name(dtype: torch.dtype) -> str:
    """``f32``, ``i64``, ``u8``, ``bf16``, ``c64``, ``bool``: a dtype in a few letters.

    >>> dtype_name(torch.float32), dtype_name(torch.uint8), dtype_name(torch.bool)
    ('f32', 'u8', 'bool')
    """
    name = str(dtype).removeprefix("torch.")
    for long, short in (("float", "f"), ("uint", "u"), ("int", "i"), ("complex", "c")):
        name = name.replace(long, short)
    return name


Node = str | tuple[str, list[tuple[str, Any]]]  # a token, or (prefix, [(key, node)])


def _token(td: Any, shape: Iterable[int], dtype: torch.dtype, devices: set[torch.device]) -> str:
    token = f"[{','.join(map(str, shape))}]"
    if OPTIONS["show_dtype"]:
        token = dtype_name(dtype) + token
    if devices != {_CPU} and td.device is None:
        token += "@" + ",".join(sorted(map(str, devices)))
    return token


def _nontensor_token(value: NonTensor) -> str:
    if isinstance(value, NonTensorData):
        return short_value(value.data, VALUE_WIDTH)
    assert isinstance(value, NonTensorStack)
    if value.batch_size.numel() > 64:
        return f"NonTensorStack[{','.join(map(str, value.batch_size))}]"
    return f"NonTensorStack({short_value(value.tolist(), VALUE_WIDTH)})"


def _shape(value: Tensor) -> Sequence[int]:
    """``value.shape``, with -1 for the ragged dims of a nested tensor of the strided
    layout (whose shape torch cannot report)."""
    if not value.is_nested or value.layout != torch.strided:
        return value.shape
    out = []
    for dim in range(value.dim()):
        try:
            out.append(value.size(dim))
        except RuntimeError:
            out.append(-1)
    return out


def compact_entry(td: Any, key: str) -> Node:
    """The compact node of entry ``key`` of ``td``."""
    value = td._tensordict.get(key) if members(td) is None else None
    if isinstance(value, Tensor):
        shape = (
            value.shape if isinstance(value, UnbatchedTensor) else _shape(value)[td.batch_dims :]
        )
        return _token(td, shape, value.dtype, {value.device})
    first = first_value(td, key)
    if isinstance(first, Tensor):
        info = leaf_info(td, key)
        if info is not None:
            return _token(td, info[0][td.batch_dims :], info[1], info[2])
        return "mixed"
    sub = td._tensordict[key] if value is not None else td.get(key)
    if isinstance(sub, NonTensor):
        return _nontensor_token(sub)
    prefix = "" if type(first) is _dense_type() else type(first).__name__
    extra = sub.batch_size[td.batch_dims :]
    if extra:
        prefix += f"[{','.join(map(str, extra))}]"
    return prefix, compact_body(sub)


@functools.cache
def _dense_type() -> type:
    from tensordict._td import TensorDict

    return TensorDict


def flat(node: Node) -> str:
    """A node on one line."""
    if isinstance(node, str):
        return node
    prefix, entries = node
    return f"{prefix}{{{', '.join(f'{k}: {flat(v)}' for k, v in entries)}}}"


def compact_entries(td: Any, keys: Iterable[str]) -> list[tuple[str, Node]]:
    """The (key, node) pairs of ``keys``, ordered by ``sort_keys``."""
    entries = [(key, compact_entry(td, key)) for key in keys]
    order = OPTIONS["sort_keys"]
    if order == "alphabetical":
        entries.sort(key=lambda e: f"{e[0]}: {flat(e[1])}")
    elif callable(order):
        entries.sort(key=lambda e: order(f"{e[0]}: {flat(e[1])}"))
    return entries


def compact_body(td: Any) -> list[tuple[str, Node]]:
    """The entries of a collection; a tensorclass adds its ``None`` fields last."""
    entries = compact_entries(td, common_keys(td))
    if hasattr(type(td), "_fields"):
        entries += [(name, "None") for name in none_fields(td)]
    return entries


def compact_header(td: Any) -> list[str]:
    """``batch_size=[..]``, ``names=[..]``, ``device=..``, ``stack_dim=..`` as shown."""
    shadowed = getattr(type(td), "_shadowed", ())
    out = []
    if OPTIONS["show_batch_size"] and "batch_size" not in shadowed:
        out.append(f"batch_size=[{','.join(map(str, td.batch_size))}]")
        names = td.names if td.batch_dims else []
        if any(n is not None for n in names):
            out.append(f"names=[{','.join(map(str, names))}]")
    if OPTIONS["show_device"] and td.device is not None and "device" not in shadowed:
        out.append(f"device={td.device}")
    if members(td) is not None:
        out.append(f"stack_dim={td.stack_dim}")
    return out


def compact_exclusive(td: Any) -> list[tuple[str, Node]]:
    """``[(member index, ("", entries))]`` for the members holding keys others lack."""
    ms = members(td)
    if ms is None:
        return []
    return [
        (str(i), ("", compact_entries(ms[i], own)))
        for i, own in enumerate(exclusive_keys(td, ms))
        if own
    ]


_WIDTH = 80


def _render(node: Node, indent: str, used: int, tail: int) -> str:
    """One line when it fits in the width after ``used`` columns and before ``tail``
    ones; else one entry per line, each by the same rule."""
    one = flat(node)
    if isinstance(node, str) or not node[1] or used + len(one) + tail <= _WIDTH:
        return one
    prefix, entries = node
    pad = indent + _INDENT
    lines = []
    for i, (key, value) in enumerate(entries):
        after = tail + 1 if i == len(entries) - 1 else 1
        lines.append(f"{pad}{key}: {_render(value, pad, len(pad) + len(key) + 2, after)}")
    return prefix + "{\n" + ",\n".join(lines) + "}"


def compact_repr(td: Any) -> str:
    """``TensorDict(batch_size=[3], fields={a: f32[4], b: {c: i64[]}})``, wrapped at 80
    columns; a lazy stack adds ``stack_dim`` and its ``exclusive_fields``."""
    header = compact_header(td)
    exclusive = compact_exclusive(td)
    head = f"{type(td).__name__}(" + "".join(f"{h}, " for h in header) + "fields="
    tail = 1 + len(", exclusive_fields={") if exclusive else 1
    out = head + _render(("", compact_body(td)), "", len(head), tail)
    if exclusive:
        used = len(out.rsplit("\n", 1)[-1]) + len(", exclusive_fields=")
        out += ", exclusive_fields=" + _render(("", exclusive), "", used, 1)
    return out + ")"


# ------------------------------------------------------------------ entry points
def _never_raise(forms: list[Callable[[Any], str]], obj: Any) -> str:
    """The first form that does not raise (a repr must not), else ``Name(...)``."""
    for form in forms:
        try:
            return form(obj)
        except Exception:  # a half-built or broken collection still prints
            continue
    return f"{type(obj).__name__}(...)"


def td_repr(td: Any) -> str:
    """The text form of a TensorDict or lazy stack, as the print options choose."""
    if OPTIONS["compact"]:
        return _never_raise([compact_repr, verbose_repr], td)
    return _never_raise([verbose_repr], td)


def tc_repr(obj: Any) -> str:
    """The text form of a tensorclass instance."""
    if OPTIONS["compact"]:
        return _never_raise([compact_repr, verbose_tc_repr], obj)
    return _never_raise([verbose_tc_repr], obj)


def _indent(text: str) -> str:
    return "\n".join(_INDENT + line for line in text.split("\n"))
