"""safetensors interop: round trips, byte compatibility, sharded checkpoints, hostile files."""

from __future__ import annotations

import builtins
import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn

import tensordict
from tensordict import NonTensorStack, TensorDict

DTYPES = [
    torch.float64,
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.bool,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]


def _leaf(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    return torch.arange(int(torch.tensor(shape).prod()), dtype=torch.int64).reshape(shape).to(dtype)


def _assert_same(a: Any, b: Any) -> None:
    ka = sorted(a.keys(include_nested=True, leaves_only=True), key=str)
    kb = sorted(b.keys(include_nested=True, leaves_only=True), key=str)
    assert ka == kb
    for key in ka:
        x, y = a.get(key), b.get(key)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and x.shape == y.shape, key
            assert torch.equal(x.reshape(-1).view(torch.uint8), y.reshape(-1).view(torch.uint8)), (
                key
            )
        else:
            assert x.tolist() == y.tolist(), key


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 8), nn.Sequential(nn.Linear(8, 2))
    )


@pytest.mark.parametrize("lazy", [True, False])
def test_round_trip_every_dtype_nested_and_zero_size(tmp_path: Path, lazy: bool) -> None:
    td = TensorDict(
        {
            "flat": {str(d).split(".")[-1]: _leaf(d, (3, 2)) for d in DTYPES},
            "empty": torch.zeros(0, 5),
            "scalar": torch.tensor(1.5),
            "deep": {"er": {"x": torch.randn(2, 2)}},
        }
    )
    td.to_safetensors(tmp_path / "a.safetensors")
    back = TensorDict.from_safetensors(tmp_path / "a.safetensors", lazy=lazy)
    _assert_same(back, td)


def test_batch_size_and_non_tensor_values_come_back(tmp_path: Path) -> None:
    td = TensorDict(
        {"a": torch.ones(3, 2), "n": {"b": torch.zeros(3)}, "s": "hello", "cfg": {"opt": "adam"}},
        [3],
    )
    td["names"] = NonTensorStack.from_list(["x", "y", "z"])
    td.to_safetensors(tmp_path / "t.safetensors")
    back = TensorDict.from_safetensors(tmp_path / "t.safetensors")
    assert back.batch_size == torch.Size([3]) and back["n"].batch_size == torch.Size([3])
    assert back["s"] == "hello" and back["names"] == ["x", "y", "z"]
    _assert_same(back, td)
    assert load_file(tmp_path / "t.safetensors").keys() == {"a", "n.b"}  # tensors only


def test_bytes_equal_save_file_both_ways(tmp_path: Path) -> None:
    model = _model()
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, tmp_path / "theirs.safetensors")
    TensorDict.from_module(model).to_safetensors(tmp_path / "ours.safetensors")
    ours = (tmp_path / "ours.safetensors").read_bytes()
    assert ours == (tmp_path / "theirs.safetensors").read_bytes()
    loaded = load_file(tmp_path / "ours.safetensors")
    for name, value in state.items():
        assert torch.equal(loaded[name], value), name
    td = TensorDict.from_safetensors(tmp_path / "theirs.safetensors")
    for name, value in state.items():
        assert torch.equal(td.get(tuple(name.split("."))), value), name
    fresh = _model().apply(lambda m: None)
    with torch.no_grad():
        for p in fresh.parameters():
            p.zero_()
    td.to_module(fresh, inplace=True)
    for name, value in fresh.state_dict().items():
        assert torch.equal(value, state[name]), name


def test_lazy_leaves_view_one_private_mapping(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    save_file({"a": torch.ones(1000), "b": torch.zeros(10, dtype=torch.int64)}, path)
    td = TensorDict.from_safetensors(path)
    a, b = td["a"], td["b"]
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    assert a.untyped_storage().nbytes() == os.path.getsize(path)
    a.add_(1)  # copy-on-write: the file keeps its bytes
    assert torch.equal(load_file(path)["a"], torch.ones(1000))
    eager = TensorDict.from_safetensors(path, lazy=False)
    assert torch.equal(eager["a"], torch.ones(1000))


def test_tied_weights_are_saved_as_copies(tmp_path: Path) -> None:
    w = torch.randn(3, 3)
    td = TensorDict({"enc": {"w": w}, "dec": {"w": w}, "half": w[0]})
    td.to_safetensors(tmp_path / "tied.safetensors")
    loaded = load_file(tmp_path / "tied.safetensors")
    assert torch.equal(loaded["enc.w"], w) and torch.equal(loaded["dec.w"], w)
    assert torch.equal(loaded["half"], w[0])


def test_write_is_atomic_over_a_live_mapping(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    TensorDict({"a": torch.ones(4)}).to_safetensors(path)
    live = TensorDict.from_safetensors(path)
    TensorDict({"a": torch.full((4,), 7.0)}).to_safetensors(path)
    assert torch.equal(live["a"], torch.ones(4))
    assert torch.equal(TensorDict.from_safetensors(path)["a"], torch.full((4,), 7.0))
    assert sorted(os.listdir(tmp_path)) == ["x.safetensors"]


def test_top_level_faces(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.arange(3)}, [3])
    tensordict.to_safetensors(td, tmp_path / "f.safetensors")
    back = tensordict.from_safetensors(tmp_path / "f.safetensors")
    _assert_same(back, td)
    assert back.batch_size == td.batch_size


def test_errors_of_the_writer(tmp_path: Path) -> None:
    td = TensorDict({"a.b": torch.ones(1), "a": {"b": torch.zeros(1)}})
    with pytest.raises(ValueError, match=r"TensorDict.to_safetensors: two entries .* 'a.b'"):
        td.to_safetensors(tmp_path / "x.safetensors")
    with pytest.raises(ValueError, match="reserved"):
        TensorDict({"a": torch.ones(1)}).to_safetensors(
            tmp_path / "x.safetensors", metadata={"tensordict": "x"}
        )
    with pytest.raises(TypeError, match=r"non-tensor value at 'o' is not JSON \(object\)"):
        TensorDict({"o": object()}).to_safetensors(tmp_path / "x.safetensors")
    assert os.listdir(tmp_path) == []


# --------------------------------------------------------------------------- sharded


def _shard(tmp_path: Path, model: nn.Module) -> dict[str, str]:
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    weight_map: dict[str, str] = {}
    for i, child in enumerate(("0", "1", "2", "3")):
        shard = f"model-{i + 1:05d}-of-00004.safetensors"
        part = {k: v for k, v in state.items() if k.split(".")[0] == child}
        save_file(part, tmp_path / shard, metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(part, shard))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    return weight_map


class _OpenCounter:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real_open, real_from_file = builtins.open, torch.from_file

        def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(os.fspath(file))
            return real_open(file, *args, **kwargs)

        def counting_from_file(file: Any, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(os.fspath(file))
            return real_from_file(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(torch, "from_file", counting_from_file)

    def shards(self) -> set[str]:
        return {os.path.basename(p) for p in self.paths if p.endswith(".safetensors")}


def test_sharded_checkpoint_opens_as_one_tensordict(tmp_path: Path) -> None:
    model = _model()
    _shard(tmp_path, model)
    for where in (tmp_path, tmp_path / "model.safetensors.index.json"):
        td = TensorDict.from_safetensors(where)
        _assert_same(td, TensorDict.from_module(model))
    fresh = _model()
    for p in fresh.parameters():
        p.data.zero_()
    with td.to_module(fresh):
        x = torch.randn(5, 4)
        model.eval(), fresh.eval()
        assert torch.equal(fresh(x), model(x))


def test_partial_load_reads_one_shard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _model()
    _shard(tmp_path, model)
    counter = _OpenCounter(monkeypatch)
    sub = TensorDict.from_safetensors(tmp_path, prefix="2")
    assert counter.shards() == {"model-00003-of-00004.safetensors"}
    target = nn.Linear(8, 8)
    sub.to_module(target, inplace=True)
    assert torch.equal(target.weight, model[2].weight)
    assert torch.equal(target.bias, model[2].bias)


def test_hostile_index_entries(tmp_path: Path) -> None:
    save_file({"w": torch.ones(2)}, tmp_path / "a.safetensors")
    index = tmp_path / "model.safetensors.index.json"
    outside = tmp_path.parent / f"outside-{tmp_path.name}.safetensors"
    for shard in (f"../{outside.name}", str(outside), "", 3):
        index.write_text(json.dumps({"weight_map": {"w": shard}}))
        with pytest.raises(
            ValueError, match=r"index.json' maps tensor 'w' to .* not a file inside"
        ):
            TensorDict.from_safetensors(tmp_path)
    save_file({"w": torch.ones(2)}, outside)
    (tmp_path / "link.safetensors").symlink_to(outside)  # a link leading out of the folder
    index.write_text(json.dumps({"weight_map": {"w": "link.safetensors"}}))
    with pytest.raises(ValueError, match=r"maps tensor 'w' to 'link.safetensors', which is not"):
        TensorDict.from_safetensors(tmp_path)
    index.write_text(json.dumps({"weight_map": {"w": "a.safetensors", "v": "a.safetensors"}}))
    with pytest.raises(ValueError, match=r"places tensors \['v'\] in .*a.safetensors"):
        TensorDict.from_safetensors(tmp_path)
    index.write_text(json.dumps({"nothing": 1}))
    with pytest.raises(ValueError, match="has no 'weight_map' object"):
        TensorDict.from_safetensors(index)
    index.write_text("{not json")
    with pytest.raises(ValueError, match="is not a JSON index"):
        TensorDict.from_safetensors(index)
    with pytest.raises(KeyError, match="no tensor of .* under prefix 'zzz'"):
        TensorDict.from_safetensors(tmp_path / "a.safetensors", prefix="zzz")


# --------------------------------------------------------------------------- hostile headers


def _raw(path: Path, header: Any, data: bytes = b"", length: int | None = None) -> Path:
    blob = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob) if length is None else length) + blob + data)
    return path


@pytest.mark.parametrize(
    ("header", "data", "length", "message"),
    [
        ({}, b"", 10**9, "declares a header of 1000000000 bytes"),
        (b"\xff\xfe", b"", None, "header that is not JSON"),
        ([1, 2], b"", None, "header that is not an object"),
        (
            {"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}},
            b"0000",
            None,
            "'a'.*unknown dtype 'Q9'",
        ),
        (
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}},
            b"0000",
            None,
            "'a'.*needs 8 bytes, the offsets span 4",
        ),
        (
            {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}},
            b"0000",
            None,
            "'a'.*outside the 4 data bytes",
        ),
        (
            {"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}},
            b"0000",
            None,
            "'a'.*shape \\[-1\\]",
        ),
        (
            {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}},
            b"0000",
            None,
            "'a'.*data_offsets",
        ),
        ({"a": 3}, b"", None, "'a': the entry is not an object"),
        ({"__metadata__": {"k": 1}}, b"", None, "__metadata__ that is not str->str"),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
            },
            b"00000000",
            None,
            "tensor 'b' overlaps tensor 'a'",
        ),
        (
            {
                "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                "a.b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]},
            },
            b"00000000",
            None,
            "'a.b' nests under a tensor",
        ),
        (
            {"__metadata__": {"tensordict": "{bad"}},
            b"",
            None,
            "malformed tensordict record",
        ),
        (
            {"__metadata__": {"tensordict": json.dumps({"version": 9})}},
            b"",
            None,
            "unsupported tensordict record",
        ),
        (
            {
                "__metadata__": {"tensordict": json.dumps({"version": 1, "batch_size": {"": [5]}})},
                "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
            },
            b"0000",
            None,
            "batch size \\[5\\] recorded for 'the root' does not fit",
        ),
    ],
)
def test_hostile_headers_are_refused(
    tmp_path: Path, header: Any, data: bytes, length: int | None, message: str
) -> None:
    path = _raw(tmp_path / "bad.safetensors", header, data, length)
    with pytest.raises(ValueError, match=f"from_safetensors: '.*bad.safetensors'.*{message}"):
        TensorDict.from_safetensors(path)


def test_short_file_and_unaligned_offsets(tmp_path: Path) -> None:
    (tmp_path / "short.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="shorter than 8 bytes"):
        TensorDict.from_safetensors(tmp_path / "short.safetensors")
    value = torch.tensor([1.5, -2.0])
    header = {"a": {"dtype": "F32", "shape": [2], "data_offsets": [1, 9]}}
    path = _raw(tmp_path / "odd.safetensors", header, b"\x00" + value.numpy().tobytes())
    # pad the header so the data starts unaligned for float32
    assert torch.equal(TensorDict.from_safetensors(path)["a"], value)


def test_folder_without_a_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="holds no model.safetensors.index.json"):
        TensorDict.from_safetensors(tmp_path)


def test_missing_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "safetensors.torch", None)
    with pytest.raises(ImportError, match=r"pip install 'tensordict\[safetensors\]'"):
        TensorDict({"a": torch.ones(1)}).to_safetensors(tmp_path / "x.safetensors")


def test_import_tensordict_imports_no_format_library() -> None:
    code = (
        "import sys, tensordict, tensordict.nn; "
        "print([m for m in ('safetensors', 'h5py', 'zarr', 'pyarrow', 'pandas') "
        "if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert out.stdout.strip() == "[]"


def test_sharded_write_round_trips_and_loads_with_safetensors(tmp_path: Path) -> None:
    model = _model()
    td = TensorDict.from_module(model)
    td.to_safetensors(tmp_path / "ckpt", max_shard_size=300)
    index = json.loads((tmp_path / "ckpt" / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and shards[0] == f"model-00001-of-{len(shards):05d}.safetensors"
    state = model.state_dict()
    assert index["metadata"]["total_size"] == sum(
        v.numel() * v.element_size() for v in state.values()
    )
    loaded: dict[str, torch.Tensor] = {}
    for shard in shards:
        loaded.update(load_file(tmp_path / "ckpt" / shard))
    assert loaded.keys() == state.keys()
    for name, value in state.items():
        assert torch.equal(loaded[name], value), name
    _assert_same(TensorDict.from_safetensors(tmp_path / "ckpt"), td)
    batched = TensorDict({"a": torch.ones(3, 2), "s": "x"}, [3])
    tensordict.to_safetensors(batched, tmp_path / "b", max_shard_size="1KB")
    back = TensorDict.from_safetensors(tmp_path / "b")
    assert back.batch_size == torch.Size([3]) and back["s"] == "x"
    with pytest.raises(
        ValueError, match=r"to_safetensors: max_shard_size 'lots' is not a positive"
    ):
        batched.to_safetensors(tmp_path / "c", max_shard_size="lots")
