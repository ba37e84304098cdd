"""The text form of a TensorDict: sorted fields, shapes, devices, dtypes and sharing."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from tensordict._nontensor import NonTensor

_INDENT = "    "


def _tensor_line(t: Tensor) -> str:
    name = "Tensor" if type(t) is Tensor else type(t).__name__
    shared = t.is_shared()  # type: ignore[no-untyped-call]
    return f"{name}(shape={t.shape}, device={t.device}, dtype={t.dtype}, is_shared={shared})"


def _entry(value: Any) -> str:
    if isinstance(value, Tensor):
        return _tensor_line(value)
    if isinstance(value, NonTensor):
        return repr(value)
    return td_repr(value)


def td_repr(td: Any) -> str:
    """``TensorDict(fields={...}, batch_size=..., device=..., is_shared=...)``, indented."""
    fields = ",\n".join(f"{key}: {_entry(td._tensordict[key])}" for key in sorted(td._tensordict))
    body = [
        f"fields={{\n{_indent(fields)}}}" if fields else "fields={\n}",
        f"batch_size={td.batch_size}",
        f"device={td.device}",
        f"is_shared={td.is_shared()}",
    ]
    return f"{type(td).__name__}(\n" + _indent(",\n".join(body)) + ")"


def _indent(text: str) -> str:
    return "\n".join(_INDENT + line for line in text.split("\n"))
