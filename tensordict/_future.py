"""TensorDictFuture: a handle on background work that completes into a TensorDict."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from typing import Any


class TensorDictFuture:
    """Wait on ``futures``, then hand back ``resulting_td`` (which they fill in).

    >>> import concurrent.futures, torch
    >>> from tensordict import TensorDict
    >>> from tensordict.utils import TensorDictFuture
    >>> td = TensorDict({"a": torch.zeros(3)}, [3])
    >>> with concurrent.futures.ThreadPoolExecutor(1) as pool:
    ...     job = pool.submit(td["a"].fill_, 1.0)
    ...     future = TensorDictFuture([job], td)
    ...     future.result()["a"].tolist()
    [1.0, 1.0, 1.0]
    """

    def __init__(
        self, futures: Sequence[concurrent.futures.Future[Any]], resulting_td: Any
    ) -> None:
        self.futures = list(futures)
        self.resulting_td = resulting_td

    def done(self) -> bool:
        """Whether every piece of work has finished.

        >>> from tensordict import TensorDict
        >>> from tensordict.utils import TensorDictFuture
        >>> TensorDictFuture([], TensorDict()).done()
        True
        """
        return all(f.done() for f in self.futures)

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the work (re-raising its first error), then return the TensorDict.

        >>> from tensordict import TensorDict
        >>> from tensordict.utils import TensorDictFuture
        >>> TensorDictFuture([], TensorDict()).result().batch_size
        torch.Size([])
        """
        for future in self.futures:
            future.result(timeout)
        return self.resulting_td
