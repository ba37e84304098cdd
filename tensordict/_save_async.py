"""Background saves (docs/format.md, section 11): ``memmap(..., return_early=True)``."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from tensordict._future import TensorDictFuture

_LOCK = threading.Lock()
_POOL: list[concurrent.futures.ThreadPoolExecutor] = []


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """One background thread: saves run in the order they were asked for, so two saves
    to one prefix commit in that order (the executor finishes its queue at exit)."""
    with _LOCK:
        if not _POOL:
            _POOL.append(
                concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tensordict-save")
            )
        return _POOL[0]


class _SaveFuture(TensorDictFuture):
    """A :class:`TensorDictFuture` whose result is what the save returned."""

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the save (re-raising its error), then return the saved TensorDict.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.ones(2)}, [2])
        >>> td.memmap(tempfile.mkdtemp() + "/c", return_early=True).result()["a"].tolist()
        [1.0, 1.0]
        """
        return self.futures[0].result(timeout)


def submit(work: Callable[[], Any]) -> TensorDictFuture:
    """Run ``work`` (a save) on the background thread; its future."""
    return _SaveFuture([_pool().submit(work)], None)
