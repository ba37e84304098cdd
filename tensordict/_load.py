"""Loading checkpoints (docs/format.md): validate everything, then map the leaf files."""

from __future__ import annotations

import functools
import json
import json.scanner
import math
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

import torch

from tensordict._format import (
    _TYPES,
    DTYPES,
    FORMAT,
    MAX_BYTES,
    META,
    NON_TENSOR_TYPE,
    VERSION,
    CheckpointNotFoundError,
    FormatError,
    PickleRefusedError,
    check_link,
    checked_name,
    left_by_interrupted_save,
    lookup_type,
)
from tensordict._memmap import MemoryMappedTensor, _map_file, _read_only_mount
from tensordict._memmap_nested import view as nested_view
from tensordict._nontensor import NonTensorData, NonTensorStack
from tensordict._nontensor_class import entry_of
from tensordict._progress import progress_bar
from tensordict._torch_compat import fake_mode_active

MAX_DEPTH = 100  # nested collections; deeper folders are refused, not recursed into
_INTS = {int}  # the element types a valid shape holds (``bool`` is not ``int`` here)


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON")


# (made once: json.loads given parse_constant builds a new decoder on every call)
_DECODER = json.JSONDecoder(parse_constant=_not_json)
_decode = _DECODER.decode
# (the C scanner, which _decode calls; typeshed types its argument as a scanner)
_scan = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]


def _parse(text: str) -> Any:
    """``_decode(text)``, calling the scanner directly when nothing but JSON whitespace
    follows the value (the decoder's own code around it costs a sixth of a small parse)."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:  # (leading whitespace, or no value: the decoder decides)
        return _decode(text)
    if end != len(text) and text[end:].strip(" \t\n\r"):
        return _decode(text)  # (raises: extra data)
    return value


_TOP: dict[str, Any] = {
    "format": str,
    "version": int,
    "type": str,
    "batch_size": list,
    "device": (str, type(None)),
    "names": (list, type(None)),
    "entries": dict,
}


def _well_typed(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` has every member of :data:`_TOP`, each of its JSON type."""
    get = meta.get
    device, names = get("device", 0), get("names", 0)
    return (
        type(get("format")) is str
        and type(get("version")) is int
        and type(get("type")) is str
        and type(get("batch_size")) is list
        and (device is None or type(device) is str)
        and (names is None or type(names) is list)
        and type(get("entries")) is dict
    )


def _plain(meta: dict[str, Any]) -> bool:
    """Whether ``meta`` passes every check of :meth:`_Loader.meta` in its common form
    (an empty batch size, no names); False sends it through the checks one by one."""
    get = meta.get
    version, device = get("version"), get("device", 0)
    return (
        get("format") == FORMAT
        and type(version) is int
        and 1 <= version <= VERSION
        and type(get("type")) is str
        and get("batch_size") == []
        and get("shape", []) == []
        and (device is None or type(device) is str)
        and get("names", 0) is None
        and type(get("entries")) is dict
    )


class _Loader:
    folders = True  # loaded collections remember their folder (an archive's have none)

    def __init__(self, call: str, verify: bool, allow_pickle: bool | None) -> None:
        self.call = call
        self.verify = verify
        self.allow_pickle = allow_pickle
        self.seen: set[Any] = set()  # the meta.json files read so far
        self.identities: dict[str, Any] = {}  # sub-folder path -> (device, inode)
        # every leaf validated, in order, with the entries holding its placeholder
        self.slots: list[tuple[dict[str, Any], str, _Leaf]] = []
        # the nested (ragged) leaves among them: mapped flat, then viewed with their shapes
        self.ragged: list[tuple[dict[str, Any], str, torch.Tensor]] = []
        self.version = VERSION  # of the metadata file being read
        # the path whose identity (device, inode) must not change during the load, and
        # its identity when the load began (a save replaces a whole folder)
        self.watch: tuple[str, Any] = ("", None)

    def replaced(self) -> bool:
        """Whether the watched folder or archive file was replaced since the load began."""
        return bool(_identity(self.watch[0]) != self.watch[1])

    def meta(self, folder: str, inline: Any = None) -> dict[str, Any]:
        """``folder``'s metadata: ``inline`` (version 2: given by the parent's file, which
        describes its whole subtree) or else its meta.json, read once; checked either way."""
        if inline is not None:
            meta = inline
            identity = self.identities.pop(folder, None)  # (learnt by _sub_folder's lstat)
            if identity is None:
                identity = self._folder_identity(folder)
            if identity in self.seen:
                self._visit(identity, folder)  # (raises)
            self.seen.add(identity)
        else:
            path = folder + os.sep + META
            raw = self._read_meta(folder, path)
            try:
                meta = _parse(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as err:  # (JSONDecodeError: a ValueError)
                raise FormatError(f"{self.call}: {path!r} is not valid JSON: {err}") from None
            except RecursionError:
                raise FormatError(f"{self.call}: {path!r} nests its JSON too deeply") from None
        if type(meta) is dict and _plain(meta):
            return meta  # (the common case, every check below passed in one expression)
        path = folder + os.sep + META
        if not isinstance(meta, dict):
            raise FormatError(f"{self.call}: {path!r} must hold a JSON object")
        if not _well_typed(meta):  # (the common case passes in one expression)
            for member, kind in _TOP.items():
                if member not in meta:
                    raise FormatError(f"{self.call}: {path!r} lacks the member {member!r}")
                if not isinstance(meta[member], kind) or isinstance(meta[member], bool):
                    raise FormatError(f"{self.call}: {path!r} member {member!r} has the wrong type")
        if meta["format"] != FORMAT:
            raise FormatError(f"{self.call}: {path!r} is not a tensordict checkpoint")
        if meta["version"] > VERSION or meta["version"] < 1:
            raise FormatError(
                f"{self.call}: {path!r} has format version {meta['version']}; this "
                f"library reads versions 1 to {VERSION}"
            )
        bs = meta["batch_size"]
        if (
            bs
            and ({*map(type, bs)} != _INTS or min(bs) < 0 or max(bs) >= MAX_BYTES)
            and not ("stack_dim" in meta and _ragged_batch(bs))  # (a lazy stack's -1)
        ):
            _check_shape(self.call, path, "batch_size", bs)  # (raises)
        if "shape" in meta and meta["shape"] != meta["batch_size"]:
            raise FormatError(
                f"{self.call}: {path!r} member 'shape' {meta['shape']!r} differs from its "
                f"'batch_size' {meta['batch_size']!r}"
            )
        names = meta["names"]
        if names is not None and (
            len(names) != len(meta["batch_size"])
            or not all(n is None or type(n) is str for n in names)
        ):
            raise FormatError(
                f"{self.call}: {path!r} member 'names' must hold one string or null per "
                f"batch dim {meta['batch_size']}, got {names!r}"
            )
        return meta

    def _read_meta(self, folder: str, path: str) -> bytes:
        """The bytes of ``folder``'s meta.json: a regular file, read once per load (a
        folder reached twice, through links or entries naming one sub-folder, is refused:
        it would make a small folder load as an exponentially large tree)."""
        flags = os.O_RDONLY | os.O_NONBLOCK  # non-blocking: a FIFO swapped in cannot block us
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW)
        except OSError:  # (a link among others: ELOOP)
            fd = -1
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    check_link(folder, path, self.call, META, "metadata file")
                    fd = os.open(path, flags)
            except OSError:
                pass
        try:
            info = os.fstat(fd) if fd >= 0 else None
            if info is None or not stat.S_ISREG(info.st_mode):  # (a FIFO, a folder)
                hint = ""
                if left_by_interrupted_save(folder):
                    hint = "; an interrupted save left it as a '.old' folder beside it"
                if not os.path.lexists(folder):
                    raise CheckpointNotFoundError(
                        f"{self.call}: {folder!r} is not a checkpoint (nothing exists there){hint}"
                    )
                raise FormatError(f"{self.call}: {folder!r} is not a checkpoint (no {META}){hint}")
            self._visit((info.st_dev, info.st_ino), folder)
            first = os.read(fd, info.st_size + 1)  # (one read: the size is known)
            if len(first) <= info.st_size:
                return first
            chunks = [first]  # (it grew meanwhile: read on to its end)
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            if fd >= 0:
                os.close(fd)

    # ---- where the files live: a folder here; an archive overrides these (_archive.py)
    def _folder_identity(self, folder: str) -> Any:
        """What tells ``folder`` apart from every other (its device and inode), for a
        folder whose ``lstat`` :meth:`_sub_folder` did not make (the load's target)."""
        try:
            info = os.stat(folder)
        except OSError:
            raise FormatError(f"{self.call}: folder {folder!r} is missing") from None
        return (info.st_dev, info.st_ino)

    def _sub_folder(self, folder: str, name: Any, key: str, what: str) -> str:
        """The checked path of the entry ``name`` in ``folder`` (not leaving it); one
        ``lstat`` checks for a link and gives the identity :meth:`_folder_identity` needs."""
        path = checked_name(folder, name, self.call, key, what)
        try:
            info = os.lstat(path)
        except OSError:
            return path  # (missing: the caller says so, naming what it expected)
        if info.st_mode & _S_IFMT == _S_IFLNK:
            check_link(folder, path, self.call, key, what)
            try:
                info = os.stat(path)
            except OSError:
                return path
        self.identities[path] = (info.st_dev, info.st_ino)
        return path

    def _leaf_size(self, folder: str, leaf_path: str, key: str) -> int:
        """The size of a leaf file, after checking it is a regular file in ``folder``."""
        try:
            info = os.lstat(leaf_path)  # one call: the link check, the kind and the size
            if info.st_mode & _S_IFMT == _S_IFREG:  # (the common case: a regular file)
                return info.st_size
            if stat.S_ISLNK(info.st_mode):
                check_link(folder, leaf_path, self.call, key, "file")
                info = os.stat(leaf_path)
        except OSError:
            info = None
        if info is None or not stat.S_ISREG(info.st_mode):
            raise FormatError(
                f"{self.call}: leaf file {leaf_path!r} of key {key!r} is missing or not a "
                "regular file"
            )
        return info.st_size

    def _sha256(self, leaf_path: str) -> str:
        from tensordict._save import file_sha256

        return file_sha256(leaf_path)

    def _unpickle(self, file: str) -> Any:
        return torch.load(file, weights_only=False)

    def validated(self) -> None:
        """Called once everything is validated, before anything is mapped."""

    def finished(self) -> None:
        """Called once the load is over (mapped, or failed while mapping)."""

    def map_leaf(self, leaf: _Leaf) -> torch.Tensor:
        """The tensor of a validated leaf, mapping its file."""
        return MemoryMappedTensor._from_checked_file(*leaf, False)

    def _visit(self, identity: Any, folder: str) -> None:
        """Refuse a folder (identified by its meta.json, or itself for inline metadata)
        reached twice: a checkpoint is a tree."""
        if identity in self.seen:
            raise FormatError(
                f"{self.call}: {folder!r} is the same folder as one already loaded "
                "(two entries or links lead to it); a checkpoint is a tree"
            )
        self.seen.add(identity)

    def lookup(self, name: str, path: str) -> Any:
        """The class a checkpoint's ``type`` names (a hook for read-only tools)."""
        return lookup_type(name, self.call, path)

    def collection(self, folder: str, device: Any, inline: Any = None, depth: int = 0) -> Any:
        """The collection at ``folder`` (``inline``: its metadata object, given by its
        parent's), validated; its leaves are placeholders until the load maps them."""
        if depth >= MAX_DEPTH:
            raise FormatError(
                f"{self.call}: {folder!r} is nested more than {MAX_DEPTH} levels deep"
            )
        meta = self.meta(folder, inline)
        path = folder + os.sep + META
        version = meta["version"]
        if inline is not None and version != self.version:
            raise FormatError(
                f"{self.call}: {path!r} (inline) has version {version}, inside a file of "
                f"version {self.version}"
            )
        self.version = version
        cls: Any = _TYPES.get(meta["type"])  # (the common case: a registered name)
        if cls is None:
            cls = self.lookup(meta["type"], path)
        bs = torch.Size(meta["batch_size"]) if meta["batch_size"] else _NO_BATCH
        # Leaves are mapped on the CPU unless the caller asks for a device: the recorded
        # device says where the collection lived, not where its files are.
        dev = device if device is not None else (None if meta["device"] is None else "cpu")
        lazy = issubclass(cls, _lazy_type())
        if lazy != ("stack_dim" in meta):
            raise FormatError(
                f"{self.call}: {path!r} has type {meta['type']!r} "
                + (
                    "without a stack_dim"
                    if lazy
                    else "and a stack_dim, which only lazy stacks have"
                )
            )
        if lazy:
            stack_dim = meta["stack_dim"]
            if type(stack_dim) is not int or not 0 <= stack_dim < len(bs):
                raise FormatError(
                    f"{self.call}: {path!r} has an invalid stack_dim {stack_dim!r} for "
                    f"batch_size {list(bs)}"
                )
            count = bs[stack_dim]
            if count < 0:
                raise FormatError(
                    f"{self.call}: {path!r} has a ragged (-1) stack dim {stack_dim} in "
                    f"batch_size {list(bs)}"
                )
            inlines: list[Any] = [None] * count
            if version >= 2:
                inlines = meta.get("members")  # type: ignore[assignment]
                if not isinstance(inlines, list) or len(inlines) != count:
                    raise FormatError(
                        f"{self.call}: {path!r} must list {count} member metadata objects "
                        "under 'members' (version 2)"
                    )
            members = [
                self.collection(
                    self._sub_folder(folder, str(i), str(i), "member"),
                    device,
                    inlines[i],
                    depth + 1,
                )
                for i in range(count)
            ]
            want = [*bs[:stack_dim], *bs[stack_dim + 1 :]]  # (-1: a ragged dim, any size)
            for i, member in enumerate(members):
                got = list(member.batch_size)
                if len(got) != len(want) or any(
                    w not in (-1, g) for w, g in zip(want, got, strict=True)
                ):
                    raise FormatError(
                        f"{self.call}: member {i} of {path!r} has batch_size "
                        f"{list(member.batch_size)}, which does not fit batch_size {list(bs)}"
                    )
            named = meta["names"]  # (the stack dim's name; the members hold the others)
            try:
                stack = cls(members, stack_dim=stack_dim, stack_dim_name=named and named[stack_dim])
            except ValueError as err:
                raise FormatError(f"{self.call}: {path!r}: {err}") from None
            if stack.batch_size != bs:  # -1 exactly where the members' sizes differ
                raise FormatError(
                    f"{self.call}: {path!r} has batch_size {list(bs)}, but its members make "
                    f"{list(stack.batch_size)}"
                )
            return stack
        entries: dict[str, Any] = {}
        names: set[str] = set()
        slots = self.slots
        for key, record in meta["entries"].items():
            # (JSON objects are plain dicts; the two common kinds are handled here, the
            # others by :meth:`entry`)
            kind = record.get("kind") if type(record) is dict else None
            if type(kind) is not str:
                raise FormatError(
                    f"{self.call}: {path!r} entry {key!r} is not an object with a kind"
                )
            name = record.get("file", record.get("dir"))
            if type(name) is str:
                if name in names:
                    raise FormatError(
                        f"{self.call}: {path!r} entry {key!r} names {name!r}, which another "
                        "entry names too"
                    )
                names.add(name)
            if kind == "tensor":
                leaf = entries[key] = self._tensor(folder, path, key, record, bs)
                slots.append((entries, key, leaf))
            elif kind == "nested":
                leaf, shapes = entries[key] = self._nested_tensor(folder, path, key, record, bs)
                slots.append((entries, key, leaf))
                self.ragged.append((entries, key, shapes))
            elif kind == "collection":
                entries[key] = self._nested(folder, path, key, record, bs, device, depth)
            else:
                entries[key] = self.entry(folder, path, key, record, bs, device)
        if meta["type"] == NON_TENSOR_TYPE:
            self._check_non_tensor_root(path, entries, depth)
        td = cls._new_unsafe(entries, bs, None if dev is None else torch.device(dev), None)
        if meta["names"] is not None:
            td.names = meta["names"]
        if self.folders:
            td._saved_folder = folder
        return td

    def _check_non_tensor_root(self, path: str, entries: dict[str, Any], depth: int) -> None:
        """A ``"NonTensor"`` collection is a checkpoint's root holding one non-tensor entry
        (a non-tensor entry saved on its own; the load gives the entry)."""
        if depth:
            raise FormatError(
                f"{self.call}: {path!r} has type {NON_TENSOR_TYPE!r}, which only a "
                "checkpoint's root has (a nested non-tensor entry is an entry of its parent)"
            )
        from tensordict._nontensor_root import check_root  # (late: it builds on TensorDict)

        try:
            check_root(entries, self.call, repr(path))
        except ValueError as err:
            raise FormatError(str(err)) from None

    def _tensor(
        self, folder: str, path: str, key: str, record: dict[str, Any], bs: torch.Size
    ) -> _Leaf:
        """A tensor entry's leaf, validated (docs/format.md, section 8); not mapped yet."""
        # The common case passes each group of checks at once; when one fails,
        # :func:`_refuse_tensor` (or :func:`checked_name`) finds which and raises.
        name, shape, file = record.get("dtype"), record.get("shape"), record.get("file")
        known = _ITEMSIZES.get(name) if type(name) is str else None
        if known is None or type(shape) is not list:
            _refuse_tensor(self.call, path, key, record)
        for dim in shape:  # (a loop: shapes are short, and this beats set/min/max)
            if type(dim) is not int or not 0 <= dim < MAX_BYTES:
                _refuse_tensor(self.call, path, key, record)
        dtype, itemsize = known
        nbytes = math.prod(shape) * itemsize  # Python ints: no int64 overflow
        # (the strides' reach counts zero dims as one)
        if nbytes > MAX_BYTES or (0 in shape and _span(shape) * itemsize > MAX_BYTES):
            raise FormatError(
                f"{self.call}: {path!r} key {key!r} declares shape {shape}, beyond "
                f"{MAX_BYTES} bytes"
            )
        leaf_path = checked_name(folder, file, self.call, key, "file")
        actual = self._leaf_size(folder, leaf_path, key)
        if actual != nbytes:
            raise FormatError(
                f"{self.call}: leaf file {leaf_path!r} of key {key!r} holds {actual} bytes; "
                f"shape {shape} of {name} needs {nbytes}"
            )
        if bs and shape[: len(bs)] != list(bs):
            raise FormatError(
                f"{self.call}: {path!r} key {key!r} has shape {shape}, which does not "
                f"start with batch_size {list(bs)}"
            )
        if "sha256" in record:
            if type(record["sha256"]) is not str:
                raise FormatError(
                    f"{self.call}: {path!r} key {key!r} has a non-string sha256 "
                    f"{record['sha256']!r}"
                )
            if self.verify and self._sha256(leaf_path) != record["sha256"]:
                raise FormatError(
                    f"{self.call}: leaf file {leaf_path!r} of key {key!r} fails its checksum"
                )
        return (leaf_path, dtype, torch.Size(shape))

    def _nested_tensor(
        self, folder: str, path: str, key: str, record: dict[str, Any], bs: torch.Size
    ) -> tuple[_Leaf, torch.Tensor]:
        """A nested (ragged) tensor entry, validated: its flat leaf (the elements' values
        end to end) and its element shapes, one row per element."""
        shapes = record.get("shapes")
        if (
            type(shapes) is not list
            or not shapes
            or any(type(row) is not list for row in shapes)
            or len({len(row) for row in shapes}) != 1
        ):
            raise FormatError(
                f"{self.call}: {path!r} key {key!r} must list its element shapes under "
                "'shapes': one or more lists of ints, all of the same length"
            )
        for row in shapes:
            _check_shape(self.call, path, "element shape of key", row, key)
        total = sum(math.prod(row) for row in shapes)
        flat = {k: v for k, v in record.items() if k != "shapes"}
        flat["shape"] = [total]
        leaf = self._tensor(folder, path, key, flat, _NO_BATCH)
        if bs and (
            len(shapes) != bs[0] or any(row[: len(bs) - 1] != list(bs[1:]) for row in shapes)
        ):
            raise FormatError(
                f"{self.call}: {path!r} key {key!r} has {len(shapes)} elements of shapes "
                f"{shapes}, which do not start with batch_size {list(bs)}"
            )
        return leaf, torch.tensor(shapes, dtype=torch.int64)

    def _nested(
        self,
        folder: str,
        path: str,
        key: str,
        record: dict[str, Any],
        bs: torch.Size,
        device: Any,
        depth: int = 0,
    ) -> Any:
        """A collection entry's collection, validated (its leaves are placeholders)."""
        sub = self._sub_folder(folder, record.get("dir"), key, "folder")
        inline = record.get("meta")
        version = self.version
        if version >= 2 and type(inline) is not dict:
            raise FormatError(
                f"{self.call}: {path!r} key {key!r} lacks its inline metadata object "
                "'meta' (version 2)"
            )
        nested = self.collection(sub, device, inline if version >= 2 else None, depth + 1)
        self.version = version
        if bs and list(nested.batch_size[: len(bs)]) != list(bs):
            raise FormatError(
                f"{self.call}: {path!r} key {key!r} has batch_size "
                f"{list(nested.batch_size)}, which does not start with {list(bs)}"
            )
        return nested

    def entry(
        self, folder: str, path: str, key: str, record: dict[str, Any], bs: torch.Size, device: Any
    ) -> Any:
        """The value of one entry of any kind (a tensor's is its unmapped leaf). A load's
        walk (:meth:`collection`) handles tensor and collection entries itself, counting
        the nesting depth; it calls this for the other kinds, the hook read-only tools
        override."""
        kind = record["kind"]
        if kind == "tensor":
            return self._tensor(folder, path, key, record, bs)
        if kind == "nested":
            return self._nested_tensor(folder, path, key, record, bs)
        if kind == "collection":  # (outside a walk: the depth counts from here)
            return self._nested(folder, path, key, record, bs, device)
        if kind == "json":
            if "value" not in record:
                raise FormatError(f"{self.call}: {path!r} key {key!r} lacks its value")
            tag = record.get("class")
            if tag is None:
                return NonTensorData(record["value"], bs)
            try:
                return entry_of(tag, record["value"], bs, self.call, f"{path!r} key {key!r}")
            except ValueError as err:
                raise FormatError(str(err)) from None
        if kind == "json_stack":
            values, positions = record.get("values"), record.get("positions")
            if not isinstance(values, list):
                raise FormatError(f"{self.call}: {path!r} key {key!r} has no list of values")
            try:
                stack = NonTensorStack._from_positions(
                    values, torch.tensor(positions, dtype=torch.long)
                )
            except (TypeError, ValueError, RuntimeError) as err:
                raise FormatError(
                    f"{self.call}: {path!r} key {key!r}: bad positions: {err}"
                ) from None
            if stack.batch_size[: len(bs)] != bs:  # (a stack may be longer than the batch)
                raise FormatError(
                    f"{self.call}: {path!r} key {key!r} has positions of shape "
                    f"{list(stack.batch_size)}, which does not start with batch_size {list(bs)}"
                )
            return stack
        if kind == "pickle":
            file = self._sub_folder(folder, record.get("file"), key, "file")
            if not self.allow_pickle:
                raise PickleRefusedError(
                    f"{self.call}: key {key!r} in {path!r} is pickled data; pass "
                    "allow_pickle=True to unpickle it (only for files you trust)"
                )
            return self._unpickle(file)
        raise FormatError(f"{self.call}: {path!r} key {key!r} has unknown kind {kind!r}")


@functools.cache
def _lazy_type() -> type:
    """LazyStackedTensorDict: the one kind stored as members (imported late: a cycle)."""
    from tensordict._lazy import LazyStackedTensorDict

    return LazyStackedTensorDict


# A validated leaf file (path, dtype, shape), mapped once every file has been checked.
_Leaf = tuple[str, torch.dtype, torch.Size]

_S_IFMT, _S_IFREG, _S_IFLNK = 0o170000, stat.S_IFREG, stat.S_IFLNK  # (no S_ISREG call)
_ITEMSIZES = {name: (dtype, dtype.itemsize) for name, dtype in DTYPES.items()}
_NO_BATCH = torch.Size([])


def _span(shape: list[int]) -> int:
    """The elements a shape's strides reach, zero dims counted as one."""
    return math.prod(max(s, 1) for s in shape)


def _refuse_tensor(call: str, path: str, key: str, record: dict[str, Any]) -> NoReturn:
    """Raise the error for a tensor entry whose dtype or shape is invalid."""
    name = record.get("dtype")
    if type(name) is not str or name not in DTYPES:
        raise FormatError(f"{call}: {path!r} key {key!r} has unknown dtype {name!r}")
    _check_shape(call, path, "shape of key", record.get("shape"), key)
    raise FormatError(f"{call}: {path!r} key {key!r} is not a valid tensor entry")


def _ragged_batch(bs: list[Any]) -> bool:
    """Whether ``bs`` is a lazy stack's batch size with ragged dims: ints, each -1 or a
    valid size."""
    return all(type(s) is int and (s == -1 or 0 <= s < MAX_BYTES) for s in bs)


def _check_shape(call: str, path: str, what: str, shape: Any, key: str | None = None) -> None:
    if type(shape) is not list or not all(
        type(s) is int and 0 <= s < MAX_BYTES  # (type(True) is bool, not int)
        for s in shape
    ):
        what = what if key is None else f"{what} {key!r}"
        raise FormatError(
            f"{call}: {path!r} {what} must be a list of non-negative ints, got {shape!r}"
        )


def load(
    prefix: str,
    *,
    call: str,
    device: Any = None,
    num_threads: int = 0,
    verify: bool = False,
    allow_pickle: bool | None = None,
    mode: str | None = None,
    non_blocking: bool = False,
    pbar: bool = False,
) -> Any:
    """Load the checkpoint at ``prefix``; everything is validated before anything is mapped;
    ``pbar`` shows a progress bar advancing per leaf mapped."""
    target = os.path.abspath(os.fspath(prefix))
    for _ in range(_ATTEMPTS):
        try:
            info: os.stat_result | None = os.stat(target)
        except OSError:
            info = None
        loader: _Loader | None = None
        try:
            loader = _loader(target, info, call, verify, allow_pickle, mode)
            td = _load_once(loader, target, device, num_threads, non_blocking, pbar)
        except (FormatError, RuntimeError, OSError) as err:
            if loader is None:
                if _identity(target) != (None if info is None else (info.st_dev, info.st_ino)):
                    continue  # (what was at the path was replaced while we looked at it)
            elif loader.replaced():
                continue  # the folder was replaced while we read it: read the new one
            if type(err) is FormatError:
                from tensordict._append import interrupted_append

                where = interrupted_append(target)
                if where is not None:
                    raise FormatError(
                        f"{err}; an append_memmap to {where!r} was interrupted: the next "
                        "append_memmap there finishes or undoes it"
                    ) from None
            raise
        if not loader.replaced():
            return td
    raise FormatError(
        f"{call}: {target!r} was replaced by concurrent saves while loading, "
        f"{_ATTEMPTS} times; try again"
    )


_ATTEMPTS = 5
_NON_TENSOR_KINDS = ("json", "json_stack", "pickle")


def load_entry(prefix: str, *, call: str, allow_pickle: bool | None) -> Any:
    """The non-tensor entry named by the last part of ``prefix`` in the checkpoint (a
    folder, or a folder in an archive) holding it, when nothing exists at ``prefix``; None
    when there is no such entry.

    A non-tensor entry lives in its parent's ``meta.json`` (docs/format.md, section 5),
    not in a sub-folder; upstream tensordict writes one, so code loading ``path / key``
    finds the entry here. Only the parent's metadata is read: no leaf is mapped."""
    target = os.path.abspath(os.fspath(prefix))
    parent, key = os.path.split(target)
    if os.path.lexists(target):
        return None
    try:
        info: os.stat_result | None = os.stat(parent)
    except OSError:
        info = None
    try:
        loader = _loader(parent, info, call, False, allow_pickle, None)
    except (FormatError, OSError):
        return None
    try:
        try:
            meta = loader.meta(parent)
        except (FormatError, OSError):
            return None  # (no checkpoint there either: the caller's error stands)
        record = meta["entries"].get(key)
        if type(record) is not dict or record.get("kind") not in _NON_TENSOR_KINDS:
            return None
        bs = torch.Size(meta["batch_size"])
        return loader.entry(parent, parent + os.sep + META, key, record, bs, None)
    finally:
        loader.finished()


def _identity(folder: str) -> tuple[int, int] | None:
    """Which folder (or file) is at this path now (a save replaces the whole folder)."""
    try:
        stat = os.stat(folder)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


@functools.cache
def _archive_loader() -> Any:
    """archive_loader (imported late: _archive imports this module)."""
    from tensordict._archive import archive_loader

    return archive_loader


def _loader(
    target: str,
    info: os.stat_result | None,
    call: str,
    verify: bool,
    allow_pickle: bool | None,
    mode: str | None,
) -> _Loader:
    """The loader for ``target`` (``info``: its stat, None if missing): a folder, or a
    place inside an archive file (which then is what must not be replaced meanwhile).
    ``mode``: "r" maps copy-on-write, "r+" shared, None as each file allows (a folder's;
    an archive's: "r")."""
    if info is None or not stat.S_ISDIR(info.st_mode):
        archived: _Loader | None = _archive_loader()(
            target, call, verify, allow_pickle, mode or "r", info
        )
        if archived is not None:
            return archived
    kind = _Loader if mode is None else _PrivateLoader if mode == "r" else _SharedLoader
    loader = kind(call, verify, allow_pickle)
    loader.watch = (target, None if info is None else (info.st_dev, info.st_ino))
    return loader


class _PrivateLoader(_Loader):
    """A folder's loader for ``mode="r"``: every leaf mapped copy-on-write."""

    def map_leaf(self, leaf: _Leaf) -> torch.Tensor:
        path, dtype, shape = leaf
        return MemoryMappedTensor._wrap(_map_file(path, dtype, shape, True, writable=False))


class _SharedLoader(_Loader):
    """A folder's loader for ``mode="r+"``: every leaf mapped shared, writes reaching the
    file; a file this process may not write is refused."""

    def map_leaf(self, leaf: _Leaf) -> torch.Tensor:
        if not os.access(leaf[0], os.W_OK) or _read_only_mount(leaf[0]):
            raise PermissionError(
                f"{self.call}: mode='r+' maps the files shared, and {leaf[0]!r} is not "
                "writable by this process; load with mode='r' (copy-on-write)"
            )
        return super().map_leaf(leaf)


def _load_once(
    loader: _Loader,
    target: str,
    device: Any,
    num_threads: int,
    non_blocking: bool,
    pbar: bool = False,
) -> Any:
    td = loader.collection(target, device)
    loader.validated()
    slots = loader.slots
    call = loader.call
    bar = progress_bar(call, len(slots), unit="leaf") if pbar else None

    def open_leaf(slot: tuple[dict[str, Any], str, _Leaf]) -> None:
        store, key, leaf = slot
        tensor: Any = loader.map_leaf(leaf)
        if device is not None:
            tensor = tensor.to(device, non_blocking=non_blocking)
        store[key] = tensor
        if bar is not None:
            bar.update(1)

    try:
        if type(loader).map_leaf is _Loader.map_leaf and fake_mode_active():
            # under FakeTensorMode (tracing): fake leaves of the recorded shapes, no file read
            for store, key, (_, dtype, shape) in slots:
                store[key] = torch.empty(shape, dtype=dtype)
        elif device is None and bar is None and num_threads <= 1:  # (the common case)
            if type(loader).map_leaf is _Loader.map_leaf:  # (a folder: one call per leaf)
                from_file = MemoryMappedTensor._from_checked_file
                for store, key, (path, dtype, shape) in slots:
                    store[key] = from_file(path, dtype, shape, False)
            else:
                map_leaf = loader.map_leaf
                for store, key, leaf in slots:
                    store[key] = map_leaf(leaf)
        elif num_threads > 1 and len(slots) > 1:  # (automatic, -1: this thread; mapping is cheap)
            with ThreadPoolExecutor(max_workers=num_threads) as pool:
                list(pool.map(open_leaf, slots))
        else:
            for slot in slots:
                open_leaf(slot)
        for store, key, shapes in loader.ragged:  # (mapped flat: viewed as nested now)
            flat = store[key]
            if isinstance(flat, MemoryMappedTensor):
                store[key] = MemoryMappedTensor._nested(flat, shapes)
            else:  # (moved to another device)
                store[key] = nested_view(flat, shapes)
    finally:
        loader.finished()
        if bar is not None:
            bar.close()
    return td
