"""Top-level checkpoint functions: ``tensordict.save``, ``load`` and ``load_memmap``."""

from __future__ import annotations

import os
from typing import Any


def save(
    data: Any,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    **kwargs: Any,
) -> Any:
    """Save ``data`` (a TensorDict or tensorclass) as a checkpoint: ``data.memmap(...)``.

    >>> import tempfile, torch
    >>> import tensordict
    >>> path = tempfile.mkdtemp() + "/ckpt"
    >>> _ = tensordict.save(tensordict.TensorDict({"a": torch.ones(2)}, [2]), path)
    >>> tensordict.load(path)["a"].tolist()
    [1.0, 1.0]
    """
    return data.memmap(prefix, copy_existing, **kwargs)


def load_memmap(
    prefix: str | os.PathLike[str],
    device: Any = None,
    non_blocking: bool = False,
    **kwargs: Any,
) -> Any:
    """Load a checkpoint folder or archive: ``TensorDict.load_memmap(...)`` (the saved
    type comes back, a tensorclass included).

    >>> import tempfile, torch
    >>> import tensordict
    >>> path = tempfile.mkdtemp() + "/x.tdz"
    >>> _ = tensordict.TensorDict({"a": torch.ones(2)}, [2]).memmap(path)
    >>> tensordict.load_memmap(path)["a"].tolist()
    [1.0, 1.0]
    """
    from tensordict._td import TensorDict

    return TensorDict.load_memmap(prefix, device, non_blocking, **kwargs)


def load(
    prefix: str | os.PathLike[str],
    device: Any = None,
    non_blocking: bool = False,
    **kwargs: Any,
) -> Any:
    """Alias of :func:`load_memmap`.

    >>> import tempfile, torch
    >>> import tensordict
    >>> path = tempfile.mkdtemp() + "/ckpt"
    >>> _ = tensordict.TensorDict({"a": torch.zeros(1)}, [1]).memmap(path)
    >>> tensordict.load(path).batch_size
    torch.Size([1])
    """
    return load_memmap(prefix, device, non_blocking, **kwargs)


def memmap(data: Any, prefix: str | os.PathLike[str] | None = None, **kwargs: Any) -> Any:
    """Function form of ``data.memmap(prefix, ...)``: a memory-mapped copy of ``data``
    (a TensorDict, lazy stack or tensorclass), saved under ``prefix`` when one is given.

    >>> import tempfile, torch
    >>> import tensordict
    >>> td = tensordict.TensorDict({"a": torch.ones(2)}, [2])
    >>> out = tensordict.memmap(td, tempfile.mkdtemp())
    >>> out.is_memmap(), out["a"].tolist()
    (True, [1.0, 1.0])
    """
    return data.memmap(prefix, **kwargs)
