"""The file-format bridges as methods of every collection: thin faces over ``_io_*`` modules."""

from __future__ import annotations

import os
from typing import Any

from tensordict._primitives import CollectionPrimitives

PathLike = str | os.PathLike[str]


class InteropOps(CollectionPrimitives):
    """Reading and writing the ecosystem's formats (safetensors, HDF5, zarr, Arrow, Parquet,
    pandas, CSV, JSON, numpy structured arrays). Each format's library is imported only when
    its method is called."""

    __slots__ = ()

    @classmethod
    def from_safetensors(
        cls,
        path: PathLike,
        *,
        device: Any = None,
        lazy: bool = True,
        prefix: str | None = None,
    ) -> Any:
        """A nested TensorDict of a safetensors file, a Hub-style sharded checkpoint
        (``model.safetensors.index.json`` and its shards) or a folder holding either.

        Dotted names become nested keys (the layout of ``from_module``, so ``to_module``
        loads it). With ``lazy`` (the default) every leaf views a private mapping of its
        file: nothing is copied or read until used. ``prefix="encoder"`` keeps only the
        tensors under ``encoder.`` (keys stripped of it) and opens only the shards that
        hold them. The header is validated before anything is mapped: sizes, offsets and
        shard names that point outside their file or folder raise a ``ValueError``.

        >>> import tempfile, torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> model = nn.Sequential(nn.Linear(2, 3))
        >>> path = tempfile.mkdtemp() + "/model.safetensors"
        >>> TensorDict.from_module(model).to_safetensors(path)
        >>> td = TensorDict.from_safetensors(path)
        >>> td["0", "weight"].shape
        torch.Size([3, 2])
        >>> TensorDict.from_safetensors(path, prefix="0")["bias"].shape
        torch.Size([3])
        """
        from tensordict._io_safetensors import read_safetensors

        return read_safetensors(path, device=device, lazy=lazy, prefix=prefix)

    def to_safetensors(self, path: PathLike, *, metadata: dict[str, str] | None = None) -> None:
        """Write this collection to one safetensors file, atomically (a temporary name in
        the same folder, then ``os.replace``).

        Tensors are stored under their nested keys joined with ``"."`` (a model's
        ``state_dict`` names), so ``safetensors.torch.load_file`` and Hub loaders read it
        unchanged; a TensorDict with an empty batch size and no non-tensor entries gives
        the very bytes ``safetensors.torch.save_file`` writes. Batch sizes and JSON
        non-tensor values are recorded in the header's metadata (key ``"tensordict"``).
        Tied tensors are stored as copies. Needs the ``safetensors`` extra.

        >>> import tempfile, torch
        >>> from safetensors.torch import load_file
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/x.safetensors"
        >>> TensorDict({"a": {"b": torch.ones(2)}}).to_safetensors(path)
        >>> load_file(path)
        {'a.b': tensor([1., 1.])}
        """
        from tensordict._io_safetensors import write_safetensors

        write_safetensors(self, path, metadata, self._call("to_safetensors"))


def _dense() -> Any:
    from tensordict._td import TensorDict  # the concrete class sits above this module

    return TensorDict


def from_safetensors(
    path: PathLike, *, device: Any = None, lazy: bool = True, prefix: str | None = None
) -> Any:
    """``TensorDict.from_safetensors`` as a function.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_safetensors, to_safetensors
    >>> path = tempfile.mkdtemp() + "/x.safetensors"
    >>> to_safetensors(TensorDict({"a": torch.zeros(2)}, [2]), path)
    >>> from_safetensors(path).batch_size
    torch.Size([2])
    """
    return _dense().from_safetensors(path, device=device, lazy=lazy, prefix=prefix)


def to_safetensors(data: Any, path: PathLike, *, metadata: dict[str, str] | None = None) -> None:
    """``data.to_safetensors(path)`` as a function (see ``TensorDictBase.to_safetensors``).

    >>> import tempfile, torch
    >>> from safetensors.torch import load_file
    >>> from tensordict import TensorDict, to_safetensors
    >>> path = tempfile.mkdtemp() + "/x.safetensors"
    >>> to_safetensors(TensorDict({"w": torch.ones(1)}), path)
    >>> load_file(path)["w"]
    tensor([1.])
    """
    data.to_safetensors(path, metadata=metadata)
