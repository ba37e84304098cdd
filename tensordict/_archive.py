"""Single-file checkpoints (docs/format.md, section 10): a ZIP of the folder, leaves mapped."""

from __future__ import annotations

import io
import itertools
import mmap
import os
import shutil
import stat
import struct
import threading
import uuid
import zipfile
import zlib
from pathlib import Path
from typing import Any, NoReturn

import torch

from tensordict._format import META, CheckpointNotFoundError, FormatError, checked_name
from tensordict._load import _Leaf, _Loader
from tensordict._memmap import MemoryMappedTensor

ALIGN = 64  # every leaf's data starts at a multiple of this (any item size divides it)
_PAD_ID = 0x6474  # the extra field padding local headers ("td")
_LOCAL = struct.Struct("<4s5H3I2H")  # a local file header's fixed part (30 bytes)
_CENTRAL = struct.Struct("<4s6H3I5H2I")  # a central directory record's fixed part (46 bytes)
_EOCD = struct.Struct("<4s4H2IH")  # the end of central directory record (22 bytes)
_HEAD = struct.Struct("<4s24x3H")  # a central record's signature, name/extra/comment lengths
_LOCATOR = struct.Struct("<4sIQI")  # the zip64 end of central directory locator (20 bytes)
_EOCD64 = struct.Struct("<4sQ2H2I4Q")  # the zip64 end of central directory record
_CHUNK = 16 << 20
# (archive identity, scope) -> (member count, central directory bytes, parsed members)
_INDEXES: dict[tuple[Any, bytes], tuple[int, bytes, dict[str, tuple[int, int, int, bytes]]]] = {}
_CACHED_INDEXES = 16
_TAIL = 16 << 10  # the first read at the file's end (the directory of ~200 members fits)
_SMALL = 1 << 20  # a member this small (metadata) is read with its local header at once


def _open(path: str) -> int:
    """``path`` opened read-only (non-blocking: a FIFO put there cannot block us)."""
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))


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
        if durable:  # (the rename itself)
            fd = os.open(os.path.dirname(target) or ".", os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
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
    if os.path.isfile(folder):
        raise ValueError(f"{call}: {folder!r} is a file; pack_memmap packs a checkpoint folder")
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
    spans = {name: archive.span(name) for name in archive.entries}
    archive.check_overlaps()
    target = os.path.abspath(os.fspath(prefix))
    from tensordict._save import _check_replaceable, _commit

    _check_replaceable(target, call)
    token = uuid.uuid4().hex[:12]
    staging = f"{target}.{token}.partial"
    try:
        os.makedirs(staging)
        for name, span in spans.items():
            assert span is not None
            out = os.path.join(staging, *name.split("/"))
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with open(out, "wb") as handle:
                handle.write(archive.read(*span))
        _commit(staging, target, token)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        archive.close()
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
    try:
        crcs = {}
        for name in archive.entries:
            span = archive.span(name)
            assert span is not None
            crcs[name] = zlib.crc32(archive.read(*span))
    finally:
        archive.close()
    with open(path, "r+b") as handle:
        handle.seek(archive.start_dir)
        for _ in range(archive.count):
            record = handle.tell()
            fixed = _CENTRAL.unpack(handle.read(_CENTRAL.size))
            name_len, extra_len, comment_len = fixed[10], fixed[11], fixed[12]
            name = handle.read(name_len).decode("utf-8" if fixed[3] & 0x800 else "cp437")
            after = handle.tell() + extra_len + comment_len
            if name in crcs:  # (not a folder entry)
                handle.seek(record + 16)  # the central record's CRC-32
                handle.write(struct.pack("<I", crcs[name]))
                handle.seek(archive.entries[name][0] + 14)  # the local header's
                handle.write(struct.pack("<I", crcs[name]))
            handle.seek(after)
    return Path(archive_path)


# ------------------------------------------------------------------ reading
class Archive:
    """An archive's index, read from its central directory in one read; each member's
    local header is checked when a load first uses it (:meth:`span`). Nothing is mapped
    until :meth:`storage`."""

    def __init__(
        self, path: str, call: str, scope: str = "", fd: int = -1, info: Any = None
    ) -> None:
        """``fd``: the file already opened (read-only) at ``path``, which the archive then
        owns, and ``info`` its ``os.fstat``."""
        self.path = path
        self.call = call
        self.scope = scope.encode()  # only members under this folder ("" for all) are indexed
        self.entries: dict[str, tuple[int, int, int, bytes]] = {}  # offset, size, method, name
        self.spans: dict[str, tuple[int, int]] = {}  # checked members: data offset, size
        self._storage: torch.Tensor | None = None
        self._lock = threading.Lock()
        self.fd = fd
        if fd < 0:
            try:
                self.fd = _open(path)
            except OSError as err:
                raise FormatError(f"{call}: cannot open {path!r}: {err.strerror}") from None
        try:
            if info is None:
                info = os.fstat(self.fd)
            if not stat.S_ISREG(info.st_mode):
                raise FormatError(f"{call}: {path!r} is not a file")
            self.size = info.st_size
            self.identity = (info.st_dev, info.st_ino)  # (the file validated and mapped)
            self._index()
        except BaseException:
            self.close()
            raise
        if META not in self.entries:
            self.close()
            raise FormatError(f"{call}: {path!r} is not a checkpoint archive (no {META})")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()

    def _bad(self, why: str) -> FormatError:
        return FormatError(
            f"{self.call}: {self.path!r} is not a memory-mapped tensordict archive: {why}"
        )

    def _read(self, offset: int, size: int) -> bytes:
        data = os.pread(self.fd, size, offset) if size else b""
        if len(data) != size:
            raise self._bad(f"{size} bytes at {offset} lie beyond the end of the file")
        return data

    def _index(self) -> None:
        # one read for the end record and, in a small archive, the whole directory
        tail_size = min(self.size, _TAIL)
        tail = self._read(self.size - tail_size, tail_size)
        at = tail_size - _EOCD.size  # (no archive comment: the common case)
        if at < 0 or not tail.startswith(b"PK\x05\x06", at):
            tail_size = min(self.size, _EOCD.size + 0xFFFF)
            tail = self._read(self.size - tail_size, tail_size)
            at = tail.rfind(b"PK\x05\x06")
        if at < 0 or at + _EOCD.size > len(tail):
            raise self._bad("no end of central directory record")
        eocd = _EOCD.unpack_from(tail, at)
        count, cd_size, cd_offset = eocd[4], eocd[5], eocd[6]
        if 0xFFFF in (count,) or 0xFFFFFFFF in (cd_size, cd_offset):  # zip64
            where = self.size - tail_size + at - _LOCATOR.size
            locator = _LOCATOR.unpack(self._read(where, _LOCATOR.size)) if where >= 0 else None
            if locator is None or locator[0] != b"PK\x06\x07":
                raise self._bad("no zip64 end of central directory locator")
            record = _EOCD64.unpack(self._read(locator[2], _EOCD64.size))
            if record[0] != b"PK\x06\x06":
                raise self._bad("no zip64 end of central directory record")
            count, cd_size, cd_offset = record[7], record[8], record[9]
        if cd_offset + cd_size > self.size or count > cd_size // _CENTRAL.size:
            raise self._bad("its central directory lies beyond the end of the file")
        inside = cd_offset - (self.size - tail_size)  # (where the directory starts in tail)
        directory = (
            tail[inside : inside + cd_size] if inside >= 0 else self._read(cd_offset, cd_size)
        )
        self.start_dir, self.count = cd_offset, count
        # The parse is a function of the directory's bytes and the scope alone: a load of
        # the same (unchanged) archive again reuses it after comparing those bytes.
        key = (self.identity, self.scope)
        known = _INDEXES.get(key)
        if known is not None and known[0] == count and known[1] == directory:
            self.entries = known[2]
            return
        self._parse(directory, count)
        if len(directory) <= _SMALL:  # (what is kept stays small: 16 directories of 1 MiB)
            if len(_INDEXES) >= _CACHED_INDEXES:
                _INDEXES.pop(next(iter(_INDEXES), None), None)  # type: ignore[arg-type]
            _INDEXES[key] = (count, directory, self.entries)

    def _parse(self, directory: bytes, count: int) -> None:
        """Index the members of the central directory ``directory`` that lie under the
        scope (and the top-level meta.json); the others' records are only walked over."""
        pos, size, scope = 0, len(directory), self.scope
        head, central, sig = _HEAD.unpack_from, _CENTRAL.unpack_from, b"PK\x01\x02"
        entries = self.entries
        try:
            for _ in range(count):
                signature, name_len, extra_len, comment_len = head(directory, pos)
                if signature != sig:
                    raise self._bad("a central directory record has a bad signature")
                start = pos + _CENTRAL.size
                pos = start + name_len + extra_len + comment_len
                if not directory.startswith(scope, start) and not (
                    name_len == 9 and directory.startswith(b"meta.json", start)
                ):
                    continue  # (a load of a sub-folder does not use it: only its lengths are read)
                if pos > size:
                    raise self._bad("its central directory is truncated")
                fixed = central(directory, start - _CENTRAL.size)
                flags, method, csize, usize = fixed[3], fixed[4], fixed[8], fixed[9]
                offset = fixed[16]
                raw_name = directory[start : start + name_len]
                if 0xFFFFFFFF in (usize, csize, offset):
                    extra = directory[start + name_len : start + name_len + extra_len]
                    usize, csize, offset = _zip64_sizes(extra, usize, csize, offset)
                try:
                    name = raw_name.decode("ascii")  # (the common case, and the fast one)
                except UnicodeDecodeError:
                    try:
                        name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
                    except UnicodeDecodeError:
                        raise self._bad(f"a member name {raw_name!r} is not UTF-8") from None
                if name in entries:
                    raise FormatError(f"{self.call}: {self.path!r} has two members named {name!r}")
                if csize != usize:
                    raise FormatError(
                        f"{self.call}: {self.path!r} member {name!r} is compressed; archives "
                        "store members uncompressed"
                    )
                if not name.endswith("/"):  # (folder entries, as zip tools write them: nothing)
                    entries[name] = (offset, usize, method, raw_name)
        except struct.error:  # (a record's fixed part runs past the directory's end)
            raise self._bad("its central directory is truncated") from None
        if pos > size:
            raise self._bad("its central directory is truncated")

    def _check_name(self, name: str) -> None:
        if (
            name
            and name[0] != "/"
            and "//" not in name
            and "/." not in name
            and name[0] != "."
            and "\\" not in name
            and "\0" not in name
        ):
            return  # (the common case: no part can be empty, "." or "..")
        parts = name.rstrip("/").split("/")
        if (
            not name
            or name.startswith("/")
            or "\\" in name
            or "\0" in name
            or any(part in ("", ".", "..") for part in parts)
        ):
            raise FormatError(
                f"{self.call}: {self.path!r} has a member named {name!r}, not allowed"
            )

    def span(self, name: str) -> tuple[int, int] | None:
        """The (data offset, size) of member ``name`` after checking its local header, or
        None when there is no such member."""
        found = self.spans.get(name)
        if found is not None:
            return found
        entry = self.entries.get(name)
        if entry is None:
            return None
        offset, raw_name = entry[0], entry[3]
        want = _LOCAL.size + len(raw_name)  # the local header and its name: one read
        head = self._read(offset, want) if offset + want <= self.size else b""
        return self._checked(name, entry, head)

    def member_bytes(self, name: str) -> bytes | None:
        """The data of the (small) member ``name``, its local header checked as by
        :meth:`span`: one read for both when the header's extra field is short."""
        entry = self.entries.get(name)
        if entry is None or name in self.spans or entry[1] > _SMALL:
            found = self.span(name)
            return None if found is None else self.read(*found)
        offset, size, raw_name = entry[0], entry[1], entry[3]
        head = os.pread(self.fd, _LOCAL.size + len(raw_name) + 2 * ALIGN + size, offset)
        start, size = self._checked(name, entry, head)
        if start + size <= offset + len(head):
            return head[start - offset : start - offset + size]
        return self.read(start, size)  # (a long extra field)

    def _checked(
        self, name: str, entry: tuple[int, int, int, bytes], head: bytes
    ) -> tuple[int, int]:
        """Check the local header at the start of ``head`` (read at the member's offset)
        against the central record ``entry``; remember and return the data's span."""
        offset, size, method, raw_name = entry
        self._check_name(name)
        want = _LOCAL.size + len(raw_name)
        if len(head) < want or head[:4] != b"PK\x03\x04":
            raise FormatError(f"{self.call}: {self.path!r} member {name!r} has no local header")
        local = _LOCAL.unpack_from(head)
        name_len, extra_len = local[9], local[10]
        if method != zipfile.ZIP_STORED or local[3] != zipfile.ZIP_STORED:
            raise FormatError(
                f"{self.call}: {self.path!r} member {name!r} is compressed; archives store "
                "members uncompressed"
            )
        if name_len != len(raw_name) or head[_LOCAL.size : want] != raw_name:
            raise FormatError(f"{self.call}: {self.path!r} member {name!r}: headers disagree")
        start = offset + _LOCAL.size + name_len + extra_len
        if start + size > self.size:
            raise FormatError(
                f"{self.call}: {self.path!r} member {name!r} claims {size} bytes beyond the "
                "end of the file"
            )
        self.spans[name] = (start, size)
        return (start, size)

    def check_overlaps(self) -> None:
        """Refuse members used by this load whose data overlap (they would alias)."""
        spans = sorted(self.spans.values())
        for (start, size), (after, _) in itertools.pairwise(spans):
            if after < start + size:
                raise FormatError(f"{self.call}: {self.path!r} has members that overlap")

    def member(self, path: str) -> str:
        """The member name of a virtual path ``<archive>/<name>``."""
        return path[len(self.path) + 1 :]

    def read(self, offset: int, size: int) -> bytes:
        return self._read(offset, size)

    def storage(self, writable: bool) -> torch.UntypedStorage:
        """The whole file mapped once: copy-on-write from the descriptor the archive was
        validated through (so it is that file, whatever its name leads to now), or, when
        ``writable``, shared and opened anew by name for writing."""
        with self._lock:
            if self._storage is None:
                if writable or self.fd < 0:
                    self._storage = torch.from_file(
                        self.path, shared=writable, size=self.size, dtype=torch.uint8
                    )
                else:
                    mapped = self.copy_on_write(0, self.size)
                    self._storage = torch.frombuffer(mapped, dtype=torch.uint8)
            return self._storage.untyped_storage()

    def copy_on_write(self, offset: int, length: int) -> mmap.mmap:
        """``length`` bytes of the file from ``offset`` (a multiple of the allocation
        granularity), mapped copy-on-write from the descriptor it was validated through."""
        try:
            return mmap.mmap(self.fd, length, access=mmap.ACCESS_COPY, offset=offset)
        except (ValueError, OSError) as err:  # (it shrank since: not ours to map)
            raise FormatError(f"{self.call}: {self.path!r} changed while loading: {err}") from None


def _zip64_sizes(extra: bytes, usize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """The sizes and offset a zip64 extra field (id 1) gives for the 0xFFFFFFFF ones."""
    pos = 0
    while pos + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4 : pos + 4 + length]
        if kind == 1:
            values = [v for (v,) in struct.iter_unpack("<Q", body[: len(body) // 8 * 8])]
            if usize == 0xFFFFFFFF and values:
                usize = values.pop(0)
            if csize == 0xFFFFFFFF and values:
                csize = values.pop(0)
            if offset == 0xFFFFFFFF and values:
                offset = values.pop(0)
        pos += 4 + length
    return usize, csize, offset


class _ArchiveLoader(_Loader):
    """The folder loader's validation, reading an archive's members instead of files."""

    folders = False

    def __init__(
        self, call: str, verify: bool, allow_pickle: bool | None, archive: Archive, mode: str = "r"
    ) -> None:
        super().__init__(call, verify, allow_pickle)
        self.archive = archive
        self.watch = (archive.path, archive.identity)  # (the file mapped must be the one read)
        self.writable = mode == "r+"
        self._bases: dict[torch.dtype, torch.Tensor] = {}  # the mapping, per dtype
        self._at: dict[str, tuple[int, int]] = {}  # leaf path -> its data's (offset, size)
        self._window: mmap.mmap | None = None  # read-only: the part of the file mapped
        self._shift = 0  # the file offset of the mapping's first byte
        self._lock = threading.Lock()

    def _read_meta(self, folder: str, path: str) -> bytes:
        data = self.archive.member_bytes(self.archive.member(path))
        if data is None:
            self._refuse_folder(folder)
        self._visit(path, folder)
        return data

    def _refuse_folder(self, folder: str) -> NoReturn:
        """Say why ``folder`` holds no metadata: nothing of the archive is there, it is
        a file of the archive, or a folder without meta.json. (A load of a sub-folder
        indexed only the members under it: the whole directory is read here.)"""
        name = self.archive.member(folder)
        whole = Archive(self.archive.path, self.call)
        try:
            names = whole.entries
        finally:
            whole.close()
        if name in names:
            raise FormatError(f"{self.call}: {folder!r} is a file of the archive, not a checkpoint")
        if name and not any(n.startswith(name + "/") for n in names):
            raise CheckpointNotFoundError(
                f"{self.call}: {folder!r} is not a checkpoint (nothing exists there)"
            )
        raise FormatError(f"{self.call}: {folder!r} is not a checkpoint (no {META})")

    def _folder_identity(self, folder: str) -> Any:
        return folder

    def _sub_folder(self, folder: str, name: Any, key: str, what: str) -> str:
        return checked_name(folder, name, self.call, key, what)

    def _leaf_size(self, folder: str, leaf_path: str, key: str) -> int:
        found = self.archive.span(self.archive.member(leaf_path))
        if found is None:
            raise FormatError(
                f"{self.call}: leaf file {leaf_path!r} of key {key!r} is missing from the archive"
            )
        self._at[leaf_path] = found
        return found[1]

    def _sha256(self, leaf_path: str) -> str:
        import hashlib

        return hashlib.sha256(
            self.archive.read(*self.archive.spans[self.archive.member(leaf_path)])
        ).hexdigest()

    def _unpickle(self, file: str) -> Any:
        found = self.archive.span(self.archive.member(file))
        if found is None:
            raise FormatError(f"{self.call}: pickle file {file!r} is missing from the archive")
        return torch.load(io.BytesIO(self.archive.read(*found)), weights_only=False)

    def validated(self) -> None:
        self.archive.check_overlaps()
        if self.writable:
            self.archive.close()  # (mapping opens the file anew, for writing)

    def finished(self) -> None:
        self.archive.close()

    def replaced(self) -> bool:
        # (read-only, the file validated is the file mapped: see Archive.storage)
        return self.writable and super().replaced()

    def _base(self, dtype: torch.dtype) -> torch.Tensor:
        """The mapping as one flat tensor of ``dtype``, made once per dtype. Read-only, it
        maps only the window of the file that this load's leaves lie in (a sub-folder's
        few members, not the whole archive: less to map and unmap), from the descriptor
        the archive was validated through; ``_shift`` is the window's offset in the file."""
        itemsize = dtype.itemsize
        with self._lock:  # (threads may map leaves; the archive's own lock is for storage())
            found = self._bases.get(dtype)
            if found is not None:
                return found
            if self._window is None and not self.writable and self.archive.fd >= 0:
                at = self._at
                low, high = self.archive.size, 0
                for _, _, (path, _, _) in self.slots:
                    start, size = at[path]
                    low, high = min(low, start), max(high, start + size)
                low -= low % mmap.ALLOCATIONGRANULARITY
                if high - low >= 16:  # (else: the whole file, as below)
                    self._window = self.archive.copy_on_write(low, high - low)
                    self._shift = low
            if self._window is not None:
                count = len(self._window) // itemsize
                base = torch.frombuffer(self._window, dtype=dtype, count=count)
            else:  # the whole file
                storage = self.archive.storage(self.writable)
                empty = torch.empty(0, dtype=torch.uint8).view(dtype)  # (no complex32 warning)
                base = empty.set_(storage, 0, (storage.nbytes() // itemsize,), (1,))
            self._bases[dtype] = base
            return base

    def map_leaf(self, leaf: _Leaf) -> torch.Tensor:
        path, dtype, shape = leaf
        offset, size = self._at[path]
        itemsize = dtype.itemsize
        if offset % itemsize:  # (not written by us: unaligned, so copied)
            storage = self.archive.storage(self.writable)
            flat = torch.empty(0, dtype=torch.uint8).set_(storage, offset, (size,), (1,))
            return MemoryMappedTensor._wrap(flat.clone().view(dtype).view(shape))
        base = self._bases.get(dtype)
        if base is None:
            base = self._base(dtype)
        if len(shape) == 1:
            strides: Any = _ONE
        else:
            strides, step = [], 1
            for dim in reversed(shape):
                strides.append(step)
                step *= max(dim, 1)
            strides.reverse()
        start = (offset - self._shift) // itemsize
        view = torch.Tensor.as_strided(base, shape, strides, start)
        view.__class__ = MemoryMappedTensor  # (a fresh object: no alias, as as_subclass makes)
        return view


_ONE = (1,)  # a vector's strides


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
    target: str,
    call: str,
    verify: bool,
    allow_pickle: bool | None,
    mode: str = "r",
    info: os.stat_result | None = None,
) -> _ArchiveLoader | None:
    """A loader for ``target`` when it is an archive file or a folder inside one;
    ``info`` is ``os.stat(target)`` (None: there is nothing at that path)."""
    path, fd = target, -1
    if info is None:  # inside an archive, or missing: the nearest thing that exists
        while True:
            parent = os.path.dirname(path)
            if parent == path:
                return None
            path = parent
            try:
                fd = _open(path)  # (a folder opens too: fstat tells)
            except OSError:
                continue
            info = os.fstat(fd)
            break
    if not stat.S_ISREG(info.st_mode):
        if fd >= 0:
            os.close(fd)
        return None
    if mode not in ("r", "r+"):
        if fd >= 0:
            os.close(fd)
        raise ValueError(f"{call}: mode must be 'r' or 'r+', got {mode!r}")
    scope = target[len(path) + 1 :].replace(os.sep, "/")
    archive = Archive(path, call, scope + "/" if scope else "", fd, info if fd >= 0 else None)
    return _ArchiveLoader(call, verify, allow_pickle, archive, mode)
