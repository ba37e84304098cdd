"""TensorDictModuleBase: declared in_keys/out_keys, select_out_keys and parameter resets."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

from torch import nn

from tdnn._fastcall import PLAIN_CALLS, own_hookless
from tensordict import is_tensor_collection, unravel_key

DISCARD = "_"


class KeysTypeError(TypeError, ValueError):
    """``in_keys``/``out_keys`` that are not TensorDict keys: a ``TypeError``, and the
    ``ValueError`` upstream's ``TensorDictModule`` raises, so code catching either works."""


class NotCallableError(TypeError, ValueError):
    """A module that cannot be called: a ``TypeError``, and the ``ValueError`` upstream's
    ``TensorDictModule`` raises, so code catching either works."""


class OutputCountError(ValueError, RuntimeError):
    """A module returned more or fewer outputs than it has ``out_keys``: a ``ValueError``,
    and the ``RuntimeError`` upstream's ``TensorDictModule`` raises, so code catching
    either works."""


def unravel_keys(call: str, keys: Any, what: str) -> list[Any]:
    """``keys`` (one key, or an iterable of keys; a list inside is a nested key) as a
    list of unravelled keys."""
    if isinstance(keys, (str, tuple)):
        keys = [keys]
    try:
        return [unravel_key(tuple(k) if isinstance(k, list) else k) for k in keys]
    except (TypeError, ValueError) as err:
        raise KeysTypeError(
            f"{call}: {what} must be of type list, str or tuples of str (TensorDict keys): {err}"
        ) from None


def _class_keys_to_properties(cls: type) -> None:
    """Class attributes ``in_keys = [...]`` / ``out_keys = [...]`` of a subclass become
    the instance properties below (unravelled once, settable per instance)."""
    for name in ("in_keys", "out_keys"):
        value = cls.__dict__.get(name)
        if value is None or isinstance(value, property):
            continue
        keys = unravel_keys(cls.__name__, value, name)
        delattr(cls, name)
        setattr(cls, "_" + name, keys)
        if name == "out_keys":
            cls._out_keys_apparent = keys  # type: ignore[attr-defined]


class _SelectOut:
    """Forward hook of :meth:`TensorDictModuleBase.select_out_keys` for modules that do
    not select by themselves: drops what the module wrote and was not selected."""

    def __init__(self, selected: list[Any]) -> None:
        self.selected = selected

    def __call__(self, module: Any, args: Any, kwargs: Any, out: Any) -> Any:
        source = module.out_keys_source
        if is_tensor_collection(out):
            drop = [k for k in source if k not in self.selected and k not in module.in_keys]
            present = out.keys(True)
            for key in drop:
                if key in present:
                    del out[key]
            return out
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(source):
            return out
        kept = tuple(v for k, v in zip(source, outs, strict=True) if k in self.selected)
        return kept[0] if len(kept) == 1 else kept


class TensorDictModuleBase(nn.Module):
    """Base of TensorDict-in / TensorDict-out modules: declares ``in_keys``/``out_keys``.

    Keys given as class attributes or assigned later are unravelled
    (``("a", ("b",))`` reads as ``("a", "b")``).

    >>> import torch
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModuleBase
    >>> class AddOne(TensorDictModuleBase):
    ...     in_keys, out_keys = ["x"], [("y",)]
    ...
    ...     def forward(self, td):
    ...         return td.set("y", td["x"] + 1)
    >>> m = AddOne()
    >>> m.out_keys, m(TensorDict({"x": torch.zeros(2)}, [2]))["y"]
    (['y'], tensor([1., 1.]))
    """

    _in_keys: list[Any]
    _out_keys: list[Any]
    _out_keys_apparent: list[Any]

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        for klass in cls.__mro__:
            if klass is TensorDictModuleBase:
                break
            _class_keys_to_properties(klass)
        return super().__new__(cls)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # nn.Module.__call__ without its two frames where it would only call forward
        if own_hookless(self):
            return self.forward(*args, **kwargs)
        return nn.Module.__call__(self, *args, **kwargs)

    def _simple(self, tensordict: Any, plain: bool) -> Any:
        """``forward(tensordict)`` through a subclass's shortcut for its common case, or
        NotImplemented (nothing done) where it has none; ``plain``: whether
        :func:`tdnn._fastcall.plain_calls` holds, so the modules it calls may be called
        through their ``forward`` when :func:`tdnn._fastcall.hookless`."""
        return NotImplemented

    @staticmethod
    def is_tdmodule_compatible(module: Any) -> bool:
        """Whether ``module`` declares ``in_keys`` and ``out_keys``.

        >>> from torch import nn
        >>> from tensordict.nn import TensorDictModule, TensorDictModuleBase
        >>> TensorDictModuleBase.is_tdmodule_compatible(nn.Linear(2, 2))
        False
        """
        return hasattr(module, "in_keys") and hasattr(module, "out_keys")

    @property
    def in_keys(self) -> list[Any]:
        """The keys read (unravelled)."""
        return self._in_keys

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        self._in_keys = unravel_keys(type(self).__name__, value, "in_keys")

    @property
    def out_keys(self) -> list[Any]:
        """The keys written, as selected by :meth:`select_out_keys`."""
        return self._out_keys_apparent

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        # the keys written from now on, as upstream: a selection made before is dropped
        keys = unravel_keys(type(self).__name__, value, "out_keys")
        if "_out_keys" in self.__dict__:
            self._drop_selection()
        self._out_keys = keys
        self._out_keys_apparent = keys

    @property
    def out_keys_source(self) -> list[Any]:
        """Every key the module writes, whatever :meth:`select_out_keys` selected."""
        return self._out_keys

    def _select(self, selected: list[Any]) -> None:
        """Apply a selection (subclasses that select by themselves override this)."""
        self.reset_out_keys()
        self.register_forward_hook(_SelectOut(selected), with_kwargs=True)

    def select_out_keys(self, *out_keys: Any) -> Any:
        """Keep only ``out_keys`` in the output (the others are not written, or are
        removed once written); returns the module, changed in place. Keys of the
        input (``in_keys``) are never removed. :meth:`reset_out_keys` undoes it.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> m = TensorDictModule(lambda x: (x + 1, x + 2), ["x"], ["y", "z"])
        >>> sorted(m.select_out_keys("z")(TensorDict(x=torch.zeros(1))).keys())
        ['x', 'z']
        """
        call = f"{type(self).__name__}.select_out_keys"
        source = self.out_keys_source
        for key in out_keys:
            if isinstance(key, list) or unravel_key(key) not in source:
                hint = ""
                if isinstance(key, list) and all(k in source for k in key):
                    hint = f"; to select several keys, unpack them: select_out_keys(*{key})"
                raise ValueError(
                    f"{call}: Can't select non existent key {key!r}: out_keys are {source}{hint}"
                )
        selected = [unravel_key(k) for k in out_keys]
        self._select(selected)
        self._out_keys_apparent = selected
        return self

    def reset_out_keys(self) -> Any:
        """Undo :meth:`select_out_keys`: every key is written again. Returns the module.

        >>> from tensordict.nn import TensorDictModule
        >>> m = TensorDictModule(lambda x: (x, x), ["x"], ["y", "z"]).select_out_keys("y")
        >>> m.reset_out_keys().out_keys
        ['y', 'z']
        """
        self._drop_selection()
        self._out_keys_apparent = self._out_keys
        return self

    def _drop_selection(self) -> None:
        for handle, hook in list(self._forward_hooks.items()):
            if isinstance(hook, _SelectOut):
                del self._forward_hooks[handle]
                self._forward_hooks_with_kwargs.pop(handle, None)

    def reset_parameters_recursive(self, parameters: Any = None) -> Any:
        """Call ``reset_parameters()`` on every submodule that has one.

        Given ``parameters`` (a TensorDict from ``TensorDict.from_module(self)``, no
        batch dims), reset those instead: the module keeps its own, and the reset
        values (sharing storage with ``parameters``) are returned.

        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> m = TensorDictModule(nn.Linear(2, 2), ["x"], ["y"])
        >>> before = m.module.weight.detach().clone()
        >>> m.reset_parameters_recursive()
        >>> bool((m.module.weight != before).any())
        True
        """
        if parameters is None:
            if not _reset(self):
                warnings.warn(
                    "reset_parameters_recursive was called without the parameters argument "
                    "and did not find any parameters to reset",
                    UserWarning,
                    stacklevel=2,
                )
            return None
        if parameters.ndim:
            raise RuntimeError(
                f"{type(self).__name__}.reset_parameters_recursive: parameters have batch "
                f"dims {tuple(parameters.batch_size)}; pass one set of parameters "
                "(batch_size=[]) shaped like the module's"
            )
        fresh = parameters.apply(lambda x: x.detach().requires_grad_(x.requires_grad))
        with fresh.to_module(self, preserve_module_state=False):
            _reset(self)
        return fresh

    def __repr__(self) -> str:
        entries = [f"{name}={child}" for name, child in self.named_children()]
        entries += [f"in_keys={self.in_keys}", f"out_keys={self.out_keys}"]
        body = ",\n".join(entries).replace("\n", "\n    ")
        return f"{type(self).__name__}(\n    {body})"


PLAIN_CALLS.add(TensorDictModuleBase.__call__)


def _reset(module: nn.Module) -> bool:
    """Reset every submodule (each once) that has ``reset_parameters``; whether any did."""
    done = False
    seen: set[int] = set()
    for child in _descendants(module.children(), seen):
        if isinstance(child, TensorDictModuleBase):
            continue  # (its wrapped module is reached as its child)
        reset = getattr(child, "reset_parameters", None)
        if callable(reset):
            reset()
            done = True
    return done


def _descendants(children: Iterable[nn.Module], seen: set[int]) -> Iterable[nn.Module]:
    for child in children:
        if id(child) in seen:
            continue
        seen.add(id(child))
        yield from _descendants(child.children(), seen)
        yield child
