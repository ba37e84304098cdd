"""The notebook form of a collection (``_repr_html_``): a collapsible tree of its entries."""

from __future__ import annotations

from html import escape
from typing import Any

from torch import Tensor

from tensordict._nontensor import NonTensorData, NonTensorStack

MAX_MEMBERS = 20  # lazy-stack members shown before "... more"
MAX_TEXT = 80  # characters of a non-tensor value's repr

_STYLE = "font-family: monospace; line-height: 1.4"
_LIST = "list-style: none; margin: 0; padding-left: 1.5em"


def truncate(text: str, width: int = MAX_TEXT) -> str:
    """``text`` cut to ``width`` characters, ending in an ellipsis when cut.

    >>> truncate("abc"), truncate("x" * 10, 5)
    ('abc', 'xxxx…')
    """
    return text if len(text) <= width else text[: width - 1] + "…"


def _attrs(**values: Any) -> str:
    return " ".join(f"{name}={escape(str(value))}" for name, value in values.items())


def _key(key: str) -> str:
    return f"<code>{escape(key)}</code>: "


def _tensor(t: Tensor) -> str:
    kind = "Tensor" if type(t) is Tensor else type(t).__name__
    return f"<b>{escape(kind)}</b> " + _attrs(
        shape=tuple(t.shape), dtype=str(t.dtype).removeprefix("torch."), device=t.device
    )


def _non_tensor(value: Any) -> str:
    if isinstance(value, NonTensorData):
        text = repr(value.data)
    elif isinstance(value, NonTensorStack):
        text = repr(value.tolist())
    else:
        text = repr(value)
    return f"<b>{escape(type(value).__name__)}</b> {escape(truncate(text))}"


def _summary(td: Any) -> str:
    head = f"<b>{escape(type(td).__name__)}</b> "
    fields = {"batch_size": tuple(td.batch_size), "device": td.device}
    parts = td._stack_parts()
    if parts is not None:
        fields["stack_dim"] = parts[0]
        fields["members"] = len(parts[1])
    return head + _attrs(**fields)


def _collection(td: Any, label: str, is_open: bool) -> str:
    items: list[str] = []
    parts = td._stack_parts()
    if parts is not None:
        for i, member in enumerate(parts[1][:MAX_MEMBERS]):
            items.append(_collection(member, f"<code>[{i}]</code>: ", False))
        hidden = len(parts[1]) - MAX_MEMBERS
        if hidden > 0:
            items.append(f"<li>… {hidden} more members</li>")
    else:
        for key in sorted(td._tensordict):
            value = td._tensordict[key]
            if isinstance(value, Tensor):
                items.append(f"<li>{_key(key)}{_tensor(value)}</li>")
            elif isinstance(value, (NonTensorData, NonTensorStack)):
                items.append(f"<li>{_key(key)}{_non_tensor(value)}</li>")
            else:
                items.append(_collection(value, _key(key), False))
    body = "".join(items) or "<li><i>no entries</i></li>"
    opened = " open" if is_open else ""
    return (
        f"<li><details{opened}><summary>{label}{_summary(td)}</summary>"
        f'<ul style="{_LIST}">{body}</ul></details></li>'
    )


def collection_html(td: Any) -> str:
    """HTML for a TensorDict, lazy stack or tensorclass: the top level open, nested
    collections folded, every key and value escaped.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> text = collection_html(TensorDict({"a<b": torch.zeros(2)}, [2]))
    >>> print(text[text.index("<details"):text.index("<ul")])
    <details open><summary><b>TensorDict</b> batch_size=(2,) device=None</summary>
    >>> print(text[text.index("<li>"):text.index("</li>")])
    <li><code>a&lt;b</code>: <b>Tensor</b> shape=(2,) dtype=float32 device=cpu
    """
    inner = _collection(td, "", True).removeprefix("<li>").removesuffix("</li>")
    return f'<div class="tensordict-repr" style="{_STYLE}">{inner}</div>'


class HtmlRepr:
    """``_repr_html_`` for every collection type, written once (notebooks call it)."""

    __slots__ = ()

    def _repr_html_(self) -> str:
        """A collapsible tree of keys with shapes, dtypes and devices.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> "<details open>" in TensorDict({"x": torch.zeros(3)}, [3])._repr_html_()
        True
        """
        return collection_html(self)
