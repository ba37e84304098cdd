"""Tables: pandas, Arrow, Parquet, CSV, JSON and numpy structured arrays, leaf by leaf."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import torch

import tensordict
from tensordict import NonTensorStack, TensorDict, lazy_stack, tensorclass

NUMERIC = [
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.bool,
]


def _name(dtype: torch.dtype) -> str:
    return str(dtype).split(".")[-1]


def _table_td(rows: int, dtypes: list[torch.dtype] = NUMERIC) -> TensorDict:
    cols: dict[str, Any] = {
        _name(d): ((torch.arange(rows) % 2) + (0.5 if d.is_floating_point else 0)).to(d)
        for d in dtypes
    }
    cols["obs"] = {"x": torch.arange(rows, dtype=torch.float32) / 4 + 0.5}
    td = TensorDict(cols, [rows])
    td["word"] = NonTensorStack.from_list([f"w{i}" for i in range(rows)])
    return td


def _assert_same(a: Any, b: Any) -> None:
    ka = sorted(a.keys(include_nested=True, leaves_only=True), key=str)
    kb = sorted(b.keys(include_nested=True, leaves_only=True), key=str)
    assert ka == kb
    assert a.batch_size == b.batch_size
    for key in ka:
        x, y = a.get(key), b.get(key)
        if isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype, key
            assert torch.equal(x, y), key
        else:
            assert x.tolist() == y.tolist(), key


@pytest.mark.parametrize("rows", [0, 4])
def test_pandas_round_trip(rows: int) -> None:
    td = _table_td(rows)
    df = td.to_pandas(separator=".")
    assert list(df.columns)[-2:] == ["obs.x", "word"]
    for d in NUMERIC:
        assert df[_name(d)].dtype == np.dtype(_name(d)).newbyteorder("=") or d == torch.bool
    back = TensorDict.from_pandas(df, separator=".")
    if rows:
        _assert_same(back, td)
    else:
        assert back.batch_size == torch.Size([0]) and back["obs", "x"].shape == (0,)
    flat = TensorDict.from_pandas(df)
    assert "obs.x" in flat.keys()


def test_pandas_special_columns() -> None:
    df = pd.DataFrame(
        {
            "when": pd.to_datetime(["2020-01-01", "2020-01-02"]),
            "cat": pd.Categorical(["b", "a"]),
            "mixed": [1, "x"],
        }
    )
    td = TensorDict.from_pandas(df, dtype=torch.float32)
    assert td["when"].dtype == torch.float32
    assert td["cat"].tolist() == [1, 0]
    assert td["mixed"] == [1, "x"]
    assert TensorDict.from_pandas(df)["when"].dtype == torch.int64


def test_pandas_batch_size_options() -> None:
    df = pd.DataFrame({"a": [1, 2, 3]})
    assert TensorDict.from_pandas(df, batch_size=[]).batch_size == torch.Size([])
    assert TensorDict.from_pandas(df, auto_batch_size=True).batch_size == torch.Size([3])
    with pytest.raises(TypeError, match="from_pandas: pass batch_size or auto_batch_size"):
        TensorDict.from_pandas(df, batch_size=[3], auto_batch_size=True)
    assert tensordict.from_pandas(df, device="cpu").device == torch.device("cpu")


def test_table_errors() -> None:
    td = TensorDict({"a": torch.zeros(2, 3), "n": {"b": torch.zeros(2)}}, [2])
    with pytest.raises(ValueError, match=r"TensorDict.to_pandas: entry 'a' has shape \(2, 3\)"):
        td.to_pandas(separator=".")
    with pytest.raises(ValueError, match=r"to_pandas: entry 'n' is a nested TensorDict; pass sep"):
        td.exclude("a").to_pandas()
    with pytest.raises(
        ValueError, match=r"to_arrow: a table needs a batch size of one dim.*\(2, 2\)"
    ):
        TensorDict({"a": torch.zeros(2, 2)}, [2, 2]).to_arrow()
    with pytest.raises(ValueError, match=r"to_arrow: entry 'z' has shape \(2, 0\); Arrow cannot"):
        TensorDict({"z": torch.zeros(2, 0)}, [2]).to_arrow()
    with pytest.raises(TypeError, match=r"to_pandas: entry 'h' has dtype torch.bfloat16"):
        TensorDict({"h": torch.zeros(2, dtype=torch.bfloat16)}, [2]).to_pandas()
    df = pd.DataFrame({"a": [1], "a.b": [2]})
    with pytest.raises(ValueError, match=r"from_pandas: column 'a.b' nests under column 'a'"):
        TensorDict.from_pandas(df, separator=".")
    df = pd.DataFrame({"a.b": [1], "a": [2]})
    with pytest.raises(ValueError, match=r"from_pandas: column 'a' is both a leaf and a prefix"):
        TensorDict.from_pandas(df, separator=".")


@pytest.mark.parametrize("rows", [0, 5])
def test_arrow_round_trip_with_tensor_and_struct_columns(rows: int) -> None:
    td = _table_td(rows)
    td["image"] = torch.arange(rows * 6, dtype=torch.uint8).reshape(rows, 2, 3)
    td["obs", "deep", "v"] = torch.ones(rows, 4, dtype=torch.float64)
    td["mask"] = torch.arange(rows * 6).view(rows, 2, 3) % 2 == 0  # bool: nested fixed lists
    table = tensordict.to_arrow(td)
    assert table.num_rows == rows
    assert pa.types.is_struct(table.schema.field("obs").type)
    back = tensordict.from_arrow(table)
    _assert_same(back, td)
    flat = td.to_arrow(separator="/")
    assert "obs/deep/v" in flat.column_names
    _assert_same(TensorDict.from_arrow(flat, separator="/"), td)


def test_arrow_nulls_and_batches() -> None:
    table = pa.table({"a": pa.array([1, None, 3]), "b": pa.array(["x", None, "z"])})
    td = TensorDict.from_arrow(table)
    assert td["a"] == [1, None, 3] and td["b"] == ["x", None, "z"]
    batch = pa.record_batch({"a": [1.0, 2.0]})
    assert torch.equal(
        TensorDict.from_arrow(batch)["a"], torch.tensor([1.0, 2.0], dtype=torch.float64)
    )


@pytest.mark.parametrize("rows", [0, 5])
def test_parquet_round_trip(tmp_path: Path, rows: int) -> None:
    td = _table_td(rows)
    td["image"] = torch.randn(rows, 2, 2)
    td.to_parquet(tmp_path / "t.parquet")
    _assert_same(tensordict.from_parquet(tmp_path / "t.parquet"), td)
    part = TensorDict.from_parquet(tmp_path / "t.parquet", columns=["image"])
    assert list(part.keys()) == ["image"]
    assert [p.name for p in tmp_path.iterdir()] == ["t.parquet"]


def test_csv_and_json_round_trip(tmp_path: Path) -> None:
    dtypes = [torch.int64, torch.float64, torch.bool]
    td = _table_td(4, dtypes)
    td["obs", "x"] = td["obs", "x"].double()
    td.to_csv(tmp_path / "t.csv", separator=".")
    _assert_same(tensordict.from_csv(tmp_path / "t.csv", separator="."), td)
    for lines in (False, True):
        td.to_json(tmp_path / "t.json", separator=".", lines=lines)
        back = tensordict.from_json(tmp_path / "t.json", separator=".", lines=lines)
        _assert_same(back, td)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv", "t.json"]


def test_struct_array_round_trip() -> None:
    td = TensorDict(
        {_name(d): (torch.arange(6) % 3).to(d).reshape(2, 3) for d in NUMERIC},
        [2, 3],
    )
    td["n", "m"] = torch.randn(2, 3, 4)
    td["s"] = NonTensorStack.from_list([["a", "bb", "c"], ["d", "e", "ffff"]])
    arr = td.to_struct_array()
    assert arr.shape == (2, 3) and arr["n"]["m"].shape == (2, 3, 4)
    assert arr.dtype["s"] == np.dtype("<U10")  # at least 10 characters, as upstream
    back = TensorDict.from_struct_array(arr)
    _assert_same(back, td)
    empty = TensorDict({"a": torch.zeros(0)}, [0])
    assert TensorDict.from_struct_array(empty.to_struct_array()).batch_size == torch.Size([0])


def test_struct_array_shares_memory_and_errors() -> None:
    arr = np.zeros(3, dtype=[("a", "f8"), ("b", "f8")])
    td = TensorDict.from_struct_array(arr)
    td["a"][0] = 5.0
    assert arr["a"][0] == 5.0
    with pytest.raises(
        TypeError, match="from_struct_array: expected a numpy structured array, got list"
    ):
        TensorDict.from_struct_array([1, 2])
    with pytest.raises(TypeError, match=r"to_struct_array: non-tensor entry 'o' holds object"):
        TensorDict({"o": NonTensorStack.from_list([{}, {}])}, [2]).to_struct_array()
    td = TensorDict.from_struct_array(arr, auto_batch_size=True)
    assert td.batch_size == torch.Size([3])


def test_missing_packages_name_their_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    monkeypatch.setitem(sys.modules, "pandas", None)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"to_pandas: .*'pandas'.*tensordict\[pandas\]"):
        td.to_pandas()
    with pytest.raises(ImportError, match=r"to_arrow: .*tensordict\[arrow\]"):
        td.to_arrow()
    with pytest.raises(ImportError, match=r"from_parquet: .*tensordict\[arrow\]"):
        TensorDict.from_parquet(tmp_path / "x.parquet")


@tensorclass
class _Pair:
    x: torch.Tensor
    n: TensorDict


@pytest.mark.parametrize("kind", ["TensorDict", "LazyStackedTensorDict", "tensorclass"])
def test_every_collection_kind_writes_every_format(tmp_path: Path, kind: str) -> None:
    td = TensorDict({"x": torch.arange(4.0), "n": {"y": torch.randn(4, 2)}}, [4])
    data: Any = {
        "TensorDict": td,
        "LazyStackedTensorDict": lazy_stack(list(td.unbind(0))),
        "tensorclass": _Pair(x=td["x"], n=td["n"], batch_size=[4]),
    }[kind]
    data.to_safetensors(tmp_path / "a.safetensors")
    ptd = data.to_h5(tmp_path / "a.h5")
    back = [
        TensorDict.from_safetensors(tmp_path / "a.safetensors"),
        ptd.to_tensordict(),
        data.to_zarr(tmp_path / "a.zarr").to_tensordict(),
        TensorDict.from_arrow(data.to_arrow()),
        TensorDict.from_struct_array(data.to_struct_array()),
    ]
    flat = data.exclude(("n", "y"))
    back_flat = TensorDict.from_pandas(flat.to_pandas(separator="."), separator=".")
    _assert_same(back_flat, td.exclude(("n", "y")))
    ptd.close()
    for got in back:
        _assert_same(got, td)
