"""Notebook display: `_repr_html_` of TensorDict, lazy stacks and tensorclass, parsed back."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorStack,
    TensorDict,
    lazy_stack,
    tensorclass,
)
from tensordict._html import MAX_MEMBERS, MAX_TEXT
from tensordict._repr import td_repr


@tensorclass
class Shown:
    pos: torch.Tensor
    label: str


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find(self, tag: str) -> list[Element]:
        """Child elements with this tag (direct children only)."""
        return [c for c in self.children if isinstance(c, Element) and c.tag == tag]

    def one(self, tag: str) -> Element:
        (found,) = self.find(tag)
        return found


class _TreeBuilder(HTMLParser):
    """Parses into Elements, failing on any mismatched or unclosed tag."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.stack[-1].children.append(element)
        self.stack.append(element)

    def handle_endtag(self, tag: str) -> None:
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(text: str) -> Element:
    """The single top element of ``text``, which must be well formed."""
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    assert builder.stack == [builder.root], "unclosed tags"
    (top,) = builder.root.children
    assert isinstance(top, Element)
    return top


def _tree(td: Any) -> Element:
    top = parse(td._repr_html_())
    assert top.tag == "div" and top.attrs["class"] == "tensordict-repr"
    return top.one("details")


def _entries(details: Element) -> dict[str, Element]:
    """The <li> of each entry under a <details>, by its key (or [i] for lazy members)."""
    out = {}
    for li in details.one("ul").find("li"):
        head = li.one("details").one("summary") if li.find("details") else li
        out[head.one("code").text()] = li
    return out


def test_tree_of_keys_shapes_dtypes_devices() -> None:
    td = TensorDict(
        {
            "obs": torch.zeros(3, 4, dtype=torch.float16),
            "nested": {"deep": {"x": torch.ones(3, dtype=torch.int64)}},
            "mm": MemoryMappedTensor.zeros(3, 2),
        },
        [3],
        device="cpu",
    )
    top = _tree(td)
    assert "open" in top.attrs
    assert top.one("summary").text() == "TensorDict batch_size=(3,) device=cpu"
    entries = _entries(top)
    assert list(entries) == sorted(td.keys())  # sorted, as the plain repr
    assert entries["obs"].text() == "obs: Tensor shape=(3, 4) dtype=float16 device=cpu"
    assert entries["mm"].text() == "mm: MemoryMappedTensor shape=(3, 2) dtype=float32 device=cpu"
    nested = entries["nested"].one("details")
    assert "open" not in nested.attrs  # nested collections start folded
    assert nested.one("summary").text() == "nested: TensorDict batch_size=(3,) device=cpu"
    deep = _entries(nested)["deep"].one("details")
    assert _entries(deep)["x"].text() == "x: Tensor shape=(3,) dtype=int64 device=cpu"


def test_keys_and_values_are_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    td = TensorDict({hostile: torch.zeros(1), "&amp": {"<b>": 1}, "text": hostile}, [])
    html = td._repr_html_()
    assert "<script>" not in html and "<b>&lt;" not in html
    entries = _entries(_tree(td))
    assert hostile in entries  # decoded back to the very key
    assert entries["text"].text() == f"text: NonTensorData {hostile!r}"
    assert entries["text"].find("script") == []
    assert "<b>" in _entries(entries["&amp"].one("details"))


def test_non_tensor_values_are_truncated() -> None:
    td = TensorDict({"long": "y" * 500, "stack": NonTensorStack.from_list(["a", "b"])}, [2])
    entries = _entries(_tree(td))
    shown = entries["long"].text().removeprefix("long: NonTensorData ")
    assert len(shown) == MAX_TEXT and shown.endswith("…") and shown.startswith("'yyy")
    assert entries["stack"].text() == "stack: NonTensorStack ['a', 'b']"


def test_tensorclass_shows_its_class_and_fields() -> None:
    obj = Shown(pos=torch.zeros(2, 3), label="<tag>", batch_size=[2])
    top = _tree(obj)
    assert top.one("summary").text() == "Shown batch_size=(2,) device=None"
    entries = _entries(top)
    assert entries["label"].text() == "label: NonTensorData '<tag>'"
    assert entries["pos"].text() == "pos: Tensor shape=(2, 3) dtype=float32 device=cpu"
    inside = _entries(_tree(TensorDict({"p": obj}, [2])))["p"].one("details")
    assert inside.one("summary").text() == "p: Shown batch_size=(2,) device=None"


def test_lazy_stack_shows_stack_dim_and_members() -> None:
    members = [TensorDict({"a": torch.zeros(i + 1)}, []) for i in range(3)]
    stack = lazy_stack(members)
    assert isinstance(stack, LazyStackedTensorDict)
    top = _tree(stack)
    assert top.one("summary").text() == (
        "LazyStackedTensorDict batch_size=(3,) device=None stack_dim=0 members=3"
    )
    entries = _entries(top)
    assert list(entries) == ["[0]", "[1]", "[2]"]
    member = entries["[2]"].one("details")
    assert _entries(member)["a"].text() == "a: Tensor shape=(3,) dtype=float32 device=cpu"
    inner_stack = lazy_stack([TensorDict({}, [2]), TensorDict({}, [2])], 1)
    outer = lazy_stack([inner_stack, inner_stack])
    inner = _entries(_tree(outer))["[1]"].one("details")
    assert inner.one("summary").text() == (
        "[1]: LazyStackedTensorDict batch_size=(2, 2) device=None stack_dim=1 members=2"
    )


def test_long_lazy_stacks_show_the_first_members() -> None:
    stack = lazy_stack([TensorDict({}, []) for _ in range(MAX_MEMBERS + 5)])
    items = _tree(stack).one("ul").find("li")
    assert len(items) == MAX_MEMBERS + 1
    assert items[-1].text() == "… 5 more members"


def test_empty_collection() -> None:
    assert _tree(TensorDict()).one("ul").text() == "no entries"


@pytest.mark.parametrize(
    "make",
    [
        lambda: TensorDict({"a": torch.zeros(2)}, [2]),
        lambda: Shown(torch.zeros(1), "x", batch_size=[1]),
    ],
)
def test_plain_repr_is_unchanged(make: Any) -> None:
    obj = make()
    assert "<" not in repr(obj) and "details" not in repr(obj)
    if type(obj) is TensorDict:
        assert repr(obj) == td_repr(obj)
