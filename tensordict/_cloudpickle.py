"""CloudpickleWrapper: a callable that pickles with cloudpickle, so lambdas and closures travel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class CloudpickleWrapper:
    """Wrap ``fn`` so that pickling it (for RPC, multiprocessing) uses cloudpickle.

    Plain pickle refuses lambdas, closures and functions defined in ``__main__`` of
    another process; the wrapper carries them by value. Calling the wrapper calls ``fn``.
    Unpickling runs the code it carries: only receive wrappers from peers you trust.

    >>> import pickle
    >>> from tensordict import CloudpickleWrapper
    >>> offset = 10
    >>> add = CloudpickleWrapper(lambda x: x + offset)
    >>> pickle.loads(pickle.dumps(add))(1)
    11
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        if not callable(fn):
            raise TypeError(f"CloudpickleWrapper: expected a callable, got {type(fn).__name__}")
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __getstate__(self) -> bytes:
        import cloudpickle  # type: ignore[import-untyped]

        return cloudpickle.dumps(self.fn)  # type: ignore[no-any-return]

    def __setstate__(self, state: bytes) -> None:
        import pickle

        self.fn = pickle.loads(state)

    def __repr__(self) -> str:
        return f"CloudpickleWrapper({self.fn!r})"
