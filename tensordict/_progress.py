"""Progress bars for long calls (``pbar=True``): a widget in notebooks, text in terminals."""

from __future__ import annotations

from typing import Any


def progress_bar(call: str, total: int, unit: str = "it") -> Any:
    """A ``tqdm.auto`` bar of ``total`` steps named after ``call``; callers ``update`` it
    as items complete and ``close`` it. Raises ModuleNotFoundError without tqdm.

    >>> bar = progress_bar("demo", 3, unit="item")
    >>> for _ in range(3):
    ...     _ = bar.update(1)
    >>> bar.n
    3
    >>> bar.close()
    """
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise ModuleNotFoundError(
            f"{call}: pbar=True needs tqdm, which is not installed; `pip install tqdm` or "
            "pass pbar=False"
        ) from None
    return tqdm(total=total, desc=call, unit=unit)
