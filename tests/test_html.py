"""Notebook display: `_repr_html_` of TensorDict, lazy stacks and tensorclass, parsed back."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any

import torch

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorStack,
    TensorDict,
    lazy_stack,
    set_printoptions,
    tensorclass,
)
from tensordict._html import MAX_MEMBERS


@tensorclass
class Shown:
    pos: torch.Tensor
    label: str
    extra: torch.Tensor | None = None


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


def _items(details: Element) -> list[Element]:
    return details.one("ul").find("li")


def _entries(details: Element) -> dict[str, Element]:
    """The <li> of each entry under a <details>, by its key (or [i] for lazy members)."""
    out = {}
    for li in _items(details):
        head = li.one("details").one("summary") if li.find("details") else li
        if head.find("code"):
            out[head.one("code").text()] = li
    return out


def _summary(li: Element) -> str:
    return li.one("details").one("summary").text()


def test_tree_of_keys_dtypes_and_feature_shapes() -> None:
    td = TensorDict(
        {
            "obs": torch.zeros(3, 4, dtype=torch.float16),
            "nested": {"deep": {"x": torch.ones(3, dtype=torch.int64)}},
            "mm": MemoryMappedTensor.zeros(3, 2),
        },
        [3],
        device="cpu",
        names=["t"],
    )
    top = _tree(td)
    assert "open" in top.attrs  # the first level is open
    assert top.one("summary").text() == "TensorDict batch_size=[3], names=[t], device=cpu"
    entries = _entries(top)
    assert list(entries) == sorted(td.keys())
    assert entries["obs"].text() == "obs: f16[4]"
    assert entries["mm"].text() == "mm: f32[2]"
    nested = entries["nested"].one("details")
    assert "open" not in nested.attrs  # nested collections start folded, saying what they hold
    assert _summary(entries["nested"]) == "nested: TensorDict batch_size=[3] · 1 entry"
    deep = _entries(nested)["deep"]
    assert _entries(deep.one("details"))["x"].text() == "x: i64[]"


def test_keys_and_values_are_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    td = TensorDict({hostile: torch.zeros(1), "&amp": {"<b>": 1}, "text": hostile}, [])
    html = td._repr_html_()
    assert "<script>" not in html and "<b>&lt;" not in html
    entries = _entries(_tree(td))
    assert hostile in entries  # decoded back to the very key
    assert entries["text"].text() == f"text: {hostile!r}"
    assert entries["text"].find("script") == []
    assert "<b>" in _entries(entries["&amp"].one("details"))


def test_non_tensor_values_are_cut() -> None:
    td = TensorDict({"long": "y" * 500, "stack": NonTensorStack.from_list(["a", "b"])}, [2])
    entries = _entries(_tree(td))
    shown = entries["long"].text().removeprefix("long: ")
    assert shown == "'" + "y" * 38 + "…"
    assert entries["stack"].text() == "stack: NonTensorStack(['a', 'b'])"


def test_tensorclass_shows_its_class_fields_and_none() -> None:
    obj = Shown(pos=torch.zeros(2, 3), label="<tag>", batch_size=[2])
    top = _tree(obj)
    assert top.one("summary").text() == "Shown batch_size=[2]"
    entries = _entries(top)
    assert entries["label"].text() == "label: '<tag>'"
    assert entries["pos"].text() == "pos: f32[3]"
    assert entries["extra"].text() == "extra: None"
    inside = _entries(_tree(TensorDict({"p": obj}, [2])))["p"]
    assert _summary(inside) == "p: Shown batch_size=[2] · 3 entries"


def test_entry_cap_counts_what_is_left() -> None:
    td = TensorDict({f"k{i:03d}": torch.zeros(1) for i in range(500)}, [])
    items = _items(_tree(td))
    assert len(items) == 201
    assert items[199].text() == "k199: f32[1]" and items[-1].text() == "... and 300 more"
    with set_printoptions(html_max_entries=5):
        small = TensorDict({"a": {f"x{i}": torch.zeros(1) for i in range(9)}, "b": 1}, [])
        top = _tree(small)
    inner = _items(_entries(top)["a"].one("details"))
    assert [li.text() for li in inner][-1] == "... and 5 more"  # a, x0..x3 drawn
    assert _items(top)[-1].text() == "... and 1 more"


def test_large_tree_stays_small() -> None:
    td = TensorDict(
        {f"g{i}": {f"k{j}": torch.zeros(2) for j in range(50)} for i in range(100)}, [2]
    )
    html = td._repr_html_()
    assert len(html) < 100_000
    assert html.count("<li>") <= 200 + 100  # drawn entries, plus one "more" row per level


def test_lazy_stack_shows_common_then_exclusive_then_members() -> None:
    a = TensorDict({"a": torch.zeros(2, 4), "b": torch.ones(1), "n": {"c": torch.zeros(2)}}, [])
    b = TensorDict({"a": torch.zeros(3, 4), "n": {"c": torch.zeros(5)}}, [])
    stack = lazy_stack([a, b])
    assert isinstance(stack, LazyStackedTensorDict)
    top = _tree(stack)
    assert top.one("summary").text() == "LazyStackedTensorDict batch_size=[2], stack_dim=0"
    common = _entries(top)
    assert list(common) == ["a", "n"]
    assert common["a"].text() == "a: f32[-1,4]"
    assert _summary(common["n"]) == "n: LazyStackedTensorDict batch_size=[2] · 1 entry"
    extra = top.one("div").find("details")
    assert extra[0].one("summary").text() == "exclusive_fields"
    (member0,) = extra[0].one("ul").find("li")
    assert _entries(member0.one("details"))["b"].text() == "b: f32[1]"
    assert extra[1].one("summary").text() == "members (2)"
    members = extra[1].one("ul").find("li")
    assert _summary(members[1]) == "[1]: TensorDict batch_size=[] · 2 entries"


def test_long_lazy_stacks_list_the_first_members() -> None:
    stack = lazy_stack([TensorDict({}, []) for _ in range(MAX_MEMBERS + 5)])
    members = _tree(stack).one("div").find("details")[-1]
    items = members.one("ul").find("li")
    assert len(items) == MAX_MEMBERS + 1
    assert items[-1].text() == "... and 5 more"


def test_options_turn_the_tree_off() -> None:
    td = TensorDict({"a<": torch.zeros(2)}, [2])
    with set_printoptions(html=False):
        assert td._repr_html_() is None
    with set_printoptions(compact=False):
        pre = parse(td._repr_html_())
    assert pre.tag == "pre" and pre.text() == repr_verbose(td)


def repr_verbose(td: Any) -> str:
    with set_printoptions(compact=False):
        return repr(td)


def test_empty_collection() -> None:
    assert _tree(TensorDict()).one("ul").children == []
