"""The text forms: golden compact and verbose strings, and the print options that pick them."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    get_printoptions,
    lazy_stack,
    parse_tensor_dict_string,
    set_printoptions,
    tensorclass,
)


@tensorclass
class Sample:
    obs: torch.Tensor
    extra: torch.Tensor | None = None
    tag: str = "x"


class Raises:
    def __repr__(self) -> str:
        raise ValueError("broken")


class Counted:
    calls = 0

    def __repr__(self) -> str:
        type(self).calls += 1
        return "c"


def _ragged() -> LazyStackedTensorDict:
    a = TensorDict({"a": torch.zeros(2, 4), "b": torch.ones(1), "n": {"c": torch.zeros(2)}}, [])
    b = TensorDict({"a": torch.zeros(3, 4), "n": {"c": torch.zeros(5)}}, [])
    stack = lazy_stack([a, b])
    assert isinstance(stack, LazyStackedTensorDict)
    return stack


# ------------------------------------------------------------------ compact golden strings
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            lambda: TensorDict(
                {"b": torch.zeros(3, dtype=torch.int64), "a": torch.zeros(3, 4)}, [3]
            ),
            "TensorDict(batch_size=[3], fields={a: f32[4], b: i64[]})",
        ),
        (TensorDict, "TensorDict(batch_size=[], fields={})"),
        (
            lambda: TensorDict({"x": torch.zeros(2, dtype=torch.uint8)}, [2], device="cpu"),
            "TensorDict(batch_size=[2], device=cpu, fields={x: u8[]})",
        ),
        (
            lambda: TensorDict({"n": TensorDict({"x": torch.zeros(3, 2, 5)}, [3, 2])}, [3]),
            "TensorDict(batch_size=[3], fields={n: [2]{x: f32[5]}})",
        ),
        (
            lambda: TensorDict({"m": torch.zeros(2, 3, device="meta")}, [2]),
            "TensorDict(batch_size=[2], fields={m: f32[3]@meta})",
        ),
        (
            lambda: TensorDict({"a": torch.zeros(2, 3)}, [2, 3], names=["b", "t"]),
            "TensorDict(batch_size=[2,3], names=[b,t], fields={a: f32[]})",
        ),
        (
            lambda: TensorDict({"s": "hi", "n": NonTensorData(3), "l": NonTensorData([1, 2])}, []),
            "TensorDict(batch_size=[], fields={l: [1, 2], n: 3, s: 'hi'})",
        ),
        (
            lambda: TensorDict({"s": NonTensorStack("a", "b")}, [2]),
            "TensorDict(batch_size=[2], fields={s: NonTensorStack(['a', 'b'])})",
        ),
        (
            lambda: Sample(obs=torch.zeros(2, 3), batch_size=[2]),
            "Sample(batch_size=[2], fields={obs: f32[3], tag: 'x', extra: None})",
        ),
        (
            lambda: TensorDict({"p": Sample(obs=torch.zeros(2), batch_size=[2])}, [2]),
            "TensorDict(batch_size=[2], fields={\n    p: Sample{obs: f32[], tag: 'x', extra: None}})",
        ),
        (
            _ragged,
            "LazyStackedTensorDict(batch_size=[2], stack_dim=0, fields={\n"
            "    a: f32[-1,4],\n"
            "    n: {c: f32[-1]}}, exclusive_fields={0: {b: f32[1]}})",
        ),
    ],
)
def test_compact_golden(make: Any, expected: str) -> None:
    assert repr(make()) == expected
    assert str(make()) == expected


def test_compact_wraps_at_80_columns() -> None:
    td = TensorDict({f"key_{i}": torch.zeros(3, 4) for i in range(3)}, [3])
    td["deep"] = TensorDict({f"inner_{i}": torch.zeros(3) for i in range(9)}, [3])
    text = repr(td)
    assert all(len(line) <= 80 for line in text.split("\n"))
    assert text.startswith(
        "TensorDict(batch_size=[3], fields={\n    deep: {\n        inner_0: f32[],"
    )
    assert text.endswith("    key_2: f32[4]})")


def test_lazy_stack_of_equal_members_reads_no_data() -> None:
    stack = lazy_stack([TensorDict({"a": torch.zeros(4, 2)}, [4])] * 3, 1)
    assert repr(stack) == "LazyStackedTensorDict(batch_size=[4,3], stack_dim=1, fields={a: f32[2]})"


# ------------------------------------------------------------------ non-tensor values
def test_long_values_are_cut_without_building_their_repr() -> None:
    Counted.calls = 0
    td = TensorDict({"big": NonTensorData([Counted() for _ in range(10_000)])}, [])
    assert repr(td) == "TensorDict(batch_size=[], fields={big: [c, c, c, c, c, c, c, c, ...]})"
    assert Counted.calls == 8
    td["huge"] = NonTensorData(list(range(2_000_000)))
    assert "huge: [0, 1, 2, 3, 4, 5, 6, 7, ...]" in repr(td)
    td = TensorDict({"s": "y" * 500}, [])
    shown = repr(td).removeprefix("TensorDict(batch_size=[], fields={s: ").removesuffix("})")
    assert shown == "'" + "y" * 38 + "…"


def test_raising_repr_shows_a_placeholder() -> None:
    td = TensorDict({"bad": Raises()}, [])
    assert repr(td) == "TensorDict(batch_size=[], fields={bad: <Raises: repr raised ValueError>})"
    with set_printoptions(compact=False):
        assert "data=<Raises: repr raised ValueError>" in repr(td)
    assert "Raises: repr raised ValueError" in td._repr_html_()


# ------------------------------------------------------------------ verbose golden strings
def test_verbose_flat_and_nested() -> None:
    td = TensorDict({"a": torch.zeros(3, 2), "n": {"c": torch.zeros(3, dtype=torch.int64)}}, [3])
    with set_printoptions(compact=False):
        text = repr(td)
    assert text == (
        "TensorDict(\n"
        "    fields={\n"
        "        a: Tensor(shape=torch.Size([3, 2]), device=cpu, dtype=torch.float32, "
        "is_shared=False),\n"
        "        n: TensorDict(\n"
        "            fields={\n"
        "                c: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.int64, "
        "is_shared=False)},\n"
        "            batch_size=torch.Size([3]),\n"
        "            device=None,\n"
        "            is_shared=False)},\n"
        "    batch_size=torch.Size([3]),\n"
        "    device=None,\n"
        "    is_shared=False)"
    )


def test_verbose_lazy_ragged() -> None:
    with set_printoptions(compact=False, verbose=False):
        text = repr(_ragged())
    assert text == (
        "LazyStackedTensorDict(\n"
        "    fields={\n"
        "        a: Tensor(shape=torch.Size([2, -1, 4])),\n"
        "        n: LazyStackedTensorDict(\n"
        "            fields={\n"
        "                c: Tensor(shape=torch.Size([2, -1]))},\n"
        "            exclusive_fields={\n"
        "            },\n"
        "            batch_size=torch.Size([2]),\n"
        "            stack_dim=0)},\n"
        "    exclusive_fields={\n"
        "        0 ->\n"
        "            b: Tensor(shape=torch.Size([1]))},\n"
        "    batch_size=torch.Size([2]),\n"
        "    stack_dim=0)"
    )


def test_verbose_tensorclass_and_names() -> None:
    obj = Sample(obs=torch.zeros(2, 3), batch_size=[2])
    td = TensorDict({"a": torch.zeros(2)}, [2], names=["t"])
    with set_printoptions(compact=False, verbose=False):
        assert repr(obj) == (
            "Sample(\n    extra=None,\n    obs=Tensor(shape=torch.Size([2, 3])),\n    tag=x,\n"
            "    batch_size=torch.Size([2]))"
        )
        assert "    batch_size=torch.Size([2]),\n    names=['t'])" in repr(td)


# ------------------------------------------------------------------ the options
def test_options_switch_restore_and_copy() -> None:
    before = get_printoptions()
    with set_printoptions(show_device=False):
        assert get_printoptions()["show_device"] is False
        assert get_printoptions()["compact"] is True  # show_device is read by both forms
    assert get_printoptions() == before
    with set_printoptions(show_grad=True):  # verbose-only: compact turns off
        assert get_printoptions()["compact"] is False
    with set_printoptions(show_grad=True, compact=True):
        assert repr(TensorDict({"a": torch.zeros(1)}, [])) == (
            "TensorDict(batch_size=[], fields={a: f32[1]})"
        )
    copy = get_printoptions()
    copy["compact"] = False
    assert get_printoptions()["compact"] is True
    setter = set_printoptions(compact=False)
    setter.set()
    try:
        assert repr(TensorDict()).startswith("TensorDict(\n")
    finally:
        setter.__exit__(None, None, None)
    assert get_printoptions() == before


def test_decorator_and_verbose_false() -> None:
    @set_printoptions(verbose=False, compact=False)
    def show() -> str:
        return repr(TensorDict({"a": torch.zeros(2)}, [2]))

    assert show() == (
        "TensorDict(\n    fields={\n        a: Tensor(shape=torch.Size([2]))},\n"
        "    batch_size=torch.Size([2]))"
    )
    assert repr(TensorDict({"a": torch.zeros(2)}, [2])).startswith("TensorDict(batch_size=[2]")


def test_unknown_option_raises() -> None:
    with pytest.raises(TypeError, match=r"set_printoptions: Unknown printoptions: \['nope'\]"):
        set_printoptions(nope=True)


@pytest.mark.parametrize(
    ("sort_keys", "order"),
    [
        ("alphabetical", ["a", "b", "c"]),
        ("insertion", ["c", "a", "b"]),
        (lambda line: line[::-1], ["c", "a", "b"]),  # lines end in f32[1], f32[2], f32[3]
    ],
)
def test_sort_keys(sort_keys: Any, order: list[str]) -> None:
    td = TensorDict({"c": torch.zeros(1), "a": torch.zeros(2), "b": torch.zeros(3)}, [])
    with set_printoptions(sort_keys=sort_keys):
        compact = repr(td)
    with set_printoptions(sort_keys=sort_keys, compact=False):
        verbose = repr(td)
    keys = [line.strip().split(":")[0] for line in verbose.split("\n") if "Tensor(" in line]
    assert keys == order
    inside = compact.removeprefix("TensorDict(batch_size=[], fields={").removesuffix("})")
    assert [e.split(":")[0] for e in inside.split(", ")] == order


def test_extra_tensor_fields() -> None:
    base = torch.arange(6.0).reshape(2, 3).requires_grad_()
    td = TensorDict({"v": base[:, ::2], "i": torch.tensor([1, 5])}, [])
    with set_printoptions(
        show_grad=True, show_is_contiguous=True, show_is_view=True, show_storage_size=True
    ):
        text = repr(td)
    assert "requires_grad=True, is_contiguous=False, is_view=True, storage_size=24" in text
    with set_printoptions(plain=True, verbose=False):
        text = repr(td)
    assert "i: Tensor(shape=torch.Size([2]), min=1, max=5)" in text
    assert "mean=2.5, std=2.082" in text


def test_options_reach_lazy_stacks_and_tensorclasses() -> None:
    with set_printoptions(show_device=False, show_is_shared=False):
        stack_text = repr(_ragged())
        obj_text = repr(Sample(obs=torch.zeros(2), batch_size=[2]))
    assert "stack_dim=0" in stack_text and "\n    device=" not in stack_text
    assert "is_shared=" not in obj_text.split("\n")[-1]
    with set_printoptions(show_dtype=False):
        assert repr(TensorDict({"a": torch.zeros(2, 3)}, [2])) == (
            "TensorDict(batch_size=[2], fields={a: [3]})"
        )
    with set_printoptions(show_batch_size=False):
        assert repr(TensorDict({"a": torch.zeros(2, 3)}, [2])) == "TensorDict(fields={a: f32[3]})"


# ------------------------------------------------------------------ parsing the printed form
def _same_layout(a: TensorDict, b: TensorDict) -> None:
    assert a.batch_size == b.batch_size and a.names == b.names
    keys = sorted(map(str, a.keys(True, True)))
    assert keys == sorted(map(str, b.keys(True, True)))
    for key in a.keys(True, True):
        x, y = a[key], b[key]
        assert (x.shape, x.dtype, x.device) == (y.shape, y.dtype, y.device)
        assert not y.any()


@pytest.mark.parametrize("compact", [True, False])
def test_parse_rebuilds_layout(compact: bool) -> None:
    td = TensorDict(
        {
            "obs": torch.ones(3, 4, 2, dtype=torch.uint8),
            "next": TensorDict({"r": torch.ones(3, 4, 1), "d": torch.ones(3, 4, 5)}, [3, 4]),
            "h": torch.ones(3, dtype=torch.bfloat16),
        },
        [3],
        names=["t"] if compact else None,
    )
    with set_printoptions(compact=compact):
        text = repr(td)
    _same_layout(td, parse_tensor_dict_string(text))
    meta = TensorDict({"m": torch.ones(2, device="meta")}, [2])
    assert parse_tensor_dict_string(repr(meta))["m"].device.type == "meta"


def test_parse_equal_lazy_stack() -> None:
    stack = lazy_stack([TensorDict({"a": torch.zeros(2)}, [])] * 3)
    rebuilt = parse_tensor_dict_string(repr(stack))
    assert type(rebuilt) is TensorDict and rebuilt["a"].shape == (3, 2)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (repr(TensorDict({"s": "hi"}, [])), r"entry 's' is \"'hi'\", not a tensor"),
        (
            repr(
                lazy_stack(
                    [TensorDict(a=torch.zeros(2), b=torch.ones(1)), TensorDict(a=torch.ones(2))]
                )
            ),
            "a lazy stack with exclusive fields cannot be rebuilt",
        ),
        (
            repr(
                lazy_stack([TensorDict({"a": torch.zeros(2)}), TensorDict({"a": torch.zeros(3)})])
            ),
            r"entry 'a' has ragged shape \[2, -1\]",
        ),
        ("Foo(x=1)", "expected a printed TensorDict"),
        ("TensorDict(batch_size=[2], fields={a: q9[]})", "entry 'a' has unknown dtype 'q9'"),
        ("TensorDict(batch_size=[2], fields={a: f32[]})extra", "expected the end of the text"),
    ],
)
def test_parse_errors(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=f"parse_tensor_dict_string: {match}"):
        parse_tensor_dict_string(text)


def test_repr_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    empty = LazyStackedTensorDict(stack_dim=0)
    assert repr(empty) == "LazyStackedTensorDict(batch_size=[0], stack_dim=0, fields={})"
    assert "members</i> (0)" in empty._repr_html_()
    import tensordict._html
    import tensordict._repr

    def broken(td: Any) -> str:
        raise RuntimeError("boom")

    td = TensorDict({"a": torch.zeros(2)}, [2])
    monkeypatch.setattr(tensordict._repr, "compact_repr", broken)
    assert repr(td).startswith("TensorDict(\n    fields={\n        a: Tensor(shape=")
    monkeypatch.setattr(tensordict._repr, "verbose_repr", broken)
    assert repr(td) == "TensorDict(...)"
    monkeypatch.setattr(tensordict._html, "collection_html", broken)
    assert td._repr_html_() == "<pre>TensorDict(...)</pre>"
