"""Single-file checkpoints (docs/format.md, section 10): a ZIP of the folder, leaves mapped."""

from __future__ import annotations

import io
import itertools
import os
import shutil
import stat
import struct
import threading
import uuid
import zipfile
import zlib
from pathlib import Path
from typing import Any

import torch

from tensordict._format import META, FormatError
from tensordict._load import _Leaf, _Loader
from tensordict._memmap import MemoryMappedTensor

ALIGN = 64  # every leaf's data starts at a multiple of this (any item size divides it)
_PAD_ID = 0x6474  # the extra field padding local headers ("td")
_LOCAL = struct.Struct("<4s5H3I2H")  # a local file header's fixed part (30 bytes)
_CENTRAL = struct.Struct("<4s6H3I5H2I")  # a central directory record's fixed part (46 bytes)
_CHUNK = 16 << 20


# ------------------------------------------------------------------ writing
def _files(folder: str) -> list[str]:
    """The folder's files as archive member names (relative, ``/``-separated), sorted."""
    names = []
    for here, dirs, files in os.walk(folder):
        dirs.sort()
        for name in files:
            full = os.path.join(here, name)
            if not stat.S_ISREG(os.lstat(full).st_mode):
                raise FormatError(f"pack_memmap: {full!r} is not a regular file")
            names.append(os.path.relpath(full, folder).replace(os.sep, "/"))
    return sorted(names)


def write_archive(folder: str, target: str, durable: bool = False) -> None:
    """Write the checkpoint folder ``folder`` as the archive ``target``, atomically."""
    staging = f"{target}.{uuid.uuid4().hex[:12]}.partial"
    try:
        with open(staging, "wb") as raw:
            with zipfile.ZipFile(raw, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for name in _files(folder):
                    full = os.path.join(folder, *name.split("/"))
                    size = os.path.getsize(full)
                    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_STORED
                    info.file_size = size
                    zip64 = size > zipfile.ZIP64_LIMIT
                    header = _LOCAL.size + len(name.encode()) + (20 if zip64 else 0) + 4
                    pad = -(raw.tell() + header) % ALIGN
                    info.extra = struct.pack("<HH", _PAD_ID, pad) + bytes(pad)
                    with zf.open(info, "w", force_zip64=zip64) as out, open(full, "rb") as src:
                        shutil.copyfileobj(src, out, _CHUNK)
            if durable:
                raw.flush()
                os.fsync(raw.fileno())
        os.replace(staging, target)
    except BaseException:
        if os.path.exists(staging):
            os.unlink(staging)
        raise


def pack_memmap(
    prefix: str | os.PathLike[str],
    archive_path: str | os.PathLike[str],
    *,
    compression: str | int | None = None,
    compresslevel: int | None = None,
) -> Path:
    """Pack the checkpoint folder ``prefix`` into the single-file archive ``archive_path``
    (leaves stored uncompressed and aligned, so loading maps them); the folder is
    validated first and the archive written atomically.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, pack_memmap
    >>> folder = tempfile.mkdtemp()
    >>> _ = TensorDict({"a": torch.arange(3)}, [3]).memmap(folder + "/ckpt")
    >>> path = pack_memmap(folder + "/ckpt", folder + "/ckpt.tdz")
    >>> TensorDict.load_memmap(path)["a"].tolist()
    [0, 1, 2]
    """
    call = "pack_memmap"
    if compression not in (None, "stored", 0) or compresslevel is not None:
        raise ValueError(
            f"{call}: compression={compression!r} is not supported; archives store leaves "
            "uncompressed so that loading can map them"
        )
    from tensordict._survey import checkpoint_problem, survey

    folder = os.path.abspath(os.fspath(prefix))
    problem = checkpoint_problem(folder, call)
    if problem is not None:
        raise ValueError(problem)
    survey(folder, call)
    write_archive(folder, os.path.abspath(os.fspath(archive_path)))
    return Path(archive_path)


def is_memmap_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a checkpoint archive (a ZIP file with a top-level meta.json);
    never raises.

    >>> import tempfile
    >>> from tensordict import is_memmap_archive
    >>> is_memmap_archive(tempfile.mkdtemp())
    False
    """
    try:
        if not os.path.isfile(path) or not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as zf:
            return META in zf.namelist()
    except Exception:  # (a damaged file is not an archive)
        return False


def unpack_memmap(archive_path: str | os.PathLike[str], prefix: str | os.PathLike[str]) -> Path:
    """Extract the archive ``archive_path`` into the checkpoint folder ``prefix``, after
    validating it as a load would; the folder is committed atomically.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict, unpack_memmap
    >>> folder = tempfile.mkdtemp()
    >>> _ = TensorDict({"a": torch.arange(3)}, [3]).memmap(folder + "/x.tdz")
    >>> TensorDict.load_memmap(unpack_memmap(folder + "/x.tdz", folder + "/x"))["a"].tolist()
    [0, 1, 2]
    """
    call = "unpack_memmap"
    archive = Archive(os.path.abspath(os.fspath(archive_path)), call)
    _Checker(call, False, False, archive).collection(archive.path, None)
    target = os.path.abspath(os.fspath(prefix))
    from tensordict._save import _check_replaceable, _commit

    _check_replaceable(target, call)
    token = uuid.uuid4().hex[:12]
    staging = f"{target}.{token}.partial"
    try:
        for name, (offset, size) in archive.members.items():
            out = os.path.join(staging, *name.split("/"))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as handle:
                handle.write(archive.read(offset, size))
        _commit(staging, target, token)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Path(prefix)


def refresh_archive_checksums(archive_path: str | os.PathLike[str]) -> Path:
    """Recompute every member's CRC-32 (after leaves were written in place through a
    ``mode="r+"`` load), so ZIP tools accept the archive again.

    >>> import tempfile, torch, zipfile
    >>> from tensordict import TensorDict, refresh_archive_checksums
    >>> path = tempfile.mkdtemp() + "/x.tdz"
    >>> _ = TensorDict({"a": torch.zeros(3)}, [3]).memmap(path)
    >>> TensorDict.load_memmap(path, mode="r+")["a"].fill_(1.0).tolist()
    [1.0, 1.0, 1.0]
    >>> with zipfile.ZipFile(refresh_archive_checksums(path)) as zf:
    ...     zf.testzip() is None
    True
    """
    call = "refresh_archive_checksums"
    path = os.path.abspath(os.fspath(archive_path))
    archive = Archive(path, call)
    with open(path, "r+b") as handle:
        handle.seek(archive.start_dir)
        for _ in range(archive.count):
            record = handle.tell()
            fixed = _CENTRAL.unpack(handle.read(_CENTRAL.size))
            name_len, extra_len, comment_len = fixed[10], fixed[11], fixed[12]
            name = handle.read(name_len).decode("utf-8", "replace")
            handle.seek(extra_len + comment_len, io.SEEK_CUR)
            after = handle.tell()
            if name not in archive.members:  # (a folder entry)
                continue
            offset, size = archive.members[name]
            crc = zlib.crc32(archive.read(offset, size))
            handle.seek(record + 16)  # the central record's CRC-32
            handle.write(struct.pack("<I", crc))
            handle.seek(archive.headers[name] + 14)  # the local header's
            handle.write(struct.pack("<I", crc))
            handle.seek(after)
    return Path(archive_path)


# ------------------------------------------------------------------ reading
class Archive:
    """An archive's validated index: member name -> (data offset, size), nothing mapped."""

    def __init__(self, path: str, call: str) -> None:
        self.path = path
        self.call = call
        self.members: dict[str, tuple[int, int]] = {}
        self.headers: dict[str, int] = {}
        self._storage: torch.Tensor | None = None
        self._lock = threading.Lock()
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                with zipfile.ZipFile(handle) as zf:
                    infos = zf.infolist()
                    self.start_dir = zf.start_dir
                self.count = len(infos)
                spans = [self._member(handle, info, size) for info in infos]
        except FormatError:
            raise
        except Exception as err:  # (zipfile's many errors on a damaged file)
            raise FormatError(f"{call}: {path!r} is not a valid archive: {err}") from None
        self.size = size
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            if start < end:
                raise FormatError(f"{call}: {path!r} has members that overlap")
        if META not in self.members:
            raise FormatError(f"{call}: {path!r} is not a checkpoint archive (no {META})")

    def _member(self, handle: Any, info: zipfile.ZipInfo, size: int) -> tuple[int, int]:
        call, name = self.call, info.filename
        parts = name.rstrip("/").split("/")
        if (
            not name
            or name.startswith("/")
            or "\\" in name
            or "\0" in name
            or any(part in ("", ".", "..") for part in parts)
        ):
            raise FormatError(f"{call}: {self.path!r} has a member named {name!r}, not allowed")
        if name in self.members or name in self.headers:
            raise FormatError(f"{call}: {self.path!r} has two members named {name!r}")
        handle.seek(info.header_offset)
        fixed = handle.read(_LOCAL.size)
        if len(fixed) != _LOCAL.size or fixed[:4] != b"PK\x03\x04":
            raise FormatError(f"{call}: {self.path!r} member {name!r} has no local header")
        local = _LOCAL.unpack(fixed)
        method, name_len, extra_len = local[3], local[9], local[10]
        start = info.header_offset + _LOCAL.size + name_len + extra_len
        if handle.read(name_len) != info.orig_filename.encode(
            "utf-8" if info.flag_bits & 0x800 else "cp437"
        ):
            raise FormatError(f"{call}: {self.path!r} member {name!r}: headers disagree")
        if method != zipfile.ZIP_STORED or info.compress_type != zipfile.ZIP_STORED:
            raise FormatError(
                f"{call}: {self.path!r} member {name!r} is compressed; archives store members "
                "uncompressed"
            )
        if info.compress_size != info.file_size or start + info.file_size > size:
            raise FormatError(
                f"{call}: {self.path!r} member {name!r} claims {info.file_size} bytes beyond "
                "the end of the file"
            )
        self.headers[name] = info.header_offset
        if not name.endswith("/"):  # (folder entries, as zip tools write them, hold nothing)
            self.members[name] = (start, info.file_size)
        return (info.header_offset, start + info.file_size)

    def member(self, path: str) -> str:
        """The member name of a virtual path ``<archive>/<name>``."""
        return path[len(self.path) + 1 :]

    def read(self, offset: int, size: int) -> bytes:
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            return handle.read(size)

    def storage(self, writable: bool) -> torch.Tensor:
        """The whole file mapped once as bytes (copy-on-write unless ``writable``)."""
        with self._lock:
            if self._storage is None:
                self._storage = torch.from_file(
                    self.path, shared=writable, size=self.size, dtype=torch.uint8
                )
            return self._storage


class _ArchiveLoader(_Loader):
    """The folder loader's validation, reading an archive's members instead of files."""

    def __init__(
        self, call: str, verify: bool, allow_pickle: bool | None, archive: Archive, mode: str = "r"
    ) -> None:
        super().__init__(call, verify, allow_pickle)
        self.archive = archive
        self.writable = mode == "r+"

    def _read_meta(self, folder: str, path: str) -> bytes:
        found = self.archive.members.get(self.archive.member(path))
        if found is None:
            raise FormatError(f"{self.call}: {folder!r} is not a checkpoint (no {META})")
        self._visit(path, folder)
        return self.archive.read(*found)

    def _folder_identity(self, folder: str) -> Any:
        return folder

    def _sub_folder(self, folder: str, name: Any, key: str, what: str) -> str:
        from tensordict._format import checked_name

        return checked_name(folder, name, self.call, key, what)

    def _leaf_size(self, folder: str, leaf_path: str, key: str) -> int:
        found = self.archive.members.get(self.archive.member(leaf_path))
        if found is None:
            raise FormatError(
                f"{self.call}: leaf file {leaf_path!r} of key {key!r} is missing from the archive"
            )
        return found[1]

    def _sha256(self, leaf_path: str) -> str:
        import hashlib

        return hashlib.sha256(
            self.archive.read(*self.archive.members[self.archive.member(leaf_path)])
        ).hexdigest()

    def _unpickle(self, file: str) -> Any:
        found = self.archive.members.get(self.archive.member(file))
        if found is None:
            raise FormatError(f"{self.call}: pickle file {file!r} is missing from the archive")
        return torch.load(io.BytesIO(self.archive.read(*found)), weights_only=False)

    def map_leaf(self, leaf: _Leaf) -> torch.Tensor:
        offset, size = self.archive.members[self.archive.member(leaf.path)]
        flat = self.archive.storage(self.writable)[offset : offset + size]
        if offset % max(leaf.dtype.itemsize, 1):  # (not written by us: unaligned, copied)
            flat = flat.clone()
        return MemoryMappedTensor._wrap(flat.view(leaf.dtype).view(leaf.shape))


class _Checker(_ArchiveLoader):
    """Validation only: pickle members are checked to exist, never unpickled."""

    def entry(
        self, folder: str, path: str, key: str, record: dict[str, Any], bs: torch.Size, device: Any
    ) -> Any:
        if record["kind"] != "pickle":
            return super().entry(folder, path, key, record, bs, device)
        from tensordict._nontensor import NonTensorData

        file = self._sub_folder(folder, record.get("file"), key, "file")
        self._leaf_size(folder, file, key)
        return NonTensorData(None, bs)


def archive_loader(
    target: str, call: str, verify: bool, allow_pickle: bool | None, mode: str = "r"
) -> _ArchiveLoader | None:
    """A loader for ``target`` when it is an archive file or a folder inside one."""
    if os.path.isdir(target):
        return None
    path = target
    while not os.path.isfile(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    if mode not in ("r", "r+"):
        raise ValueError(f"{call}: mode must be 'r' or 'r+', got {mode!r}")
    return _ArchiveLoader(call, verify, allow_pickle, Archive(path, call), mode)
