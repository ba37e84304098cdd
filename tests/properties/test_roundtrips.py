"""Hypothesis properties: flatten/unflatten keys, state_dict and pickle round trips."""

from __future__ import annotations

import pickle
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tensordict import TensorDict
from tests.catalogue import assert_same

KEYS = st.text(alphabet="abcxyz_", min_size=1, max_size=4)
DTYPES = st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool, torch.int8])


@st.composite
def tensordicts(draw: st.DrawFn, max_depth: int = 3) -> TensorDict:
    """A TensorDict of random structure, batch size, dtypes and trailing shapes."""
    batch = draw(st.lists(st.integers(0, 3), max_size=2))

    def level(depth: int) -> dict[str, Any]:
        keys = draw(st.lists(KEYS, min_size=0, max_size=3, unique=True))
        out: dict[str, Any] = {}
        for key in keys:
            if depth < max_depth and draw(st.booleans()):
                out[key] = level(depth + 1)
            else:
                extra = draw(st.lists(st.integers(0, 3), max_size=2))
                dtype = draw(DTYPES)
                out[key] = torch.zeros((*batch, *extra)).to(dtype).random_(0, 2)
        return out

    return TensorDict(level(0), batch_size=batch)


@settings(max_examples=60, deadline=None)
@given(tensordicts())
def test_flatten_unflatten(td: TensorDict) -> None:
    back = td.flatten_keys("/").unflatten_keys("/")
    assert_same(back, td.clone().filter_empty_())  # flatten keeps leaves only, as upstream


@settings(max_examples=60, deadline=None)
@given(tensordicts())
def test_state_dict_round_trip(td: TensorDict) -> None:
    assert_same(TensorDict().load_state_dict(td.state_dict()), td)


@settings(max_examples=60, deadline=None)
@given(tensordicts())
def test_pickle_round_trip(td: TensorDict) -> None:
    assert_same(pickle.loads(pickle.dumps(td)), td)


@settings(max_examples=60, deadline=None)
@given(tensordicts())
def test_clone_equals_and_is_independent(td: TensorDict) -> None:
    c = td.clone()
    assert (c == td).all()
    assert_same(c.to(torch.float64), td.to(torch.float64))


@settings(max_examples=40, deadline=None)
@given(tensordicts(), st.integers(0, 2), st.integers(1, 3))
def test_stack_unbind(td: TensorDict, dim: int, n: int) -> None:
    dim = dim % (td.batch_dims + 1)
    parts = [td.clone() for _ in range(n)]
    stacked = torch.stack(parts, dim)
    for part, back in zip(parts, stacked.unbind(dim), strict=True):
        assert_same(back, part)


@settings(max_examples=40, deadline=None)
@given(tensordicts(), st.integers(1, 3))
def test_cat_split(td: TensorDict, size: int) -> None:
    if td.batch_dims == 0:
        return
    pieces = td.split(size, 0)
    assert_same(torch.cat(pieces, 0), td)


@settings(max_examples=40, deadline=None)
@given(tensordicts())
def test_reshape_round_trip(td: TensorDict) -> None:
    flat = td.reshape(-1)
    assert flat.batch_size == (td.batch_size.numel(),)
    assert_same(flat.reshape(td.batch_size), td)
    assert_same(td.unsqueeze(0).squeeze(0), td)
    if td.batch_dims == 2:
        assert_same(td.permute(1, 0).permute(1, 0), td)
