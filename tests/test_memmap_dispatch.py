"""MemoryMappedTensor dispatch: plain results for ops, mapped views for view methods."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict


def _mm(tmp_path: Path) -> tuple[MemoryMappedTensor, torch.Tensor]:
    plain = torch.arange(24.0).reshape(2, 3, 4)
    return MemoryMappedTensor.from_tensor(plain, filename=tmp_path / "x.memmap"), plain


_VIEWS: dict[str, Callable[[Any], Any]] = {
    "int": lambda t: t[1],
    "slice": lambda t: t[:, 1:3],
    "tuple": lambda t: t[0, ..., None],
    "0-dim index tensor": lambda t: t[torch.tensor(1)],
    "view": lambda t: t.view(6, 4),
    "view_as": lambda t: t.view_as(torch.zeros(4, 6)),
    "reshape": lambda t: t.reshape(24),
    "reshape_as": lambda t: t.reshape_as(torch.zeros(6, 4)),
    "flatten": lambda t: t.flatten(),
    "ravel": lambda t: t.ravel(),
    "unflatten": lambda t: t.unflatten(2, (2, 2)),
    "t/transpose": lambda t: t[0].t(),
    "transpose": lambda t: t.transpose(0, 2),
    "swapaxes": lambda t: t.swapaxes(0, 1),
    "permute": lambda t: t.permute(2, 0, 1),
    "movedim": lambda t: t.movedim(0, 2),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "squeeze": lambda t: t[:1].squeeze(0),
    "expand": lambda t: t.expand(5, 2, 3, 4),
    "expand_as": lambda t: t[:1].expand_as(torch.zeros(2, 3, 4)),
    "narrow": lambda t: t.narrow(1, 1, 2),
    "select": lambda t: t.select(2, 3),
    "diagonal": lambda t: t.diagonal(dim1=1, dim2=2),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "as_strided": lambda t: t.as_strided((3,), (2,)),
    "detach": lambda t: t.detach(),
    "T": lambda t: t[0].T,
    "mT": lambda t: t.mT,
    "data": lambda t: t.data,
    "contiguous": lambda t: t.contiguous(),
    "add_": lambda t: t.add_(0),
}
_VIEW_TUPLES: dict[str, Callable[[Any], Any]] = {
    "unbind": lambda t: t.unbind(1),
    "split": lambda t: t.split(1, 2),
    "split sizes": lambda t: t.split([1, 3], 2),
    "chunk": lambda t: t.chunk(2, 2),
    "tensor_split": lambda t: t.tensor_split(3, 1),
    "iteration": tuple,
}
_RESULTS: dict[str, Callable[[Any], Any]] = {
    "add": lambda t: t + 1,
    "mul": lambda t: t * t,
    "sum": lambda t: t.sum(),
    "clone": lambda t: t.clone(),
    "index list": lambda t: t[[0, 1, 0]],
    "index bool": lambda t: t[torch.tensor([True, False])],
    "reshape of a transposed view (a copy)": lambda t: t.transpose(0, 2).reshape(24),
    "contiguous of a transposed view": lambda t: t.transpose(0, 2).contiguous(),
    "double": lambda t: t.double(),
    "stack": lambda t: torch.stack([t, t]),
    "cat": lambda t: torch.cat([t, t]),
    "functional reshape (plain view)": lambda t: torch.reshape(t, (24,)),
    "zero-size view": lambda t: t[:, 0:0],
}


@pytest.mark.parametrize("name", _VIEWS)
def test_view_methods_stay_mapped(tmp_path: Path, name: str) -> None:
    mm, plain = _mm(tmp_path)
    view = _VIEWS[name](mm)
    assert type(view) is MemoryMappedTensor and view.filename == mm.filename
    torch.testing.assert_close(view.as_subclass(torch.Tensor), _VIEWS[name](plain))
    view.fill_(-1)  # writes reach the file
    assert (mm == -1).any()


@pytest.mark.parametrize("name", _VIEW_TUPLES)
def test_view_tuples_stay_mapped(tmp_path: Path, name: str) -> None:
    mm, plain = _mm(tmp_path)
    views = _VIEW_TUPLES[name](mm)
    assert type(views) is tuple and len(views) == len(_VIEW_TUPLES[name](plain))
    for view, expected in zip(views, _VIEW_TUPLES[name](plain), strict=True):
        assert type(view) is MemoryMappedTensor and view.filename == mm.filename
        torch.testing.assert_close(view.as_subclass(torch.Tensor), expected)


@pytest.mark.parametrize("name", _RESULTS)
def test_other_results_are_plain_tensors(tmp_path: Path, name: str) -> None:
    mm, plain = _mm(tmp_path)
    out = _RESULTS[name](mm)
    assert type(out) is torch.Tensor
    torch.testing.assert_close(out, _RESULTS[name](plain))


def test_ops_returning_their_input_return_the_mapped_tensor(tmp_path: Path) -> None:
    mm, _ = _mm(tmp_path)
    assert mm.contiguous() is mm and mm.add_(1) is mm and mm.to(torch.float32) is mm
    assert mm.flatten(0, 0) is mm


def test_functional_views_share_the_bytes(tmp_path: Path) -> None:
    mm, _ = _mm(tmp_path)
    flat = torch.reshape(mm, (24,))
    flat[0] = 100
    assert mm[0, 0, 0] == 100


def test_indexing_a_memmapped_tensordict_keeps_mapped_leaves(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.randn(4, 3), "n": {"b": torch.randn(4)}}, [4])
    mapped = td.memmap(tmp_path / "td")
    for index in (1, slice(1, 3), (slice(None),)):
        part = mapped[index]
        assert part.is_memmap()
        torch.testing.assert_close(part["a"].as_subclass(torch.Tensor), td["a"][index])
    picked = mapped[torch.tensor([0, 2])]
    assert type(picked["a"]) is torch.Tensor
    torch.testing.assert_close(picked["n", "b"], td["n", "b"][torch.tensor([0, 2])])


def test_repr_and_format_of_mapped_views(tmp_path: Path) -> None:
    mm, plain = _mm(tmp_path)
    row = mm[0, 1]
    assert repr(row) == repr(plain[0, 1]).replace("tensor", "MemoryMappedTensor")
    assert repr(mm[0, 1, 2]) == "MemoryMappedTensor(6.)"
    assert f"{mm[0, 1, 2]:.1f}" == "6.0" and str(mm[:1, :1, :2]).startswith("MemoryMappedTensor(")
