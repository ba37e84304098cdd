"""The fast paths added for per-call overhead give what the general paths give."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tensordict import MemoryMappedTensor, TensorDict

_INDICES: list[Any] = [
    1,
    -1,
    slice(1, 3),
    slice(None, None, 2),
    (slice(None), 0),
    (1, torch.tensor([0, 2])),  # advanced: a copy
    (torch.tensor([0, 3]),),
    (slice(1, 3), None),
    (torch.tensor([True, False, True, True]), 2),
]


@pytest.mark.parametrize("index", _INDICES, ids=repr)
def test_index_of_mixed_plain_and_mapped_leaves(index: Any) -> None:
    plain = {
        "p": torch.randn(4, 3),
        "m": torch.randn(4, 3, 2),
        "q": torch.randn(4, 3),
        "empty": torch.zeros(4, 3, 0),
        "n": torch.randn(4, 3),
    }
    mapped = {k: MemoryMappedTensor.from_tensor(plain[k]) for k in ("m", "empty", "n")}
    td = TensorDict({**plain, **mapped}, [4, 3])
    td["nested"] = TensorDict({"x": MemoryMappedTensor.from_tensor(torch.randn(4, 3, 5))}, [4, 3])
    out = td[index]
    assert list(out.keys()) == ["p", "m", "q", "empty", "n", "nested"]
    for key, value in td.items(True, True):
        expected = value[index]  # the tensor's own indexing is the reference
        got = out[key]
        assert type(got) is type(expected), key
        torch.testing.assert_close(
            got.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor)
        )
        if isinstance(expected, MemoryMappedTensor):
            assert got.data_ptr() == expected.data_ptr()  # a view of the same bytes
