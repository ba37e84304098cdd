"""make_memmap* on a collection saved to a folder: the new leaf's file is written inside the
checkpoint, then every meta.json describing it is replaced as append_memmap replaces them
(docs/format.md, section 13)."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import torch
from torch import Tensor

from tensordict._format import META, VERSION, encode_name
from tensordict._memmap import MemoryMappedTensor
from tensordict._memmap_backing import backing_of


class EntryExistsError(KeyError, RuntimeError):
    """The key of a new memory-mapped leaf is already an entry.

    A ``KeyError`` (the key is the problem) and a ``RuntimeError`` (what upstream
    tensordict raises), so either ``except`` clause catches it.
    """

    def __str__(self) -> str:  # the message, not KeyError's quoted repr of it
        return str(self.args[0]) if self.args else ""


def saved_folder(td: Any) -> str | None:
    """The folder ``td`` was saved as or loaded from, while every tensor leaf maps a file
    of it (or a private copy-on-write map of one, as of a read-only file or a zero-size
    leaf: a MemoryMappedTensor in neither a file nor shared memory)."""
    folder: str | None = getattr(td, "_saved_folder", None)
    if folder is None:
        return None
    inside = folder + os.sep
    for leaf in td._tensor_leaves([]):
        if not isinstance(leaf, MemoryMappedTensor):
            return None
        backing = backing_of(leaf.untyped_storage()) if leaf.numel() else None
        if backing is None:  # a private map: nothing to check
            continue
        if backing.filename is None or not backing.filename.startswith(inside):
            return None
    return folder


def record_folders(td: Any, folder: str, meta: dict[str, Any]) -> None:
    """Remember on ``td`` and each collection in it the folder it is saved as (``meta``: the
    folder's metadata, its subtree inline)."""
    parts = td._stack_parts()
    if parts is not None:
        for i, member in enumerate(parts[1]):
            record_folders(member, os.path.join(folder, str(i)), meta["members"][i])
        return
    td._saved_folder = folder
    entries = meta["entries"]
    for key, value in td._tensordict.items():
        record = entries.get(key)
        if record is not None and record["kind"] == "collection":
            record_folders(value, os.path.join(folder, record["dir"]), record["meta"])


def _names(meta: dict[str, Any], name: str) -> bool:
    """Whether version-2 metadata ``meta`` holds the sub-folder ``name`` inline."""
    if not isinstance(meta, dict) or meta.get("version") != VERSION:
        return False
    members = meta.get("members")
    if isinstance(members, list):
        return name.isdigit() and str(int(name)) == name and int(name) < len(members)
    entries = meta.get("entries")
    return isinstance(entries, dict) and any(
        isinstance(r, dict) and r.get("kind") == "collection" and r.get("dir") == name
        for r in entries.values()
    )


def _top(folder: str) -> tuple[str, list[str]]:
    """The outermost checkpoint whose metadata describes ``folder`` (its own folder, or an
    ancestor's whose inline metadata holds it), and the sub-folder names down to it."""
    route: list[str] = []
    here = folder
    while True:
        parent = os.path.dirname(here)
        if parent == here:
            return here, route
        try:
            with open(os.path.join(parent, META), encoding="utf-8") as handle:
                meta = json.load(handle)
        except (OSError, ValueError):
            return here, route
        if not _names(meta, os.path.basename(here)):
            return here, route
        route.insert(0, os.path.basename(here))
        here = parent


def _child(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """The inline metadata of sub-folder ``name`` (a member of a stack or a collection)."""
    if "members" in meta:
        member: dict[str, Any] = meta["members"][int(name)]
        return member
    return next(
        r["meta"]
        for r in meta["entries"].values()
        if r["kind"] == "collection" and r["dir"] == name
    )


def add_leaf(
    td: Any,
    folder: str,
    call: str,
    key: tuple[str, ...],
    source: Tensor,
    like: bool,
    storage_file: str | None = None,
) -> MemoryMappedTensor:
    """Add the leaf ``key`` (new collections for its missing parents) to ``td``, saved at
    ``folder``: its file holds ``source``'s values (zeros with ``like``), then the metadata of
    every folder describing it is committed through append_memmap's journal.
    ``storage_file``: the file ``source`` maps, which must be the leaf's file-to-be."""
    from tensordict._append import JOURNAL, _finish, _relative, _undo
    from tensordict._save import _Writer
    from tensordict._td import TensorDict

    top, route = _top(folder)
    _writable(call, key, [top, *(os.path.join(top, *route[: i + 1]) for i in range(len(route)))])
    top, changed = described_by(folder, call)  # every folder whose meta.json changes
    if changed[0][1]["version"] != VERSION:
        raise RuntimeError(
            f"{call}: {top!r} is a version-{changed[0][1]['version']} checkpoint, which "
            "cannot gain entries in place; save it again (memmap) to write the current version"
        )
    here, meta = changed[-1]
    _check_same(call, here, td, meta)
    node, depth = td, 0
    for part in key[:-1]:  # the parents that exist, in memory and in the folder
        child = node._tensordict.get(part)
        if child is None:
            break
        record = meta["entries"].get(part)
        if not isinstance(child, TensorDict):  # (a lazy stack is no TensorDict)
            raise RuntimeError(
                f"{call}: {key[: depth + 1]!r} is a {type(child).__name__}, which cannot hold "
                f"the new memory-mapped leaf {key!r}"
            )
        if record["kind"] != "collection":  # (_check_same: every key held has a record)
            raise RuntimeError(
                f"{call}: the checkpoint at {here!r} holds {part!r} as a {record['kind']}, "
                "not a collection; load it again before adding entries"
            )
        node, depth = child, depth + 1
        here, meta = os.path.join(here, record["dir"]), record["meta"]
        _check_same(call, here, child, meta)
        changed.append((here, meta))
    rest = key[depth:]  # (rest[0] is in neither the node nor, by _check_same, its folder)
    bs = node.batch_size
    if source.is_nested:  # (a strided nested tensor: checked on its regular leading dims)
        stand_in = source
    else:
        if source.shape[: len(bs)] != bs:
            raise ValueError(
                f"{call}({key!r}): shape {tuple(source.shape)} does not start with batch_size "
                f"{tuple(bs)}"
            )
        stand_in = torch.zeros((), dtype=source.dtype).expand(source.shape)  # no memory
    node._convert(_nest(stand_in, rest, node), rest[0], call)  # its checks (tensorclass fields)
    if len(changed) > 1 + len(route):  # (the parents above were checked already)
        _writable(call, key, [f for f, _ in changed[1 + len(route) :]])
    taken = {r.get("file", r.get("dir")) for r in meta["entries"].values()}
    taken |= set(os.listdir(here))  # nothing on disk is overwritten, even stray files
    last = ".memmap" if len(rest) == 1 else ""
    names = [encode_name(rest[0], last, set(taken))]
    names += [encode_name(p, "", set()) for p in rest[1:-1]]
    names += [encode_name(rest[-1], ".memmap", set())] if len(rest) > 1 else []
    target = os.path.join(here, *names)
    if storage_file is not None and os.path.abspath(storage_file) != target:
        raise RuntimeError(
            f"{call}: Providing a storage with an associated filename ({storage_file!r}) "
            f"that differs from the new leaf's file {target!r} is not permitted; copy it "
            "with make_memmap_from_tensor instead"
        )
    writer = _Writer(call, like, None, False)
    made = os.path.join(here, names[0])
    rel = _relative(top)
    plan = {"sizes": {}, "folders": [rel(f) for f, _ in changed]}
    try:
        record = writer.entry(rest[0], _nest(source, rest, node), here, taken, key)
        (leaf,) = writer.run(1)
        writer.write_metas()  # the new sub-folders' own meta.json
        meta["entries"][rest[0]] = record
        stage_metas(top, plan, changed)
    except BaseException:
        if os.path.exists(os.path.join(top, JOURNAL)):
            _undo(top, plan)
        meta["entries"].pop(rest[0], None)
        if os.path.isdir(made):
            shutil.rmtree(made, ignore_errors=True)
        elif os.path.lexists(made):
            os.unlink(made)
        raise
    _finish(top, plan)
    value = _nest(leaf, rest, node)
    if record["kind"] == "collection":
        record_folders(value, made, record["meta"])
    # added through the lock as upstream adds it (a saved collection is locked), even to a
    # TensorDict nested in a locked one, which cannot be unlocked on its own
    node._tensordict[rest[0]] = node._convert(value, rest[0], call)
    if node.is_locked and isinstance(value, TensorDict):
        from tensordict._lock_parents import note_parent

        value.lock_()
        note_parent(value, node)
    return leaf


def stage_metas(top: str, plan: dict[str, Any], changed: list[tuple[str, Any]]) -> None:
    """Journal ``plan``, write each changed folder's new meta.json beside its old one, and
    mark the change committed (append_memmap's journal: ``_finish`` then puts them in
    place; a killed process's change is finished or undone by the next reader)."""
    from tensordict._append import COMMIT, JOURNAL, TMP, _write_json

    _write_json(os.path.join(top, JOURNAL), plan)
    for folder, meta in changed:
        _write_json(os.path.join(folder, TMP), meta)
    os.replace(os.path.join(top, JOURNAL), os.path.join(top, COMMIT))


def described_by(folder: str, call: str) -> tuple[str, list[tuple[str, Any]]]:
    """The outermost checkpoint describing ``folder`` (a killed change to it finished or
    undone first) and the metadata of every folder from it down to ``folder``, the top
    one first; only the top one's for a checkpoint of an older version (check
    ``changed[0][1]["version"]``: such a one is never changed in place)."""
    from tensordict._append import recover as recover_append
    from tensordict._survey import survey

    top, route = _top(folder)
    recover_append(top)
    meta = survey(top, call).root.meta
    changed = [(top, meta)]
    if meta["version"] != VERSION:
        return top, changed
    here = top
    for name in route:
        here, meta = os.path.join(here, name), _child(meta, name)
        changed.append((here, meta))
    return top, changed


def _nest(leaf: Any, rest: tuple[str, ...], node: Any) -> Any:
    """``leaf`` inside new TensorDicts for the keys ``rest[1:-1]`` (the entry ``rest[0]``
    of ``node``), as ``node`` would hold them: its batch size and device."""
    from tensordict._td import TensorDict

    value = leaf
    for part in reversed(rest[1:]):
        value = TensorDict._new_unsafe({part: value}, node.batch_size, node.device, None)
    return value


def _check_same(call: str, folder: str, node: Any, meta: dict[str, Any]) -> None:
    """Refuse a folder that no longer describes ``node`` (saved again since, or the
    collection changed in memory): its batch size and its keys must be the folder's."""
    ours, theirs = list(node.batch_size), meta["batch_size"]
    if ours != theirs or set(node._tensordict) != set(meta["entries"]):
        raise RuntimeError(
            f"{call}: the checkpoint at {folder!r} no longer describes this collection "
            f"(batch_size {theirs} and keys {sorted(meta['entries'])} there, {ours} and "
            f"{sorted(node._tensordict)} here: was it saved again since?); load it again "
            "before adding entries"
        )


def _writable(call: str, key: tuple[str, ...], folders: list[str]) -> None:
    for folder in folders:
        if not os.access(folder, os.W_OK):
            raise PermissionError(
                f"{call}: cannot add {key!r}: the checkpoint folder {folder!r} is read-only "
                "(nothing was written); save a copy elsewhere with memmap(prefix) first"
            )
