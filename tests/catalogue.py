"""A shared catalogue of example TensorDicts, crossed with operations by the tests."""

from __future__ import annotations

import dataclasses
import io
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from tensordict import (
    LazyStackedTensorDict,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorClass,
    TensorDict,
    TypedTensorDict,
    from_consolidated,
    is_tensorclass,
    lazy_stack,
)


def flat() -> TensorDict:
    return TensorDict({"a": torch.randn(4, 3), "b": torch.randn(4)}, batch_size=[4])


def nested() -> TensorDict:
    return TensorDict(
        {"a": torch.randn(4, 3), "n": {"b": torch.randn(4, 2), "m": {"c": torch.randn(4)}}},
        batch_size=[4],
    )


def empty_batch() -> TensorDict:
    return TensorDict({"a": torch.randn(3), "b": torch.randn(())}, batch_size=[])


def two_dims() -> TensorDict:
    return TensorDict({"a": torch.randn(2, 3, 5), "b": torch.randn(2, 3)}, batch_size=[2, 3])


def non_contiguous() -> TensorDict:
    return TensorDict({"a": torch.randn(3, 4).t(), "b": torch.randn(4, 6)[:, ::2]}, batch_size=[4])


def bool_int() -> TensorDict:
    return TensorDict(
        {
            "f": torch.randn(4),
            "i": torch.randint(1, 5, (4, 2)),
            "m": torch.rand(4) > 0.5,
        },
        batch_size=[4],
    )


def requires_grad() -> TensorDict:
    return TensorDict(
        {"w": torch.randn(4, 3, requires_grad=True), "v": torch.randn(4)}, batch_size=[4]
    )


def with_non_tensor() -> TensorDict:
    td = TensorDict({"a": torch.randn(4, 2)}, batch_size=[4])
    td["text"] = "hello"
    return td


def longer_nested_batch() -> TensorDict:
    inner = TensorDict({"x": torch.randn(4, 5, 2)}, batch_size=[4, 5])
    return TensorDict({"a": torch.randn(4), "inner": inner}, batch_size=[4])


def zero_size() -> TensorDict:
    return TensorDict({"a": torch.randn(0, 3), "b": torch.randn(0)}, batch_size=[0])


class CatalogueSample(TensorClass):
    """A tensorclass entry of the catalogue: a tensor field, a nested collection, a string.
    (Its name is its own in the suite: a class is registered by name for saving and
    sending, and other test files define classes called ``Sample``.)"""

    obs: torch.Tensor
    extra: TensorDict
    label: str


Sample = CatalogueSample


def tensorclass() -> Sample:
    extra = TensorDict({"r": torch.randn(4, 2)}, batch_size=[4])
    return Sample(torch.randn(4, 3), extra, "cat", batch_size=[4])


def lazy_same() -> Any:
    """A lazy stack of members sharing one structure (densifiable)."""
    return lazy_stack(list(nested().unbind(0)), 0)


def lazy_ragged() -> Any:
    """A lazy stack whose members differ in a leaf's feature size (not densifiable)."""
    return lazy_stack(
        [
            TensorDict({"x": torch.randn(3, 2), "y": torch.randn(3)}, [3]),
            TensorDict({"x": torch.randn(3, 5), "y": torch.randn(3)}, [3]),
        ],
        1,
    )


def memmapped() -> TensorDict:
    """A TensorDict whose leaves are memory-mapped files."""
    return nested().memmap(tempfile.mkdtemp(prefix="catalogue-") + "/td")


CATALOGUE: dict[str, Callable[[], Any]] = {
    "flat": flat,
    "nested": nested,
    "empty_batch": empty_batch,
    "two_dims": two_dims,
    "non_contiguous": non_contiguous,
    "bool_int": bool_int,
    "requires_grad": requires_grad,
    "with_non_tensor": with_non_tensor,
    "longer_nested_batch": longer_nested_batch,
    "zero_size": zero_size,
    "tensorclass": tensorclass,
    "lazy_same": lazy_same,
    "memmapped": memmapped,
}

# Collections that refuse the operations needing one dense tensor per key (each has its own
# crossing test: every operation either works member by member or names the differing key).
RAGGED: dict[str, Callable[[], Any]] = {"lazy_ragged": lazy_ragged}


def leaves(td: TensorDict) -> dict[object, torch.Tensor]:
    """Tensor leaves by nested key."""
    return {
        k: v
        for k, v in td.items(include_nested=True, leaves_only=True)
        if isinstance(v, torch.Tensor)
    }


def assert_same(a: TensorDict, b: TensorDict) -> None:
    """Same structure, batch size and leaf values (dtype included)."""
    assert a.batch_size == b.batch_size
    assert set(a.keys(include_nested=True)) == set(b.keys(include_nested=True))
    la, lb = leaves(a), leaves(b)
    for key, x in la.items():
        y = lb[key]
        assert x.dtype == y.dtype, key
        assert x.shape == y.shape, key
        torch.testing.assert_close(x, y, equal_nan=True, rtol=0, atol=0)


def assert_shares(a: Any, b: Any, keys: list[Any] | None = None) -> None:
    """``a`` holds the very tensors ``b`` holds at ``keys`` (all of ``a``'s leaves by default).

    A lazy stack's ``get`` stacks its members' tensors into a new one, so two lazy stacks
    share when their members do, member by member.
    """
    if isinstance(a, LazyStackedTensorDict) and isinstance(b, LazyStackedTensorDict):
        assert a.stack_dim == b.stack_dim and len(a.tensordicts) == len(b.tensordicts)
        for x, y in zip(a.tensordicts, b.tensordicts, strict=True):
            assert_shares(x, y, keys)
        return
    for key in leaves(a) if keys is None else keys:
        assert a.get(key) is b.get(key), key


# ------------------------------------------------------------------ every kind, for saving
# Each save path (memmap, save/load, archives, consolidate, pickling) is crossed with these
# as well as with CATALOGUE and RAGGED: every kind of collection and of entry the library has.


class CatalogueRecord(TensorClass):
    """A tensorclass with a nested tensorclass, a non-tensor field and Optional fields."""

    obs: torch.Tensor
    inner: CatalogueSample
    note: str
    maybe: torch.Tensor | None = None
    tag: str | None = None


class CatalogueTyped(TypedTensorDict):
    """A TypedTensorDict of the catalogue."""

    eta: Tensor
    x: Tensor


def named() -> TensorDict:
    return TensorDict(
        {"a": torch.randn(2, 3), "n": {"b": torch.randn(2, 3, 4)}}, [2, 3], names=["env", "t"]
    )


def lazy_heterogeneous() -> Any:
    """Members with different keys."""
    return lazy_stack(
        [
            TensorDict({"a": torch.randn(3), "b": torch.zeros(3, 2)}, [3]),
            TensorDict({"a": torch.randn(3), "c": {"d": torch.ones(3)}}, [3]),
        ],
        0,
    )


def lazy_named() -> Any:
    """A named lazy stack: the stack dim's name (the members hold the others)."""
    members = [TensorDict({"a": torch.randn(3, i + 1)}, [3], names=["t"]) for i in range(2)]
    return lazy_stack(members, 1, stack_dim_name="env")


def lazy_nested() -> Any:
    """A lazy stack of lazy stacks (inner stack_dim 1), inside a TensorDict."""
    inner = [
        lazy_stack([TensorDict({"x": torch.randn(2, i + j + 1)}, [2]) for j in range(2)], 1)
        for i in range(3)
    ]
    return TensorDict({"s": lazy_stack(inner, 0), "t": torch.arange(3)}, [3])


def tensorclass_optional() -> CatalogueRecord:
    """Optional fields, one set, one None."""
    return CatalogueRecord(
        obs=torch.randn(3, 2),
        inner=CatalogueSample(torch.randn(3, 1), TensorDict({}, [3]), "in", batch_size=[3]),
        note="outer",
        maybe=torch.ones(3),
        batch_size=[3],
    )


def typed() -> CatalogueTyped:
    return CatalogueTyped(eta=torch.randn(3, 2), x=torch.arange(3), batch_size=[3])


def non_tensor_data() -> NonTensorData:
    return NonTensorData({"lr": 0.5, "steps": [1, 2]}, batch_size=[2])


def non_tensor_stack() -> NonTensorStack:
    return NonTensorStack("a", "b", "c")


def non_tensor_stack_of_stack() -> NonTensorStack:
    """A 2-d NonTensorStack, taken from a stack of TensorDicts holding strings."""
    rows = [torch.stack([TensorDict({"s": f"{i}{j}"}, []) for j in range(2)]) for i in range(2)]
    return torch.stack(rows).get("s")


def json_values() -> TensorDict:
    """A non-tensor entry of every JSON type, one value per batch and one per element."""
    td = TensorDict({"x": torch.zeros(2)}, [2])
    for key, value in {
        "str": "s",
        "int": 3,
        "float": 2.5,
        "bool": True,
        "none": None,
        "list": [1, "a", None, [False]],
        "dict": {"k": {"n": 1.5}, "l": []},
    }.items():
        td.set(key, NonTensorData(value, batch_size=[2]))
    td.set("stack", NonTensorStack(1, "b"))
    td.set("meta", MetaData("m", batch_size=[2]))
    td.set("typed_meta", MetaData[int](4, batch_size=[2]))
    return td


def empty_no_batch() -> TensorDict:
    return TensorDict({}, [])


def empty_zero_batch() -> TensorDict:
    return TensorDict({"n": TensorDict({}, [0, 2])}, [0])


_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]


def every_dtype() -> TensorDict:
    """A leaf of every plain dtype (random bits, NaNs included), 0-d and zero-size leaves."""
    gen = torch.Generator().manual_seed(0)
    leaves: dict[str, Any] = {}
    for dtype in _DTYPES:
        bits = torch.randint(0, 256, (2, 3 * dtype.itemsize), dtype=torch.uint8, generator=gen)
        name = str(dtype).removeprefix("torch.")
        leaves[name] = bits.view(dtype) if dtype is not torch.bool else bits > 127
    leaves["shapes"] = {"zero_d": torch.tensor(1.5), "empty": torch.zeros(0, 4)}
    return TensorDict({**leaves, "rows": torch.zeros(2, 0, 3, dtype=torch.int16)}, [])


def strided() -> TensorDict:
    """Non-contiguous, expanded, offset, conjugate and negative-view leaves."""
    base = torch.arange(40.0).view(4, 10)
    return TensorDict(
        {
            "t": torch.randn(3, 4).t(),
            "expanded": torch.randn(4, 1).expand(4, 5),
            "sliced": base[:, 1::3],
            "offset": base[1:, 2:].t()[2:6],
            "conj": torch.randn(4, 2, dtype=torch.complex64).conj(),  # (a lazy conjugate view)
            "neg": torch.randn(4, 3, dtype=torch.complex64).conj().imag,  # (a negative view)
        },
        [4],
    )


SAVE_KINDS: dict[str, Callable[[], Any]] = {
    "named": named,
    "lazy_heterogeneous": lazy_heterogeneous,
    "lazy_named": lazy_named,
    "lazy_nested": lazy_nested,
    "tensorclass_optional": tensorclass_optional,
    "typed": typed,
    "non_tensor_data": non_tensor_data,
    "non_tensor_stack": non_tensor_stack,
    "non_tensor_stack_of_stack": non_tensor_stack_of_stack,
    "json_values": json_values,
    "empty_no_batch": empty_no_batch,
    "empty_zero_batch": empty_zero_batch,
    "every_dtype": every_dtype,
    "strided": strided,
}


def bits(x: Tensor) -> Tensor:
    """``x``'s elements as raw bytes in C order (every dtype: NaNs and -0.0 compare)."""
    x = x.detach().cpu().resolve_conj().resolve_neg()
    if not x.is_contiguous():
        same = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}.get(x.itemsize)
        x = (x if same is None else x.view(same)).contiguous()
    return x.reshape(-1).view(torch.uint8)


def same_json(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (``1 == True == 1.0`` does not do)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_json(a[k], b[k]) for k in a)
    return bool(a == b) or (a != a and b != b)  # (NaN)


def assert_identical(a: Any, b: Any, where: str = "root", *, values: bool = True) -> None:
    """``b`` is ``a`` again: the class of every collection and entry, batch sizes, names,
    lazy-stack dims, every key in order, dtypes, shapes, and (``values``) every bit."""
    if isinstance(a, Tensor):  # (a memory-mapped tensor is a tensor)
        assert isinstance(b, Tensor), f"{where}: {type(b).__name__} instead of a tensor"
        assert (b.dtype, b.shape) == (a.dtype, a.shape), f"{where}: {b.dtype}{list(b.shape)}"
        if values:
            assert torch.equal(bits(a), bits(b)), f"{where}: values differ"
        return
    assert type(b) is type(a), f"{where}: {type(b).__name__} instead of {type(a).__name__}"
    assert b.batch_size == a.batch_size, f"{where}: batch_size {b.batch_size}"
    if isinstance(a, NonTensorData):
        assert same_json(a.data, b.data), f"{where}: {b.data!r} instead of {a.data!r}"
        return
    if isinstance(a, NonTensorStack):
        assert same_json(a.tolist(), b.tolist()), f"{where}: {b.tolist()!r}"
        return
    assert b.names == a.names, f"{where}: names {b.names}"
    if isinstance(a, LazyStackedTensorDict):
        assert b.stack_dim == a.stack_dim, f"{where}: stack_dim {b.stack_dim}"
        assert len(b.tensordicts) == len(a.tensordicts), f"{where}: members"
        for i, (x, y) in enumerate(zip(a.tensordicts, b.tensordicts, strict=True)):
            assert_identical(x, y, f"{where}[{i}]", values=values)
        return
    assert list(b.keys()) == list(a.keys()), f"{where}: keys {list(b.keys())}"
    for key in a.keys():
        assert_identical(a.get(key), b.get(key), f"{where}.{key}", values=values)
    if is_tensorclass(a):  # (a field set to None holds no entry: it must stay None)
        for field in dataclasses.fields(a):
            assert (getattr(a, field.name) is None) == (getattr(b, field.name) is None), field


# (copy_existing: the "memmapped" kind's leaves map another checkpoint's files)
def _memmap(x: Any, tmp: Path) -> Any:
    return x.memmap(tmp / "ckpt", copy_existing=True)


def _memmap_shared(x: Any, tmp: Path) -> Any:
    return x.memmap()  # (no folder: anonymous shared memory)


def _memmap_load(x: Any, tmp: Path) -> Any:
    x.memmap(tmp / "ckpt", copy_existing=True)
    return TensorDict.load_memmap(tmp / "ckpt", allow_pickle=True)


def _memmap_inplace(x: Any, tmp: Path) -> Any:
    out = x.memmap_(tmp / "ckpt", copy_existing=True)
    assert out is x
    return TensorDict.load_memmap(tmp / "ckpt", allow_pickle=True)


def _save_load(x: Any, tmp: Path) -> Any:
    x.save(tmp / "ckpt", copy_existing=True)
    return TensorDict.load(tmp / "ckpt", allow_pickle=True)


def _archive(x: Any, tmp: Path) -> Any:
    x.save(tmp / "ckpt.tdz")
    return TensorDict.load(tmp / "ckpt.tdz", allow_pickle=True)


def _consolidated_file(x: Any, tmp: Path) -> Any:
    x.consolidate(filename=tmp / "ckpt.bin")
    return from_consolidated(tmp / "ckpt.bin")


def _consolidated(x: Any, tmp: Path) -> Any:
    return x.consolidate()


def _pickled(x: Any, tmp: Path) -> Any:
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def _memmap_pickled(x: Any, tmp: Path) -> Any:
    return _pickled(x.memmap(tmp / "ckpt", copy_existing=True), tmp)


def _consolidated_pickled(x: Any, tmp: Path) -> Any:
    return _pickled(x.consolidate(), tmp)


# every way a collection is saved and read back (or shared), by name
SAVE_PATHS: dict[str, Callable[[Any, Path], Any]] = {
    "memmap": _memmap,
    "memmap_shared": _memmap_shared,
    "memmap_load": _memmap_load,
    "memmap_inplace": _memmap_inplace,
    "save_load": _save_load,
    "archive": _archive,
    "consolidated_file": _consolidated_file,
    "consolidated": _consolidated,
    "pickled": _pickled,
    "memmap_pickled": _memmap_pickled,
    "consolidated_pickled": _consolidated_pickled,
}
