"""A non-tensor entry saved on its own: the one-entry collection that names it on disk.

``NonTensorData.memmap(path)`` (and ``save``, ``memmap_like``, ``consolidate``, ...) runs
on the one-entry ``TensorDict({"data": entry})`` the entry's TensorDict methods use
(``_nontensor_api``). Saved as a plain TensorDict it would load back as one; saved as a
:class:`NonTensorRoot`, whose registered type name is ``"NonTensor"`` (docs/format.md,
section 6), a load gives the entry itself, as upstream's does.
"""

from __future__ import annotations

from typing import Any

from tensordict._format import NON_TENSOR_TYPE, register_type
from tensordict._nontensor import NonTensor
from tensordict._td import TensorDict

FIELD = "data"


class NonTensorRoot(TensorDict):
    """The one-entry collection a non-tensor entry is saved as (never handed to users:
    a load unwraps it with :func:`unwrap`)."""

    __slots__ = ()

    def _call(self, op: str) -> str:
        """Errors name the entry's class (``NonTensorStack.memmap: ...``)."""
        held = self._tensordict.get(FIELD)
        return f"{type(held).__name__ if held is not None else 'NonTensor'}.{op}"


register_type(NON_TENSOR_TYPE, NonTensorRoot)


def as_root(entry: NonTensor) -> NonTensorRoot:
    """``entry`` as the one-entry collection it is saved as."""
    return NonTensorRoot._new_unsafe({FIELD: entry}, entry.batch_size, entry.device, None)  # type: ignore[return-value]


def check_root(entries: dict[str, Any], call: str, where: str) -> None:
    """Refuse a ``"NonTensor"`` collection that is not one non-tensor entry ``"data"``
    (``ValueError``; a file that says it holds a non-tensor entry must hold exactly that)."""
    if list(entries) != [FIELD] or not isinstance(entries[FIELD], NonTensor):
        kinds = {k: type(v).__name__ for k, v in entries.items()}
        raise ValueError(
            f"{call}: {where} has type {NON_TENSOR_TYPE!r}, which holds exactly one "
            f"non-tensor entry {FIELD!r}; it holds {kinds}"
        )


def unwrap(loaded: Any) -> Any:
    """The entry a loaded :class:`NonTensorRoot` holds; anything else as it is."""
    if type(loaded) is NonTensorRoot:
        return loaded._tensordict[FIELD]
    return loaded
