"""Tables: pandas, Arrow, Parquet, CSV, JSON and numpy structured arrays, one row per element."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from tensordict._io_common import require, write_atomically
from tensordict._nontensor import NonTensorData, NonTensorStack, is_non_tensor
from tensordict._structure import StructureOps

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

_NUMERIC_KINDS = frozenset("iufbc")


# ------------------------------------------------------------------ columns -> TensorDict


def _column(call: str, name: str, values: Any, dtype: torch.dtype | None) -> Any:
    """One column as a tensor (numeric and bool), or a NonTensorStack (anything else)."""
    if isinstance(values, np.ndarray) and values.dtype.kind == "M":
        values = values.astype("datetime64[ns]").astype(np.int64)
    if isinstance(values, np.ndarray) and values.dtype.kind in _NUMERIC_KINDS:
        tensor = torch.from_numpy(np.array(values, copy=True))
        return tensor if dtype is None or tensor.dtype == torch.bool else tensor.to(dtype)
    if isinstance(values, _Ragged) and values:  # rows of different lengths: jagged
        rows = [torch.from_numpy(row) for row in values]
        nested = torch.nested.as_nested_tensor(rows, layout=torch.jagged)
        return nested if dtype is None or nested.dtype == torch.bool else nested.to(dtype)
    items = values.tolist() if isinstance(values, np.ndarray) else list(values)
    try:  # lists of one length per level: extra batch dims, as a nested list reads
        return NonTensorStack.from_list(items)
    except ValueError:  # lists of different lengths: one value (a list) per row
        return NonTensorStack._from_list(items, ndim=1)


def _nest(call: str, flat: dict[str, Any], separator: str | None) -> dict[str, Any]:
    if separator is None:
        return flat
    tree: dict[str, Any] = {}
    for name, value in flat.items():
        parts = name.split(separator)
        node = tree
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(
                    f"{call}: column {name!r} nests under column {part!r}, which is a leaf"
                )
            node = child
        if parts[-1] in node:
            raise ValueError(f"{call}: column {name!r} is both a leaf and a prefix")
        node[parts[-1]] = value
    return tree


def build(
    call: str,
    columns: dict[str, Any],
    num_rows: int,
    *,
    separator: str | None = None,
    dtype: torch.dtype | None = None,
    device: Any = None,
    batch_size: Any = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
) -> TensorDictBase:
    """A TensorDict with one entry per column (nested on ``separator``), batch = rows."""
    from tensordict._td import TensorDict  # the concrete class sits above this module

    if auto_batch_size and batch_size is not None:
        raise TypeError(f"{call}: pass batch_size or auto_batch_size=True, not both")
    flat = {str(k): _column(call, str(k), v, dtype) for k, v in columns.items()}
    tree = _nest(call, flat, separator)
    td = TensorDict(tree, batch_size=[num_rows] if batch_size is None else batch_size)
    if auto_batch_size:
        entries: dict[Any, Any] = td.to_dict()
        td = TensorDict.from_dict(entries, batch_dims=batch_dims, auto_batch_size=True)
    return td if device is None else td.to(device)


def _struct_leaf(column: Any) -> Any:
    """An Arrow array as numpy (numbers, tensors) or a dict (struct) or a list (others)."""
    pa = require("pyarrow", "arrow", "from_arrow")
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if isinstance(kind, pa.FixedShapeTensorType):
        if len(column) == 0:
            dtype = kind.value_type.to_pandas_dtype()
            return np.zeros((0, *kind.shape), dtype=dtype)
        return column.to_numpy_ndarray()
    if pa.types.is_fixed_size_list(kind):  # nested fixed-size lists: an N-d tensor column
        sizes: list[int] = []
        values = column
        while pa.types.is_fixed_size_list(values.type):
            sizes.append(values.type.list_size)
            values = values.flatten()
        if values.null_count == 0 and (
            pa.types.is_integer(values.type)
            or pa.types.is_floating(values.type)
            or pa.types.is_boolean(values.type)
        ):
            flat = values.to_numpy(zero_copy_only=False)
            return flat.reshape(len(column), *sizes)
        return column.to_pylist()
    if pa.types.is_struct(kind):
        return {kind.field(i).name: _struct_leaf(column.field(i)) for i in range(kind.num_fields)}
    if (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_timestamp(kind)
    ) and column.null_count == 0:
        return column.to_numpy(zero_copy_only=False)
    if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and column.null_count == 0:
        inner = kind.value_type
        numeric = pa.types.is_integer(inner) or pa.types.is_floating(inner)
        if (numeric or pa.types.is_boolean(inner)) and column.flatten().null_count == 0:
            dtype = inner.to_pandas_dtype()  # rows of numbers of any length: ragged
            return _Ragged(np.asarray(row, dtype=dtype) for row in column.to_pylist())
    return column.to_pylist()


class _Ragged(list):  # type: ignore[type-arg]
    """The rows of a variable-length list column, one numpy array each: a jagged leaf."""


def _flat_columns(prefix: str, node: dict[str, Any], out: dict[str, Any], sep: str) -> None:
    for name, value in node.items():
        if isinstance(value, dict):
            _flat_columns(f"{prefix}{name}{sep}", value, out, sep)
        else:
            out[f"{prefix}{name}"] = value


def from_table(
    call: str, table: Any, *, separator: str | None = None, **kwargs: Any
) -> TensorDictBase:
    """A TensorDict of an Arrow table or record batch (struct columns become nested)."""
    columns = {name: _struct_leaf(table.column(name)) for name in table.column_names}
    flat: dict[str, Any] = {}
    sep = "\x00"  # struct children nest on a separator no column name holds
    _flat_columns("", columns, flat, sep)
    if separator is not None:
        flat = {name.replace(separator, sep): value for name, value in flat.items()}
    return build(call, flat, table.num_rows, separator=sep, **kwargs)


# ------------------------------------------------------------------ TensorDict -> columns


def _numpy(call: str, name: str, tensor: Tensor) -> np.ndarray:
    if tensor.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        raise TypeError(
            f"{call}: entry {name!r} has dtype {tensor.dtype}, which numpy cannot hold; "
            "cast it first (for example td.float())"
        )
    return tensor.detach().cpu().numpy()


def _rows(call: str, td: Any) -> int:
    if td.batch_dims != 1:
        raise ValueError(
            f"{call}: a table needs a batch size of one dimension (the rows), got "
            f"{tuple(td.batch_size)}; call td.reshape(-1) first"
        )
    return int(td.batch_size[0])


def _values(value: Any, rows: int) -> list[Any]:
    if isinstance(value, NonTensorStack):
        return list(value.tolist())
    return [value.data] * rows


def columns_of(call: str, td: Any, separator: str | None, *, nd: bool = False) -> dict[str, Any]:
    """Flat ``column -> numpy array or list``; ``nd`` keeps multi-dim tensors (as arrays)."""
    rows = _rows(call, td)
    out: dict[str, Any] = {}

    def walk(node: Any, where: str) -> None:
        for key, value in node.items():
            name = f"{where}{key}"
            if isinstance(value, Tensor):
                if value.ndim > 1 and not nd:
                    raise ValueError(
                        f"{call}: entry {name!r} has shape {tuple(value.shape)}; a column "
                        "holds one value per row (use to_arrow or to_parquet for tensors)"
                    )
                out[name] = _numpy(call, name, value)
            elif is_non_tensor(value):
                out[name] = _values(value, rows)
            elif separator is None:
                raise ValueError(
                    f"{call}: entry {name!r} is a nested TensorDict; pass separator='.' to "
                    "flatten it into columns"
                )
            else:
                walk(value, name + separator)

    walk(td, "")
    return out


def to_dataframe(call: str, td: Any, separator: str | None) -> Any:
    """A pandas DataFrame of ``td`` (one column per leaf)."""
    pd = require("pandas", "pandas", call)
    return pd.DataFrame(columns_of(call, td, separator))


def from_dataframe(call: str, frame: Any, **kwargs: Any) -> TensorDictBase:
    """A TensorDict of a pandas DataFrame (categoricals become their codes)."""
    columns: dict[str, Any] = {}
    for name in frame.columns:
        series = frame[name]
        if str(series.dtype) == "category":
            columns[str(name)] = series.cat.codes.to_numpy()
        else:
            columns[str(name)] = series.to_numpy()
    return build(call, columns, len(frame), **kwargs)


def _arrow_array(call: str, name: str, value: Any, rows: int) -> Any:
    pa = require("pyarrow", "arrow", call)
    if isinstance(value, Tensor):
        array = np.ascontiguousarray(_numpy(call, name, value))
        if array.ndim > 1:
            inner = array.shape[1:]
            values = pa.array(array.reshape(-1))
            if 0 in inner:
                raise ValueError(
                    f"{call}: entry {name!r} has shape {tuple(value.shape)}; Arrow cannot store "
                    "rows of zero size"
                )
            if array.dtype == np.bool_:  # not a fixed_shape_tensor value type: nested lists
                for size in reversed(inner):
                    values = pa.FixedSizeListArray.from_arrays(values, size)
                return values
            storage = pa.FixedSizeListArray.from_arrays(values, math.prod(inner))
            kind = pa.fixed_shape_tensor(values.type, list(inner))
            return pa.ExtensionArray.from_storage(kind, storage)
        return pa.array(array)
    if is_non_tensor(value):
        return pa.array(_values(value, rows))
    children = {k: _arrow_array(call, f"{name}.{k}", v, rows) for k, v in value.items()}
    if not children:
        return pa.nulls(rows, pa.struct([]))
    return pa.StructArray.from_arrays(list(children.values()), names=list(children))


def to_table(call: str, td: Any, separator: str | None = None) -> Any:
    """An Arrow table: N-d tensors as fixed_shape_tensor columns, nested TensorDicts as
    struct columns (or flat columns joined with ``separator``)."""
    pa = require("pyarrow", "arrow", call)
    rows = _rows(call, td)
    # (StructureOps' own flatten_keys: a tensorclass's refuses keys that are not fields,
    # and these only name columns)
    source = td if separator is None else StructureOps.flatten_keys(td, separator)
    arrays = {str(k): _arrow_array(call, str(k), v, rows) for k, v in source.items()}
    return pa.table(arrays) if arrays else pa.table({})


def write_with(path: str | os.PathLike[str], write: Callable[[str], Any]) -> None:
    """Atomic write of a table file."""
    write_atomically(path, write)


# ------------------------------------------------------------------ structured arrays


def _np_dtype(call: str, name: str, value: Any, ndim: int) -> Any:
    if isinstance(value, Tensor):
        base = _numpy(call, name, value[(0,) * ndim] if value.numel() else value).dtype
        inner = tuple(value.shape[ndim:])
        return (base, inner) if inner else base
    if is_non_tensor(value):
        items = np.asarray(value.tolist() if isinstance(value, NonTensorStack) else [value.data])
        if items.dtype.kind not in "US":
            raise TypeError(
                f"{call}: non-tensor entry {name!r} holds {items.dtype} values; a structured "
                "array holds numbers and strings"
            )
        width = max(items.dtype.itemsize // np.dtype(items.dtype.kind + "1").itemsize, 10)
        return f"{items.dtype.kind}{width}"  # at least 10 characters, as upstream
    return np.dtype([(str(k), _np_dtype(call, f"{name}.{k}", v, ndim)) for k, v in value.items()])


def _fill(call: str, out: np.ndarray, value: Any, shape: tuple[int, ...]) -> None:
    if isinstance(value, Tensor):
        out[...] = _numpy(call, "", value)
    elif isinstance(value, NonTensorStack):
        out[...] = np.asarray(value.tolist())
    elif is_non_tensor(value):
        out[...] = value.data
    else:
        for key, child in value.items():
            _fill(call, out[str(key)], child, shape)


def to_struct_array(call: str, td: Any) -> np.ndarray:
    """A numpy structured array shaped like the batch, one field per entry."""
    ndim = td.batch_dims
    dtype = np.dtype([(str(k), _np_dtype(call, str(k), v, ndim)) for k, v in td.items()])
    out = np.zeros(tuple(td.batch_size), dtype=dtype)
    _fill(call, out, td, tuple(td.batch_size))
    return out


def _struct_tree(arr: np.ndarray) -> Any:
    if arr.dtype.names is not None:
        return {name: _struct_tree(arr[name]) for name in arr.dtype.names}
    if arr.dtype.kind in _NUMERIC_KINDS:
        try:
            return torch.from_numpy(arr)  # a view of the array's memory where strides allow
        except (ValueError, RuntimeError):
            return torch.from_numpy(np.ascontiguousarray(arr))
    if arr.ndim == 0:
        return NonTensorData(arr.item())
    return NonTensorStack.from_list(arr.tolist())


def from_struct_array(
    call: str,
    arr: Any,
    *,
    batch_size: Any,
    auto_batch_size: bool,
    batch_dims: int | None,
    device: Any,
) -> TensorDictBase:
    """A TensorDict of a structured array: numeric fields as tensors (views where the
    record layout allows), string fields as NonTensorStacks, nested fields nested."""
    from tensordict._td import TensorDict  # the concrete class sits above this module

    if not (isinstance(arr, np.ndarray) and arr.dtype.names is not None):
        raise TypeError(f"{call}: expected a numpy structured array, got {type(arr).__name__}")
    if auto_batch_size and batch_size is not None:
        raise TypeError(f"{call}: pass batch_size or auto_batch_size=True, not both")
    tree = _struct_tree(arr)
    td = TensorDict(tree, batch_size=arr.shape if batch_size is None else batch_size)
    if auto_batch_size:
        entries: dict[Any, Any] = td.to_dict()
        td = TensorDict.from_dict(entries, batch_dims=batch_dims, auto_batch_size=True)
    return td if device is None else td.to(device)
