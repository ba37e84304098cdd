"""Tensorclasses that tests across processes share: defined here so that every process
(``spawn`` start method included) has them, under the name a transfer carries."""

from __future__ import annotations

import torch

from tensordict._tensorclass import tensorclass


@tensorclass
class MyDistData:
    """A two-field tensorclass for distributed tests: its class survives a transfer.

    >>> import torch
    >>> from tensordict.testing import MyDistData
    >>> MyDistData(a=torch.zeros(3), b=torch.ones(3, 2), batch_size=[3]).b.shape
    torch.Size([3, 2])
    """

    a: torch.Tensor
    b: torch.Tensor
