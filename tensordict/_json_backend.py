"""``tensordict.utils.set_json_backend`` / ``get_json_backend`` / ``json_dumps``: the JSON
module upstream lets users choose for its metadata (``"json"`` or ``"orjson"``), which
upstream 0.15 deprecates (reached through ``tensordict.utils`` they warn, as upstream's).

Here the choice selects what :func:`json_dumps` writes with. Checkpoint metadata is always
written by the standard library's ``json`` (docs/format.md): ``orjson`` would write ``NaN``
as ``null`` (a value that loads back as None) and refuses integers beyond 64 bits.
"""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

_BACKENDS = ("json", "orjson")
_CHOSEN = ["json"]  # (one slot: the chosen backend's name)


def set_json_backend(backend: str) -> None:
    """Choose the module :func:`json_dumps` serialises with: ``"json"`` (the default) or
    ``"orjson"`` (which must be installed); a ``ValueError`` for any other name.

    >>> from tensordict._json_backend import get_json_backend, set_json_backend
    >>> set_json_backend("json")
    >>> get_json_backend().__name__
    'json'
    """
    if backend not in _BACKENDS:
        raise ValueError(
            f"set_json_backend: Backend must be either 'json' or 'orjson', got {backend!r}"
        )
    _module(backend)  # (an ImportError now, not at the first dump)
    _CHOSEN[0] = backend


def get_json_backend() -> ModuleType:
    """The module chosen by :func:`set_json_backend` (``json`` by default)."""
    return _module(_CHOSEN[0])


def _module(name: str) -> ModuleType:
    if name == "json":
        return json
    import orjson  # type: ignore[import-not-found]  # (an optional extra)

    return orjson  # type: ignore[no-any-return]


def json_dumps(data: Any, **kwargs: Any) -> str | bytes:
    """``data`` as JSON by the chosen backend: a ``str`` from ``json``, ``bytes`` from
    ``orjson`` (which takes no ``separators`` and writes integers beyond 64 bits with
    ``json``).

    >>> from tensordict._json_backend import json_dumps
    >>> json_dumps({"a": [1, 2]}, separators=(",", ":"))
    '{"a":[1,2]}'
    """
    backend = get_json_backend()
    if backend is json:
        return json.dumps(data, **kwargs)
    options = {k: v for k, v in kwargs.items() if k != "separators"}
    try:
        return backend.dumps(data, **options)  # type: ignore[no-any-return]
    except TypeError as err:
        if "Integer exceeds 64-bit range" not in str(err):
            raise
        return json.dumps(data, **kwargs)
