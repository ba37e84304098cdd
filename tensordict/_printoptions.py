"""The print options of collections: ``set_printoptions`` (a switch) and ``get_printoptions``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])

# the live options; every repr reads them at call time
OPTIONS: dict[str, Any] = {
    "show_batch_size": True,
    "show_device": True,
    "show_is_shared": True,
    "show_shape": True,
    "show_field_device": True,
    "show_dtype": True,
    "show_field_is_shared": True,
    "show_grad": False,
    "show_is_contiguous": False,
    "show_is_view": False,
    "show_storage_size": False,
    "plain": False,
    "sort_keys": "alphabetical",
    "compact": True,
    "html": True,
    "html_max_entries": 200,
}

# options only the verbose form reads: passing one without ``compact`` turns compact off
_VERBOSE_ONLY = frozenset(
    {
        "show_is_shared",
        "show_shape",
        "show_field_device",
        "show_field_is_shared",
        "show_grad",
        "show_is_contiguous",
        "show_is_view",
        "show_storage_size",
        "plain",
    }
)

# what ``verbose=False`` hides, unless the same call sets them
_QUIET = {
    "show_device": False,
    "show_is_shared": False,
    "show_field_device": False,
    "show_dtype": False,
    "show_field_is_shared": False,
}


class set_printoptions:
    """Choose what the text and notebook forms of a collection show.

    The default is the compact form, ``TensorDict(batch_size=[3], fields={a: f32[4]})``:
    each tensor as its dtype and the dims after the batch dims. ``compact=False`` gives
    the verbose form (one ``Tensor(shape=..., device=..., dtype=..., is_shared=...)`` line
    per entry), whose parts the ``show_*`` options pick; passing one of the verbose-only
    options (``show_is_shared``, ``show_shape``, ``show_field_device``,
    ``show_field_is_shared``, ``show_grad``, ``show_is_contiguous``, ``show_is_view``,
    ``show_storage_size``, ``plain``) without ``compact`` turns the compact form off.
    ``verbose=False`` hides devices, dtypes and sharing unless the call sets them.
    ``sort_keys`` is ``"alphabetical"``, ``"insertion"`` or a callable sort key on each
    line; ``html=False`` turns the notebook form off and ``html_max_entries`` caps the
    entries it draws (200). Use it in a ``with`` block, as a decorator, or ``.set()`` it.

    >>> import torch
    >>> from tensordict import TensorDict, set_printoptions
    >>> td = TensorDict(a=torch.zeros(3, 4), batch_size=[3])
    >>> print(td)
    TensorDict(batch_size=[3], fields={a: f32[4]})
    >>> with set_printoptions(compact=False, verbose=False):
    ...     print(td)
    TensorDict(
        fields={
            a: Tensor(shape=torch.Size([3, 4]))},
        batch_size=torch.Size([3]))
    """

    def __init__(self, *, verbose: bool = True, **kwargs: Any) -> None:
        unknown = set(kwargs) - set(OPTIONS)
        if unknown:
            raise TypeError(
                f"set_printoptions: Unknown printoptions: {sorted(unknown)}; "
                f"valid options are {sorted(OPTIONS)}"
            )
        if "compact" not in kwargs and not _VERBOSE_ONLY.isdisjoint(kwargs):
            kwargs["compact"] = False
        if not verbose:
            kwargs = {**_QUIET, **kwargs}
        self._kwargs = kwargs
        self._saved: list[dict[str, Any]] = []

    def set(self) -> None:
        """Apply the options for the rest of the program (``__exit__`` undoes the last one)."""
        self._saved.append(dict(OPTIONS))
        OPTIONS.update(self._kwargs)

    def __enter__(self) -> None:
        self.set()

    def __exit__(self, *exc: object) -> None:
        OPTIONS.update(self._saved.pop())

    def __call__(self, func: _F) -> _F:
        """Decorate ``func``: the options hold during each call."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"set_printoptions({', '.join(f'{k}={v!r}' for k, v in self._kwargs.items())})"


def get_printoptions() -> dict[str, Any]:
    """A copy of the current print options (see ``set_printoptions``).

    >>> from tensordict import get_printoptions, set_printoptions
    >>> get_printoptions()["compact"]
    True
    >>> with set_printoptions(show_grad=True):
    ...     get_printoptions()["compact"]
    False
    """
    return dict(OPTIONS)
