"""State dicts, pickling, copying, and registration with torch's weights-only loader."""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import Tensor

from tensordict._batch import KeysMismatchError
from tensordict._keys import join_path
from tensordict._mapping import is_plain_mapping
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack, _rebuild
from tensordict._primitives import CollectionPrimitives, DenseStorage

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import DenseTensorDictBase

_Dense = TypeVar("_Dense", bound="DenseTensorDictBase")
# the entries that described each level in state dicts written before the ``_metadata``
# attribute (upstream's older layout): still read, never written
_BATCH = "__batch_size"
_DEVICE = "__device"


class _Level(dict[str, Any]):
    """One level of a state dict being loaded, with its ``{"batch_size", "device"}``
    metadata (None when the state dict gave none)."""

    meta: dict[str, Any] | None = None


def _plain(td: Any) -> dict[str, Any]:
    """The entries as nested (batch_size, device, entries) triples, for pickling."""
    out: dict[str, Any] = {}
    for key, value in td._tensordict.items():
        if isinstance(value, (Tensor, NonTensor)) or type(value) is not type(td):
            out[key] = value  # a leaf, a tensorclass or a lazy stack: pickled as itself
        else:
            out[key] = (
                tuple(value._batch_size),
                value._device,
                _plain(value),
                value._names,
                value._is_locked,
            )
    return out


def _from_plain(
    cls: Callable[..., _Dense],
    batch_size: tuple[int, ...],
    device: torch.device | None,
    entries: dict[str, Any],
    names: list[str | None] | None = None,
    locked: bool = False,
) -> _Dense:
    """Rebuild a pickled TensorDict; validated like construction (pickles may be foreign)."""
    nested = {
        key: _from_plain(cls, *value) if isinstance(value, tuple) else value
        for key, value in entries.items()
    }
    td = cls(nested, batch_size=batch_size, device=device, names=names)
    if locked:
        td.lock_()
    return td


class StateOps(CollectionPrimitives):
    """``state_dict``/``load_state_dict``, pickle, ``copy.copy`` and ``copy.deepcopy``."""

    __slots__ = ()

    def state_dict(
        self,
        destination: OrderedDict[str, Any] | None = None,
        prefix: str = "",
        keep_vars: bool = False,
        flatten: bool = True,
    ) -> OrderedDict[str, Any]:
        """The entries, keys joined by "." (as ``nn.Module.state_dict``), in ``destination``
        when given; each level's batch size and device go in the dict's ``_metadata``
        attribute under the level's prefix, as a module's state dict keeps its version, so
        ``module.load_state_dict(td.state_dict())`` takes a TensorDict of its parameters.

        ``keep_vars=True`` keeps the live tensors (for in-place restores); otherwise
        leaves are detached. ``flatten=False`` nests one OrderedDict per level, each with
        its own ``_metadata``.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> sd = TensorDict({"a": {"b": torch.zeros(2)}}, [2]).state_dict()
        >>> list(sd), sd._metadata["a"]
        (['a.b'], {'batch_size': torch.Size([2]), 'device': None})
        """
        call = self._call("state_dict")
        td = self._as_dense(call)
        out: OrderedDict[str, Any] = OrderedDict() if destination is None else destination
        metadata = getattr(out, "_metadata", None)
        if metadata is None:
            metadata = OrderedDict()
            setattr(out, "_metadata", metadata)  # noqa: B010  (an OrderedDict's attribute)
        level = prefix[:-1] if prefix.endswith(".") else prefix
        meta: dict[str, Any] = {"batch_size": td._batch_size, "device": td._device}
        if getattr(td, "_is_tensorclass", False):  # the class's name, as upstream records it
            meta["_type"] = type(td).__qualname__
        metadata[level] = meta
        # non-tensor entries go with the level's metadata (as upstream): the keys are then
        # the tensors, which a module's state dict (or safetensors) can hold
        for key, value in td._tensordict.items():
            if flatten and "." in key:
                raise ValueError(
                    f"{call}: key {key!r} contains '.', which flatten=True "
                    "uses as separator; pass flatten=False"
                )
            if isinstance(value, Tensor):
                out[prefix + key] = value if keep_vars else value.detach()
            elif isinstance(value, NonTensor):
                data = value.data if type(value) is NonTensorData else value
                meta.setdefault("_non_tensor", {})[key] = data
            elif flatten:
                value.state_dict(out, prefix + key + ".", keep_vars, True)
            else:
                out[prefix + key] = value.state_dict(keep_vars=keep_vars, flatten=False)
        return out

    def __copy__(self) -> Self:
        from tensordict._structure import _copy_structure

        return self._per_member(_copy_structure)

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        fn, args = self.__reduce__()
        out: Self = fn(*copy.deepcopy(args, memo))
        if out.is_locked:  # a copy is unlocked, as clone()'s (and upstream's deepcopy)
            out.unlock_()
        return out


class DenseStateOps(DenseStorage):
    """The dense storage's half: ``load_state_dict`` and pickling of a TensorDict's entries."""

    __slots__ = ()

    def load_state_dict(
        self,
        state_dict: Mapping[str, Any],
        strict: bool = True,
        assign: bool = False,
        from_flatten: bool | None = None,
    ) -> Self:
        """Load a :meth:`state_dict`, copying into existing leaves (or replacing, ``assign``).

        Onto an empty TensorDict everything is created, batch size and device included.
        With ``strict`` every key of a non-empty TensorDict must be in the state, and
        nothing outside its keys may be in the state; all offending keys are named.
        ``from_flatten`` says whether keys were joined by "." (``state_dict(flatten=True)``);
        by default a state holding nested mappings is taken as nested, any other as flat.
        Batch sizes and devices come from the state dict's ``_metadata``, or from the
        ``__batch_size`` / ``__device`` entries of the older layout.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> src = TensorDict({"a": torch.ones(3), "b": {"c": torch.ones(3)}}, [3])
        >>> dst = TensorDict().load_state_dict(src.state_dict())
        >>> dst.batch_size, dst["b", "c"]
        (torch.Size([3]), tensor([1., 1., 1.]))
        """
        if "_tensordict" in state_dict and "_non_tensordict" in state_dict:
            # a tensorclass's legacy state: its entries wrapped under "_tensordict"
            legacy = state_dict["_tensordict"]
            state_dict = {**legacy, **state_dict["_non_tensordict"]}
        nested = _nest(state_dict, from_flatten)
        _read_levels(state_dict, nested)
        was_empty = not self._tensordict
        if self._is_locked and was_empty and _paths_of_nested(nested):
            raise RuntimeError(
                f"{type(self).__name__}.load_state_dict: the TensorDict is locked and empty"
            )
        if strict and not was_empty:
            ours = {join_path(p) for p in _paths(self)}
            theirs = {join_path(p) for p in _paths_of_nested(nested)}
            missing, unexpected = sorted(ours - theirs, key=str), sorted(theirs - ours, key=str)
            if missing or unexpected:
                # upstream's words for the first unexpected key end the message
                extra = (
                    f"; Key {unexpected[0]!r} wasn't expected in the state-dict"
                    if unexpected
                    else ""
                )
                raise KeysMismatchError(
                    f"{type(self).__name__}.load_state_dict: missing keys {missing}, "
                    f"unexpected keys {unexpected} (pass strict=False to load what matches)" + extra
                )
        self._load_nested(nested, assign)
        return self

    def _load_nested(self, nested: dict[str, Any], assign: bool) -> None:
        meta = getattr(nested, "meta", None)
        if meta is not None and not self._tensordict:
            if "batch_size" in meta:
                self.batch_size = meta["batch_size"]  # type: ignore[misc]
            if self._device is None and meta.get("device") is not None:
                self._device = torch.device(meta["device"])
        for key, value in _non_tensor(nested).items():  # (see state_dict)
            leaf = value if isinstance(value, NonTensor) else NonTensorData(value)
            self._set_path((key,), leaf, self._call("load_state_dict"))
        for key, value in nested.items():
            current = self._tensordict.get(key)
            if isinstance(value, dict):
                if current is not None and not isinstance(current, CollectionPrimitives):
                    raise TypeError(
                        f"{self._call('load_state_dict')}: key {key!r} is a "
                        f"{type(current).__name__} "
                        "here but a nested TensorDict in the state dict"
                    )
                if current is None:
                    level = getattr(value, "meta", None) or {}
                    bs = level.get("batch_size", self._batch_size)
                    current = self._new_unsafe({}, torch.Size(bs), self._device, None)
                    self._set_path((key,), current, self._call("load_state_dict"))
                    current = self._tensordict[key]
                current._load_nested(value, assign)  # type: ignore[union-attr]
            elif isinstance(current, Tensor) and isinstance(value, Tensor) and not assign:
                self.set_(key, value)
            else:
                self._set_path((key,), value, self._call("load_state_dict"))

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _from_plain,
            (
                type(self),
                tuple(self._batch_size),
                self._device,
                _plain(self),
                self._names,
                self._is_locked,
            ),
        )


def _nest(state: Mapping[str, Any], from_flatten: bool | None = None) -> _Level:
    """A flat state dict (``"a.b"`` keys) as nested levels; nested state dicts pass through.

    A state dict holding mappings is in the nested form (``flatten=False``): its keys are
    taken as they are, dots included. Each level's metadata is :func:`_read_levels`' job.
    """
    if from_flatten is None:
        from_flatten = not any(is_plain_mapping(v) for v in state.values())
    out = _Level()
    if not from_flatten:
        for k, v in state.items():
            out[k] = _nest(v, False) if is_plain_mapping(v) else v
        return out
    for key, value in state.items():
        parts = key.split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, _Level())
        node[parts[-1]] = value
    return out


def _read_levels(state: Mapping[str, Any], nested: _Level) -> None:
    """Give each level of ``nested`` (built from ``state``) its batch size and device: from
    ``state._metadata`` (keyed by the level's dotted prefix; each nested mapping of the
    nested form has its own), else from the older layout's ``__batch_size`` / ``__device``
    entries, which are taken out."""
    metadata = getattr(state, "_metadata", None)
    if isinstance(metadata, Mapping):
        for prefix, meta in metadata.items():
            if not isinstance(meta, Mapping):
                continue
            node: Any = nested
            parts = prefix.split(".") if prefix else []
            if meta.get("_type") == "NonTensorData" and isinstance(meta.get("_non_tensor"), dict):
                _non_tensor_of(nested, parts, meta["_non_tensor"].get("data"))
                continue  # (upstream's state dicts describe each non-tensor entry so)
            for part in parts:
                child = node.get(part)
                if child is None and "batch_size" in meta:  # a level with no leaves
                    child = node[part] = _Level()
                if not isinstance(child, _Level):
                    break  # (a module's own metadata: no level of ours)
                node = child
            else:
                node.meta = dict(meta)
    for key, value in list(nested.items()):
        if isinstance(value, _Level):
            source = state.get(key) if is_plain_mapping(state) else None
            _read_levels(source if is_plain_mapping(source) else {}, value)
    if nested.meta is None and _BATCH in nested:
        nested.meta = {"batch_size": nested.pop(_BATCH), "device": nested.pop(_DEVICE, None)}


def _non_tensor_of(nested: _Level, parts: list[str], data: Any) -> None:
    """Record the non-tensor value ``data`` at the dotted path ``parts`` (an entry of an
    upstream state dict's ``_metadata``) in its level's metadata, where ours keep them."""
    node: Any = nested
    for part in parts[:-1]:
        node = node.setdefault(part, _Level())
        if not isinstance(node, _Level):
            return
    if parts:
        if node.meta is None:
            node.meta = {}
        node.meta.setdefault("_non_tensor", {})[parts[-1]] = data


def _paths(td: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for key, value in td._tensordict.items():
        if isinstance(value, (Tensor, NonTensor)):
            out.append((*prefix, key))
        else:
            out.extend(_paths(value, (*prefix, key)))
    return out


def _non_tensor(nested: dict[str, Any]) -> dict[str, Any]:
    """The non-tensor fields a tensorclass's state dict keeps in a level's metadata."""
    meta = getattr(nested, "meta", None) or {}
    values = meta.get("_non_tensor")
    return values if isinstance(values, dict) else {}


def _paths_of_nested(nested: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [(*prefix, key) for key in _non_tensor(nested)]
    for key, value in nested.items():
        if isinstance(value, dict):
            out.extend(_paths_of_nested(value, (*prefix, key)))
        else:
            out.append((*prefix, key))
    return out


def register_safe_globals(td_cls: type) -> None:
    """Let ``torch.load(weights_only=True)`` rebuild TensorDicts and their pieces.

    Only constructors that validate their input are registered; nothing here runs
    code named by a file.
    """
    from tensordict._lazy import LazyStackedTensorDict
    from tensordict._lazy import _rebuild_stack as _rebuild_lazy
    from tensordict._nontensor import MetaData, _rebuild_meta, _rebuild_stack

    safe: list[Any] = [td_cls, _from_plain, NonTensorData, _rebuild, NonTensorStack]
    safe += [_rebuild_stack, MetaData, _rebuild_meta, LazyStackedTensorDict, _rebuild_lazy]
    torch.serialization.add_safe_globals(safe)
