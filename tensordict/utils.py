"""Public helpers: key utilities and a printer for checkpoint folders."""

from __future__ import annotations

import os

from tensordict._keys import NestedKey, unravel_key, unravel_key_list
from tensordict._modules import register_params_module

__all__ = [
    "NestedKey",
    "print_directory_tree",
    "register_params_module",
    "unravel_key",
    "unravel_key_list",
]


def print_directory_tree(
    path: str | os.PathLike[str], indent: str = "", display_metadata: bool = True
) -> None:
    """Print a folder as a tree, folders first (the layout of a checkpoint).

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> folder = tempfile.mkdtemp() + "/tensordict"
    >>> _ = TensorDict({"a": torch.rand(10), "b": {"c": torch.rand(10)}}, [10]).memmap(folder)
    >>> print_directory_tree(folder)
    tensordict/
        b/
            c.memmap
            meta.json
        a.memmap
        meta.json
    """
    path = os.fspath(path)
    print(f"{indent}{os.path.basename(os.path.normpath(path))}/")
    entries = sorted(os.listdir(path))
    folders = [e for e in entries if os.path.isdir(os.path.join(path, e))]
    files = [e for e in entries if not os.path.isdir(os.path.join(path, e))]
    for name in folders:
        print_directory_tree(os.path.join(path, name), indent + "    ", display_metadata)
    for name in files:
        if display_metadata or name != "meta.json":
            print(f"{indent}    {name}")
