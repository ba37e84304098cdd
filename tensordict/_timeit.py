"""timeit: a small profiling helper that accumulates wall times under names."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


class timeit:
    """Time a block (``with timeit("name"):``) or every call of a function (as a decorator).

    Times accumulate per name in ``timeit._REG`` as ``[mean seconds, total seconds, count]``;
    ``timeit.print()`` reports them and ``timeit.erase()`` resets them.

    >>> from tensordict.utils import timeit
    >>> timeit.erase()
    >>> @timeit("work")
    ... def work():
    ...     return sum(range(100))
    >>> _ = work(); _ = work()
    >>> with timeit("work"):
    ...     pass
    >>> timeit._REG.pop("work")[2]
    3
    """

    _REG: ClassVar[dict[str, list[float]]] = {}

    def __init__(self, name: str) -> None:
        self.name = name
        self._starts: list[float] = []

    def __call__(self, fn: _F) -> _F:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with timeit(self.name):
                return fn(*args, **kwargs)

        return timed  # type: ignore[return-value]

    def __enter__(self) -> None:
        self._starts.append(time.perf_counter())

    def __exit__(self, *exc: object) -> None:
        elapsed = time.perf_counter() - self._starts.pop()
        mean, total, count = self._REG.setdefault(self.name, [0.0, 0.0, 0])
        count += 1
        self._REG[self.name] = [mean + (elapsed - mean) / count, total + elapsed, count]

    @staticmethod
    def print(prefix: str | None = None) -> list[str]:
        """Print one line per name (mean and total time) and return the lines.

        >>> from tensordict.utils import timeit
        >>> timeit.erase()
        >>> timeit._REG["x"] = [0.5, 1.0, 2]
        >>> timeit.print()
        x took 500.0 msec (total = 1.0 sec)
        ['x took 500.0 msec (total = 1.0 sec)']
        >>> del timeit._REG["x"]
        """
        lines = []
        for name in sorted(timeit._REG):
            mean, total, _ = timeit._REG[name]
            line = f"{name} took {mean * 1000:.4} msec (total = {total:.4} sec)"
            lines.append(f"{prefix} -- {line}" if prefix else line)
        for line in lines:
            print(line)
        return lines

    @staticmethod
    def erase() -> None:
        """Reset every accumulated time to zero (the names stay).

        >>> from tensordict.utils import timeit
        >>> timeit._REG["y"] = [1.0, 1.0, 1]
        >>> timeit.erase(); timeit._REG["y"]
        [0.0, 0.0, 0]
        >>> del timeit._REG["y"]
        """
        for name in timeit._REG:
            timeit._REG[name] = [0.0, 0.0, 0]
