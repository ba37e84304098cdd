"""Shared pieces of the file-format bridges: optional imports, the format error, atomic writes."""

from __future__ import annotations

import importlib
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


def require(module: str, extra: str, call: str) -> ModuleType:
    """Import an optional dependency, or raise an ImportError that names the extra to install.

    >>> require("json", "none", "demo").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f"{call}: this needs the optional package {module.partition('.')[0]!r}; install it "
            f"with `pip install 'tensordict[{extra}]'`"
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
