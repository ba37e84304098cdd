"""The zarr (v3) storage of PersistentTensorDict: stores, groups, chunked arrays."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tensordict._io_common import require


class ZarrBackend:
    """What PersistentTensorDict needs of a zarr store (zarr imported on first use)."""

    name = "zarr"

    def __init__(self) -> None:
        self.zarr = require("zarr", "zarr", "PersistentTensorDict")

    def open(self, filename: Any, mode: str, attrs: dict[str, str] | None = None) -> Any:
        if isinstance(filename, self.zarr.Group):
            return filename
        store = filename if not isinstance(filename, (str, os.PathLike)) else os.fspath(filename)
        if attrs is not None:  # a new store: its attributes written once (a zip cannot rewrite)
            return self.zarr.open_group(store, mode=mode, attributes=attrs)
        return self.zarr.open_group(store, mode="r+" if mode == "a" else mode)

    def filename(self, root: Any) -> str:
        return str(root.store)

    def is_group(self, node: Any) -> bool:
        return isinstance(node, self.zarr.Group)

    def is_array(self, node: Any) -> bool:
        return isinstance(node, self.zarr.Array) and np.dtype(node.dtype).kind in "iufbc"

    def member(self, group: Any, name: str) -> Any:
        try:
            return group[name]
        except KeyError:
            return None

    def names(self, group: Any) -> list[str]:
        return sorted(group.keys())

    def shape(self, node: Any) -> tuple[int, ...]:
        return tuple(node.shape)

    def dtype(self, node: Any) -> np.dtype[Any]:
        dtype: np.dtype[Any] = np.dtype(node.dtype)
        return dtype

    def read(self, node: Any, index: Any) -> np.ndarray:
        if isinstance(index, tuple) and any(isinstance(i, np.ndarray) for i in index):
            return np.asarray(node.oindex[index])
        return np.asarray(node[index])

    def write(self, node: Any, index: Any, value: np.ndarray) -> None:
        if isinstance(index, tuple) and any(isinstance(i, np.ndarray) for i in index):
            node.oindex[index] = value
        else:
            node[index] = value

    def create_array(self, group: Any, name: str, value: np.ndarray, kwargs: Any) -> None:
        options = {"compressors": None, **kwargs}
        lead = tuple(kwargs.get("chunks") or ())[: value.ndim]  # leading dims; the rest whole
        chunks = (*lead, *value.shape[len(lead) :])
        options["chunks"] = tuple(max(int(c), 1) for c in chunks) or (1,)
        if value.ndim == 0:
            options["chunks"] = ()
        array = group.create_array(
            name, shape=value.shape, dtype=value.dtype, overwrite=True, **options
        )
        if value.size:
            array[...] = value

    def create_group(self, group: Any, name: str, attrs: dict[str, str] | None = None) -> Any:
        if attrs is not None:
            return group.create_group(name, attributes=attrs, overwrite=True)
        return group.require_group(name)

    def delete(self, group: Any, name: str) -> None:
        del group[name]

    def get_attr(self, node: Any, key: str) -> str | None:
        value = node.attrs.get(key)
        return None if value is None else str(value)

    def set_attr(self, node: Any, key: str, value: str) -> None:
        node.attrs[key] = value

    def flush(self, root: Any) -> None:
        """Zarr writes through: nothing is buffered."""

    def close(self, root: Any) -> None:
        store = getattr(root, "store", None)
        if store is not None and hasattr(store, "close"):
            store.close()  # a ZipStore writes its directory here
