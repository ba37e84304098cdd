"""The notebook form of a collection (``_repr_html_``): a tree of its entries, capped."""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from torch import Tensor

from tensordict._nontensor import NonTensor
from tensordict._printoptions import OPTIONS
from tensordict._repr import (
    common_keys,
    compact_entry,
    compact_header,
    exclusive_keys,
    first_value,
    members,
    none_fields,
)

MAX_MEMBERS = 20  # lazy-stack members listed before "... and N more"

_STYLE = "font-family:monospace;line-height:1.4"
_LIST = "list-style:none;margin:0;padding-left:1.5em"
_DIM = "opacity:0.7"


def _ordered(keys: Iterable[str]) -> list[str]:
    order = OPTIONS["sort_keys"]
    if order == "alphabetical":
        return sorted(keys)
    if callable(order):
        return sorted(keys, key=lambda k: order(f"{k}: "))
    return list(keys)


def _count(n: int) -> str:
    return f"{n} {'entry' if n == 1 else 'entries'}"


def _label(td: Any) -> str:
    """``TensorDict batch_size=[3] · 2 entries``: what a folded row says."""
    n = len(common_keys(td)) + (len(none_fields(td)) if hasattr(type(td), "_fields") else 0)
    size = ",".join(map(str, td.batch_size))
    return escape(f"{type(td).__name__} batch_size=[{size}] · {_count(n)}")


def _rows(td: Any, budget: list[int], keys: Iterable[str] | None = None) -> str:
    """``<ul>`` of the entries of ``td`` (or of ``keys``), drawing at most ``budget[0]``
    more entries over the whole tree, then ``... and N more``."""
    is_lazy = members(td) is not None
    names = _ordered(common_keys(td) if keys is None else keys)
    if keys is None and hasattr(type(td), "_fields"):
        names += none_fields(td)
    items = []
    for i, key in enumerate(names):
        if budget[0] <= 0:
            items.append(f"<li>... and {len(names) - i} more</li>")
            break
        budget[0] -= 1
        head = f"<code>{escape(key)}</code>: "
        value = first_value(td, key) if is_lazy else td._tensordict.get(key)
        if value is None or isinstance(value, (Tensor, NonTensor)):
            token = "None" if value is None else compact_entry(td, key)
            assert isinstance(token, str)
            items.append(f'<li>{head}<span style="{_DIM}">{escape(token)}</span></li>')
            continue
        if is_lazy:
            value = td.get(key)
        items.append(
            f'<li><details><summary>{head}<span style="{_DIM}">{_label(value)}</span>'
            f"</summary>{_rows(value, budget)}</details></li>"
        )
    return f'<ul style="{_LIST}">' + "".join(items) + "</ul>"


def _lazy_parts(td: Any, budget: list[int]) -> str:
    """The exclusive fields, then the members (folded), of a lazy stack."""
    ms = members(td)
    if ms is None:
        return ""
    out = []
    owned = [(i, own) for i, own in enumerate(exclusive_keys(td, ms)) if own]
    if owned:
        groups = "".join(
            f"<li><details open><summary><code>{i}</code></summary>{_rows(ms[i], budget, own)}"
            "</details></li>"
            for i, own in owned
        )
        out.append(
            f'<details open><summary><i style="{_DIM}">exclusive_fields</i></summary>'
            f'<ul style="{_LIST}">{groups}</ul></details>'
        )
    rows = [
        f'<li><details><summary><code>[{i}]</code>: <span style="{_DIM}">{_label(m)}</span>'
        f"</summary>{_rows(m, budget)}</details></li>"
        for i, m in enumerate(ms[:MAX_MEMBERS])
    ]
    if len(ms) > MAX_MEMBERS:
        rows.append(f"<li>... and {len(ms) - MAX_MEMBERS} more</li>")
    out.append(
        f'<details><summary><i style="{_DIM}">members</i> ({len(ms)})</summary>'
        f'<ul style="{_LIST}">{"".join(rows)}</ul></details>'
    )
    return '<div style="padding-left:1.5em">' + "".join(out) + "</div>"


def collection_html(td: Any) -> str | None:
    """HTML for a TensorDict, lazy stack or tensorclass: the first level open, nested
    collections folded with their batch size and entry count, at most
    ``html_max_entries`` entries drawn, everything escaped. None when the ``html``
    print option is off; the verbose text in ``<pre>`` when ``compact`` is off.

    >>> import torch
    >>> from tensordict import TensorDict
    >>> text = collection_html(TensorDict({"a<b": torch.zeros(2, 3)}, [2]))
    >>> print(text[text.index("<summary>"):text.index("</summary>")])
    <summary><b>TensorDict</b> <span style="opacity:0.7">batch_size=[2]</span>
    >>> "<code>a&lt;b</code>" in text and "f32[3]" in text
    True
    """
    if not OPTIONS["html"]:
        return None
    if not OPTIONS["compact"]:
        return f"<pre>{escape(repr(td))}</pre>"
    budget = [int(OPTIONS["html_max_entries"])]
    header = escape(", ".join(compact_header(td)))
    return (
        f'<div class="tensordict-repr" style="{_STYLE}"><details open><summary>'
        f'<b>{escape(type(td).__name__)}</b> <span style="{_DIM}">{header}</span></summary>'
        f"{_rows(td, budget)}{_lazy_parts(td, budget)}</details></div>"
    )


class HtmlRepr:
    """``_repr_html_`` for every collection type, written once (notebooks call it)."""

    __slots__ = ()

    def _repr_html_(self) -> str | None:
        """A tree of keys with dtypes and feature shapes; see ``collection_html``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> "<details open>" in TensorDict({"x": torch.zeros(3)}, [3])._repr_html_()
        True
        """
        try:
            return collection_html(self)
        except Exception:  # a display must not raise: the text form instead
            return f"<pre>{escape(repr(self))}</pre>"
