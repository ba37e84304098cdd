"""The one place that touches torch's private APIs (``torch._foreach_*``, ``torch._C._nn``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch

# The multi-tensor kernels, found once: code traced by torch.compile then reads this dict,
# not the torch module, which the traced user code reaches by its own name (one object
# reached by two paths costs an aliasing guard, checked in Python on every compiled call).
_FOREACH: dict[str, Callable[..., Any]] = {
    name[len("_foreach_") :]: getattr(torch, name)
    for name in dir(torch)
    if name.startswith("_foreach_")
}


def foreach(name: str) -> Callable[..., Any] | None:
    """The multi-tensor kernel ``torch._foreach_<name>``, or None where torch lacks it."""
    return _FOREACH.get(name)


def register_pytree_node(
    cls: type,
    flatten: Callable[[Any], tuple[list[Any], Any]],
    unflatten: Callable[[Any, Any], Any],
    flatten_with_keys: Callable[[Any], tuple[list[tuple[Any, Any]], Any]],
    name: str,
) -> None:
    """Teach ``torch.utils._pytree`` (vmap, torch.func, compile) to open ``cls``."""
    from torch.utils import _pytree

    if cls in _pytree.SUPPORTED_NODES:
        return
    _pytree.register_pytree_node(
        cls,
        flatten,
        unflatten,
        serialized_type_name=name,
        flatten_with_keys_fn=flatten_with_keys,
    )


def mapping_key(key: str) -> Any:
    """The pytree path entry for a mapping key."""
    from torch.utils import _pytree

    return _pytree.MappingKey(key)


def sequence_key(index: int) -> Any:
    """The pytree path entry for a sequence position."""
    from torch.utils import _pytree

    return _pytree.SequenceKey(index)


# The ``__torch_function__`` of a tensor subclass whose ops dispatch as on a plain tensor.
disabled_torch_function: Any = torch._C._disabled_torch_function_impl


def disable_subclass_dispatch() -> Any:
    """A context in which tensor-subclass ``__torch_function__`` overrides are skipped."""
    return torch._C.DisableTorchFunctionSubclass()


def is_higher_order_op(func: object) -> bool:
    """Whether ``func`` is one of torch's higher-order operators (``invoke_subgraph``,
    ``cond``, ...), which take a TensorDict argument as a pytree, not as an operand."""
    return isinstance(func, torch._ops.HigherOrderOperator)


def flatten_dense(tensors: list[torch.Tensor]) -> torch.Tensor:
    """One contiguous 1-D copy of ``tensors`` (same dtype) in order, built in one C++ call."""
    return torch._C._nn.flatten_dense_tensors(tensors)


def is_batched(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a functorch batched tensor (seen inside ``vmap``)."""
    return bool(torch._C._functorch.is_batchedtensor(tensor))


# The same test as one C call, for hot loops (to_module's swap runs it once per leaf).
functorch_wrapped: Callable[[torch.Tensor], bool] = torch._C._functorch.is_functorch_wrapped_tensor


def is_functorch_wrapped(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a functorch (vmap/grad) wrapper, whose ``requires_grad`` does
    not report the autograd state of the tensor it wraps."""
    return bool(torch._C._functorch.is_functorch_wrapped_tensor(tensor))


_VMAP_OUT = threading.local()


def unwrapping_vmap_outputs() -> bool:
    """Whether vmap is now putting the mapped dim back into its outputs (the leaves a
    pytree node is rebuilt from then gained that dim)."""
    return getattr(_VMAP_OUT, "depth", 0) > 0


def let_vmap_take_one_out_dim(
    is_collection: Callable[[Any], bool],
    finish: Callable[[Any, Any, Any], Any] | None = None,
    unbatch: Callable[[Any, Any, int, int], Any] | None = None,
) -> None:
    """Let ``vmap(f, ..., out_dims=(d,))`` return one TensorDict, as it already lets
    ``f`` return one tensor: torch special-cases a tensor output only, and a TensorDict
    opens into a pytree that ``(d,)`` does not match. ``finish(inside, outside, out_dims)``
    then sees each collection output before and after the mapped dim is put back (to
    carry what the leaves cannot, such as dim names). ``unbatch(output, out_dims, level,
    size)`` may put the mapped dim back into a collection output whole (None: it goes
    through pytree). Idempotent."""
    from torch._functorch import vmap as _vmap

    original = _vmap._unwrap_batched
    if getattr(original, "_tensordict_one_out_dim", False):
        return

    def unwrap_batched(
        batched_outputs: Any,
        out_dims: int | tuple[int, ...] | None,
        vmap_level: int,
        batch_size: int,
        func: Callable[..., Any],
    ) -> tuple[Any, ...]:
        _VMAP_OUT.depth = getattr(_VMAP_OUT, "depth", 0) + 1
        try:
            if not is_collection(batched_outputs):
                return original(batched_outputs, out_dims, vmap_level, batch_size, func)
            if isinstance(out_dims, tuple) and len(out_dims) == 1:
                out_dims = out_dims[0]
            out = None
            if unbatch is not None:
                out = unbatch(batched_outputs, out_dims, vmap_level, batch_size)
            if out is None:
                out = original(batched_outputs, out_dims, vmap_level, batch_size, func)
            return out if finish is None else finish(batched_outputs, out, out_dims)
        finally:
            _VMAP_OUT.depth -= 1

    unwrap_batched._tensordict_one_out_dim = True  # type: ignore[attr-defined]
    _vmap._unwrap_batched = unwrap_batched


def batch_dim_steps() -> tuple[
    Callable[[torch.Tensor, int, int], torch.Tensor],
    Callable[[torch.Tensor, int, int, int], torch.Tensor],
]:
    """vmap's own steps that make a tensor batched at a vmap level, ``(tensor, dim,
    level)``, and put the mapped dim back, ``(tensor, level, size, dim)`` (an unbatched
    tensor is expanded): torch's C functions, or under ``torch.compile`` the wrappers
    dynamo traces."""
    if torch.compiler.is_compiling():
        from torch._functorch import predispatch

        return predispatch._add_batch_dim, predispatch._remove_batch_dim
    return torch._C._functorch._add_batch_dim, torch._C._functorch._remove_batch_dim


def let_vmap_take_whole(
    prepare: Callable[[Any, Any], tuple[torch.Tensor | None, Any, Any]],
    batch: Callable[[Any, int, int], Any],
) -> None:
    """Let ``vmap`` batch some top-level arguments whole, where it would open them into a
    pytree and batch their leaves one by one (then rebuild every level). For each
    argument and its ``in_dim``, ``prepare`` gives a tensor of its batch shape (vmap
    checks the ``in_dim`` and the mapped size on it) or None (the argument goes through
    pytree), the ``in_dim`` to use, and what to batch in the argument's place;
    ``batch(that, dim, level)`` then batches it. Idempotent."""
    from torch._functorch import vmap as _vmap
    from torch.utils._pytree import tree_unflatten

    process, create = _vmap._process_batched_inputs, _vmap._create_batched_inputs
    if getattr(process, "_tensordict_whole", False):
        return

    def process_batched_inputs(in_dims: Any, args: Any, func: Callable[..., Any]) -> Any:
        if type(args) is not tuple:
            return process(in_dims, args, func)
        if type(in_dims) is int:
            dims: tuple[Any, ...] = (in_dims,) * len(args)
        elif type(in_dims) is tuple and len(in_dims) == len(args):
            dims = in_dims
        else:
            return process(in_dims, args, func)
        wholes: list[tuple[torch.Tensor, Any]] = []  # (stand-in, the argument)
        standing = list(args)
        new_dims = list(dims)
        for i, (arg, dim) in enumerate(zip(args, dims, strict=True)):
            tensor, new_dims[i], whole = prepare(arg, dim)
            if tensor is not None:
                standing[i] = tensor
                wholes.append((tensor, whole))
        if new_dims != list(dims):
            in_dims = tuple(new_dims)
        if not wholes:
            return process(in_dims, args, func)
        size, flat_dims, flat_args, spec = process(in_dims, tuple(standing), func)
        for i, a in enumerate(flat_args):  # the arguments back in place of their stand-ins
            for tensor, arg in wholes:
                if a is tensor:
                    flat_args[i] = arg
        return size, flat_dims, flat_args, spec

    def create_batched_inputs(
        flat_in_dims: list[int | None], flat_args: list[Any], vmap_level: int, args_spec: Any
    ) -> tuple[Any, ...]:
        pairs = list(zip(flat_in_dims, flat_args, strict=True))
        if all(d is None or isinstance(a, torch.Tensor) for d, a in pairs):
            return create(flat_in_dims, flat_args, vmap_level, args_spec)
        add = batch_dim_steps()[0]
        batched = [
            a
            if d is None
            else add(a, d, vmap_level)
            if isinstance(a, torch.Tensor)
            else batch(a, d, vmap_level)
            for d, a in pairs
        ]
        out: tuple[Any, ...] = tree_unflatten(batched, args_spec)
        return out

    process_batched_inputs._tensordict_whole = True  # type: ignore[attr-defined]
    _vmap._process_batched_inputs = process_batched_inputs
    _vmap._create_batched_inputs = create_batched_inputs


# ``Tensor.split`` with a list of sizes, without the Python wrapper ``Tensor.split`` adds.
split_with_sizes: Callable[..., tuple[torch.Tensor, ...]] = torch._C.TensorBase.split_with_sizes


def new_shared_storage(nbytes: int) -> torch.UntypedStorage:
    """A new storage of ``nbytes`` in shared memory (made there, not copied there), by
    the sharing strategy of ``torch.multiprocessing``."""
    storage: torch.UntypedStorage = torch.UntypedStorage._new_shared(nbytes)  # type: ignore[no-untyped-call]
    return storage


def batched_dim(tensor: torch.Tensor) -> int | None:
    """The dim ``vmap`` maps over in the tensor a batched ``tensor`` wraps (None if it is
    not batched)."""
    if not is_batched(tensor):
        return None
    dim = torch._C._functorch.maybe_get_bdim(tensor)
    return None if dim is None or dim < 0 else int(dim)


def nested_view_from_buffer(flat: torch.Tensor, shapes: torch.Tensor) -> torch.Tensor:
    """A strided nested tensor of element ``shapes`` (one row each, C-contiguous, end to
    end) over the 1-D tensor ``flat``, sharing its memory. torch counts the elements'
    offsets from the storage's start, so ``flat``'s own offset is added."""
    strides, offsets = torch._nested_compute_contiguous_strides_offsets(shapes)
    start = int(flat.storage_offset())
    if start:
        offsets = offsets + start
    return torch._nested_view_from_buffer(flat, shapes, strides, offsets)


def ragged_dim(tensor: torch.Tensor) -> int:
    """The ragged dim of a jagged nested ``tensor`` (1 unless built with ``jagged_dim``)."""
    return int(tensor._ragged_idx)  # type: ignore[attr-defined]


def forget_seqlens(tensor: torch.Tensor) -> None:
    """Drop the min/max sequence lengths a jagged nested ``tensor`` caches once computed
    (stale after its offsets or lengths are overwritten in place)."""
    cache = getattr(tensor, "_metadata_cache", None)
    if cache:
        cache.pop("max_seqlen", None)
        cache.pop("min_seqlen", None)


def nested_sizes(tensor: torch.Tensor) -> torch.Tensor:
    """The element shapes of a strided nested ``tensor``: one row per element."""
    return tensor._nested_tensor_size()


def is_packed_nested(tensor: torch.Tensor) -> bool:
    """Whether the strided nested ``tensor`` lays its elements end to end, C-contiguous,
    from the start of its storage (as :func:`nested_view_from_buffer` of a buffer at
    offset 0 makes them): then its element shapes and storage say everything."""
    sizes = tensor._nested_tensor_size()
    strides, offsets = torch._nested_compute_contiguous_strides_offsets(sizes)
    return bool(
        torch.equal(tensor._nested_tensor_strides(), strides)
        and torch.equal(tensor._nested_tensor_storage_offsets(), offsets)
    )


def compile_disabled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compiler.disable(fn)`` without importing ``torch._dynamo`` now (about 1.2 s
    of ``import tensordict``): torch's own lazy spelling imports it on the first call,
    which under ``torch.compile`` has already happened."""
    lazy = getattr(torch, "_disable_dynamo", None)
    if lazy is None:  # (a torch without it: the eager import)
        return torch.compiler.disable(fn)  # type: ignore[no-untyped-call,no-any-return]
    return lazy(fn)  # type: ignore[no-any-return]


def fake_mode_active() -> bool:
    """Whether a ``FakeTensorMode`` is active: tensors made now are fake (no data)."""
    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None
