"""The on-disk format's vocabulary (docs/format.md): version, dtype names, names, types."""

from __future__ import annotations

import glob
import hashlib
import math
import os
import re
from typing import Any

import torch

FORMAT = "tensordict"
VERSION = 2
META = "meta.json"
MAX_BYTES = 2**62


class FormatError(ValueError):
    """A checkpoint folder that does not follow docs/format.md."""


class CheckpointNotFoundError(FormatError, FileNotFoundError):
    """Nothing at the path a load was given (also a ``FileNotFoundError``, as upstream's)."""


_DTYPE_NAMES = [
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    # version 2: every other plain dtype torch has on the CPU
    "complex32",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "bits8",
    "bits16",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    *(f"uint{n}" for n in range(1, 8)),
    *(f"int{n}" for n in range(1, 8)),
]
DTYPES: dict[str, torch.dtype] = {
    name: getattr(torch, name) for name in _DTYPE_NAMES if hasattr(torch, name)
}
DTYPE_NAMES: dict[torch.dtype, str] = {dtype: name for name, dtype in DTYPES.items()}

_JSON_SCALARS = (str, int, bool, type(None))


def is_json_value(value: Any) -> bool:
    """Whether ``value`` is JSON that loads back as itself, type included (section 5):
    ``None``, ``bool``, ``int``, a finite ``float``, ``str``, and ``list``/``dict`` (string
    keys) of those, nested. Exactly these types: a subclass (a numpy scalar, a ``str``
    enum, an ``OrderedDict``, a ``torch.Size``) or a tuple would load as another type."""
    kind = type(value)
    if kind in _JSON_SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    try:
        if kind is list:
            return all(is_json_value(item) for item in value)
        if kind is dict:
            return all(type(k) is str and is_json_value(v) for k, v in value.items())
    except RecursionError:  # (nested too deeply for JSON's own encoder too)
        return False
    return False


_SAFE = re.compile(r"[A-Za-z0-9_\-.()\[\]+]+")
_MAX_NAME = 120


def is_plain_name(key: str) -> bool:
    """Whether ``key`` is its own file name (section 3: written as it is, not escaped)."""
    return (
        _SAFE.fullmatch(key) is not None
        and not key.startswith(".")
        and not key.endswith(".json")
        and len(key.encode()) <= _MAX_NAME
    )


class PickleRefusedError(FormatError, RuntimeError):
    """A checkpoint entry is pickled data and the caller did not pass ``allow_pickle=True``
    (a ``FormatError``, and a ``RuntimeError`` as upstream tensordict raises)."""


def encode_name(key: str, suffix: str, taken: set[str]) -> str:
    """A file or folder name for ``key`` inside its folder (section 3 of the spec)."""
    if _SAFE.fullmatch(key) and not key.startswith(".") and not key.endswith(".json"):
        base = key
    else:
        base = "".join(
            ch if _SAFE.fullmatch(ch) and not (ch == "." and i == 0) else _escape(ch)
            for i, ch in enumerate(key)
        )
        if base.endswith(".json"):
            base = base[:-5] + "%2Ejson"
    if len(base.encode()) > _MAX_NAME:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        base = base.encode()[: _MAX_NAME - 17].decode(errors="ignore") + "~" + digest
    name = base + suffix
    counter = 0
    while name in taken or name == META:
        counter += 1
        name = f"{base}~{counter}{suffix}"
    taken.add(name)
    return name


def _escape(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode())


def left_by_interrupted_save(path: str) -> bool:
    """Whether ``path`` is missing because a save died between its two renames, leaving
    the previous checkpoint as ``<path>.<token>.old`` beside it (section 7)."""
    return not os.path.exists(path) and bool(
        glob.glob(glob.escape(os.path.abspath(path)) + ".*.old")
    )


def checked_name(folder: str, name: Any, call: str, key: str, what: str) -> str:
    """``folder/name`` after checking the name itself; a link there is the caller's to
    check with :func:`check_link` (the loader learns it from the ``lstat`` it needs anyway).
    """
    if type(name) is not str or name in _NOT_NAMES or not _NOT_IN_NAMES.isdisjoint(name):
        raise FormatError(f"{call}: {what} name {name!r} of key {key!r} in {folder!r} is not valid")
    return folder + os.sep + name


_NOT_NAMES = ("", ".", "..")  # never a file's or folder's name
_NOT_IN_NAMES = frozenset("/\\\0")  # nor does one hold a separator or a NUL


def check_link(folder: str, path: str, call: str, key: str, what: str) -> None:
    """Refuse a symbolic link at ``path`` that resolves outside ``folder``."""
    if not os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep):
        name = os.path.basename(path)
        raise FormatError(
            f"{call}: {what} {name!r} of key {key!r} in {folder!r} leads outside the checkpoint"
        )


def checked_path(folder: str, name: Any, call: str, key: str, what: str) -> str:
    """``folder/name`` after checking the name cannot leave the folder (section 3).

    A plain name cannot leave its folder; only a symbolic link can, so links (and only
    links) are resolved and must stay inside the folder.
    """
    path = checked_name(folder, name, call, key, what)
    if os.path.islink(path):
        check_link(folder, path, call, key, what)
    return path


# ------------------------------------------------------------ collection types
_TYPES: dict[str, type] = {}
NON_TENSOR_TYPE = "NonTensor"  # a non-tensor entry saved as a checkpoint's root


def register_type(name: str, cls: type) -> None:
    """Record ``cls`` under the stable ``name`` written in checkpoints."""
    known = _TYPES.get(name)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise ValueError(
            f"register_type: {name!r} already names {known.__module__}.{known.__qualname__}"
        )
    _TYPES[name] = cls


def lookup_type(name: str, call: str, where: str) -> type:
    """The class registered as ``name``; never imports anything."""
    cls = _TYPES.get(name)
    if cls is None:
        raise FormatError(
            f"{call}: {where} names type {name!r}, which is not registered in this process "
            f"(registered: {sorted(_TYPES)}); define or import the class before loading"
        )
    return cls


def type_name(cls: type) -> str:
    """The registered name of ``cls``; a TypeError for a class that is not, or no longer,
    the one registered under its name (written, it would load as the other class)."""
    for name, known in _TYPES.items():
        if known is cls:
            return name
    same = [n for n, known in _TYPES.items() if known.__qualname__ == cls.__qualname__]
    if same:
        raise TypeError(
            f"{cls.__qualname__} is no longer the class registered as {same[0]!r}: a class "
            "of that name was defined after it, and what is written would load as that "
            "one; write an instance of the current class (or give the classes distinct "
            "names)"
        )
    raise TypeError(f"{cls.__qualname__} is not a registered tensor collection type")
