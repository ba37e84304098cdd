"""``append_memmap``: grow a saved checkpoint folder by rows along its first batch dim,
journaled so that a failed or killed append leaves the old rows (docs/format.md, section 12)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tensordict._format import DTYPES, META, FormatError, is_json_value
from tensordict._nontensor import NonTensor, NonTensorData, NonTensorStack

JOURNAL = ".append.journal"  # the old sizes, written before any file grows
COMMIT = ".append.commit"  # the journal renamed: the new metadata is complete
TMP = ".meta.json.append.tmp"  # a folder's new meta.json, before it replaces the old one
_CALL = "append_memmap"


def append_memmap(
    prefix: str | os.PathLike[str], rows: Any, *, allow_pickle: bool | None = None
) -> None:
    """Append ``rows`` (a TensorDict or tensorclass with the saved keys, dtypes and trailing
    shapes) to the checkpoint folder ``prefix`` along its first batch dim, in place: each
    leaf file grows by the new rows' bytes and the metadata is replaced last, so a failed
    append leaves the saved rows as they were (a killed one is finished or undone by the
    next ``append_memmap``). Use one writer at a time, and no reader during an append.

    ``allow_pickle`` is accepted for compatibility: pickled entries are never read here,
    and a checkpoint holding one cannot grow.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, append_memmap
    >>> path = tempfile.mkdtemp() + "/buffer"
    >>> _ = TensorDict({"x": torch.zeros(2, 3)}, [2]).memmap(path)
    >>> append_memmap(path, TensorDict({"x": torch.ones(1, 3)}, [1]))
    >>> TensorDict.load_memmap(path)["x"].sum(-1).tolist()
    [0.0, 0.0, 3.0]
    """
    del allow_pickle  # (nothing is unpickled)
    from tensordict._survey import checkpoint_problem, survey

    folder = os.path.abspath(os.fspath(prefix))
    if os.path.isfile(folder):
        raise ValueError(
            f"{_CALL}: {folder!r} is an archive, which cannot grow in place; unpack it with "
            "unpack_memmap, append, and pack it again"
        )
    problem = checkpoint_problem(folder, _CALL)
    if problem is not None:
        raise ValueError(problem)
    recover(folder)
    tree = survey(folder, _CALL).root  # validated as a load validates; nothing mapped
    if isinstance(rows, NonTensor):  # (rows of a non-tensor entry saved on its own)
        from tensordict._nontensor_root import as_root

        rows = as_root(rows)
    if rows._stack_parts() is not None:
        rows = rows.contiguous()
    bs = list(tree.meta["batch_size"])
    if not bs:
        raise ValueError(f"{_CALL}: {folder!r} has batch_size []: there is no dim to append along")
    new_bs = list(rows.batch_size)
    if len(new_bs) != len(bs) or new_bs[1:] != bs[1:]:
        raise ValueError(
            f"{_CALL}: rows have batch_size {new_bs}; appending to batch_size {bs} needs "
            f"[n, *{bs[1:]}]"
        )
    plan = _Plan(folder, new_bs[0])
    plan.collection(tree, rows, (), folder)
    if plan.problems:
        raise ValueError(f"{_CALL}: cannot append to {folder!r}: " + "; ".join(plan.problems))
    if new_bs[0]:
        plan.commit()


class _Plan:
    """What an append writes: bytes at the end of leaf files, and every folder's metadata."""

    def __init__(self, root: str, n: int) -> None:
        self.root = root
        self.n = n
        self.problems: list[str] = []
        self.leaves: list[tuple[str, int, np.ndarray[Any, Any], dict[str, Any]]] = []
        self.metas: list[tuple[str, dict[str, Any]]] = []  # the root's first

    def collection(self, node: Any, rows: Any, path: tuple[str, ...], folder: str) -> None:
        from tensordict._survey import Collection

        meta = node.meta
        where = repr(path) if path else "the root"
        if node.lazy:
            self.problems.append(f"{where} is a lazy stack, which cannot grow in place")
            return
        if not _is_collection(rows):
            self.problems.append(f"{where} is a collection, rows give {type(rows).__name__}")
            return
        if rows._stack_parts() is not None:
            rows = rows.contiguous()
        given = rows._tensordict
        extra = [k for k in given if k not in node.entries]
        if extra:
            self.problems.append(f"rows have keys the checkpoint lacks at {where}: {extra}")
        self.metas.append((folder, meta))
        meta["batch_size"][0] += self.n
        if "shape" in meta:  # upstream's name for the batch size (docs/format.md)
            meta["shape"] = list(meta["batch_size"])
        for key, child in node.entries.items():
            sub = (*path, key)
            if key not in given:
                self.problems.append(f"rows lack the key {sub!r}")
                continue
            value = given[key]
            record = meta["entries"][key]
            if isinstance(child, Collection):
                self.collection(child, value, sub, os.path.join(folder, record["dir"]))
            elif child.kind == "tensor":
                self.tensor(sub, record, value, os.path.join(folder, record["file"]), child)
            elif child.kind == "pickle":
                self.problems.append(f"{sub!r} holds pickled data, which cannot grow in place")
            elif child.kind == "nested":
                self.problems.append(f"{sub!r} is a nested tensor, which cannot grow in place")
            else:
                self.json(sub, record, value, meta["batch_size"])

    def tensor(
        self, key: tuple[str, ...], record: dict[str, Any], value: Any, file: str, leaf: Any
    ) -> None:
        dtype = DTYPES[record["dtype"]]
        shape = record["shape"]
        if not isinstance(value, torch.Tensor):
            self.problems.append(f"{key!r} is a tensor, rows give {type(value).__name__}")
        elif value.dtype != dtype:
            self.problems.append(f"{key!r} has dtype {dtype}, rows give {value.dtype}")
        elif list(value.shape) != [self.n, *shape[1:]]:
            self.problems.append(
                f"{key!r} needs rows of shape {[self.n, *shape[1:]]}, got {list(value.shape)}"
            )
        else:
            from tensordict._save import raw_bytes

            data = raw_bytes(value.detach().cpu()).numpy()
            self.leaves.append((file, leaf.nbytes, data, record))
            shape[0] += self.n

    def json(self, key: tuple[str, ...], record: dict[str, Any], value: Any, bs: list[int]) -> None:
        old_bs = [bs[0] - self.n, *bs[1:]]
        if isinstance(value, NonTensorData):
            values, positions = [value.data], torch.zeros([self.n, *bs[1:]], dtype=torch.long)
        elif isinstance(value, NonTensorStack):
            values, positions = list(value.values), value.positions
            if list(positions.shape) != [self.n, *bs[1:]]:
                self.problems.append(f"{key!r} needs rows of shape {[self.n, *bs[1:]]}")
                return
        else:
            self.problems.append(f"{key!r} is non-tensor data, rows give {type(value).__name__}")
            return
        if not is_json_value(values):
            self.problems.append(f"rows give non-JSON data at {key!r}, saved as JSON")
            return
        if record["kind"] == "json":
            if isinstance(value, NonTensorData) and _same(value.data, record["value"]):
                return  # one value for every row, still
            old_values = [record["value"]]
            old_positions = torch.zeros(old_bs, dtype=torch.long)
        else:
            old_values = record["values"]
            old_positions = torch.tensor(record["positions"], dtype=torch.long).reshape(old_bs)
        merged = list(old_values)
        index = []
        for v in values:
            at = next((i for i, w in enumerate(merged) if _same(v, w)), None)
            if at is None:
                merged.append(v)
                at = len(merged) - 1
            index.append(at)
        remapped = torch.tensor(index, dtype=torch.long)[positions.reshape(-1)].reshape(
            positions.shape
        )
        record.clear()
        record.update(
            kind="json_stack",
            values=merged,
            positions=torch.cat([old_positions, remapped]).tolist(),
        )

    def commit(self) -> None:
        """Journal the old sizes, grow the files, write the new metadata beside the old,
        mark the append complete, then replace each folder's meta.json (the root's first)."""
        from tensordict._save import file_sha256

        rel = _relative(self.root)
        plan = {
            "sizes": {rel(file): size for file, size, _, _ in self.leaves},
            "folders": [rel(folder) for folder, _ in self.metas],
        }
        _write_json(os.path.join(self.root, JOURNAL), plan)
        try:
            for file, size, data, record in self.leaves:
                with open(file, "r+b") as handle:
                    handle.seek(size)
                    handle.write(data.data)
                if "sha256" in record:
                    record["sha256"] = file_sha256(file)
            for folder, meta in self.metas:
                _write_json(os.path.join(folder, TMP), meta)
        except BaseException:
            _undo(self.root, plan)
            raise
        os.replace(os.path.join(self.root, JOURNAL), os.path.join(self.root, COMMIT))
        _finish(self.root, plan)


def _is_collection(value: Any) -> bool:
    return hasattr(value, "_stack_parts") and hasattr(value, "batch_size")


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON (``True`` and ``1`` are not)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _relative(root: str) -> Any:
    def rel(path: str) -> str:
        return os.path.relpath(path, root).replace(os.sep, "/")

    return rel


def _write_json(path: str, value: Any) -> None:
    staging = path + ".partial"
    with open(staging, "w", encoding="utf-8") as handle:
        json.dump(value, handle)
    os.replace(staging, path)


def _inside(root: str, rel: Any, marker: str) -> str:
    """The path ``rel`` names under ``root``, refusing one that leaves it."""
    parts = rel.split("/") if isinstance(rel, str) else [""]
    if rel != "." and any(
        part in ("", ".", "..") or "\\" in part or "\0" in part for part in parts
    ):
        raise FormatError(f"{_CALL}: {marker!r} names {rel!r}, which leaves {root!r}")
    path = root if rel == "." else os.path.join(root, *parts)
    real, base = os.path.realpath(path), os.path.realpath(root)
    if real != base and not real.startswith(base + os.sep):
        raise FormatError(f"{_CALL}: {marker!r} names {rel!r}, which leaves {root!r}")
    return path


def _read_plan(root: str, marker: str) -> dict[str, Any]:
    """A journal, checked before it is acted on: it only ever names paths under ``root``."""
    try:
        with open(marker, encoding="utf-8") as handle:
            plan = json.load(handle)
    except (OSError, ValueError) as err:
        raise FormatError(f"{_CALL}: cannot read the journal {marker!r}: {err}") from None
    sizes, folders = (plan.get("sizes"), plan.get("folders")) if isinstance(plan, dict) else (0, 0)
    if (
        not isinstance(sizes, dict)
        or not isinstance(folders, list)
        or not all(type(s) is int and s >= 0 for s in sizes.values())
    ):
        raise FormatError(f"{_CALL}: the journal {marker!r} is not one append_memmap wrote")
    for rel in [*sizes, *folders]:
        _inside(root, rel, marker)
    return {"sizes": sizes, "folders": folders}


def _undo(root: str, plan: dict[str, Any]) -> None:
    """Put the old rows back: cut each grown file to its old size, drop the new metadata."""
    for rel, size in plan["sizes"].items():
        path = _inside(root, rel, JOURNAL)
        if os.path.isfile(path) and os.path.getsize(path) > size:
            os.truncate(path, size)
    for rel in plan["folders"]:
        tmp = os.path.join(_inside(root, rel, JOURNAL), TMP)
        if os.path.exists(tmp):
            os.unlink(tmp)
    os.unlink(os.path.join(root, JOURNAL))


def _finish(root: str, plan: dict[str, Any]) -> None:
    """Replace each folder's meta.json by its new one (the root's first), then drop the mark."""
    for rel in plan["folders"]:
        folder = _inside(root, rel, COMMIT)
        if os.path.exists(os.path.join(folder, TMP)):
            os.replace(os.path.join(folder, TMP), os.path.join(folder, META))
    os.unlink(os.path.join(root, COMMIT))


def recover(root: str) -> None:
    """Finish an append that was killed after its commit mark, or undo one killed before."""
    if os.path.exists(os.path.join(root, COMMIT)):
        _finish(root, _read_plan(root, os.path.join(root, COMMIT)))
    elif os.path.exists(os.path.join(root, JOURNAL)):
        _undo(root, _read_plan(root, os.path.join(root, JOURNAL)))


def interrupted_append(path: str) -> str | None:
    """The folder at or above ``path`` holding a killed append's journal, if any."""
    here = Path(path)
    for folder in (here, *here.parents):
        if (folder / JOURNAL).exists() or (folder / COMMIT).exists():
            return str(folder)
        if not (folder / META).exists():
            return None
    return None
