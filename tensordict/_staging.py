"""Staging buffers of non-consolidated transfers: one flat storage per structure, reused.

A TensorDict that is not consolidated travels through a staging buffer: its leaves are
stacked into it before a send or a reduction, and copied out of it after a receive. Making
that buffer and its 1,000 leaf views costs more than the copy itself for small leaves, so
the last few buffers are kept, each with its views made once, and handed to the next
transfer of the same plan (see ``_consolidate.Plan``). Only CPU buffers of at most
``_LIMIT`` bytes are kept (beyond that the copy dominates), at most ``_KEEP`` of them, so
the memory held is bounded; nothing is keyed by a process group. A buffer is owned by one
transfer at a time: :func:`take` removes it from the pool and :func:`give_back` returns it
once the transfer has completed (a transfer that fails or is never waited for simply
keeps it, and the next one makes a new buffer).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import torch
from torch import Tensor

from tensordict._consolidate import Plan
from tensordict._jagged import expand, overwritten
from tensordict._torch_compat import foreach

_LIMIT = 32 << 20  # bytes
_KEEP = 2
_LOCK = threading.Lock()
_FREE: list[Staging] = []
_COPY = foreach("copy_")


class Staging:
    """A flat ``uint8`` storage laid out by ``plan``, and its leaf views once asked for."""

    __slots__ = ("_views", "plan", "storage")

    def __init__(self, plan: Plan, storage: Tensor) -> None:
        self.plan = plan
        self.storage = storage
        self._views: list[Tensor] | None = None

    def views(self) -> list[Tensor]:
        """The views of the plan's slots, in walk order (a jagged leaf's parts, see
        ``_jagged``; made on the first call)."""
        if self._views is None:
            self._views = self.plan.part_views(self.storage)
        return self._views

    def copy_to(self, leaves: Sequence[Tensor]) -> None:
        """Copy the storage into ``leaves`` (walk order, the plan's dtypes and shapes; a
        jagged leaf's parts in place): one multi-tensor copy from the kept views (a leaf
        by leaf copy where torch refuses it, e.g. leaves on several devices)."""
        jags = self.plan.jagged
        if jags is not None:
            self._copy(expand(leaves, jags))
            overwritten(leaves, jags)
            return
        self._copy(leaves)

    def _copy(self, leaves: Sequence[Tensor]) -> None:
        views = self.views()
        with torch.no_grad():
            if _COPY is not None:
                try:
                    _COPY(list(leaves), views)
                    return
                except RuntimeError:
                    pass
            for leaf, view in zip(leaves, views, strict=True):
                leaf.copy_(view)


def _kept(plan: Plan, device: torch.device) -> bool:
    return device.type == "cpu" and plan.nbytes <= _LIMIT


def take(plan: Plan, device: torch.device) -> Staging:
    """A staging buffer for ``plan`` on ``device``: a kept one when there is one, else new."""
    if _kept(plan, device):
        with _LOCK:
            for i, staging in enumerate(_FREE):
                if staging.plan is plan:
                    return _FREE.pop(i)
    return Staging(plan, torch.empty(plan.nbytes, dtype=torch.uint8, device=device))


def give_back(staging: Staging) -> None:
    """Return a buffer whose transfer has completed to the pool (the oldest is dropped)."""
    if _kept(staging.plan, staging.storage.device):
        with _LOCK:
            if any(kept is staging for kept in _FREE):
                return  # given back already: one buffer is never handed out twice
            _FREE.insert(0, staging)
            del _FREE[_KEEP:]
