"""Hypothesis properties of the format bridges: write then read gives the same leaves."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import TensorDict

_DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool]


@st.composite
def tables(draw: st.DrawFn) -> TensorDict:
    """A TensorDict of one batch dim (0 to 5 rows), nested up to two levels."""
    rows = draw(st.integers(0, 5))

    def level(depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i in range(draw(st.integers(1, 3))):
            if depth < 2 and draw(st.booleans()):
                out[f"n{i}"] = level(depth + 1)
            else:
                dtype = draw(st.sampled_from(_DTYPES))
                inner = draw(st.lists(st.integers(1, 3), max_size=2))  # (Arrow: no 0-size rows)
                gen = torch.Generator().manual_seed(draw(st.integers(0, 1000)))
                values = torch.randint(0, 100, (rows, *inner), generator=gen)
                out[f"k{i}"] = values.to(dtype)
        return out

    return TensorDict(level(0), [rows])


def _same(a: Any, b: Any) -> bool:
    keys = sorted(a.keys(True, True), key=str)
    if keys != sorted(b.keys(True, True), key=str):
        return False
    return all(a.get(k).dtype == b.get(k).dtype and torch.equal(a.get(k), b.get(k)) for k in keys)


@settings(max_examples=25, deadline=None)
@given(tables())
def test_safetensors_h5_zarr_parquet_round_trips(td: TensorDict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        td.to_safetensors(root / "x.safetensors")
        assert _same(TensorDict.from_safetensors(root / "x.safetensors"), td)
        ptd = td.to_h5(root / "x.h5")
        assert _same(ptd.to_tensordict(), td)
        ptd.close()
        assert _same(td.to_zarr(root / "x.zarr").to_tensordict(), td)
        td.to_parquet(root / "x.parquet")
        assert _same(TensorDict.from_parquet(root / "x.parquet"), td)
