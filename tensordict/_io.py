"""The file-format bridges as methods of every collection: thin faces over ``_io_*`` modules."""

from __future__ import annotations

import os
from typing import Any

import torch

from tensordict._primitives import CollectionPrimitives
from tensordict._unbatched import refuse_unbatched

PathLike = str | os.PathLike[str]
_MISSING: Any = object()


def _persistent(
    call: str,
    filename: Any,
    mode: str,
    auto_batch_size: bool,
    batch_dims: int | None,
    batch_size: Any,
) -> Any:
    from tensordict._io_persistent import PersistentTensorDict

    return PersistentTensorDict._opened(
        call, filename, mode, auto_batch_size, batch_dims, batch_size
    )


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

    def to_safetensors(
        self,
        path: PathLike,
        *,
        metadata: dict[str, str] | None = None,
        max_shard_size: int | str | None = None,
    ) -> None:
        """Write this collection to one safetensors file, atomically (a temporary name in
        the same folder, then ``os.replace``).

        Tensors are stored under their nested keys joined with ``"."`` (a model's
        ``state_dict`` names), so ``safetensors.torch.load_file`` and Hub loaders read it
        unchanged; a TensorDict with an empty batch size and no non-tensor entries gives
        the very bytes ``safetensors.torch.save_file`` writes. Batch sizes and JSON
        non-tensor values are recorded in the header's metadata (key ``"tensordict"``).
        Tied tensors are stored as copies. With ``max_shard_size`` (bytes, or ``"5GB"``)
        ``path`` is a folder that receives a Hub-style sharded checkpoint
        (``model-00001-of-0000N.safetensors`` and ``model.safetensors.index.json``).
        Needs the ``safetensors`` extra.

        >>> import tempfile, torch
        >>> from safetensors.torch import load_file
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/x.safetensors"
        >>> TensorDict({"a": {"b": torch.ones(2)}}).to_safetensors(path)
        >>> load_file(path)
        {'a.b': tensor([1., 1.])}
        """
        refuse_unbatched(self, self._call("to_safetensors"), "written to a file")
        from tensordict._io_safetensors import write_safetensors

        write_safetensors(self, path, metadata, self._call("to_safetensors"), max_shard_size)

    # ------------------------------------------------------------------ tables
    @classmethod
    def from_pandas(
        cls,
        dataframe: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Any:
        """A TensorDict with one entry per column of a pandas DataFrame, batch size = rows.

        Numeric and boolean columns become tensors of the same dtype (cast to ``dtype`` if
        given), datetimes int64 nanoseconds, categoricals their codes, anything else
        (strings, objects) a ``NonTensorStack``. ``separator="."`` nests ``"obs.x"`` as
        ``("obs", "x")``.

        >>> import pandas as pd
        >>> from tensordict import TensorDict
        >>> td = TensorDict.from_pandas(pd.DataFrame({"a": [1, 2], "s": ["x", "y"]}))
        >>> td["a"], td["s"], td.batch_size
        (tensor([1, 2]), LinkedList(['x', 'y']), torch.Size([2]))
        """
        from tensordict._io_tabular import from_dataframe

        return from_dataframe(
            "from_pandas",
            dataframe,
            separator=separator,
            dtype=dtype,
            device=device,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
        )

    def to_pandas(self, *, separator: str | None = None) -> Any:
        """A pandas DataFrame with one column per entry (a batch of one dim is the rows).

        Nested entries need ``separator`` to name their columns (``"obs.x"``); a tensor
        with more than one dim cannot be a column (``to_arrow`` keeps it).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.arange(2), "n": {"b": torch.zeros(2)}}, [2]).to_pandas(
        ...     separator="."
        ... )
           a  n.b
        0  0  0.0
        1  1  0.0
        """
        from tensordict._io_tabular import to_dataframe

        return to_dataframe(self._call("to_pandas"), self, separator)

    @classmethod
    def from_arrow(
        cls,
        table: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
    ) -> Any:
        """A TensorDict of a ``pyarrow.Table`` (or RecordBatch): struct columns become
        nested TensorDicts, ``fixed_shape_tensor`` columns tensors with their row shape,
        numbers tensors, anything else a ``NonTensorStack``.

        >>> import pyarrow as pa
        >>> from tensordict import TensorDict
        >>> t = pa.table({"a": [1.0, 2.0], "n": pa.array([{"b": 1}, {"b": 2}])})
        >>> TensorDict.from_arrow(t)["n", "b"]
        tensor([1, 2])
        """
        from tensordict._io_tabular import from_table

        return from_table(
            "from_arrow",
            table,
            separator=separator,
            dtype=dtype,
            device=device,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
        )

    def to_arrow(self, *, separator: str | None = None) -> Any:
        """A ``pyarrow.Table`` of a batch of one dim: a column per entry, tensors of more
        dims as ``fixed_shape_tensor`` columns, nested TensorDicts as struct columns (or
        flat columns joined with ``separator``), non-tensor values as inferred columns.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"x": torch.zeros(2, 3), "n": {"y": torch.arange(2)}}, [2])
        >>> print(td.to_arrow().schema.field("n").type)
        struct<y: int64>
        """
        from tensordict._io_tabular import to_table

        return to_table(self._call("to_arrow"), self, separator)

    @classmethod
    def from_parquet(
        cls,
        path: PathLike,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
        columns: list[str] | None = None,
        **kwargs: Any,
    ) -> Any:
        """A TensorDict of a Parquet file (read with pyarrow, then as ``from_arrow``);
        ``columns`` reads only those columns. ``kwargs`` go to ``pyarrow.parquet.read_table``.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/t.parquet"
        >>> TensorDict({"a": torch.arange(3), "b": torch.ones(3, 2)}, [3]).to_parquet(path)
        >>> TensorDict.from_parquet(path, columns=["b"])["b"].shape
        torch.Size([3, 2])
        """
        from tensordict._io_common import require
        from tensordict._io_tabular import from_table

        pq = require("pyarrow.parquet", "arrow", "from_parquet")
        table = pq.read_table(os.fspath(path), columns=columns, **kwargs)
        return from_table(
            "from_parquet",
            table,
            separator=separator,
            dtype=dtype,
            device=device,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
        )

    def to_parquet(self, path: PathLike, *, separator: str | None = None, **kwargs: Any) -> None:
        """Write a batch of one dim as a Parquet file, atomically (the ``to_arrow`` table;
        ``kwargs`` go to ``pyarrow.parquet.write_table``).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/t.parquet"
        >>> TensorDict({"a": torch.arange(3)}, [3]).to_parquet(path)
        >>> TensorDict.from_parquet(path)["a"]
        tensor([0, 1, 2])
        """
        from tensordict._io_common import require, write_atomically
        from tensordict._io_tabular import to_table

        call = self._call("to_parquet")
        pq = require("pyarrow.parquet", "arrow", call)
        table = to_table(call, self, separator)
        write_atomically(path, lambda tmp: pq.write_table(table, tmp, **kwargs))

    @classmethod
    def from_csv(
        cls,
        path: PathLike,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
        **kwargs: Any,
    ) -> Any:
        """A TensorDict of a CSV file (read by ``pandas.read_csv``, ``kwargs`` forwarded;
        then as ``from_pandas``).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/t.csv"
        >>> TensorDict({"a": torch.arange(2), "n": {"b": torch.ones(2)}}, [2]).to_csv(
        ...     path, separator="."
        ... )
        >>> TensorDict.from_csv(path, separator=".")["n", "b"]
        tensor([1., 1.], dtype=torch.float64)
        """
        from tensordict._io_common import require
        from tensordict._io_tabular import from_dataframe

        pd = require("pandas", "pandas", "from_csv")
        return from_dataframe(
            "from_csv",
            pd.read_csv(os.fspath(path), **kwargs),
            separator=separator,
            dtype=dtype,
            device=device,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
        )

    def to_csv(self, path: PathLike, *, separator: str | None = None, **kwargs: Any) -> None:
        """Write a batch of one dim as a CSV file, atomically (``to_pandas`` then
        ``DataFrame.to_csv(index=False, **kwargs)``).

        >>> import pathlib, tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/t.csv"
        >>> TensorDict({"a": torch.arange(2)}, [2]).to_csv(path)
        >>> pathlib.Path(path).read_text().split()
        ['a', '0', '1']
        """
        from tensordict._io_common import write_atomically
        from tensordict._io_tabular import to_dataframe

        frame = to_dataframe(self._call("to_csv"), self, separator)
        write_atomically(path, lambda tmp: frame.to_csv(tmp, index=False, **kwargs))

    @classmethod
    def from_json(
        cls,
        path: PathLike,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
        separator: str | None = None,
        dtype: torch.dtype | None = None,
        lines: bool = False,
        **kwargs: Any,
    ) -> Any:
        """A TensorDict of a JSON file of records (JSON Lines with ``lines=True``), read by
        ``pandas.read_json`` (``kwargs`` forwarded), then as ``from_pandas``.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/t.json"
        >>> TensorDict({"a": torch.arange(2), "s": ["x", "y"]}, [2]).to_json(path)
        >>> TensorDict.from_json(path)["s"]
        LinkedList(['x', 'y'])
        """
        from tensordict._io_common import require
        from tensordict._io_tabular import from_dataframe

        pd = require("pandas", "pandas", "from_json")
        with open(path, encoding="utf-8") as f:
            frame = pd.read_json(f, orient="records", lines=lines, **kwargs)
        return from_dataframe(
            "from_json",
            frame,
            separator=separator,
            dtype=dtype,
            device=device,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
        )

    def to_json(
        self, path: PathLike, *, separator: str | None = None, lines: bool = False, **kwargs: Any
    ) -> None:
        """Write a batch of one dim as a JSON array of records (JSON Lines with
        ``lines=True``), atomically, through ``DataFrame.to_json``.

        >>> import pathlib, tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/t.json"
        >>> TensorDict({"a": torch.arange(2)}, [2]).to_json(path)
        >>> pathlib.Path(path).read_text()
        '[{"a":0},{"a":1}]'
        """
        from tensordict._io_common import write_atomically
        from tensordict._io_tabular import to_dataframe

        frame = to_dataframe(self._call("to_json"), self, separator)
        write_atomically(
            path, lambda tmp: frame.to_json(tmp, orient="records", lines=lines, **kwargs)
        )

    @classmethod
    def from_struct_array(
        cls,
        struct_array: Any,
        *,
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        device: Any = None,
        batch_size: Any = None,
    ) -> Any:
        """A TensorDict of a numpy structured array, batch size = the array's shape:
        numeric fields become tensors (views of the array where its layout allows), string
        fields ``NonTensorStack`` entries, nested fields nested TensorDicts.

        >>> import numpy as np
        >>> from tensordict import TensorDict
        >>> arr = np.zeros(3, dtype=[("a", "i4"), ("b", "f8", (2,))])
        >>> TensorDict.from_struct_array(arr)["b"].shape
        torch.Size([3, 2])
        """
        from tensordict._io_tabular import from_struct_array

        return from_struct_array(
            "from_struct_array",
            struct_array,
            batch_size=batch_size,
            auto_batch_size=auto_batch_size,
            batch_dims=batch_dims,
            device=device,
        )

    def to_struct_array(self) -> Any:
        """A numpy structured array shaped like the batch: a field per entry (with the
        entry's per-element shape), nested TensorDicts as nested fields, string
        non-tensor entries as unicode fields.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> arr = TensorDict({"a": torch.arange(2), "b": torch.ones(2, 3)}, [2]).to_struct_array()
        >>> arr.dtype.names, arr["b"].shape
        (('a', 'b'), (2, 3))
        """
        from tensordict._io_tabular import to_struct_array

        return to_struct_array(self._call("to_struct_array"), self)

    # ------------------------------------------------------------------ HDF5 and zarr
    @classmethod
    def from_h5(
        cls,
        filename: PathLike,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Any = None,
    ) -> Any:
        """A ``PersistentTensorDict`` over an HDF5 file (entries read lazily); see
        ``PersistentTensorDict.from_h5``. Needs the ``h5`` extra.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/f.h5"
        >>> TensorDict({"a": torch.arange(3)}, [3]).to_h5(path).close()
        >>> TensorDict.from_h5(path)[1:]["a"]
        tensor([1, 2])
        """
        return _persistent("from_h5", filename, mode, auto_batch_size, batch_dims, batch_size)

    def to_h5(self, filename: PathLike, **kwargs: Any) -> Any:
        """Write this collection to a new HDF5 file and return the ``PersistentTensorDict``
        over it; ``kwargs`` go to ``h5py``'s ``create_dataset`` (``compression=...``).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> ptd = TensorDict({"a": torch.ones(2)}, [2]).to_h5(tempfile.mkdtemp() + "/f.h5")
        >>> ptd["a"], type(ptd).__name__
        (tensor([1., 1.]), 'PersistentTensorDict')
        >>> ptd.close()
        """
        from tensordict._io_persistent import PersistentTensorDict

        refuse_unbatched(self, self._call("to_h5"), "written to a file")
        return PersistentTensorDict.from_dict(self, filename, backend="h5", **kwargs)

    @classmethod
    def from_zarr(
        cls,
        filename: Any,
        *,
        mode: str = "r",
        auto_batch_size: bool = False,
        batch_dims: int | None = None,
        batch_size: Any = None,
    ) -> Any:
        """A ``PersistentTensorDict`` over a zarr store (chunks read on access); see
        ``PersistentTensorDict.from_zarr``. Needs the ``zarr`` extra.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/s.zarr"
        >>> _ = TensorDict({"a": torch.arange(4)}, [4]).to_zarr(path, chunks=(2,))
        >>> TensorDict.from_zarr(path).get_at("a", slice(1, 3))
        tensor([1, 2])
        """
        return _persistent("from_zarr", filename, mode, auto_batch_size, batch_dims, batch_size)

    def to_zarr(self, filename: Any, **kwargs: Any) -> Any:
        """Write this collection to a new zarr store and return the ``PersistentTensorDict``
        over it; ``kwargs`` go to zarr's ``create_array`` (``chunks=(16,)`` chunks every
        leaf along its leading dims, ``compressors=...``); by default one chunk per leaf.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(6, 2), "n": {"b": torch.ones(6)}}, [6])
        >>> z = td.to_zarr(tempfile.mkdtemp() + "/s.zarr", chunks=(2,))
        >>> z.file["a"].chunks
        (2, 2)
        """
        from tensordict._io_persistent import PersistentTensorDict

        refuse_unbatched(self, self._call("to_zarr"), "written to a file")
        return PersistentTensorDict.from_dict(self, filename, backend="zarr", **kwargs)

    def to_store(
        self,
        *,
        backend: str = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Upload this collection to a Redis-protocol server and return the
        :class:`~tensordict.TensorDictStore` over it (a
        :class:`~tensordict.LazyStackedTensorDictStore` for a lazy stack); see
        :meth:`TensorDictStore.from_tensordict <tensordict.TensorDictStore.from_tensordict>`.
        ``kwargs`` go to ``redis.Redis`` (or ``td_id=``, ``client=``)."""
        from tensordict._store import TensorDictStore

        return TensorDictStore.from_tensordict(
            self,
            backend=backend,  # type: ignore[arg-type]
            host=host,
            port=port,
            db=db,
            unix_socket_path=unix_socket_path,
            prefix=prefix,
            device=device,
            **kwargs,
        )

    def get_at(self, key: Any, index: Any, default: Any = _MISSING) -> Any:
        """``self.get(key)[index]`` (a ``PersistentTensorDict`` reads only that part).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.arange(4)}, [4]).get_at("a", slice(1, 3))
        tensor([1, 2])
        """
        value = self.get(key) if default is _MISSING else self.get(key, default)
        return value if value is default else value[index]

    @classmethod
    def from_schema(
        cls,
        schema: dict[Any, tuple[Any, torch.dtype]],
        *,
        batch_size: Any = None,
        storage: str | None = None,
        device: Any = None,
        **kwargs: Any,
    ) -> Any:
        """A zero-filled collection from ``{key: (element_shape, dtype)}``: each entry has
        shape ``[*batch_size, *element_shape]``. ``storage`` picks where it lives: None
        (memory), ``"shared"`` (shared memory), ``"memmap"`` (``prefix=``), ``"h5"`` or
        ``"zarr"`` (``filename=``; a PersistentTensorDict).

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict.from_schema({"obs": ([3], torch.uint8)}, batch_size=[10])
        >>> td["obs"].shape
        torch.Size([10, 3])
        """
        from tensordict._td import TensorDict

        call = f"{getattr(cls, '__name__', 'TensorDict')}.from_schema"
        bs = torch.Size(batch_size or ())
        if storage in ("h5", "zarr"):
            from tensordict._io_persistent import PersistentTensorDict

            if "filename" not in kwargs:
                raise TypeError(f"{call}: storage={storage!r} needs filename=")
            lazy = {
                k: torch.zeros((), dtype=dtype).expand(*bs, *shape)
                for k, (shape, dtype) in schema.items()
            }
            filename = kwargs.pop("filename")
            td = TensorDict(lazy, batch_size=bs)
            return PersistentTensorDict.from_dict(
                td, filename, backend=storage, device=device, **kwargs
            )
        if storage not in (None, "memmap", "shared"):
            raise ValueError(
                f"{call}: Unknown storage backend {storage!r}; expected None, 'shared', 'memmap', "
                "'h5' or 'zarr'"
            )
        entries = {
            k: torch.zeros((*bs, *shape), dtype=dtype, device=device)
            for k, (shape, dtype) in schema.items()
        }
        td = TensorDict(entries, batch_size=bs, device=device)
        if storage == "memmap":
            return td.memmap_(kwargs.pop("prefix", None), **kwargs)
        if storage == "shared":
            return td.share_memory_()
        return td


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


def to_safetensors(
    data: Any,
    path: PathLike,
    *,
    metadata: dict[str, str] | None = None,
    max_shard_size: int | str | None = None,
) -> None:
    """``data.to_safetensors(path)`` as a function (see ``TensorDictBase.to_safetensors``).

    >>> import tempfile, torch
    >>> from safetensors.torch import load_file
    >>> from tensordict import TensorDict, to_safetensors
    >>> path = tempfile.mkdtemp() + "/x.safetensors"
    >>> to_safetensors(TensorDict({"w": torch.ones(1)}), path)
    >>> load_file(path)["w"]
    tensor([1.])
    """
    data.to_safetensors(path, metadata=metadata, max_shard_size=max_shard_size)


def from_pandas(dataframe: Any, **kwargs: Any) -> Any:
    """``TensorDict.from_pandas`` as a function.

    >>> import pandas as pd
    >>> from tensordict import from_pandas
    >>> from_pandas(pd.DataFrame({"a": [1.5]}))["a"]
    tensor([1.5000], dtype=torch.float64)
    """
    return _dense().from_pandas(dataframe, **kwargs)


def from_arrow(table: Any, **kwargs: Any) -> Any:
    """``TensorDict.from_arrow`` as a function.

    >>> import pyarrow as pa
    >>> from tensordict import from_arrow
    >>> from_arrow(pa.table({"a": [1, 2]})).batch_size
    torch.Size([2])
    """
    return _dense().from_arrow(table, **kwargs)


def to_arrow(td: Any, *, separator: str | None = None) -> Any:
    """``td.to_arrow()`` as a function.

    >>> import torch
    >>> from tensordict import TensorDict, to_arrow
    >>> to_arrow(TensorDict({"a": torch.arange(2)}, [2])).num_rows
    2
    """
    return td.to_arrow(separator=separator)


def from_parquet(path: PathLike, **kwargs: Any) -> Any:
    """``TensorDict.from_parquet`` as a function.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_parquet
    >>> path = tempfile.mkdtemp() + "/t.parquet"
    >>> TensorDict({"a": torch.arange(2)}, [2]).to_parquet(path)
    >>> from_parquet(path)["a"]
    tensor([0, 1])
    """
    return _dense().from_parquet(path, **kwargs)


def from_csv(path: PathLike, **kwargs: Any) -> Any:
    """``TensorDict.from_csv`` as a function.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_csv
    >>> path = tempfile.mkdtemp() + "/t.csv"
    >>> TensorDict({"a": torch.arange(2)}, [2]).to_csv(path)
    >>> from_csv(path)["a"]
    tensor([0, 1])
    """
    return _dense().from_csv(path, **kwargs)


def from_json(path: PathLike, **kwargs: Any) -> Any:
    """``TensorDict.from_json`` as a function.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_json
    >>> path = tempfile.mkdtemp() + "/t.json"
    >>> TensorDict({"a": torch.arange(2)}, [2]).to_json(path)
    >>> from_json(path)["a"]
    tensor([0, 1])
    """
    return _dense().from_json(path, **kwargs)


def from_h5(filename: PathLike, **kwargs: Any) -> Any:
    """``TensorDict.from_h5`` as a function.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_h5
    >>> path = tempfile.mkdtemp() + "/f.h5"
    >>> TensorDict({"a": torch.arange(2)}, [2]).to_h5(path).close()
    >>> from_h5(path).batch_size
    torch.Size([2])
    """
    return _dense().from_h5(filename, **kwargs)


def from_zarr(filename: Any, **kwargs: Any) -> Any:
    """``TensorDict.from_zarr`` as a function.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, from_zarr
    >>> path = tempfile.mkdtemp() + "/s.zarr"
    >>> _ = TensorDict({"a": torch.arange(2)}, [2]).to_zarr(path)
    >>> from_zarr(path)["a"]
    tensor([0, 1])
    """
    return _dense().from_zarr(filename, **kwargs)
