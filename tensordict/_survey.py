"""A checkpoint's structure for read-only tools: validated as a load validates, nothing mapped."""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field
from typing import Any

import torch

from tensordict._archive import Archive, _ArchiveLoader
from tensordict._format import (
    DTYPES,
    META,
    FormatError,
    checked_path,
    left_by_interrupted_save,
    lookup_type,
)
from tensordict._load import _Loader
from tensordict._nontensor import NonTensorData

TENSOR_KINDS = ("tensor", "nested")  # the entries whose file holds tensor elements


@dataclass
class Leaf:
    """One non-collection entry: a tensor file, a JSON value or stack, or pickled data."""

    kind: str  # "tensor", "nested", "json", "json_stack" or "pickle"
    record: dict[str, Any]  # its member of meta.json's entries
    path: str | None = None  # the leaf file (tensor, pickle), or the archive holding it
    nbytes: int = 0  # the leaf file's size
    offset: int = 0  # where its bytes start in ``path`` (non-zero inside an archive)

    def read(self) -> bytes:
        """The leaf file's bytes (a pickle's: compared, never unpickled)."""
        assert self.path is not None
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            return handle.read(self.nbytes)

    @property
    def dtype(self) -> str:
        return str(self.record["dtype"])

    @property
    def shape(self) -> list[Any]:
        """A tensor's shape; a nested tensor's element shapes (one list per element)."""
        return list(self.record["shape" if self.kind == "tensor" else "shapes"])

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def json_elements(self) -> Any:
        """A ``json_stack``'s value per batch element (nested lists), a ``json``'s value."""
        if self.kind == "json":
            return self.record["value"]
        values = self.record["values"]

        def expand(pos: Any) -> Any:
            return [expand(p) for p in pos] if isinstance(pos, list) else values[pos]

        return expand(self.record["positions"])


@dataclass
class Collection:
    """One checkpoint folder: a TensorDict, a tensorclass or a lazy stack."""

    type: str
    meta: dict[str, Any]
    entries: dict[str, Collection | Leaf] = field(default_factory=dict)
    members: list[Collection] = field(default_factory=list)  # lazy stacks only

    @property
    def lazy(self) -> bool:
        return "stack_dim" in self.meta

    def walk(self) -> list[Collection | Leaf]:
        """Every node below this one, depth first."""
        out: list[Collection | Leaf] = []
        for child in [*self.members, *self.entries.values()]:
            out.append(child)
            if isinstance(child, Collection):
                out += child.walk()
        return out


@dataclass
class Survey:
    """A validated checkpoint: its tree, and notes on what was not checked or loaded."""

    root: Collection
    notes: list[str]


class _Surveyor(_Loader):
    """The loader's validation, keeping each meta.json, never unpickling anything, and
    standing a plain TensorDict in for a tensorclass this process does not define."""

    def __init__(self, call: str, verify: bool) -> None:
        super().__init__(call, verify, allow_pickle=False)
        self.metas: dict[str, dict[str, Any]] = {}
        self.notes: list[str] = []

    def meta(self, folder: str, inline: Any = None) -> dict[str, Any]:
        meta = super().meta(folder, inline)
        self.metas[folder] = meta
        return meta

    def lookup(self, name: str, path: str) -> Any:
        try:
            return lookup_type(name, self.call, path)
        except FormatError:
            if not name.startswith("tensorclass:"):
                raise
        from tensordict._td import TensorDict

        self.notes.append(
            f"{path!r}: type {name!r} is not defined in this process; its entries were "
            "checked as a TensorDict's"
        )
        return TensorDict

    def entry(
        self, folder: str, path: str, key: str, record: dict[str, Any], bs: torch.Size, device: Any
    ) -> Any:
        if record["kind"] != "pickle":
            return super().entry(folder, path, key, record, bs, device)
        self._pickle_file(folder, record, key)
        self.notes.append(f"{path!r} key {key!r} holds pickled data, not loaded")
        return NonTensorData(None, bs)  # a stand-in: nothing is unpickled

    def _pickle_file(self, folder: str, record: dict[str, Any], key: str) -> str:
        file = checked_path(folder, record.get("file"), self.call, key, "file")
        if not os.path.isfile(file):
            raise FormatError(f"{self.call}: pickle file {file!r} of key {key!r} is missing")
        return file

    def locate(self, file: str) -> tuple[str, int, int]:
        """Where a validated leaf or pickle file's bytes are: (file, offset, size)."""
        return file, 0, os.stat(file).st_size

    def tree(self, folder: str) -> Collection:
        """The surveyed structure under ``folder`` (after :meth:`collection` ran on it)."""
        meta = self.metas[folder]
        node = Collection(str(meta["type"]), meta)
        if node.lazy:
            count = meta["batch_size"][meta["stack_dim"]]
            node.members = [self.tree(os.path.join(folder, str(i))) for i in range(count)]
            return node
        for key, record in meta["entries"].items():
            kind = record["kind"]
            if kind == "collection":
                node.entries[key] = self.tree(os.path.join(folder, record["dir"]))
            elif kind in TENSOR_KINDS:
                shapes = [record["shape"]] if kind == "tensor" else record["shapes"]
                count = sum(math.prod(shape) for shape in shapes)
                nbytes = count * DTYPES[record["dtype"]].itemsize
                where, offset, _ = self.locate(os.path.join(folder, record["file"]))
                node.entries[key] = Leaf(kind, record, where, nbytes, offset)
            elif kind == "pickle":
                where, offset, size = self.locate(os.path.join(folder, record["file"]))
                node.entries[key] = Leaf(kind, record, where, size, offset)
            else:
                node.entries[key] = Leaf(kind, record)
        return node


class _ArchiveSurveyor(_Surveyor, _ArchiveLoader):
    """The surveyor reading an archive's members (docs/format.md, section 10)."""

    def __init__(self, call: str, verify: bool, archive: Archive) -> None:
        _ArchiveLoader.__init__(self, call, verify, False, archive)
        self.metas = {}
        self.notes = []

    def _pickle_file(self, folder: str, record: dict[str, Any], key: str) -> str:
        file = self._sub_folder(folder, record.get("file"), key, "file")
        if self.archive.span(self.archive.member(file)) is None:
            raise FormatError(
                f"{self.call}: pickle file {file!r} of key {key!r} is missing from the archive"
            )
        return file

    def locate(self, file: str) -> tuple[str, int, int]:
        offset, size = self.archive.spans[self.archive.member(file)]
        return self.archive.path, offset, size


def survey(path: str, call: str, verify: bool = False) -> Survey:
    """Validate the checkpoint at ``path`` as a load would (checksums too with ``verify``),
    without mapping or unpickling anything, and return its structure.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> folder = tempfile.mkdtemp() + "/ckpt"
    >>> _ = TensorDict({"a": torch.zeros(4, 2), "b": {"c": torch.ones(4)}}, [4]).memmap(folder)
    >>> tree = survey(folder, "demo").root
    >>> leaf = tree.entries["a"]
    >>> tree.type, leaf.shape, leaf.nbytes, list(tree.entries["b"].entries)
    ('TensorDict', [4, 2], 32, ['c'])
    """
    target = os.path.abspath(path)
    if os.path.isfile(target):  # an archive (docs/format.md, section 10)
        archive = Archive(target, call)
        try:
            surveyor: _Surveyor = _ArchiveSurveyor(call, verify, archive)
            surveyor.collection(target, None)
            archive.check_overlaps()
            return Survey(surveyor.tree(target), surveyor.notes)
        finally:
            archive.close()
    surveyor = _Surveyor(call, verify)
    surveyor.collection(target, None)
    return Survey(surveyor.tree(target), surveyor.notes)


def checkpoint_problem(path: str, call: str) -> str | None:
    """Why ``path`` is not a checkpoint folder or archive at all (missing, another file, no
    meta.json), or None.

    >>> checkpoint_problem("/no/such/folder", "demo")
    "demo: '/no/such/folder' does not exist"
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if left_by_interrupted_save(path):
            return (
                f"{call}: {path!r} does not exist; an interrupted save left it as a "
                "'.old' folder beside it (docs/format.md, section 7)"
            )
        return f"{call}: {path!r} does not exist"
    except OSError as err:
        return f"{call}: cannot read {path!r}: {err.strerror}"
    if not stat.S_ISDIR(info.st_mode):
        try:
            with open(path, "rb") as handle:
                if handle.read(4) == b"PK\x03\x04":  # a ZIP file: validated as an archive
                    return None
        except OSError as err:
            return f"{call}: cannot read {path!r}: {err.strerror}"
        return f"{call}: {path!r} is a file, not a checkpoint folder or archive"
    if not os.path.isfile(os.path.join(path, META)):
        return f"{call}: {path!r} is not a checkpoint (no meta.json in it)"
    return None
