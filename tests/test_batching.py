"""collate, group_by and unpad_sequence, checked against plain torch."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils.data import DataLoader

import tensordict
from tensordict import LazyStackedTensorDict, TensorDict, tensorclass


def test_group_by_tensor_entry_matches_masks() -> None:
    keys = torch.tensor([3, 1, 3, 2, 1])
    td = TensorDict({"k": keys, "x": torch.randn(5, 2)}, [5])
    values, groups = tensordict.group_by(td, "k")
    assert torch.equal(values, torch.unique(keys))
    for value, group in zip(values, groups, strict=True):
        assert torch.equal(group["x"], td["x"][keys == value])
    rows = TensorDict({"k": torch.tensor([[0, 1], [1, 0], [0, 1]])}, [3])
    values, groups = tensordict.group_by(rows, "k")
    assert values.tolist() == [[0, 1], [1, 0]] and [len(g) for g in groups] == [2, 1]


def test_group_by_non_tensor_and_errors() -> None:
    td = TensorDict({"s": ["b", "a", "b"], "x": torch.arange(3)}, [3])
    values, groups = tensordict.group_by(td, "s")
    assert values == ["a", "b"] and [g["x"].tolist() for g in groups] == [[1], [0, 2]]
    with pytest.raises(ValueError, match="group_by: the tensordict needs at least one batch dim"):
        tensordict.group_by(TensorDict({"k": torch.zeros(2)}), "k")
    with pytest.raises(TypeError, match="group_by: entry 'n' is a nested tensordict"):
        tensordict.group_by(TensorDict({"n": {"a": torch.zeros(2)}}, [2]), "n")


def test_unpad_sequence_inverts_pad_sequence() -> None:
    seqs = [torch.randn(n, 2) for n in (2, 4, 1)]
    tds = [TensorDict({"a": s, "n": {"b": s[:, 0]}}, [len(s)]) for s in seqs]
    back = tensordict.unpad_sequence(tensordict.pad_sequence(tds, return_mask=True))
    assert isinstance(back, LazyStackedTensorDict) and "masks" not in back.keys()
    for i, s in enumerate(seqs):
        assert torch.equal(back[i]["a"], s) and torch.equal(back[i]["n", "b"], s[:, 0])
    # past the batch dims, with an explicit mask tensor (left padding)
    padded = TensorDict({"a": torch.tensor([[0, 0, 1], [0, 2, 3]])}, [2])
    mask = torch.tensor([[False, False, True], [False, True, True]])
    back = tensordict.unpad_sequence(padded, mask)
    assert [back[i]["a"].tolist() for i in range(2)] == [[1], [2, 3]]
    with pytest.raises(ValueError, match="not contiguous"):
        tensordict.unpad_sequence(padded, torch.tensor([[True, False, True]] * 2))
    with pytest.raises(KeyError, match="no 'masks' entry"):
        tensordict.unpad_sequence(padded)


@tensorclass
class Sample:
    obs: torch.Tensor
    label: torch.Tensor


def test_collate_kinds() -> None:
    tds = [TensorDict({"x": torch.full((2,), float(i))}) for i in range(3)]
    out = tensordict.collate(tds)
    assert type(out) is TensorDict and torch.equal(out["x"], torch.stack([t["x"] for t in tds]))
    samples = [
        Sample(obs=torch.ones(3) * i, label=torch.tensor(i), batch_size=[]) for i in range(2)
    ]
    out = tensordict.collate(samples)
    assert type(out) is Sample and out.label.tolist() == [0, 1]
    pairs = [(tds[i], torch.tensor(i)) for i in range(2)]
    td, labels = tensordict.collate(pairs)
    assert td.batch_size == (2,) and labels.tolist() == [0, 1]
    Pair = collections.namedtuple("Pair", ["td", "n"])
    assert type(tensordict.collate([Pair(tds[0], 1), Pair(tds[1], 2)])) is Pair
    assert tensordict.collate([{"a": torch.zeros(1)}] * 2)["a"].shape == (2, 1)
    assert tensordict.collate([1, 2]).tolist() == [1, 2]
    td = tds[0]
    assert tensordict.collate(td) is td and tensordict.collate([]) == []
    assert tensordict.collate(tds, nested_keys=["x"])["x"].is_nested


def test_collate_pads_in_a_dataloader() -> None:
    seqs = [torch.arange(n, dtype=torch.float32) for n in (3, 1, 2, 2)]
    data = [TensorDict({"seq": s, "y": torch.tensor(len(s))}) for s in seqs]
    loader = DataLoader(
        data,
        batch_size=2,
        collate_fn=lambda b: tensordict.collate(b, pad_keys={"seq": -1.0}, mask_key="mask"),
    )
    batches = list(loader)
    expected = torch.nn.utils.rnn.pad_sequence(seqs[:2], batch_first=True, padding_value=-1.0)
    assert torch.equal(batches[0]["seq"], expected)
    assert batches[0]["mask", "seq"].tolist() == [[True, True, True], [True, False, False]]
    assert batches[1]["y"].tolist() == [2, 2]


def test_unpad_sequence_non_tensor_loses_pad_slots() -> None:
    tds = [TensorDict({"a": torch.ones(n), "s": ["w"] * n}, [n]) for n in (1, 2)]
    back = tensordict.unpad_sequence(tensordict.pad_sequence(tds, return_mask=True))
    assert back[0]["s"] == ["w"] and back[1]["s"] == ["w", "w"]
