"""Divergences from upstream 0.15.3 found by a differential run over tensorclasses, saving
and loading, and lazy stacks of TensorDicts that differ; each pinned down."""

from __future__ import annotations

from typing import Any

import torch

from tensordict import tensorclass


@tensorclass
class _Tagged:
    w: torch.Tensor
    meta: Any = None


def test_tensorclass_tolist_leaves_unset_fields_out_as_upstream() -> None:
    unset = _Tagged(w=torch.zeros(2), batch_size=[2])
    assert unset.tolist() == [{"w": torch.tensor(0.0)}] * 2
    assert unset[0].tolist() == {"w": torch.tensor(0.0)}
    assert unset.tolist(convert_tensors=True) == [{"w": 0.0}, {"w": 0.0}]
    # to_dict keeps listing them as None, as upstream's does
    assert list(unset.to_dict()) == ["w", "meta"] and unset.to_dict()["meta"] is None
    tagged = _Tagged(w=torch.zeros(2), meta="m", batch_size=[2])
    assert [row["meta"] for row in tagged.tolist()] == ["m", "m"]
