"""TensorDictModule: a torch module that reads its inputs from, and writes its outputs to,
a TensorDict."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import torch
from torch import Tensor, nn

from tdnn._base import (
    DISCARD,
    NotCallableError,
    OutputCountError,
    TensorDictModuleBase,
    unravel_keys,
)
from tdnn._fastcall import PLAIN_CALLS, hookless, own_hookless, plain_calls, put
from tdnn._settings import LOCAL, Setting
from tensordict import (
    CloudpickleWrapper,
    NestedKey,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    is_leaf_nontensor,
    is_tensor_collection,
    unravel_key,
)

# Set by tdnn.set_skip_existing(); a plain flag (not a contextvar) so that compiled code
# reads it without a graph break.
SKIP_EXISTING: list[Any] = [False]
SKIP = Setting(SKIP_EXISTING)


def skip_on() -> bool:
    """Whether ``set_skip_existing`` is on in the calling thread."""
    value = SKIP_EXISTING[0]
    return bool(value if value is not LOCAL else SKIP.get())


def tensor_inputs(
    call: str, in_keys: list[Any], first: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[Any, Any]:
    """Tensors given positionally (in in_keys order) or by keyword (a key, or a nested key
    joined with "_") as a ``{key: tensor}`` dict; None means "not given". Keywords that
    name no in_key are left in ``kwargs`` (extra arguments for the module)."""
    given = [first, *args]
    if len(given) > max(len(in_keys), 1):
        raise TypeError(f"{call}: {len(given)} inputs for in_keys {in_keys}")
    env = {k: v for k, v in zip(in_keys, given, strict=False) if v is not None}
    for name in list(kwargs):
        key = next((k for k in in_keys if (k if isinstance(k, str) else "_".join(k)) == name), None)
        if key is not None:
            if key in env:
                raise RuntimeError(f"{call}: Duplicated argument {name!r} in args and kwargs")
            env[key] = kwargs.pop(name)
    return env


def plain_value(value: Any) -> Any:
    """A non-tensor entry as the module sees it (its Python value; a list for a stack of
    them), as upstream does; anything else unchanged."""
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value


def deprecated_device(module: nn.Module, call: str) -> torch.device:
    """Upstream's deprecated ``device`` of a module: its first parameter's (cpu if none)."""
    warnings.warn(
        f"{call}.device is deprecated and will be removed in TensorDict 0.17; "
        "read the device of a parameter instead",
        DeprecationWarning,
        stacklevel=3,
    )
    for p in module.parameters():
        return p.device
    return torch.device("cpu")


def positional_out(call: str, args: tuple[Any, ...], tensordict_out: Any) -> Any:
    """The upstream spelling ``module(td, td_out)``: the one positional argument after the
    TensorDict is ``tensordict_out``; anything else is refused."""
    if len(args) > 1 or tensordict_out is not None or not is_tensor_collection(args[0]):
        raise TypeError(
            f"{call}: after the TensorDict, only a tensordict_out may be passed "
            f"positionally, got {len(args)} more arguments"
        )
    return args[0]


class TensorDictModule(TensorDictModuleBase):
    """Wrap ``module`` so it reads ``in_keys`` from a TensorDict and writes ``out_keys``.

    ``in_keys`` as a list feeds positional arguments; as a dict ``{argument_name: key}``
    (or ``{key: argument_name}`` with ``out_to_in_map=False``) feeds keyword arguments.
    An out key ``"_"`` discards that output. The module may return a tensor, a tuple,
    a dict or a TensorDict. Missing input keys are passed as None (``strict=True``
    refuses them up front); if the module then fails, the error names the missing keys.
    ``inplace=True`` writes into the input, ``False`` into a new TensorDict that holds
    only the outputs, ``"empty"`` into ``input.empty()`` (same type and batch size).
    ``get_kwargs`` go to ``TensorDict.get`` when the inputs are read, e.g.
    ``{"as_padded_tensor": True}`` to read a ragged entry of a lazy stack padded.

    >>> import torch
    >>> from torch import Tensor, nn
    >>> from tensordict import TensorDict
    >>> from tdnn import TensorDictModule
    >>> policy = TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"])
    >>> td = policy(TensorDict({"obs": torch.zeros(5, 3)}, [5]))
    >>> td["action"].shape
    torch.Size([5, 2])
    >>> policy(torch.zeros(1, 3)).shape     # plain tensors work too
    torch.Size([1, 2])
    """

    def __init__(
        self,
        module: Callable[..., Any],
        in_keys: Sequence[NestedKey] | Mapping[Any, Any] | NestedKey,
        out_keys: Sequence[NestedKey] | NestedKey,
        *,
        inplace: bool | str = True,
        out_to_in_map: bool | None = None,
        method: str | None = None,
        method_kwargs: dict[str, Any] | None = None,
        strict: bool = False,
        get_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        call = "TensorDictModule"
        if isinstance(in_keys, Mapping):
            # upstream's default (None) reads the dict as {argument: key}, as True does
            inverted = out_to_in_map is None or out_to_in_map
            pairs = [(v, k) for k, v in in_keys.items()] if inverted else list(in_keys.items())
            # the argument names, one per in_key (two arguments may read one key)
            self._kwargs: list[str] | None = [str(v) for _, v in pairs]
            self.in_keys = [unravel_keys(call, k, "in_keys")[0] for k, _ in pairs]
        else:
            if out_to_in_map is not None:
                warnings.warn(
                    "out_to_in_map is not None but is only used when in_key is a dictionary.",
                    UserWarning,
                    stacklevel=2,
                )
            self._kwargs = None
            self.in_keys = unravel_keys(call, in_keys, "in_keys")
        self.out_keys = (
            unravel_keys(call, out_keys, "out_keys") if out_keys != DISCARD else [DISCARD]
        )
        if DISCARD in self._in_keys:
            warnings.warn(
                f'{call}: in key "_" reads an entry named "_"; as an out key "_" discards '
                "that output, so it is likely a mistake here",
                UserWarning,
                stacklevel=2,
            )
        if inplace not in (True, False, "empty"):
            raise ValueError(f"{call}: inplace must be True, False or 'empty', got {inplace!r}")
        if type(module) is type or (method is None and not callable(module)):
            # a class (nn.Linear for nn.Linear(3, 4)) would be built by the first call
            raise NotCallableError(
                f"{call}: Module {module!r} is not callable as a module; pass a callable such "
                "as an nn.Module instance"
                + (" (this is a class: instantiate it)" if type(module) is type else "")
            )
        self.inplace = inplace
        self.method = method
        self.method_kwargs = dict(method_kwargs or {})
        self.strict = strict
        self._get_kwargs = dict(get_kwargs or {})  # TensorDict.get options for the inputs
        if isinstance(module, nn.Module):
            self.module = module
        else:
            self.__dict__["module"] = module  # a plain callable: an attribute, not a child

    def __getstate__(self) -> dict[str, Any]:
        # a plain callable (a lambda, a closure) travels by value through cloudpickle, so
        # the module pickles whatever it wraps, as upstream's does
        state: dict[str, Any] = super().__getstate__()  # type: ignore[no-untyped-call]
        if "module" in state:
            state = {**state, "module": CloudpickleWrapper(state["module"])}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        module = state.get("module")
        if isinstance(module, CloudpickleWrapper):
            state = {**state, "module": module.fn}
        super().__setstate__(state)  # type: ignore[no-untyped-call]

    def _base(self) -> Any:
        base = self._modules.get("module")
        return self.__dict__["module"] if base is None else base

    def _target(self) -> Callable[..., Any]:
        base: Callable[..., Any] = self._base()
        return getattr(base, self.method) if self.method else base

    def _name(self) -> str:
        base = self._base()
        return (
            type(base).__name__ if isinstance(base, nn.Module) else getattr(base, "__name__", "fn")
        )

    def _select(self, selected: list[Any]) -> None:
        self.reset_out_keys()  # forward writes only the selected keys: no hook needed

    @property
    def is_functional(self) -> bool:
        """False: modules here hold their parameters (swap them with ``to_module``).
        Deprecated, as upstream.

        >>> import warnings
        >>> from tensordict.nn import TensorDictModule
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     TensorDictModule(lambda x: x, ["x"], ["y"]).is_functional
        False
        """
        warnings.warn(
            "TensorDictModule.is_functional is deprecated and will be removed in TensorDict 0.17",
            DeprecationWarning,
            stacklevel=2,
        )
        return False

    @property
    def device(self) -> torch.device:
        """The device of the first parameter (cpu if none). Deprecated upstream.

        >>> import warnings
        >>> from torch import nn
        >>> from tensordict.nn import TensorDictModule
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     TensorDictModule(nn.Linear(2, 2), ["x"], ["y"]).device
        device(type='cpu')
        """
        return deprecated_device(self, "TensorDictModule")

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("__") or name in ("module", "_modules"):
                raise
            base = self.__dict__.get("module", self.__dict__["_modules"].get("module"))
            if base is None:
                raise
            return getattr(base, name)

    def __repr__(self) -> str:
        text = super().__repr__()
        base = self.__dict__.get("module")
        if base is None:
            return text
        head, _, rest = text.partition("\n")
        return f"{head}\n    module={base},\n{rest}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # nn.Module.__call__ without its two frames where it would only call forward
        if own_hookless(self):
            if len(args) == 1 and not kwargs and isinstance(args[0], TensorDict):
                result = self._simple(args[0], True)
                if result is not NotImplemented:
                    return result
            return self.forward(*args, **kwargs)
        return nn.Module.__call__(self, *args, **kwargs)

    def _simple(self, tensordict: Any, plain: bool) -> Any:
        # the common case: a module reads one tensor, its output goes back into the input
        in_keys = self._in_keys
        module = self._modules.get("module")
        if (
            SKIP_EXISTING[0]
            or module is None
            or len(in_keys) != 1
            or self._kwargs is not None
            or self.method is not None
            or self.method_kwargs
            or self._get_kwargs
            or self.inplace is not True
            or not isinstance(value := tensordict.get(in_keys[0], None), Tensor)
        ):
            return NotImplemented
        out = module.forward(value) if plain and hookless(module) else module(value)
        out_keys = self._out_keys
        if isinstance(out, Tensor) and len(out_keys) == 1:
            if out_keys[0] != DISCARD:
                put(tensordict, out_keys[0], out)
            return tensordict
        if type(out) is tuple and len(out) == len(out_keys) and self._out_keys_apparent is out_keys:
            for key, item in zip(out_keys, out, strict=True):
                if key != DISCARD:
                    put(tensordict, key, item)
            return tensordict
        return self._write(tensordict, None, out)

    def forward(
        self, tensordict: Any = None, *args: Any, tensordict_out: Any = None, **kwargs: Any
    ) -> Any:
        if (
            not args
            and not kwargs
            and tensordict_out is None
            and isinstance(tensordict, TensorDict)
        ):
            result = self._simple(tensordict, plain_calls())
            if result is not NotImplemented:
                return result
        if not isinstance(tensordict, TensorDict) and not is_tensor_collection(tensordict):
            if tensordict is None and "tensordict" in kwargs:
                return self.forward(kwargs.pop("tensordict"), *args, **kwargs)
            return self._dispatch(tensordict, *args, **kwargs)
        if args:
            tensordict_out = positional_out(
                f"TensorDictModule({self._name()})", args, tensordict_out
            )
        if SKIP_EXISTING[0] and skip_on() and self._skippable(tensordict):
            return tensordict if tensordict_out is None else tensordict_out.update(tensordict)
        in_keys = self._in_keys
        module = self._modules.get("module")
        if (  # the common case: a module called with the one tensor it reads
            module is not None
            and len(in_keys) == 1
            and self._kwargs is None
            and self.method is None
            and not self.method_kwargs
            and not self._get_kwargs
            and isinstance(value := tensordict.get(in_keys[0], None), Tensor)
        ):
            out = module(value, **kwargs)
        else:
            get_kwargs = self._get_kwargs
            out = self._run(
                (lambda k, d: tensordict.get(k, d, **get_kwargs)) if get_kwargs else tensordict.get,
                lambda: tensordict.keys(True, True, is_leaf=is_leaf_nontensor),
                kwargs,
            )
        return self._write(tensordict, tensordict_out, out)

    def _write(self, tensordict: Any, tensordict_out: Any, out: Any) -> Any:
        """Write the module's output ``out`` as ``forward`` does; return the result."""
        out_keys = self._out_keys
        if tensordict_out is None and self.inplace is True:
            if isinstance(out, Tensor) and len(out_keys) == 1:  # one tensor back into the input
                if out_keys[0] != DISCARD:
                    tensordict.set(out_keys[0], out)
                return tensordict
            tensordict_out = tensordict
        elif tensordict_out is None:
            empty = self.inplace == "empty"
            tensordict_out = tensordict.empty() if empty else TensorDict()
        selected = self._out_keys_apparent
        for key, value in zip(*self._outputs(out), strict=True):
            if selected is out_keys or key in selected:
                tensordict_out.set(key, value)
        return tensordict_out

    def _skippable(self, tensordict: Any) -> bool:
        """Under ``set_skip_existing(True)``: every out key (those ``select_out_keys``
        kept, as upstream) is present already (and none is also read, so a key updated in
        place is still computed)."""
        present = tensordict.keys(True)
        out_keys = [k for k in self._out_keys_apparent if k != DISCARD]
        return all(k in present for k in out_keys) and not any(k in out_keys for k in self._in_keys)

    def _run(
        self,
        get: Callable[[Any, Any], Any],
        available: Callable[[], Any],
        extra: dict[str, Any] | None = None,
    ) -> Any:
        """Read the in_keys through ``get``, call the module (with the caller's ``extra``
        keyword arguments, updated with ``method_kwargs`` as upstream does), return what it
        returned."""
        extra = {**(extra or {}), **self.method_kwargs} if self.method_kwargs else (extra or {})
        in_keys = self._in_keys
        values = [plain_value(get(key, None)) for key in in_keys]
        missing = [k for k, v in zip(in_keys, values, strict=True) if v is None]
        if missing and self.strict:
            raise KeyError(self._missing_message(missing, available()))
        try:
            if self._kwargs is not None:
                named = dict(zip(self._kwargs, values, strict=True))
                return self._target()(**named, **extra)
            return self._target()(*values, **extra)
        except Exception as err:
            if missing and "unexpected keyword" not in str(err):
                # the module choked on None inputs: say which keys were absent
                raise KeyError(self._missing_message(missing, available())) from err
            raise

    def _missing_message(self, missing: list[Any], available: Any) -> str:
        have = ", ".join(sorted(map(str, available)))
        return (
            f"TensorDictModule({self._name()}): input keys {missing} are missing from the "
            f"inputs, which have {have}. Some tensors that are necessary for the module call "
            "may not have not been found in the input tensordict"  # upstream's words
        )

    def _outputs(self, out: Any) -> tuple[list[Any], list[Any]]:
        """The (out key, value) pairs of a module result, ``"_"`` outputs dropped."""
        out_keys = self._out_keys
        keys = [k for k in out_keys if k != DISCARD]
        if is_tensor_collection(out):
            if all(k in out for k in keys):
                return keys, [out.get(k) for k in keys]
            # not keyed by the out_keys: one output (a TensorDict written whole), as upstream
        elif isinstance(out, Mapping):
            by_key = {unravel_key(k): v for k, v in out.items()}
            if all(k in by_key for k in keys):
                return keys, [by_key[k] for k in keys]
        if out is None:
            if not out_keys:  # a module run for its side effects: nothing to write
                return keys, []
            if keys:  # a forgotten ``return``, as upstream refuses it
                raise RuntimeError(
                    f"TensorDictModule({self._name()}): the module returned None for out_keys "
                    f"{out_keys}"
                )
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) != len(out_keys) and isinstance(out, torch.fx.Proxy):
            # torch.fx tracing: a traced tuple is one proxy, indexed for each out key
            outs = tuple(cast(Any, out)[i] for i in range(len(out_keys)))
        if len(outs) != len(out_keys):
            lacking = ""
            if isinstance(out, Mapping) or is_tensor_collection(out):
                have = (
                    list(out.keys(True))
                    if is_tensor_collection(out)
                    else [unravel_key(k) for k in out]
                )
                lacking = f" (a {type(out).__name__} without {[k for k in keys if k not in have]})"
            raise OutputCountError(
                f"TensorDictModule({self._name()}): the module returned {len(outs)} outputs"
                f"{lacking} for {len(out_keys)} out_keys {out_keys}"
            )
        return keys, [v for k, v in zip(out_keys, outs, strict=True) if k != DISCARD]

    def _dispatch(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        """Called with tensors: read them as the in_keys, return the outputs (no TensorDict
        is built, so ``torch.fx`` traces this path)."""
        env = tensor_inputs(f"TensorDictModule({self._name()})", self._in_keys, first, args, kwargs)
        keys, results = self._outputs(self._run(env.get, env.keys, kwargs))
        selected = self._out_keys_apparent
        if selected is not self._out_keys:  # in the order out_keys lists them, as upstream
            by_key = dict(zip(keys, results, strict=True))
            results = [by_key[k] for k in selected if k in by_key]
        return results[0] if len(results) == 1 else tuple(results)


PLAIN_CALLS.add(TensorDictModule.__call__)
