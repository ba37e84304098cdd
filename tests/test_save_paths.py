"""Every kind of collection of the catalogue through every save path, compared exactly."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    is_tensor_collection,
)
from tensordict._format import FormatError
from tests.catalogue import CATALOGUE, RAGGED, SAVE_KINDS, SAVE_PATHS, assert_identical

KINDS = {**CATALOGUE, **RAGGED, **SAVE_KINDS}


def _fresh(name: str) -> Any:
    torch.manual_seed(0)  # (two calls give the same collection: one to save, one to compare)
    return KINDS[name]()


PATHS = SAVE_PATHS


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_survives_every_path(kind: str, path: str, tmp_path: Path) -> None:
    assert_identical(_fresh(kind), PATHS[path](_fresh(kind), tmp_path))


@pytest.mark.parametrize("archive", [False, True])
@pytest.mark.parametrize("kind", KINDS)
def test_memmap_like_keeps_the_structure(kind: str, archive: bool, tmp_path: Path) -> None:
    target = tmp_path / ("ckpt.tdz" if archive else "ckpt")
    out = _fresh(kind).memmap_like(target, copy_existing=True)
    assert_identical(_fresh(kind), out, values=False)
    assert_identical(_fresh(kind), TensorDict.load_memmap(target), values=False)


def _parts(x: Any) -> dict[str, Any]:
    """What a sub-folder load of each name gives: members of a stack, entries otherwise
    (tensor leaves have no folder of their own)."""
    if isinstance(x, LazyStackedTensorDict):
        return {str(i): member for i, member in enumerate(x.tensordicts)}
    if not is_tensor_collection(x) or isinstance(x, (NonTensorData, NonTensorStack)):
        return {}
    return {key: x.get(key) for key in x.keys() if not isinstance(x.get(key), torch.Tensor)}


@pytest.mark.parametrize("kind", KINDS)
def test_each_part_loads_on_its_own(kind: str, tmp_path: Path) -> None:
    _fresh(kind).memmap(tmp_path / "ckpt", copy_existing=True)
    for name, part in _parts(_fresh(kind)).items():
        assert_identical(part, TensorDict.load_memmap(tmp_path / "ckpt" / name), name)
        _fresh(kind).save(tmp_path / "ckpt.tdz", copy_existing=True)  # ... and from an archive
        assert_identical(part, TensorDict.load_memmap(tmp_path / "ckpt.tdz", subpath=name))


# ---------------------------------------------------------------- the losses this fixed
def test_non_tensor_stack_saved_as_the_root_loads_as_the_stack(tmp_path: Path) -> None:
    stack = torch.stack([TensorDict({"s": c}, []) for c in "abc"]).get("s")
    assert type(stack) is NonTensorStack
    stack.memmap(tmp_path / "a")
    back = TensorDict.load_memmap(tmp_path / "a")
    assert type(back) is NonTensorStack and back.tolist() == ["a", "b", "c"]
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["type"] == "NonTensor" and list(meta["entries"]) == ["data"]
    NonTensorData("x", batch_size=[3]).save(tmp_path / "b")
    back = TensorDict.load(tmp_path / "b")
    assert type(back) is NonTensorData and back.data == "x" and back.batch_size == (3,)


def test_background_save_of_an_entry_gives_the_entry(tmp_path: Path) -> None:
    future = NonTensorStack("a", "b").memmap(tmp_path / "a", return_early=True)
    assert type(future.result()) is NonTensorStack and future.result().tolist() == ["a", "b"]


@pytest.mark.parametrize("name", ["ckpt", "ckpt.tdz"])
def test_nested_non_tensor_entry_loads_from_its_path(name: str, tmp_path: Path) -> None:
    td = TensorDict({"s": NonTensorStack("a", "b"), "o": NonTensorData({1}, [2])}, [2])
    td.memmap(tmp_path / name)
    assert TensorDict.load_memmap(tmp_path / name / "s").tolist() == ["a", "b"]
    with pytest.raises(FormatError, match=r"key 'o' in .* is pickled data; pass allow_pickle"):
        TensorDict.load_memmap(tmp_path / name / "o")
    assert TensorDict.load_memmap(tmp_path / name / "o", allow_pickle=True).data == {1}
    with pytest.raises(FormatError, match=rf"'.*{name}/missing' is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / name / "missing")


@pytest.mark.parametrize(
    "entries",
    [
        {"data": {"kind": "json", "value": 1}, "b": {"kind": "json", "value": 2}},
        {"other": {"kind": "json", "value": 1}},
        {},
    ],
)
def test_a_non_tensor_root_holding_anything_else_is_refused(
    entries: dict[str, Any], tmp_path: Path
) -> None:
    NonTensorData(0).memmap(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    meta["entries"] = entries
    (tmp_path / "a" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match=r"type 'NonTensor', which holds exactly one non-tensor"):
        TensorDict.load_memmap(tmp_path / "a")


def test_a_nested_non_tensor_collection_is_refused(tmp_path: Path) -> None:
    TensorDict({"n": TensorDict({"data": NonTensorData(1)}, [])}, []).memmap(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    meta["entries"]["n"]["meta"]["type"] = "NonTensor"
    (tmp_path / "a" / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match=r"type 'NonTensor', which only a checkpoint's root"):
        TensorDict.load_memmap(tmp_path / "a")


class _Letters(str):
    """A str subclass (as a str enum is): JSON would write it as a plain str."""


@pytest.mark.parametrize(
    "value",
    [
        _Letters("ab"),
        (1, 2),
        [1, (2, 3)],
        {"k": (1,)},
        torch.Size([2]),
        float("nan"),
        {1: "int key"},
        __import__("collections").OrderedDict(a=1),
        __import__("numpy").float64(2.5),
    ],
    ids=repr,
)
def test_non_json_values_keep_their_type(value: Any, tmp_path: Path) -> None:
    td = TensorDict({"v": NonTensorData(value)}, [])
    td.memmap(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["entries"]["v"]["kind"] == "pickle"  # (not JSON: it would change type)
    back = TensorDict.load_memmap(tmp_path / "a", allow_pickle=True).get("v").data
    assert type(back) is type(value) and repr(back) == repr(value)
    with pytest.raises(
        TypeError, match=r"consolidate: key \('v',\) holds a non-tensor value of type"
    ):
        td.consolidate(filename=tmp_path / "c.bin")


@pytest.mark.parametrize("entry", [MetaData("m", [2]), MetaData[int](3, [2])], ids=repr)
def test_metadata_keeps_its_class(entry: Any, tmp_path: Path) -> None:
    td = TensorDict({"m": entry}, [2])
    for back in (
        PATHS["memmap_load"](td, tmp_path),
        PATHS["archive"](td, tmp_path),
        PATHS["consolidated_file"](td, tmp_path),
    ):
        assert type(back.get("m")) is type(entry) and back.get("m").data == entry.data


def test_an_unknown_non_tensor_class_tag_is_refused(tmp_path: Path) -> None:
    TensorDict({"m": MetaData[int](3)}, []).memmap(tmp_path / "a")
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["entries"]["m"] == {"kind": "json", "value": 3, "class": "MetaData[int]"}
    for tag, why in [("Evil", "names the non-tensor class 'Evil'"), ("MetaData[str]", "Expected")]:
        meta["entries"]["m"]["class"] = tag
        (tmp_path / "a" / "meta.json").write_text(json.dumps(meta))
        with pytest.raises(FormatError, match=rf"key 'm'.*{why}"):
            TensorDict.load_memmap(tmp_path / "a")


# ------------------------------------------------- the format bridges' non-tensor entries
def _safetensors(x: Any, tmp: Path) -> Any:
    x.to_safetensors(tmp / "x.safetensors")
    return TensorDict.from_safetensors(tmp / "x.safetensors")


def _h5(x: Any, tmp: Path) -> Any:
    return x.to_h5(tmp / "x.h5").to_tensordict()


def _zarr(x: Any, tmp: Path) -> Any:
    return x.to_zarr(tmp / "x.zarr").to_tensordict()


BRIDGES = {"safetensors": _safetensors, "h5": _h5, "zarr": _zarr}
NON_TENSORS: dict[str, Callable[[], Any]] = {
    "list": lambda: NonTensorData([1, 2], [2]),
    "nested_list": lambda: NonTensorData([[1, 2], [3, 4]], [2]),
    "int": lambda: NonTensorData(3, [2]),
    "float": lambda: NonTensorData(2.5, [2]),
    "bool": lambda: NonTensorData(True, [2]),
    "dict": lambda: NonTensorData({"a": [1]}, [2]),
    "stack_of_lists": lambda: NonTensorStack([1, 2], [3, 4]),
    "meta": lambda: MetaData[int](1, [2]),
}


@pytest.mark.parametrize("bridge", BRIDGES)
@pytest.mark.parametrize("entry", NON_TENSORS)
def test_format_bridges_keep_non_tensor_entries(entry: str, bridge: str, tmp_path: Path) -> None:
    """(Lists came back as tensors, a stack of lists as a deeper stack of numbers, a
    MetaData as a NonTensorData; safetensors wrote numbers and dicts into files that
    failed to load.)"""

    def make() -> TensorDict:
        return TensorDict({"x": torch.zeros(2), "n": {"v": NON_TENSORS[entry]()}}, [2])

    back = BRIDGES[bridge](make(), tmp_path)
    assert_identical(make(), back.select(*make().keys()))  # (HDF5 and zarr sort the keys)


@pytest.mark.parametrize("bridge", BRIDGES)
@pytest.mark.parametrize(
    "value", [(1, 2), {1: "a"}, [(1,)], __import__("numpy").int64(3)], ids=repr
)
def test_format_bridges_refuse_values_json_would_change(
    value: Any, bridge: str, tmp_path: Path
) -> None:
    td = TensorDict({"x": torch.zeros(2), "v": NonTensorData(value, [2])}, [2])
    kind = type(value).__name__
    with pytest.raises(TypeError, match=rf"the non-tensor value at 'v' is not JSON \({kind}\)"):
        BRIDGES[bridge](td, tmp_path)


def test_errors_saving_an_entry_name_its_class(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"^NonTensorData.memmap: key \('data',\) holds non-JSON"):
        NonTensorData({1}).memmap(tmp_path / "a", allow_pickle=False)
    with pytest.raises(TypeError, match=r"^NonTensorStack.consolidate: key \('data',\) holds a"):
        NonTensorStack((1,), (2,)).consolidate(filename=tmp_path / "c.bin")


def test_upstream_folders_keep_stack_dim_names_and_metadata(tmp_path: Path) -> None:
    """Folders laid out as upstream tensordict writes them (written by hand here)."""

    def meta(folder: Path, content: dict[str, Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(json.dumps(content))

    dense = {"_type": "<class 'tensordict._td.TensorDict'>", "_format_version": 1}
    lazy = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
    meta(tmp_path / "l", {"_type": lazy, "stack_dim": 1, "stack_dim_name": "env"})
    for i in range(2):
        meta(tmp_path / "l" / str(i), {"shape": [3], "names": ["t"], **dense})
    back = TensorDict.load_memmap(tmp_path / "l")
    assert back.names == ["t", "env"] and back.stack_dim == 1
    meta(tmp_path / "m", {"m": {"type": "MetaData"}, "shape": [2], **dense})
    meta(tmp_path / "m" / "m", {"_type": "<class 'tensordict.tensorclass.MetaData'>", "data": 1})
    entry = TensorDict.load_memmap(tmp_path / "m").get("m")
    assert type(entry) is MetaData and entry.data == 1 and entry.batch_size == (2,)


def test_rows_of_an_entry_append_to_the_entry_saved_on_its_own(tmp_path: Path) -> None:
    from tensordict import append_memmap

    NonTensorStack("a", "b").memmap(tmp_path / "s")
    append_memmap(tmp_path / "s", NonTensorStack("c"))  # (an AttributeError before)
    assert TensorDict.load_memmap(tmp_path / "s").tolist() == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("tensor", "what"),
    [
        (torch.eye(2).to_sparse(), "of layout torch.sparse_coo"),
        (torch.empty(2, device="meta"), "on the meta device"),
    ],
    ids=["sparse", "meta"],
)
def test_tensors_without_element_bytes_are_refused_naming_the_key(
    tensor: torch.Tensor, what: str, tmp_path: Path
) -> None:
    td = TensorDict({"n": {"x": tensor}}, [2])
    with pytest.raises(TypeError, match=rf"memmap: key \('n', 'x'\) is a tensor {what}"):
        td.memmap(tmp_path / "a")
    assert not (tmp_path / "a").exists()  # (nothing committed)


def test_a_description_kept_in_memory_holds_any_value() -> None:
    """``consolidate(metadata=True)`` writes nothing, so nothing is refused (as upstream)."""
    td = TensorDict({"x": torch.zeros(2), "t": NonTensorData((1, 2)), "s": NonTensorData({1})}, [])
    entries = td.consolidate(metadata=True)._consolidated["metadata"]["root"]["entries"]
    assert entries["t"]["data"] == (1, 2) and entries["s"]["data"] == {1}
