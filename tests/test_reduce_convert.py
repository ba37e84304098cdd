"""Reductions and conversions (dtype, device, clone, detach, memory placement, gradients)."""

from __future__ import annotations

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict
from tests.catalogue import assert_shares, leaves

REDUCTIONS = ["sum", "mean", "std", "var", "amax", "amin", "prod"]


def _floats(td: TensorDict) -> TensorDict:
    """Float leaves with two or more elements (std/var of one element warns in torch)."""
    return td.apply(
        lambda x: x.detach().double() if x.is_floating_point() and x.numel() > 1 else None,
        filter_empty=False,  # an empty result stays a TensorDict
    )


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction_per_leaf_matches_torch(example: TensorDict, op: str) -> None:
    td = _floats(example)
    out = getattr(td, op)()
    assert out.batch_size == torch.Size([])
    for key, x in leaves(td).items():
        torch.testing.assert_close(out.get(key), getattr(torch, op)(x), equal_nan=True)


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction_over_batch_dim(op: str) -> None:
    td = TensorDict({"a": torch.randn(3, 4, 2, dtype=torch.float64), "s": "x"}, [3, 4])
    out = getattr(td, op)(dim=1)
    assert out.batch_size == torch.Size([3]) and out["s"] == "x"
    want = getattr(torch, op)(td["a"], dim=1) if op != "amax" else td["a"].amax(dim=1)
    torch.testing.assert_close(out["a"], want)
    kept = getattr(td, op)(dim=-1, keepdim=True)
    assert kept.batch_size == torch.Size([3, 1])
    feat = getattr(td, op)(dim="feature")
    assert feat.batch_size == torch.Size([3, 4]) and feat["a"].shape == (3, 4)


@pytest.mark.parametrize("op", [*REDUCTIONS, "logsumexp"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_a_nested_level_keeps_its_own_batch_dims_through_a_reduction(
    op: str, keepdim: bool
) -> None:
    inner = TensorDict({"x": torch.randn(2, 3, 4), "s": "v"}, [2, 3], names=["i", "j"])
    td = TensorDict({"a": torch.randn(2, 5), "inner": inner}, [2])
    out = getattr(td, op)(dim=0, keepdim=keepdim)
    assert out.batch_size == ((1,) if keepdim else ())
    assert out["inner"].batch_size == ((1, 3) if keepdim else (3,))
    assert out["inner"].names == (["i", "j"] if keepdim else ["j"])
    want = getattr(torch, op)(inner["x"], dim=0, keepdim=keepdim)
    torch.testing.assert_close(
        out["inner", "x"], want if op != "amax" else inner["x"].amax(0, keepdim)
    )
    assert out["inner", "s"] == "v"


@pytest.mark.parametrize("op", REDUCTIONS)
def test_keepdim_without_dim_keeps_every_dim_as_torch(op: str) -> None:
    inner = TensorDict({"x": torch.randn(2, 3, 4)}, [2, 3])
    td = TensorDict({"a": torch.randn(2, 5), "inner": inner}, [2], names=["i"])
    out = getattr(td, op)(keepdim=True)
    assert out.batch_size == (1,) and out.names == ["i"]
    assert out["inner"].batch_size == (1, 1) and out["a"].shape == (1, 1)
    whole = getattr(torch, op)(td["a"]) if op not in ("amax", "amin") else td["a"].amax()
    if op == "amin":
        whole = td["a"].amin()
    torch.testing.assert_close(out["a"], whole.reshape(1, 1))
    assert out["inner", "x"].shape == (1, 1, 1)


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize(("dim", "keepdim", "names"), [(0, False, ["y"]), (1, True, ["x", "y"])])
def test_extremes_along_a_dim_keep_dim_names(
    op: str, dim: int, keepdim: bool, names: list[str]
) -> None:
    td = TensorDict({"a": torch.randn(3, 4, 2)}, [3, 4], names=["x", "y"])
    out = getattr(td, op)(dim=dim, keepdim=keepdim)
    assert out.values.names == names and out.indices.names == names
    assert getattr(td, op)(dim=dim, keepdim=keepdim, return_indices=False).names == names


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduce_true_gives_one_tensor(op: str) -> None:
    a, b = torch.randn(3, 2, dtype=torch.float64), torch.randn(3, dtype=torch.float64)
    td = TensorDict({"a": a, "n": {"b": b}}, [3])
    joined = torch.cat([a.reshape(-1), b.reshape(-1)])
    torch.testing.assert_close(getattr(td, op)(reduce=True), getattr(torch, op)(joined))
    per_row = torch.cat([a, b[:, None]], dim=1)
    torch.testing.assert_close(
        getattr(td, op)(dim="feature", reduce=True), getattr(torch, op)(per_row, dim=-1)
    )


def test_reduction_errors() -> None:
    td = TensorDict({"a": torch.randn(3, 2)}, [3])
    with pytest.raises(
        IndexError, match="TensorDict.sum: dim 1 is out of range for a batch of 1 dims"
    ):
        td.sum(dim=1)
    with pytest.raises(ValueError, match="dim must be an int, a tuple of ints, 'feature' or None"):
        td.mean(dim="rows")
    with pytest.raises(ValueError, match="reduce=True needs at least one tensor leaf"):
        TensorDict({}, []).sum(reduce=True)
    with pytest.raises(RuntimeError, match=r"TensorDict.std: dim \(0, -2\) repeats a dimension"):
        TensorDict({"a": torch.randn(3, 2)}, [3, 2]).std(dim=(0, -2))  # torch's type, and a
    # ValueError as the other bad dims


def test_all_any_dim() -> None:
    td = TensorDict({"m": torch.tensor([[True, False], [True, True]])}, [2, 2])
    assert torch.equal(td.all(dim=1)["m"], torch.tensor([False, True]))
    assert torch.equal(td.any(dim=0)["m"], torch.tensor([True, True]))


@pytest.mark.parametrize(
    ("method", "dtype"),
    [
        ("float", torch.float32),
        ("double", torch.float64),
        ("half", torch.float16),
        ("bfloat16", torch.bfloat16),
        ("int", torch.int32),
        ("long", torch.int64),
        ("bool", torch.bool),
    ],
)
def test_dtype_casts(example: TensorDict, method: str, dtype: torch.dtype) -> None:
    td = example.detach()
    out = getattr(td, method)()
    for key, x in leaves(td).items():
        assert out.get(key).dtype == dtype
        torch.testing.assert_close(out.get(key), x.to(dtype))


def test_to_keeps_leaves_of_the_target_dtype() -> None:
    a = torch.zeros(2, dtype=torch.float64)
    td = TensorDict({"a": a, "b": torch.zeros(2), "c": torch.zeros(2)}, [2])
    out = td.to(torch.float64)
    assert out["a"] is a
    out["b"].add_(1)
    assert (out["c"] == 0).all()  # the shared cast buffer does not alias leaves


def test_to_device_and_other_spellings() -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}, "s": "x"}, [2])
    cpu = td.to("cpu")
    assert cpu.device == torch.device("cpu") and cpu["n"].device == torch.device("cpu")
    assert cpu.get("s").device == torch.device("cpu")
    both = td.to("cpu", torch.float64)
    assert both["a"].dtype == torch.float64
    like = td.to(torch.zeros(1, dtype=torch.int64))
    assert like["a"].dtype == torch.int64 and like.device == torch.device("cpu")
    assert td.to(cpu).device == torch.device("cpu")
    assert td.cpu().device == torch.device("cpu")
    assert td.to() is td
    with pytest.raises(TypeError, match="TensorDict.to: cannot convert to"):
        td.to(3.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        td.to(foo=1)


def test_clear_device() -> None:
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2], device="cpu")
    assert td.clear_device_() is td
    assert td.device is None and td["n"].device is None
    td2 = TensorDict({"a": torch.zeros(2)}, [2], device="cpu")
    td2.clear_device()
    assert td2.device is None


def test_clone_detach_contiguous(example: TensorDict) -> None:
    c = example.clone()
    for key, x in leaves(example).items():
        assert c.get(key) is not x
        torch.testing.assert_close(c.get(key), x)
    shallow = example.clone(recurse=False)
    assert_shares(shallow, example)
    d = example.detach()
    assert not any(x.requires_grad for x in leaves(d).values())
    assert example.contiguous().is_contiguous()


def test_requires_grad_and_share_memory() -> None:
    td = TensorDict({"w": torch.zeros(2), "i": torch.zeros(2, dtype=torch.long)}, [2])
    assert not td.requires_grad
    td.requires_grad_()
    assert td["w"].requires_grad and not td["i"].requires_grad and td.requires_grad
    td = td.detach()
    assert not td.is_shared()
    assert td.share_memory_() is td
    assert td.is_shared() and td["w"].is_shared()
    assert not TensorDict({}, []).is_shared()


def test_pin_memory_needs_accelerator() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    if torch.cuda.is_available():
        assert td.pin_memory()["a"].is_pinned()
    else:
        with pytest.raises(RuntimeError):
            td.pin_memory()


def _fake_pin(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Stand in for Tensor.pin_memory where no accelerator is (a marked copy per call)."""
    calls: list[int] = []

    def pin(self: torch.Tensor) -> torch.Tensor:
        calls.append(id(self))
        return self.clone().add_(100)

    monkeypatch.setattr(torch.Tensor, "pin_memory", pin)
    return calls


@pytest.mark.parametrize("num_threads", [None, 0, 3])
@pytest.mark.parametrize("lazy", [False, True])
def test_pin_memory_threads_and_inplace(
    monkeypatch: pytest.MonkeyPatch, num_threads: int | None, lazy: bool
) -> None:
    calls = _fake_pin(monkeypatch)
    make = lambda: TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2, 3)}}, [2])  # noqa: E731
    td = torch.stack([make(), make()]) if not lazy else LazyStackedTensorDict(make(), make())
    parts = td.tensordicts if isinstance(td, LazyStackedTensorDict) else [td]
    own = lambda: [t for p in parts for t in leaves(p).values()]  # noqa: E731
    out = td.pin_memory(num_threads=num_threads)
    assert out is not td and sorted(calls) == sorted(map(id, own()))  # each leaf pinned once
    assert torch.equal(out["a"], td["a"] + 100) and torch.equal(out["n", "b"], td["n", "b"] + 100)
    before = own()
    assert td.pin_memory(num_threads=num_threads, inplace=True) is td
    assert all(a is b for a, b in zip(before, own(), strict=True))  # the same leaves
    assert torch.equal(td["n", "b"], torch.full((2, 2, 3), 101.0))


def test_pin_memory_bad_threads() -> None:
    with pytest.raises(ValueError, match=r"TensorDict.pin_memory: num_threads must be an int >= 0"):
        TensorDict({"a": torch.zeros(2)}, [2]).pin_memory(num_threads=-1)
