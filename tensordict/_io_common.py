"""Shared pieces of the file-format bridges: optional imports, the format error, atomic writes."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from types import ModuleType
from typing import Any


class FormatError(ValueError):
    """A file that does not follow its format (or lies about its own sizes and offsets).

    >>> from tensordict._io_common import FormatError
    >>> issubclass(FormatError, ValueError)
    True
    """


def _load(module: str) -> ModuleType:
    """Import one of the optional packages by a static import (the core never imports by
    a computed name)."""
    if module == "safetensors.torch":
        import safetensors.torch

        return safetensors.torch
    if module == "h5py":
        import h5py  # type: ignore[import-untyped]

        return h5py  # type: ignore[no-any-return]
    if module == "zarr":
        import zarr

        return zarr
    if module == "pyarrow":
        import pyarrow  # type: ignore[import-untyped]

        return pyarrow  # type: ignore[no-any-return]
    if module == "pyarrow.parquet":
        import pyarrow.parquet  # type: ignore[import-untyped]

        return pyarrow.parquet  # type: ignore[no-any-return]
    if module == "pandas":
        import pandas  # type: ignore[import-untyped]

        return pandas  # type: ignore[no-any-return]
    if module == "redis":
        import redis

        return redis
    raise ValueError(f"tensordict: {module!r} is not one of the optional packages")


def require(module: str, extra: str, call: str) -> ModuleType:
    """Import an optional dependency, or raise an ImportError that names the extra to install.

    >>> require("h5py", "h5", "demo").__name__
    'h5py'
    """
    try:
        return _load(module)
    except ImportError as err:
        raise ImportError(
            f"{call}: this needs the optional package {module.partition('.')[0]!r}; install "
            f"it with `pip install 'tensordict[{extra}]'`"
        ) from err


def write_atomically(path: str | os.PathLike[str], write: Callable[[str], Any]) -> None:
    """Call ``write(tmp)`` on a temporary name in ``path``'s folder, then move it onto
    ``path`` with ``os.replace`` (a live mapping of the old file keeps its bytes).

    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> write_atomically(os.path.join(d, "x.txt"), lambda p: open(p, "w").close())
    >>> os.listdir(d)
    ['x.txt']
    """
    target = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(target))
    tmp = os.path.join(folder, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
