"""Nested (ragged) tensors of the strided layout: memory-mapped, held by TensorDicts on
their regular leading dims, saved and loaded (docs/format.md, kind "nested")."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict
from tensordict._format import FormatError

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")

SHAPES = torch.tensor([[2, 3], [2, 4], [3, 2]])


def _ragged(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Three elements of the shapes above, each holding distinct values."""
    parts, start = [], 0
    for row in SHAPES.tolist():
        count = row[0] * row[1]
        parts.append(torch.arange(start, start + count).to(dtype).view(row))
        start += count
    return torch.nested.nested_tensor(parts)


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Element by element: same count, shapes, dtype and values."""
    ea, eb = a.unbind(), b.unbind()
    return len(ea) == len(eb) and all(
        x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
        for x, y in zip(ea, eb, strict=True)
    )


# ------------------------------------------------------------ MemoryMappedTensor
@pytest.mark.parametrize("in_file", [False, True])
@pytest.mark.parametrize(
    ("factory", "fill", "expected"),
    [
        ("zeros", (), 0),
        ("ones", (), 1),
        ("full", (7,), 7),
    ],
)
def test_factories_take_a_nested_shape(
    tmp_path: Path, in_file: bool, factory: str, fill: tuple[Any, ...], expected: int
) -> None:
    filename = tmp_path / "x.memmap" if in_file else None
    out = getattr(MemoryMappedTensor, factory)(SHAPES, *fill, dtype=torch.int32, filename=filename)
    assert type(out) is MemoryMappedTensor and out.is_nested and out.dtype == torch.int32
    assert torch.equal(out._nested_tensor_size(), SHAPES)
    assert all(bool((element == expected).all()) for element in out.unbind())
    assert (out.filename is not None) == in_file
    if in_file:  # the file holds the elements end to end
        assert os.path.getsize(filename) == int(SHAPES.prod(1).sum()) * 4  # type: ignore[arg-type]


def test_empty_with_a_nested_shape_is_writable_through_its_elements(tmp_path: Path) -> None:
    out = MemoryMappedTensor.empty(SHAPES, filename=tmp_path / "x", dtype=torch.int64)
    out.fill_(2)
    out[1].fill_(5)
    again = MemoryMappedTensor.from_filename(tmp_path / "x", dtype=torch.int64, shape=SHAPES)
    assert [int(e.sum()) for e in again.unbind()] == [12, 40, 12]


@pytest.mark.parametrize("in_file", [False, True])
def test_from_tensor_copies_a_nested_tensor(tmp_path: Path, in_file: bool) -> None:
    source = _ragged(torch.float64)
    out = MemoryMappedTensor.from_tensor(source, filename=tmp_path / "x" if in_file else None)
    assert type(out) is MemoryMappedTensor and _same(out, source)
    source.unbind()[0].fill_(-1)  # a copy: the source's later changes do not reach it
    assert float(out.unbind()[0].min()) == 0.0
    zeros = MemoryMappedTensor.from_tensor(source, copy_data=False)
    assert torch.equal(zeros._nested_tensor_size(), SHAPES) and float(zeros[2].abs().sum()) == 0


def test_from_filename_storage_and_handler_view_a_flat_buffer(tmp_path: Path) -> None:
    flat = MemoryMappedTensor.from_tensor(torch.arange(10, dtype=torch.float64))
    shape = torch.tensor([[2, 2], [2, 3]])
    viewed = MemoryMappedTensor.from_storage(flat.untyped_storage(), shape=shape, dtype=flat.dtype)
    assert viewed.is_nested and torch.equal(viewed[1], torch.arange(4, 10.0).view(2, 3))
    viewed[0].fill_(-1)  # the same memory
    assert flat[:4].tolist() == [-1.0] * 4
    by_handler = MemoryMappedTensor.from_handler(flat._handler, torch.float64, shape)
    assert by_handler[0].tolist() == [[-1.0, -1.0], [-1.0, -1.0]]
    saved = MemoryMappedTensor.from_tensor(_ragged(), filename=tmp_path / "f")
    mapped = MemoryMappedTensor.from_filename(tmp_path / "f", torch.float32, SHAPES)
    assert _same(mapped, _ragged()) and mapped.filename == saved.filename


@pytest.mark.parametrize("factory", ["empty_like", "zeros_like", "ones_like"])
def test_like_factories_follow_a_nested_input(factory: str) -> None:
    out = getattr(MemoryMappedTensor, factory)(_ragged(torch.int16))
    assert out.is_nested and out.dtype == torch.int16
    assert torch.equal(out._nested_tensor_size(), SHAPES)


def test_a_file_backed_nested_tensor_pickles_by_reference(tmp_path: Path) -> None:
    out = MemoryMappedTensor.from_tensor(_ragged(), filename=tmp_path / "x")
    blob = pickle.dumps(out)
    assert len(blob) < 1000  # the file name and the element shapes, not the data
    back = pickle.loads(blob)
    assert type(back) is MemoryMappedTensor and back.filename == out.filename
    back[2].fill_(9)
    assert float(out[2].min()) == 9.0


@pytest.mark.parametrize(
    ("shape", "error", "match"),
    [
        (torch.tensor([[1.0, 2.0]]), TypeError, "a nested shape is a 2-D integer tensor"),
        (torch.tensor([[[1, 2]]]), TypeError, "a nested shape is a 2-D integer tensor"),
        (torch.tensor([[True, False]]), TypeError, "holds integers, got a bool"),
        (torch.tensor([[1, -2]]), ValueError, "must not hold negative sizes"),
        (torch.empty(0, 2, dtype=torch.int64), ValueError, "at least one element"),
    ],
)
def test_bad_nested_shapes_are_refused(shape: torch.Tensor, error: type, match: str) -> None:
    with pytest.raises(error, match=f"MemoryMappedTensor.zeros: .*{match}"):
        MemoryMappedTensor.zeros(shape)


def test_jagged_and_empty_nested_tensors_are_refused() -> None:
    jagged = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged)
    with pytest.raises(TypeError, match="from_tensor: nested tensors of the torch.jagged layout"):
        MemoryMappedTensor.from_tensor(jagged)
    with pytest.raises(TypeError, match="shape= cannot be given for a nested tensor"):
        MemoryMappedTensor.from_tensor(_ragged(), shape=(3,))


# ------------------------------------------------------------------ TensorDict
def _td() -> TensorDict:
    two = torch.nested.nested_tensor(
        [torch.arange(12, dtype=torch.float64).view(3, 4), torch.arange(15.0).view(3, 5)]
    )
    return TensorDict({"a": two, "b": torch.ones(2, 3)}, batch_size=[2, 3])


def test_a_tensordict_holds_a_nested_tensor_on_its_regular_dims() -> None:
    td = _td()
    assert td["a"].is_nested
    assert torch.equal(td[1, 2]["a"], torch.arange(10.0, 15.0))
    assert torch.equal(td[0]["a"], torch.arange(12, dtype=torch.float64).view(3, 4))
    other = TensorDict(batch_size=[2, 3])
    other["a"] = td["a"]  # __setitem__ and set take the general path
    other.set(("n", "a"), td["a"])
    assert other["n", "a"] is td["a"]
    assert "a: f64[-1]" in repr(td)


@pytest.mark.parametrize(
    ("batch", "error", "match"),
    [
        ([2, 4], ValueError, r"shape \(2, \[\(3, 4\), \(3, 5\)\]\) of key 'a' does not start"),
        ([3], ValueError, r"does not start with batch_size \(3,\)"),
        ([2, 3, 4], TypeError, "whose elements differ in a batch dim"),
        ([2, 3, 4, 5, 6], ValueError, "does not start with batch_size"),
    ],
)
@pytest.mark.parametrize("how", ["construct", "setitem", "set"])
def test_a_nested_tensor_not_fitting_the_batch_is_refused(
    batch: list[int], error: type, match: str, how: str
) -> None:
    value = _td()["a"]

    def store() -> None:
        if how == "construct":
            TensorDict({"a": value}, batch)
        elif how == "setitem":
            TensorDict(batch_size=batch)["a"] = value
        else:
            TensorDict(batch_size=batch).set("a", value)

    with pytest.raises(error, match=match):
        store()


@pytest.mark.parametrize("where", ["folder", "archive"])
def test_memmap_and_load_round_trip_a_nested_leaf(tmp_path: Path, where: str) -> None:
    td = _td()
    target = tmp_path / ("ckpt" if where == "folder" else "ckpt.tdz")
    if where == "folder":
        td.memmap(target)
        entry = json.loads((target / "meta.json").read_text())["entries"]["a"]
        assert entry == {
            "kind": "nested",
            "file": "a.memmap",
            "dtype": "float64",
            "shapes": [[3, 4], [3, 5]],
        }
    else:
        td.save(target)
    loaded = TensorDict.load(target)
    assert type(loaded["a"]) is MemoryMappedTensor and _same(loaded["a"], td["a"])
    for i in range(2):
        for j in range(3):
            assert (loaded[i, j] == td[i, j]).all()


def test_memmap_in_place_replaces_the_nested_leaf_by_its_mapped_copy(tmp_path: Path) -> None:
    td = _td().memmap_(tmp_path / "c")
    assert type(td["a"]) is MemoryMappedTensor and td["a"].filename == str(tmp_path / "c/a.memmap")
    td["a"][1].fill_(0)  # writes reach the file
    assert float(TensorDict.load_memmap(tmp_path / "c")["a"][1].abs().sum()) == 0.0
    like = _td().memmap_like(tmp_path / "l")
    assert float(like["a"][0].abs().sum()) == 0.0 and like["a"].is_nested


def test_a_sub_folder_holding_a_nested_leaf_loads_alone(tmp_path: Path) -> None:
    TensorDict({"sub": _td()}, [2]).memmap(tmp_path / "c")
    sub = TensorDict.load_memmap(tmp_path / "c" / "sub")
    assert _same(sub["a"], _td()["a"])


def test_make_memmap_with_a_nested_shape_adds_it_to_the_checkpoint(tmp_path: Path) -> None:
    td = TensorDict()
    td.memmap_(tmp_path)
    loaded = TensorDict.load_memmap(tmp_path).memmap_()
    made = td.make_memmap(("e", "f"), shape=torch.tensor([[1, 2], [1, 3]]))
    made[1].fill_(3)
    copied = td.make_memmap_from_tensor("g", _ragged())
    assert made.is_nested and copied.filename is not None and _same(copied, _ragged())
    loaded.memmap_refresh_()
    assert loaded["e", "f"].is_nested and loaded["e", "f"][1].tolist() == [[3.0, 3.0, 3.0]]
    assert _same(loaded["g"], _ragged())
    # without a folder, in shared memory
    plain = TensorDict({}, [])
    assert plain.make_memmap("n", torch.tensor([[2], [3]])).is_nested


def _saved(tmp_path: Path) -> Path:
    _td().memmap(tmp_path / "c")
    return tmp_path / "c"


def _edit(folder: Path, **changes: Any) -> None:
    meta = json.loads((folder / "meta.json").read_text())
    entry = meta["entries"]["a"]
    for key, value in changes.items():
        if value is None:
            entry.pop(key, None)
        else:
            entry[key] = value
    (folder / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"shapes": None}, "must list its element shapes under 'shapes'"),
        ({"shapes": []}, "must list its element shapes under 'shapes'"),
        ({"shapes": [[3, 4], [3]]}, "must list its element shapes under 'shapes'"),
        ({"shapes": [[3, 4], 7]}, "must list its element shapes under 'shapes'"),
        ({"shapes": [[3, -4], [3, 5]]}, "element shape of key 'a' must be a list of non-neg"),
        ({"shapes": [[3, 4.0], [3, 5]]}, "element shape of key 'a' must be a list of non-neg"),
        ({"shapes": [[3, 4], [3, 6]]}, "holds 216 bytes; shape \\[30\\] of float64 needs 240"),
        ({"shapes": [[4, 3], [3, 5]]}, "do not start with batch_size \\[2, 3\\]"),
        ({"shapes": [[3, 4], [3, 5], [0, 0]]}, "do not start with batch_size \\[2, 3\\]"),
        ({"dtype": "float128"}, "unknown dtype 'float128'"),
        ({"file": "../x"}, "'a'"),
    ],
)
def test_bad_nested_entries_are_refused_before_mapping(
    tmp_path: Path, changes: dict[str, Any], match: str
) -> None:
    folder = _saved(tmp_path)
    _edit(folder, **changes)
    with pytest.raises(FormatError, match=match):
        TensorDict.load_memmap(folder)


def test_the_cli_reads_nested_leaves(tmp_path: Path) -> None:
    folder = _saved(tmp_path)
    other = tmp_path / "d"
    changed = _td()
    changed["a"][1].fill_(0)
    changed.memmap(other)

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "tensordict", *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.stdout + done.stderr

    assert "float64  nested [[3, 4], [3, 5]]  216 B" in cli("inspect", str(folder))
    assert "2 tensor files" in cli("verify", str(folder))
    assert "'a': 14 of 27 values differ" in cli("diff", str(folder), str(other))


def test_append_memmap_refuses_to_grow_a_nested_leaf(tmp_path: Path) -> None:
    from tensordict import append_memmap

    folder = _saved(tmp_path)
    with pytest.raises(ValueError, match="'a',\\) is a nested tensor, which cannot grow"):
        append_memmap(folder, _td())


def test_an_upstream_folder_with_a_nested_leaf_and_a_longer_file_loads(tmp_path: Path) -> None:
    """Upstream's layout: the values in ``a.memmap``, the int64 element shapes in
    ``a.shape.memmap``; upstream maps the first bytes of a longer file, and so do we."""
    top = tmp_path / "up"
    top.mkdir()
    meta = {
        "a": {"device": "cpu", "shape": [2, 2], "dtype": "torch.float32", "is_nested": True},
        "b": {"device": "cpu", "shape": [2, 1], "dtype": "torch.int64", "is_nested": False},
        "shape": [2],
        "device": "cpu",
        "_type": "<class 'tensordict._td.TensorDict'>",
    }
    (top / "meta.json").write_text(json.dumps(meta))
    torch.tensor([[3, 4], [3, 5]]).numpy().tofile(top / "a.shape.memmap")
    torch.arange(27.0).numpy().tofile(top / "a.memmap")
    (top / "b.memmap").write_bytes(torch.tensor([[1], [2]]).numpy().tobytes() + b"\n")
    loaded = TensorDict.load_memmap(top)
    assert loaded["b"].tolist() == [[1], [2]]
    assert torch.equal(loaded["a"][1], torch.arange(12.0, 27.0).view(3, 5))
    (top / "a.shape.memmap").write_bytes(torch.tensor([[3, -4], [3, 5]]).numpy().tobytes())
    with pytest.raises(FormatError, match="nested entry 'a' of .* has invalid element shapes"):
        TensorDict.load_memmap(top)
    (top / "a.shape.memmap").write_bytes(b"\0" * 8)  # short
    with pytest.raises(FormatError, match="a.shape.memmap' of key 'a' does not hold 32 bytes"):
        TensorDict.load_memmap(top)


# ------------------------------------------------------------- operations
def test_casts_apply_and_in_place_ops_reach_a_nested_leaf() -> None:
    td = _td()
    wide = td.to(torch.float32)
    assert wide["a"].dtype == torch.float32 and wide["b"].dtype == torch.float32
    assert _same(wide["a"], torch.nested.nested_tensor([e.float() for e in td["a"].unbind()]))
    doubled = td.apply(lambda x: x * 2)
    assert _same(doubled["a"], torch.nested.nested_tensor([e * 2 for e in td["a"].unbind()]))
    with pytest.raises(ValueError, match="shape \\(1, 3\\) of key 'b' does not start"):
        td.apply(lambda x: x if x.is_nested else x[:1])
    zeroed = td.clone().zero_()  # (torch has no foreach kernel for nested tensors)
    assert all(float(e.abs().sum()) == 0 for e in zeroed["a"].unbind())
    assert float(zeroed["b"].abs().sum()) == 0


def test_tensorclasses_and_lazy_stacks_hold_nested_leaves() -> None:
    from tensordict import TensorClass, lazy_stack

    class Ragged(TensorClass):
        r: torch.Tensor

    value = _td()["a"]
    assert Ragged(value, batch_size=[2]).r is value  # the fast constructor path
    assert Ragged(r=value, batch_size=[2, 3]).r is value
    with pytest.raises(ValueError, match="does not start with batch_size \\(3,\\)"):
        Ragged(value, batch_size=[3])
    stacked = lazy_stack([_td(), _td()])
    assert stacked.batch_size == (2, 2, 3) and "a: f64[-1]," in repr(stacked)


def test_memmap_of_a_jagged_leaf_is_refused_naming_it(tmp_path: Path) -> None:
    jagged = torch.nested.nested_tensor_from_jagged(torch.arange(10.0), torch.tensor([0, 3, 10]))
    td = TensorDict({"x": {"j": jagged}}, [2])
    with pytest.raises(TypeError, match=r"memmap\(\('x', 'j'\)\): nested tensors of the torch"):
        td.memmap(tmp_path / "c")
    assert not (tmp_path / "c").exists()  # nothing committed


# ------------------------------------------------------------ review fixes
def test_a_nested_view_with_other_strides_pickles_by_value(tmp_path: Path) -> None:
    mapped = MemoryMappedTensor.from_tensor(_ragged(), filename=tmp_path / "x")
    view = mapped.transpose(1, 2)
    back = pickle.loads(pickle.dumps(view))
    assert type(back) is MemoryMappedTensor and _same(back, view)


def test_nested_tensors_with_0d_elements_are_mapped_and_saved(tmp_path: Path) -> None:
    scalars = torch.nested.nested_tensor([torch.tensor(1.0), torch.tensor(2.0)])
    mapped = MemoryMappedTensor.from_tensor(scalars, filename=tmp_path / "s")
    assert [float(e) for e in mapped.unbind()] == [1.0, 2.0]
    TensorDict({"s": scalars}, [2]).memmap(tmp_path / "c")
    assert [float(e) for e in TensorDict.load_memmap(tmp_path / "c")["s"].unbind()] == [1.0, 2.0]


@pytest.mark.parametrize("how", ["set_", "set_inplace", "update_"])
@pytest.mark.parametrize("mapped", [False, True])
def test_in_place_writes_into_a_nested_leaf(tmp_path: Path, how: str, mapped: bool) -> None:
    td = _td().memmap_(tmp_path / "c") if mapped else _td()
    new = torch.nested.nested_tensor([e + 1 for e in _td()["a"].unbind()])
    if how == "set_":
        td.set_("a", new)
    elif how == "set_inplace":
        td.set("a", new, inplace=True)
    else:
        td.update_({"a": new})
    assert _same(td["a"], new)
    if mapped:
        assert _same(TensorDict.load_memmap(tmp_path / "c")["a"], new)
    other = torch.nested.nested_tensor([torch.zeros(3, 4), torch.zeros(3, 6)]).double()
    with pytest.raises(ValueError, match="key 'a' holds a nested tensor of elements"):
        td.set_("a", other)
    with pytest.raises(ValueError, match="got one not nested"):
        td.set_("a", torch.zeros(2, 3, 4))


def test_memmap_in_place_again_keeps_a_nested_leaf(tmp_path: Path) -> None:
    td = _td().memmap_(tmp_path / "c")
    again = td.memmap_(tmp_path / "c", existsok=True)
    assert _same(again["a"], _td()["a"])
