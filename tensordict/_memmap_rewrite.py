"""A non-tensor entry written in place (``set_``, ``update_``, ``set(inplace=True)``) into a
collection saved to a folder: its record in every meta.json describing it is replaced, so
the checkpoint keeps what the collection holds, as its tensor leaves (mapped files) do."""

from __future__ import annotations

import os
import threading
from typing import Any

from tensordict._format import VERSION
from tensordict._nontensor import NonTensor

_INLINE = ("json", "json_stack")  # records held in the metadata itself, with no file


# one lock per checkpoint (its real path): a rewrite reads, changes and replaces the
# meta.json files and the journal of the whole checkpoint, so two threads writing two
# entries of one checkpoint take turns (processes writing one checkpoint are not supported)
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def _lock_of(path: str) -> threading.Lock:
    real = os.path.realpath(path)
    with _LOCKS_LOCK:
        lock = _LOCKS.get(real)
        if lock is None:
            lock = _LOCKS[real] = threading.Lock()
        return lock


def write_non_tensor(td: Any, key: str, value: NonTensor, call: str) -> None:
    """Store ``value`` as ``td``'s entry ``key``, and record it in the checkpoint ``td`` is
    saved to when it is: memory and files change together, under the checkpoint's lock.
    Only a value the metadata holds inline (JSON) is written there; any other value raises
    a ``RuntimeError`` before anything changed, in memory or on disk. A checkpoint that no
    longer describes ``td`` (saved again since, or changed in memory) or of an older
    version is left alone, as its tensor leaves would be."""
    from tensordict._memmap_add import saved_folder

    folder = saved_folder(td)
    if folder is None:
        td._tensordict[key] = value
        return
    with _lock_of(folder):
        try:
            _rewrite(td, folder, key, value, call)
        except OSError as err:
            raise RuntimeError(
                f"{call}: key {key!r}: could not record the new value in the checkpoint at "
                f"{folder!r} ({err}); the collection keeps its old value"
            ) from err
        td._tensordict[key] = value


def _rewrite(td: Any, folder: str, key: str, value: NonTensor, call: str) -> None:
    from tensordict._append import _finish, _relative, _undo
    from tensordict._memmap_add import described_by, stage_metas
    from tensordict._save import _Writer

    top, changed = described_by(folder, call)
    here, meta = changed[-1]
    if (
        changed[0][1]["version"] != VERSION
        or list(td.batch_size) != meta["batch_size"]
        or set(td._tensordict) != set(meta["entries"])
        or meta["entries"][key].get("kind") not in _INLINE
    ):
        return
    try:  # (allow_pickle=False: a value JSON cannot hold is refused, no file written)
        record = _Writer(call, False, False, False).entry(key, value, here, set(), (key,))
    except TypeError:
        record = {}
    if record.get("kind") not in _INLINE:
        raise RuntimeError(
            f"{call}: key {key!r} of the collection saved at {here!r} holds JSON data in "
            f"its meta.json; the new {type(value).__name__} cannot be written there in place "
            "(save the collection again with memmap)"
        ) from None
    plan = {"sizes": {}, "folders": [_relative(top)(f) for f, _ in changed]}
    old = meta["entries"][key]
    meta["entries"][key] = record
    try:
        stage_metas(top, plan, changed)
    except BaseException:
        meta["entries"][key] = old
        from tensordict._append import JOURNAL

        if os.path.exists(os.path.join(top, JOURNAL)):
            _undo(top, plan)
        raise
    _finish(top, plan)
