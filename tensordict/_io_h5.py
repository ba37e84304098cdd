"""The HDF5 storage of PersistentTensorDict, through h5py: files, groups, datasets."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tensordict._io_common import require


class H5Backend:
    """What PersistentTensorDict needs of an HDF5 file (h5py imported on first use)."""

    name = "h5"

    def __init__(self) -> None:
        self.h5 = require("h5py", "h5", "PersistentTensorDict")

    def open(self, filename: Any, mode: str, attrs: dict[str, str] | None = None) -> Any:
        if isinstance(filename, self.h5.Group):
            return filename
        try:
            root = self.h5.File(os.fspath(filename), mode)
        except OSError as err:  # another process (the one that forked this map worker, or
            if "lock" not in str(err):  # a writer) holds the file: read without a lock
                raise
            root = self.h5.File(os.fspath(filename), mode, locking=False)
        root.attrs.update(attrs or {})
        return root

    def filename(self, root: Any) -> str:
        return str(root.file.filename)

    def is_group(self, node: Any) -> bool:
        return isinstance(node, self.h5.Group)

    def is_array(self, node: Any) -> bool:
        return isinstance(node, self.h5.Dataset) and node.dtype.kind in "iufbc"

    def member(self, group: Any, name: str) -> Any:
        """The node ``name`` of ``group``, None when absent. An external link is returned
        unresolved (another file is never opened) and a broken soft link as the link: the
        caller refuses both as non-array nodes."""
        link = group.get(name, getlink=True)
        if link is None or isinstance(link, self.h5.ExternalLink):
            return link
        try:
            return group[name]
        except KeyError:
            return link

    def names(self, group: Any) -> list[str]:
        return list(group.keys())

    def shape(self, node: Any) -> tuple[int, ...]:
        return tuple(node.shape)

    def dtype(self, node: Any) -> np.dtype[Any]:
        return node.dtype  # type: ignore[no-any-return]

    def read(self, node: Any, index: Any) -> np.ndarray:
        return np.asarray(node[index])

    def write(self, node: Any, index: Any, value: np.ndarray) -> None:
        node[index] = value

    def create_array(self, group: Any, name: str, value: np.ndarray, kwargs: Any) -> None:
        if name in group:
            del group[name]
        group.create_dataset(name, data=value, **kwargs)

    def create_group(self, group: Any, name: str, attrs: dict[str, str] | None = None) -> Any:
        out = group.require_group(name)
        out.attrs.update(attrs or {})
        return out

    def delete(self, group: Any, name: str) -> None:
        del group[name]

    def get_attr(self, node: Any, key: str) -> str | None:
        value = node.attrs.get(key)
        if isinstance(value, bytes):
            return value.decode()
        return None if value is None else str(value)

    def set_attr(self, node: Any, key: str, value: str) -> None:
        node.attrs[key] = value

    def flush(self, root: Any) -> None:
        if root.id.valid:
            root.file.flush()

    def close(self, root: Any) -> None:
        if isinstance(root, self.h5.File) and root.id.valid:
            root.close()
