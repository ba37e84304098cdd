"""Persistence, I/O and conversion calls that gave another result than upstream's (or
failed) for code written for upstream tensordict: each test fails without its fix."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
import torch

import tensordict
from tensordict import MemoryMappedTensor, PersistentTensorDict, TensorDict, is_tensorclass


def _file(tmp_path: Path) -> str:
    path = str(tmp_path / "x.memmap")
    MemoryMappedTensor.from_tensor(torch.arange(6.0), filename=path)
    return path


def test_from_filename_mode_r_is_copy_on_write(tmp_path: Path) -> None:
    path = _file(tmp_path)
    view = MemoryMappedTensor.from_filename(path, torch.float32, (2, 3), mode="r")
    view[0, 0] = 100.0
    assert view[0, 0].item() == 100.0
    again = MemoryMappedTensor.from_filename(path, torch.float32, (2, 3))
    torch.testing.assert_close(again.as_subclass(torch.Tensor), torch.arange(6.0).view(2, 3))


def test_from_filename_mode_r_plus_writes_through(tmp_path: Path) -> None:
    path = _file(tmp_path)
    view = MemoryMappedTensor.from_filename(path, torch.float32, (6,), mode="r+")
    view[1] = 7.0
    assert MemoryMappedTensor.from_filename(path, torch.float32, (6,))[1].item() == 7.0


def test_from_filename_mode_errors(tmp_path: Path) -> None:
    path = _file(tmp_path)
    with pytest.raises(
        ValueError, match=r"from_filename: mode must be 'r', 'r\+' or None, got 'w'"
    ):
        MemoryMappedTensor.from_filename(path, torch.float32, (6,), mode="w")
    if os.geteuid() == 0:  # root may write any file
        return
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match=r"from_filename: mode='r\+' needs a writable file"):
        MemoryMappedTensor.from_filename(path, torch.float32, (6,), mode="r+")


_STRUCT = np.zeros(3, dtype=[("x", "f4"), ("y", "i8", (2,))])


def test_module_from_struct_array_batch_is_the_array_shape() -> None:
    td = tensordict.from_struct_array(_STRUCT)
    assert td.batch_size == (3,)
    assert td["y"].shape == (3, 2)
    assert tensordict.from_struct_array(_STRUCT, batch_size=[]).batch_size == ()


@pytest.mark.parametrize("from_any", [tensordict.from_any, TensorDict.from_any])
def test_from_any_struct_array_batch_is_the_array_shape(from_any: object) -> None:
    td = from_any(_STRUCT)  # type: ignore[operator]
    assert td.batch_size == (3,)
    torch.testing.assert_close(td["x"], torch.zeros(3))


@pytest.mark.parametrize("obj", [3, "x", None, object, np.zeros(2)])
def test_from_any_other_objects_come_back_unchanged(obj: object) -> None:
    assert TensorDict.from_any(obj) is obj


def test_from_any_dataframe_is_from_pandas() -> None:
    frame = pd.DataFrame({"a": [1, 2, 3], "b": [1.0, 2.0, 3.0]})
    td = TensorDict.from_any(frame)
    assert td.batch_size == (3,)
    torch.testing.assert_close(td["a"], torch.tensor([1, 2, 3]))
    torch.testing.assert_close(td["b"], torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))


def test_from_any_h5_file_is_a_persistent_tensordict(tmp_path: Path) -> None:
    path = str(tmp_path / "f.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(8.0).reshape(4, 2))
    with h5py.File(path, "r") as f:
        td = TensorDict.from_any(f, batch_size=[4])
        assert isinstance(td, PersistentTensorDict)
        assert td.batch_size == (4,)
        torch.testing.assert_close(td["a"], torch.arange(8.0, dtype=torch.float64).view(4, 2))


@dataclasses.dataclass
class _Sample:
    x: torch.Tensor
    label: str = "none"


def test_from_dataclass_as_tensorclass() -> None:
    out = TensorDict.from_dataclass(_Sample(torch.zeros(3), "a"), as_tensorclass=True)
    assert is_tensorclass(out) and type(out).__name__ == "_Sample_tc"
    torch.testing.assert_close(out.x, torch.zeros(3))
    assert out.label == "a"
    cls = TensorDict.from_dataclass(_Sample, as_tensorclass=True)
    assert isinstance(cls, type) and is_tensorclass(cls)
    made = cls(x=torch.ones(2), batch_size=[2])
    assert made.label == "none" and made.batch_size == (2,)


_CPU = torch.device("cpu")


def _devices(td: TensorDict) -> list[object]:
    return [td.device, td["n"].device]


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize("op", ["memmap", "memmap_", "memmap_like"])
def test_memory_mapped_collections_are_on_the_cpu(tmp_path: Path, prefix: bool, op: str) -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2])
    assert _devices(td) == [None, None]
    out = getattr(td, op)(str(tmp_path / "c") if prefix else None)
    assert _devices(out) == [_CPU, _CPU]
    if op == "memmap_":
        assert out is td
    if prefix:
        assert _devices(TensorDict.load_memmap(tmp_path / "c")) == [_CPU, _CPU]


def test_lazy_stack_memmap_is_on_the_cpu(tmp_path: Path) -> None:
    stack = tensordict.lazy_stack([TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(2)])
    out = stack.memmap(tmp_path / "s")
    assert out.device == _CPU and out.tensordicts[0].device == _CPU
    assert TensorDict.load_memmap(tmp_path / "s").device == _CPU


def _saved(tmp_path: Path) -> str:
    path = str(tmp_path / "saved")
    TensorDict({"a": torch.arange(4.0).view(2, 2), "n": {"b": torch.ones(2)}}, [2]).memmap(path)
    return path


@pytest.mark.parametrize(
    "target",
    [
        TensorDict(),
        TensorDict(batch_size=[2]),
        TensorDict({"z": torch.zeros(2), "n": {"old": torch.zeros(2)}}, [2]),
    ],
)
def test_load_memmap_into_replaces_the_entries(tmp_path: Path, target: TensorDict) -> None:
    path = _saved(tmp_path)
    batch = target.batch_size
    nested = target.get("n", None)
    assert target.load_memmap_(path) is target
    assert target.batch_size == batch
    assert sorted(target.keys(include_nested=True, leaves_only=True), key=str) == [("n", "b"), "a"]
    assert isinstance(target["a"], MemoryMappedTensor)
    torch.testing.assert_close(target["a"].as_subclass(torch.Tensor), torch.arange(4.0).view(2, 2))
    if nested is not None:
        assert target["n"] is nested  # nested collections are kept, their leaves replaced


def test_load_memmap_out_and_load_replace_the_leaves(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    out = TensorDict({"a": torch.zeros(2, 2), "gone": torch.zeros(2)}, [2])
    assert TensorDict.load_memmap(path, out=out) is out
    assert sorted(out.keys()) == ["a", "n"]
    dst = TensorDict().lock_()
    assert dst.load_(path) is dst and dst.is_locked
    assert dst["n", "b"].tolist() == [1.0, 1.0]


def test_load_memmap_into_checks_the_batch_size(tmp_path: Path) -> None:
    path = _saved(tmp_path)
    with pytest.raises(
        ValueError, match=r"TensorDict.set: shape \(2, 2\) of key 'a' does not start"
    ):
        TensorDict(batch_size=[3]).load_memmap_(path)


def test_memmap_refresh_drops_keys_no_longer_saved(tmp_path: Path) -> None:
    path = str(tmp_path / "c")
    td = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2)}, [2]).memmap(path)
    TensorDict({"a": torch.ones(2), "c": torch.ones(2)}, [2]).memmap(path)
    td.memmap_refresh_()
    assert sorted(td.keys()) == ["a", "c"]
    assert td["a"].tolist() == [1.0, 1.0]


def _torch_round_trip(obj: object) -> object:
    import io

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer)  # weights_only=True, torch's default


def test_torch_load_weights_only_rebuilds_lazy_stacks_and_non_tensor_stacks() -> None:
    members = [TensorDict({"a": torch.full((2,), float(i)), "s": f"m{i}"}, [2]) for i in range(3)]
    stack = tensordict.lazy_stack(members, dim=1)
    back = _torch_round_trip(stack)
    assert type(back) is type(stack) and back.stack_dim == 1 and back.batch_size == (2, 3)
    torch.testing.assert_close(back["a"], stack["a"])
    assert back[0, 2]["s"] == "m2"
    labels = tensordict.NonTensorStack("x", "y")
    again = _torch_round_trip(labels)
    assert type(again) is tensordict.NonTensorStack and again.tolist() == ["x", "y"]
    meta = _torch_round_trip(tensordict.MetaData(3))
    assert type(meta) is tensordict.MetaData and meta.data == 3


def test_deepcopy_is_unlocked_like_clone() -> None:
    import copy

    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2]).lock_()
    out = copy.deepcopy(td)
    assert not out.is_locked and not out["n"].is_locked and td.is_locked
    torch.testing.assert_close(out["n", "b"], td["n", "b"])
    assert out["a"].data_ptr() != td["a"].data_ptr()
    stack = tensordict.lazy_stack([td.clone(), td.clone()]).lock_()
    assert not copy.deepcopy(stack).is_locked


def test_state_dict_values_are_the_tensors_non_tensors_in_the_metadata(tmp_path: Path) -> None:
    from safetensors.torch import load_file, save_file

    labels = tensordict.NonTensorStack("x", "y")
    td = TensorDict(
        {"a": torch.ones(2), "n": {"b": torch.zeros(2), "t": "deep"}, "s": "hi", "v": labels},
        [2],
    )
    sd = td.state_dict()
    assert list(sd) == ["a", "n.b"]
    assert all(isinstance(v, torch.Tensor) for v in sd.values())
    save_file(sd, str(tmp_path / "w.safetensors"))  # tensors only: safetensors takes it
    assert sorted(load_file(str(tmp_path / "w.safetensors"))) == ["a", "n.b"]
    for state in (sd, td.state_dict(flatten=False)):
        back = TensorDict().load_state_dict(state)
        assert back["s"] == "hi" and back["n", "t"] == "deep" and back["v"] == ["x", "y"]
        torch.testing.assert_close(back["a"], td["a"])
    module = torch.nn.Linear(2, 2)
    params = TensorDict.from_module(module).unlock_()
    params["tag"] = "not a parameter"
    module.load_state_dict(params.state_dict())  # strict: the non-tensor is no key


def test_load_state_dict_reads_upstreams_non_tensor_metadata() -> None:
    from collections import OrderedDict

    sd: OrderedDict[str, torch.Tensor] = OrderedDict(a=torch.ones(2), **{"n.b": torch.zeros(2)})
    non_tensor = {"_type": "NonTensorData", "_is_non_tensor": True}
    sd._metadata = OrderedDict(  # type: ignore[attr-defined]
        [
            ("", {"batch_size": torch.Size([2]), "device": None}),
            ("n", {"batch_size": torch.Size([2]), "device": None}),
            ("n.t", {**non_tensor, "batch_size": torch.Size([2]), "_non_tensor": {"data": "d"}}),
            ("s", {**non_tensor, "batch_size": torch.Size([2]), "_non_tensor": {"data": "hi"}}),
        ]
    )
    back = TensorDict().load_state_dict(sd)
    assert back.batch_size == (2,) and back["s"] == "hi" and back["n", "t"] == "d"
    keys = sorted(back.keys(include_nested=True), key=str)
    assert keys == [("n", "b"), ("n", "t"), "a", "n", "s"]


def test_persistent_tensordict_memmap_is_a_memory_mapped_tensordict(tmp_path: Path) -> None:
    src = TensorDict({"a": torch.arange(6.0).view(2, 3), "n": {"b": torch.ones(2)}}, [2])
    h5 = src.to_h5(str(tmp_path / "f.h5"))
    out = h5.memmap(tmp_path / "mm")
    assert type(out) is TensorDict and out.is_memmap() and out.device == _CPU
    torch.testing.assert_close(out["a"].as_subclass(torch.Tensor), src["a"])
    back = TensorDict.load_memmap(tmp_path / "mm")
    torch.testing.assert_close(back["n", "b"].as_subclass(torch.Tensor), src["n", "b"])
    like = h5.memmap_like(tmp_path / "like")
    assert like["a"].shape == (2, 3) and like["a"].sum().item() == 0
    with pytest.raises(RuntimeError, match="PersistentTensorDict.memmap_: a PersistentTensorDict"):
        h5.memmap_(tmp_path / "inplace")
    h5.close()


def test_load_mode_r_of_a_folder_is_copy_on_write(tmp_path: Path) -> None:
    path = str(tmp_path / "c")
    TensorDict({"a": torch.zeros(3), "n": {"b": torch.zeros(2)}}, []).memmap(path)
    private = TensorDict.load(path, mode="r")
    private["a"] += 1.0
    private["n", "b"][0] = 3.0
    assert private["a"].tolist() == [1.0, 1.0, 1.0]
    again = TensorDict.load_memmap(path)
    assert again["a"].tolist() == [0.0, 0.0, 0.0] and again["n", "b"].tolist() == [0.0, 0.0]
    shared = TensorDict.load_memmap(path, mode="r+")
    shared["a"] += 2.0
    assert TensorDict.load_memmap(path)["a"].tolist() == [2.0, 2.0, 2.0]


def test_load_mode_errors(tmp_path: Path) -> None:
    path = str(tmp_path / "c")
    TensorDict({"a": torch.zeros(3)}, []).memmap(path)
    with pytest.raises(ValueError, match=r"load_memmap: mode must be 'r', 'r\+' or None, got 'w'"):
        TensorDict.load(path, mode="w")
    if os.geteuid() == 0:  # root may write any file
        return
    os.chmod(os.path.join(path, "a.memmap"), 0o444)
    with pytest.raises(PermissionError, match=r"load_memmap: mode='r\+' maps the files shared"):
        TensorDict.load_memmap(path, mode="r+")


def test_loading_a_missing_path_is_a_file_not_found_error(tmp_path: Path) -> None:
    from tensordict._format import FormatError

    with pytest.raises(FileNotFoundError, match="load_memmap: .*nope' is not a checkpoint"):
        TensorDict.load(tmp_path / "nope")
    with pytest.raises(FormatError):  # (also the format error it was)
        TensorDict.load_memmap(tmp_path / "nope")
    TensorDict({"a": torch.zeros(1)}, []).memmap(tmp_path / "c")
    with pytest.raises(FileNotFoundError, match="nothing exists there"):
        TensorDict.load_memmap(tmp_path / "c", subpath="zz")


def test_numpy_leaves_out_none_entries() -> None:
    td = TensorDict(
        {
            "a": torch.zeros(2),
            "none": None,
            "n": {"x": None},
            "v": tensordict.NonTensorStack(None, "x"),
        },
        [2],
    )
    out = td.numpy()
    assert sorted(out) == ["a", "n", "v"] and out["n"] == {} and out["v"] == [None, "x"]
    np.testing.assert_array_equal(out["a"], np.zeros(2, dtype=np.float32))
    assert "v" not in TensorDict({"v": tensordict.NonTensorStack(None, None)}, [2]).numpy()


def test_memmap_into_a_folder_with_a_symlink_names_it(tmp_path: Path) -> None:
    prefix, outside = tmp_path / "saved", tmp_path / "outside"
    prefix.mkdir()
    outside.mkdir()
    (prefix / "nested").symlink_to(outside, target_is_directory=True)
    td = TensorDict({"nested": {"x": torch.randn(3)}}, [])
    with pytest.raises(RuntimeError, match="a nested TensorDict through symlink 'nested'"):
        td.memmap(prefix)
    assert not list(outside.iterdir())


def _upstream_folder(root: Path) -> Path:
    """A folder laid out as upstream tensordict's memmap writes it (written by hand)."""
    import json

    def meta(folder: Path, content: dict[str, object]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "meta.json").write_text(json.dumps(content))

    td_type = {"_type": "<class 'tensordict._td.TensorDict'>", "_format_version": 1}
    leaf = {"device": "cpu", "is_nested": False}
    top = root / "up"
    meta(
        top,
        {
            "a": {**leaf, "shape": [2, 1], "dtype": "torch.int64"},
            "nested": {"type": "TensorDict"},
            "s": {"type": "NonTensorData"},
            "ns": {"type": "NonTensorStack"},
            "l": {"type": "LazyStackedTensorDict"},
            "o": {"type": "NonTensorData"},
            "shape": [2, 1],
            "device": "cpu",
            **td_type,
        },
    )
    torch.tensor([[1], [2]]).numpy().tofile(top / "a.memmap")
    meta(
        top / "nested",
        {
            "k/e y": {**leaf, "shape": [2, 1], "dtype": "torch.bfloat16"},
            "empty": {**leaf, "shape": [2, 1, 0], "dtype": "torch.float32"},
            "shape": [2, 1],
            "device": "cpu",
            **td_type,
        },
    )
    ones = torch.ones(2, 1, dtype=torch.bfloat16).view(torch.int16).numpy()
    ones.tofile(top / "nested" / "k%2Fe%20y.memmap")
    nt = "<class 'tensordict.tensorclass.NonTensorData'>"
    meta(top / "s", {"_type": nt, "data": "a string!", "_metadata": None})
    stack = "<class 'tensordict.tensorclass.NonTensorStack'>"
    meta(top / "ns", {"_type": stack, "stack_dim": 0, "data": [["u"], ["v"]]})
    meta(top / "o", {"_type": nt, "_metadata": None})
    import pickle

    (top / "o" / "other.pickle").write_bytes(pickle.dumps({"data": {1, 2}}))
    lazy = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
    meta(top / "l", {"_type": lazy, "stack_dim": 0})
    for i in range(2):
        meta(
            top / "l" / str(i),
            {"q": {**leaf, "shape": [1], "dtype": "torch.float32"}, "shape": [1], **td_type},
        )
        torch.full((1,), float(i)).numpy().tofile(top / "l" / str(i) / "q.memmap")
    return top


def test_load_reads_a_folder_saved_by_upstream(tmp_path: Path) -> None:
    top = _upstream_folder(tmp_path)
    td = TensorDict.load(top, allow_pickle=True)
    assert td.batch_size == (2, 1)
    assert isinstance(td["a"], MemoryMappedTensor)
    torch.testing.assert_close(td["a"].as_subclass(torch.Tensor), torch.tensor([[1], [2]]))
    bf = td["nested", "k/e y"]
    assert bf.dtype == torch.bfloat16 and bf.float().tolist() == [[1.0], [1.0]]
    assert td["nested", "empty"].shape == (2, 1, 0)
    assert td["s"] == "a string!" and td["ns"] == [["u"], ["v"]] and td["o"] == {1, 2}
    stack = td.get("l")
    assert type(stack).__name__ == "LazyStackedTensorDict"
    assert stack["q"].view(-1).tolist() == [0.0, 1.0]
    nested = TensorDict.load_memmap(top, subpath="nested")
    assert nested.batch_size == (2, 1) and nested["k/e y"].shape == (2, 1)


def test_loading_upstreams_folder_is_validated_and_never_unpickles_unasked(tmp_path: Path) -> None:
    from tensordict._format import PickleRefusedError

    top = _upstream_folder(tmp_path)
    with pytest.raises(
        PickleRefusedError, match=r"other.pickle' is pickled data; pass allow_pickle"
    ):
        TensorDict.load(top)
    (top / "a.memmap").write_bytes(b"\0" * 8)  # one element short
    with pytest.raises(
        ValueError, match=r"leaf file .*a.memmap' of key 'a' does not hold 16 bytes"
    ):
        TensorDict.load(top, allow_pickle=True)


def test_a_fifo_as_meta_json_is_refused_without_blocking(tmp_path: Path) -> None:
    from tensordict._format import FormatError

    (tmp_path / "c").mkdir()
    os.mkfifo(tmp_path / "c" / "meta.json")
    with pytest.raises(FormatError, match="is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / "c")
