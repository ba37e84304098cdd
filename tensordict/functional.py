"""Public face of upstream's ``tensordict.functional``: functions over lists of TensorDicts."""

from tensordict._batching import collate, group_by, unpad_sequence
from tensordict._functional import (
    dense_stack_tds,
    make_tensordict,
    merge_tensordicts,
    pad_sequence,
)
from tensordict._pad import pad

__all__ = [
    "collate",
    "dense_stack_tds",
    "group_by",
    "make_tensordict",
    "merge_tensordicts",
    "pad",
    "pad_sequence",
    "unpad_sequence",
]
