"""Checkpoints written by format version 1 (tests/data/v1) load in every later version."""

from __future__ import annotations

import pathlib

import torch

from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict, tensorclass

DATA = pathlib.Path(__file__).parent / "data" / "v1"


@tensorclass(shadow=True)  # `values` is a TensorDict method name: allowed with shadow
class GoldenClass:
    values: torch.Tensor
    note: str


def test_v1_tensordict_loads_with_every_value() -> None:
    td = TensorDict.load_memmap(DATA / "td", verify=True)
    assert td.batch_size == (2,)
    assert torch.equal(td["float"], torch.arange(6.0).reshape(2, 3))
    assert torch.equal(td["int"], torch.tensor([7, -8]))
    assert torch.equal(td["bool"], torch.tensor([True, False]))
    assert torch.equal(td["bf16"], torch.tensor([1.5, -2.25], dtype=torch.bfloat16))
    assert torch.equal(td["nested", "deep", "x"], torch.tensor([[1, 2], [3, 4]], dtype=torch.int16))
    assert td["text"] == "version one"
    assert isinstance(td.get("words"), NonTensorStack) and td["words"] == ["left", "right"]
    assert type(td["tc"]) is GoldenClass and td["tc"].note == "golden"
    assert torch.equal(td["tc"].values, torch.tensor([0.5, 0.25]))
    assert torch.equal(td["odd/key"], torch.zeros(2, dtype=torch.uint8))


def test_v1_lazy_stack_and_partial_load() -> None:
    lazy = TensorDict.load_memmap(DATA / "lazy")
    assert isinstance(lazy, LazyStackedTensorDict)
    assert [m["a"].shape for m in lazy.tensordicts] == [(1,), (3,)]
    assert lazy.partial_keys() == ["b"]
    sub = TensorDict.load_memmap(DATA / "td" / "nested")
    assert sub["deep", "x"].dtype == torch.int16


def test_golden_files_are_not_rewritten() -> None:
    before = {p: p.stat().st_size for p in DATA.rglob("*.memmap")}
    TensorDict.load_memmap(DATA / "td")
    assert {p: p.stat().st_size for p in DATA.rglob("*.memmap")} == before


V2 = pathlib.Path(__file__).parent / "data" / "v2"


@tensorclass(shadow=True)
class GoldenClassV2:
    values: torch.Tensor
    note: str


def _check_v2(td: TensorDict) -> None:
    raw = torch.arange(8, dtype=torch.uint8)
    assert td.batch_size == (2,)
    assert torch.equal(td["float"], torch.arange(6.0).reshape(2, 3))
    assert td["complex32"].dtype == torch.complex32
    assert torch.equal(td["complex32"].view(torch.uint8).reshape(-1), raw)
    assert torch.equal(td["e8m0"].view(torch.uint8), raw[:2])
    assert torch.equal(td["bits16"].view(torch.uint8), raw[:4])
    assert torch.equal(td["nested", "deep", "x"], torch.tensor([[1, 2], [3, 4]], dtype=torch.int16))
    assert td["text"] == "version two" and td["words"] == ["left", "right"]
    assert td["obj", "a set"] == {1, 2}
    assert td["tc"].note == "golden" and torch.equal(td["tc"].values, torch.tensor([0.5, 0.25]))
    assert torch.equal(td["ragged", "a"], torch.ones(2, 2, 1))


def test_v2_folder_and_archive_load_with_every_value() -> None:
    _check_v2(TensorDict.load_memmap(V2 / "td", verify=True, allow_pickle=True))
    _check_v2(TensorDict.load_memmap(V2 / "td.tdz", allow_pickle=True))
    assert type(TensorDict.load_memmap(V2 / "td" / "tc")) is GoldenClassV2
    lazy = TensorDict.load_memmap(V2 / "lazy")
    assert [m["a"].shape for m in lazy.tensordicts] == [(1,), (3,)]
    sub = TensorDict.load_memmap(V2 / "td" / "nested")
    assert sub["deep", "x"].dtype == torch.int16


def test_v2_nested_strided_entry_loads_bit_exactly() -> None:
    td = TensorDict.load_memmap(V2 / "nested", verify=True)
    ragged = td["ragged"]
    assert td.batch_size == (2, 3) and ragged.is_nested and ragged.dtype == torch.int32
    assert torch.equal(ragged[0], torch.arange(6, dtype=torch.int32).view(3, 2))
    assert torch.equal(ragged[1], torch.arange(9, dtype=torch.int32).view(3, 3))
