"""A view's len() counts what iterating it yields, for every kind and every option."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from tensordict import TensorDict, is_leaf_nontensor
from tests.catalogue import CATALOGUE, RAGGED

_KINDS = {**CATALOGUE, **RAGGED}


def _with_ragged_level() -> TensorDict:
    """A TensorDict holding a ragged lazy stack and a non-tensor entry among its levels."""
    return TensorDict(
        {"a": torch.zeros(2), "r": RAGGED["lazy_ragged"](), "s": "text"},
        batch_size=[],
    )


def _is_float_leaf(cls: type) -> bool:
    return issubclass(cls, torch.Tensor)


@pytest.mark.parametrize("name", [*sorted(_KINDS), "with_ragged_level"])
@pytest.mark.parametrize(
    ("include_nested", "leaves_only", "is_leaf"),
    list(
        itertools.product([False, True], [False, True], [None, is_leaf_nontensor, _is_float_leaf])
    ),
)
def test_len_counts_what_iteration_yields(
    name: str, include_nested: bool, leaves_only: bool, is_leaf: Any
) -> None:
    td = _with_ragged_level() if name == "with_ragged_level" else _KINDS[name]()
    ragged = name in RAGGED or name == "with_ragged_level"
    for method in (td.keys, td.values, td.items):
        if method is not td.keys and ragged:
            continue  # (the values of a ragged level do not stack: they raise, as upstream)
        view = method(include_nested, leaves_only, is_leaf=is_leaf)
        if not hasattr(type(view), "__len__"):
            continue  # a lazy stack's values and items are generators, as upstream
        assert len(view) == len(list(iter(view))), (method.__name__, name)
