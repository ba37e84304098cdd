"""Non-tensor entries as JSON records, for the file formats that keep them in metadata.

The safetensors, HDF5 and zarr bridges store each non-tensor entry as a small JSON
object beside the tensors: ``{"data": value}`` (with ``"class"`` for a ``MetaData``, see
``_nontensor_class``) or ``{"values": [...], "positions": [...]}`` for a
``NonTensorStack`` (its distinct values and the batch-shaped positions, so a value that
is itself a list stays one value). A value JSON would bring back as another type is
refused, naming its key: never stored to come back changed.
"""

from __future__ import annotations

from typing import Any

import torch

from tensordict._format import is_json_value
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack
from tensordict._nontensor_class import UnnamedClass, class_tag, entry_of


def to_record(entry: NonTensor, call: str, where: str) -> dict[str, Any]:
    """``entry`` as a JSON record; a ``TypeError`` naming ``where`` for a value (or class)
    JSON cannot hold as it is.

    >>> from tensordict import MetaData, NonTensorStack
    >>> to_record(MetaData("m"), "save", "'k'"), to_record(NonTensorStack([1], [2]), "save", "'k'")
    ({'data': 'm', 'class': 'MetaData'}, {'values': [[1], [2]], 'positions': [0, 1]})
    """
    if isinstance(entry, NonTensorStack) and is_json_value(entry.values):
        return {"values": list(entry.values), "positions": entry.positions.tolist()}
    if isinstance(entry, NonTensorData) and is_json_value(entry.data):
        try:
            tag = class_tag(entry)
        except UnnamedClass:
            pass
        else:
            return {"data": entry.data} if tag is None else {"data": entry.data, "class": tag}
    values = entry._values()
    bad = next((v for v in values if not is_json_value(v)), None)
    what = type(entry).__name__ if bad is None else type(bad).__name__
    raise TypeError(
        f"{call}: the non-tensor value at {where} is not JSON ({what}): this format stores "
        "non-tensor entries as JSON, exactly str, int, finite float, bool, None, and lists "
        "and dicts (str keys) of those; another type would load as a different one"
    )


def from_record(record: Any, batch_size: Any, call: str, where: str) -> NonTensor:
    """The entry a record of :func:`to_record` stands for (``{"stack": nested list}``,
    written by earlier versions, too); a ``ValueError`` naming ``where`` for a bad one.

    >>> from_record({"values": ["a", "b"], "positions": [1, 0]}, [2], "load", "'k'").tolist()
    ['b', 'a']
    """
    if isinstance(record, dict):
        keys = set(record)
        if keys == {"values", "positions"} and isinstance(record["values"], list):
            try:
                positions = torch.tensor(record["positions"], dtype=torch.long)
                return NonTensorStack._from_positions(record["values"], positions)
            except (TypeError, ValueError, RuntimeError, IndexError) as err:
                raise ValueError(f"{call}: {where}: bad non-tensor positions ({err})") from None
        if keys == {"stack"} and isinstance(record["stack"], list):
            return NonTensorStack.from_list(record["stack"])
        if keys in ({"data"}, {"data", "class"}):
            return entry_of(record.get("class"), record["data"], batch_size, call, where)
    raise ValueError(f"{call}: {where}: bad non-tensor record {record!r}")
