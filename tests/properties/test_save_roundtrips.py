"""Hypothesis properties of the save paths: what is saved loads back identical, or the
save refuses it naming the key (never a value of another type, never a missing key)."""

from __future__ import annotations

import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import (
    NonTensorData,
    NonTensorStack,
    TensorDict,
    lazy_stack,
)
from tests.catalogue import SAVE_PATHS, assert_identical, same_json
from tests.properties.test_module_roundtrips import module_trees

KEYS = st.text(alphabet="abz_.-%é", min_size=1, max_size=4)  # (some keys need escaping)
DTYPES = st.sampled_from(
    [torch.bool, torch.uint8, torch.int16, torch.int64, torch.float16, torch.bfloat16,
     torch.float32, torch.float64, torch.complex64]
)  # fmt: skip
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
# values JSON cannot hold as they are (another type, or nothing, would come back)
NOT_JSON = st.one_of(
    st.tuples(JSON),
    st.frozensets(st.integers(), max_size=3),
    st.binary(max_size=4),
    st.sampled_from([float("nan"), float("inf"), -float("inf")]),
    st.dictionaries(st.integers(), JSON, min_size=1, max_size=2),
    st.lists(st.tuples(st.integers()), min_size=1, max_size=2),
)


def _json_keeps(value: Any) -> bool:
    """Whether JSON gives ``value`` back as it was, types included."""
    try:
        return same_json(value, json.loads(json.dumps(value, allow_nan=False)))
    except (TypeError, ValueError):
        return False


_memmap = SAVE_PATHS["memmap_load"]
_archive = SAVE_PATHS["archive"]
_consolidated = SAVE_PATHS["consolidated_file"]
_pickled = SAVE_PATHS["pickled"]
PATHS: list[Callable[[Any, Path], Any]] = [_memmap, _archive, _consolidated, _pickled]


def _through_every_path(x: Any, make: Callable[[], Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for path in PATHS:
            assert_identical(make(), path(x, Path(tmp)), path.__name__)


@st.composite
def collections(draw: st.DrawFn) -> Callable[[], TensorDict]:
    """A maker of one TensorDict of random structure: nested, named batch dims, leaves
    of random dtypes and trailing shapes (zero-size ones included), non-tensor entries."""
    batch = draw(st.lists(st.integers(0, 3), max_size=2))
    names = draw(st.none() | st.just([f"d{i}" for i in range(len(batch))]))
    seed = draw(st.integers(0, 2**16))

    def level(depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in draw(st.lists(KEYS, max_size=3, unique=True)):
            kind = draw(st.sampled_from(["tensor", "json", "stack"] + ["nest"] * (depth < 2)))
            if kind == "nest":
                out[key] = level(depth + 1)
            elif kind == "json":
                out[key] = ("json", draw(JSON))
            elif kind == "stack" and batch:
                out[key] = ("stack", draw(st.lists(JSON, min_size=batch[0], max_size=batch[0])))
            else:
                extra = draw(st.lists(st.integers(0, 3), max_size=2))
                out[key] = (draw(DTYPES), (*batch, *extra))
        return out

    spec = level(0)

    def build(node: dict[str, Any], gen: torch.Generator, top: bool = False) -> TensorDict:
        td = TensorDict({}, batch, names=names if top else None)
        for key, value in node.items():
            if isinstance(value, dict):
                td.set(key, build(value, gen))
            elif value[0] == "json":
                td.set(key, NonTensorData(value[1], batch_size=batch))
            elif value[0] == "stack":
                rows = [NonTensorData(v, batch_size=batch[1:]) for v in value[1]]
                td.set(key, NonTensorStack(*rows) if rows else NonTensorData(None, batch))
            else:
                dtype, shape = value
                raw = torch.randint(
                    0, 256, (*shape, dtype.itemsize), dtype=torch.uint8, generator=gen
                )
                td.set(key, (raw > 127 if dtype is torch.bool else raw.view(dtype)).squeeze(-1))
        return td

    def make() -> TensorDict:
        return build(spec, torch.Generator().manual_seed(seed), top=True)

    return make


@settings(max_examples=12, deadline=None)
@given(collections())
def test_collections_survive_every_path(make: Callable[[], TensorDict]) -> None:
    _through_every_path(make(), make)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.booleans()), min_size=1, max_size=3),
    st.integers(0, 1),
    st.integers(0, 2**16),
)
def test_lazy_stacks_survive_every_path(
    members: list[tuple[int, bool]], stack_dim: int, seed: int
) -> None:
    """Members differing in a leaf's size and in their keys, stacked along any dim."""

    def make() -> Any:
        gen = torch.Generator().manual_seed(seed)
        tds = []
        for size, extra in members:
            td = TensorDict({"x": torch.randn(2, size, generator=gen)}, [2])
            if extra:
                td["y"] = {"z": torch.randint(0, 9, (2,), generator=gen)}
            tds.append(td)
        return lazy_stack(tds, stack_dim, stack_dim_name="env" if seed % 2 else None)

    _through_every_path(make(), make)


@settings(max_examples=40, deadline=None)
@given(JSON | NOT_JSON, st.integers(0, 2))
def test_non_tensor_values_come_back_as_they_were_or_are_refused(value: Any, rows: int) -> None:
    """A checkpoint keeps any value (JSON inline, others pickled); a consolidated file
    keeps JSON values and refuses the others naming the key."""

    def make() -> TensorDict:
        return TensorDict({"v": NonTensorData(value, batch_size=[rows])}, [rows])

    with tempfile.TemporaryDirectory() as tmp:
        for path in (_memmap, _archive, _pickled):
            back = path(make(), Path(tmp)).get("v").data
            assert same_json(value, back) or (type(back) is type(value) and back == value)
        if _json_keeps(value):
            assert same_json(value, _consolidated(make(), Path(tmp)).get("v").data)
        else:
            with pytest.raises(TypeError, match=r"key \('v',\) holds a non-tensor value of"):
                _consolidated(make(), Path(tmp))


@settings(max_examples=15, deadline=None)
@given(module_trees())
def test_module_parameters_survive_memmap_into_a_fresh_module(model: torch.nn.Module) -> None:
    """from_module, memmap, load_memmap, to_module: the other module computes with the
    very values saved (parameters and buffers, every dtype)."""
    fresh = copy.deepcopy(model)
    for tensor in fresh.state_dict().values():
        tensor.zero_()
    with tempfile.TemporaryDirectory() as tmp:
        TensorDict.from_module(model).memmap(Path(tmp) / "params")
        TensorDict.load_memmap(Path(tmp) / "params").to_module(fresh)
        want, got = model.state_dict(), fresh.state_dict()
        assert list(got) == list(want)
        for key, tensor in want.items():
            assert_identical(tensor, got[key], key)
