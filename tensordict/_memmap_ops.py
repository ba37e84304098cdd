"""Memory-mapped TensorDicts: memmap_/memmap/memmap_like/load_memmap and friends."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._convert import map_leaves
from tensordict._format import CheckpointNotFoundError, FormatError
from tensordict._load import load as _load
from tensordict._load import load_entry
from tensordict._memmap import MemoryMappedTensor
from tensordict._memmap_backing import MemmapExistsError
from tensordict._primitives import CollectionPrimitives
from tensordict._progress import progress_bar
from tensordict._unbatched import refuse_unbatched

if TYPE_CHECKING:
    from typing import Self


_DEFAULT_THREADS = -1  # automatic: several threads for checkpoints of 16 MB and more
_CPU = torch.device("cpu")  # memory-mapped collections live on the CPU, as upstream's


def _inside(path: str | None, folder: str) -> bool:
    return path is not None and os.path.abspath(path).startswith(os.path.abspath(folder) + os.sep)


def _folders(subpath: Any) -> list[Any]:
    """The folder names of a ``subpath``: a string, or a (nested) tuple or list of them,
    as a nested key is written."""
    if isinstance(subpath, (tuple, list)):
        return [name for part in subpath for name in _folders(part)]
    return [subpath]


class MemmapOps(CollectionPrimitives):
    """Writing a collection as memory-mapped files (docs/format.md) and loading it back."""

    __slots__ = ()

    def is_memmap(self) -> bool:
        """Whether every tensor leaf is a MemoryMappedTensor (however it was built).

        >>> import torch
        >>> from tensordict import TensorDict, MemoryMappedTensor
        >>> TensorDict({"a": MemoryMappedTensor.zeros(3)}, [3]).is_memmap()
        True
        """
        leaves = self._tensor_leaves([])
        return bool(leaves) and all(isinstance(x, MemoryMappedTensor) for x in leaves)

    def _check_existing(self, prefix: str | None, copy_existing: bool, call: str) -> None:
        if prefix is None or copy_existing:
            return
        for leaf in self._tensor_leaves([]):
            if isinstance(leaf, MemoryMappedTensor):
                name = leaf.filename
                if name is not None and not _inside(name, prefix):
                    raise RuntimeError(
                        f"{call}: A filename was provided but the tensor already has a file "
                        f"associated: a leaf is already memory-mapped at {name!r}, outside "
                        f"{os.fspath(prefix)!r}; pass copy_existing=True to copy it there"
                    )

    def memmap(
        self,
        prefix: str | os.PathLike[str] | None = None,
        copy_existing: bool = False,
        *,
        num_threads: int = _DEFAULT_THREADS,
        return_early: bool = False,
        share_non_tensor: bool = False,
        existsok: bool = True,
        robust_key: bool | None = True,
        archive: bool | None = None,
        compression: str | int | None = None,
        durable: bool = False,
        checksum: bool = False,
        allow_pickle: bool | None = None,
        pbar: bool = False,
    ) -> Self:
        """A memory-mapped copy: written as a checkpoint at ``prefix`` (docs/format.md),
        or in anonymous shared memory without one. The save is atomic.

        A ``prefix`` ending in ``.tdz`` (or ``archive=True``) writes a single-file archive
        (section 10 of the spec). With ``return_early=True`` the save runs in the
        background and a :class:`~tensordict.TensorDictFuture` is returned; its
        ``result()`` is the memory-mapped copy (do not modify the leaves meanwhile).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> folder = tempfile.mkdtemp() + "/ckpt"
        >>> td = TensorDict({"a": torch.rand(10), "b": {"c": torch.rand(10)}}, [10])
        >>> saved = td.memmap(folder)
        >>> saved.is_memmap(), bool((TensorDict.load_memmap(folder) == td).all())
        (True, True)

        ``pbar=True`` shows a progress bar (a widget in notebooks) advancing per leaf.
        """
        return self._memmap_entry(  # type: ignore[no-any-return]
            "memmap", locals(), like=False, inplace=False
        )

    def memmap_(
        self,
        prefix: str | os.PathLike[str] | None = None,
        copy_existing: bool = False,
        *,
        num_threads: int = _DEFAULT_THREADS,
        return_early: bool = False,
        share_non_tensor: bool = False,
        existsok: bool = True,
        robust_key: bool | None = True,
        archive: bool | None = None,
        compression: str | int | None = None,
        durable: bool = False,
        checksum: bool = False,
        allow_pickle: bool | None = None,
        pbar: bool = False,
    ) -> Self:
        """:meth:`memmap`, replacing this TensorDict's leaves by the memory-mapped ones.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3)}, [3])
        >>> future = td.memmap_(tempfile.mkdtemp() + "/ckpt", return_early=True)
        >>> future.result() is td, td.is_memmap()
        (True, True)
        """
        return self._memmap_entry(  # type: ignore[no-any-return]
            "memmap_", locals(), like=False, inplace=True
        )

    def memmap_like(
        self,
        prefix: str | os.PathLike[str] | None = None,
        copy_existing: bool = False,
        *,
        existsok: bool = True,
        num_threads: int = _DEFAULT_THREADS,
        return_early: bool = False,
        share_non_tensor: bool = False,
        robust_key: bool | None = True,
        archive: bool | None = None,
        durable: bool = False,
        pbar: bool = False,
    ) -> Self:
        """Allocate memory-mapped leaves of the same shapes and dtypes, without copying
        values (an expanded TensorDict is never materialised in RAM).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> datum = TensorDict({"image": torch.zeros(3, 8, 8, dtype=torch.uint8)}, [])
        >>> data = datum.expand(1000).memmap_like(tempfile.mkdtemp() + "/data")
        >>> data.batch_size, data["image"].is_contiguous()
        (torch.Size([1000]), True)
        """
        return self._memmap_entry(  # type: ignore[no-any-return]
            "memmap_like", locals(), like=True, inplace=False
        )

    def _memmap_entry(self, op: str, args: dict[str, Any], like: bool, inplace: bool) -> Any:
        """Check the keywords the memmap family shares, then save now or in the background."""
        call = self._call(op)
        refuse_unbatched(self, call, "memory-mapped")
        if args["robust_key"] is False:  # legacy names: every key is its file name as it is
            from tensordict._format import is_plain_name

            for key in self.keys(include_nested=True):
                for part in (key,) if isinstance(key, str) else key:
                    if not is_plain_name(part):
                        raise RuntimeError(
                            f"{call}: robust_key=False uses each key as a file name as it "
                            f"is: No such file or directory can be named {part!r}; pass "
                            "robust_key=True (the default) to encode it"
                        )
        if args["share_non_tensor"]:
            raise ValueError(
                f"{call}: share_non_tensor=True is not supported: non-tensor values are "
                "written into the checkpoint, not shared between processes"
            )
        prefix = args["prefix"]
        archive = args["archive"]
        if archive is None:
            archive = prefix is not None and os.fspath(prefix).endswith(".tdz")
        if archive and prefix is None:
            raise ValueError(f"{call}: archive=True needs a prefix (the archive file)")
        compression = args.get("compression")
        if compression not in (None, "stored", 0):
            raise ValueError(
                f"{call}: compression={compression!r} is not supported; archives store "
                "leaves uncompressed so that they can be mapped"
            )

        def work() -> Any:  # the result is locked, as upstream's: its keys are the files
            return self._memmap(
                call,
                prefix,
                args["copy_existing"],
                args["num_threads"],
                args["existsok"],
                args["durable"],
                args.get("checksum", False),
                args.get("allow_pickle"),
                like=like,
                inplace=inplace,
                archive=bool(archive),
                pbar=args.get("pbar", False),
            ).lock_()

        if not args["return_early"]:
            return work()
        from tensordict._save_async import submit

        return submit(work)

    def _memmap(
        self,
        call: str,
        prefix: Any,
        copy_existing: bool,
        num_threads: int,
        existsok: bool,
        durable: bool,
        checksum: bool,
        allow_pickle: bool | None,
        like: bool,
        inplace: bool,
        archive: bool = False,
        pbar: bool = False,
    ) -> Self:
        if prefix is None:
            bar = progress_bar(call, len(self._tensor_leaves([])), unit="leaf") if pbar else None

            def share(x: Tensor) -> Tensor:
                if bar is not None:
                    bar.update(1)
                if isinstance(x, MemoryMappedTensor) and not like:
                    return x
                return MemoryMappedTensor.from_tensor(x.detach(), copy_data=not like)

            try:
                out = map_leaves(self, share, _CPU)
            finally:
                if bar is not None:
                    bar.close()
            if inplace:
                _swap_leaves(self, out)
                return self
            return out
        prefix = os.fspath(prefix)
        if archive:
            return self._memmap_archive(
                call, prefix, existsok, durable, checksum, allow_pickle, like, inplace
            )
        self._check_existing(prefix, copy_existing, call)
        if not existsok and os.path.exists(prefix):
            raise MemmapExistsError(
                f"{call}: {prefix!r} already exists (pass existsok=True to replace it)"
            )
        from tensordict._save import save

        mapping: dict[int, Tensor] = {}

        def keep(pairs: list[tuple[Tensor, MemoryMappedTensor]]) -> None:
            for old, new in pairs:
                mapping[id(old)] = new

        meta = save(
            self,
            prefix,
            call=call,
            like=like,
            num_threads=num_threads,
            durable=durable,
            checksum=checksum,
            allow_pickle=allow_pickle,
            on_leaves=keep,
            pbar=pbar,
        )
        out = map_leaves(self, lambda x: mapping[id(x)], _CPU)
        if inplace:
            _swap_leaves(self, out)
            out = self
        from tensordict._memmap_add import record_folders

        record_folders(out, os.path.abspath(prefix), meta)
        return out

    def _memmap_archive(
        self,
        call: str,
        prefix: str,
        existsok: bool,
        durable: bool,
        checksum: bool,
        allow_pickle: bool | None,
        like: bool,
        inplace: bool,
    ) -> Self:
        """Write the checkpoint as one archive file (docs/format.md, section 10), then
        load it: the leaves map the archive."""
        import shutil
        import uuid

        from tensordict._archive import write_archive
        from tensordict._save import save

        target = os.path.abspath(prefix)
        if os.path.lexists(target) and (not existsok or not os.path.isfile(target)):
            raise MemmapExistsError(
                f"{call}: {prefix!r} already exists"
                + ("" if os.path.isfile(target) else " and is not an archive file")
            )
        folder = f"{target}.{uuid.uuid4().hex[:12]}.dir"
        try:
            save(
                self,
                folder,
                call=call,
                like=like,
                num_threads=1,
                checksum=checksum,
                allow_pickle=allow_pickle,
            )
            write_archive(folder, target, durable)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        # memmap_like leaves are there to be filled: they write through to the archive
        out = _load(target, call=call, allow_pickle=True, mode="r+" if like else "r")
        if inplace:
            _swap_leaves(self, out)
            return self
        return out  # type: ignore[no-any-return]

    def make_memmap(
        self, key: Any, shape: Any, *, dtype: torch.dtype | None = None, robust_key: Any = True
    ) -> MemoryMappedTensor:
        """A new memory-mapped leaf at ``key`` (zeros, of ``shape`` and ``dtype``), returned
        for filling. In a collection saved to a folder (:attr:`saved_path`) its file is
        written in that folder and added to the checkpoint (a later load sees it; nested
        keys make sub-folders); otherwise it lives in shared memory. A ``RuntimeError``
        (also a ``KeyError``) when ``key`` is already an entry.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/ckpt"
        >>> td = TensorDict({}, [2]).memmap_(path)
        >>> td.make_memmap(("obs", "x"), (2, 3)).fill_(1.0).shape
        torch.Size([2, 3])
        >>> TensorDict.load_memmap(path)["obs", "x"].sum().item()
        6.0
        """
        from tensordict import _memmap_nested as nested
        from tensordict._memmap import _nested_arg, _shape_arg

        call = self._call("make_memmap")
        dtype = torch.get_default_dtype() if dtype is None else dtype
        shapes = _nested_arg(call, (shape,), None)
        if shapes is not None:  # a nested (ragged) leaf: a 2-D tensor of element shapes
            return self._new_memmap_leaf(
                "make_memmap",
                key,
                lambda: nested.zeros(shapes, dtype),
                like=True,
                in_memory=lambda: MemoryMappedTensor.empty(shapes, dtype=dtype),
            )
        size = _shape_arg(call, (shape,))
        return self._new_memmap_leaf(
            "make_memmap",
            key,
            lambda: torch.empty(size, dtype=dtype, device="meta"),
            like=True,
            in_memory=lambda: MemoryMappedTensor.empty(size, dtype=dtype),
        )

    def make_memmap_from_tensor(
        self, key: Any, tensor: Tensor, *, copy_data: bool = True, robust_key: Any = True
    ) -> MemoryMappedTensor:
        """A new memory-mapped leaf at ``key`` with the shape and dtype of ``tensor`` (and
        its values unless ``copy_data=False``), returned: in the folder the collection is
        saved to (as :meth:`make_memmap`), or in shared memory; a ``RuntimeError`` (also a
        ``KeyError``) when ``key`` exists.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({}, [2])
        >>> td.make_memmap_from_tensor("a", torch.ones(2)).tolist(), td.is_memmap()
        ([1.0, 1.0], True)
        """
        if tensor.is_nested:
            from tensordict import _memmap_nested as nested

            nested.refuse_jagged(f"{self._call('make_memmap_from_tensor')}({key!r})", tensor)
        return self._new_memmap_leaf(
            "make_memmap_from_tensor",
            key,
            lambda: tensor.detach().as_subclass(Tensor),  # copied, even from a mapped file
            like=not copy_data,
            in_memory=lambda: MemoryMappedTensor.from_tensor(tensor, copy_data=copy_data),
        )

    def make_memmap_from_storage(
        self,
        key: Any,
        storage: torch.UntypedStorage,
        shape: Any,
        *,
        dtype: torch.dtype | None = None,
        robust_key: Any = True,
    ) -> MemoryMappedTensor:
        """A new memory-mapped leaf at ``key`` viewing ``storage`` (a memory-mapped or
        shared-memory storage) as ``shape`` and ``dtype``, returned; a ``RuntimeError``
        (also a ``KeyError``) when ``key`` exists.

        In a collection saved to a folder (:attr:`saved_path`) the leaf is a new file of
        that checkpoint holding a copy of the storage's bytes (a checkpoint's leaves are its
        own files), and a storage mapping another file is refused.

        >>> import torch
        >>> from tensordict import MemoryMappedTensor, TensorDict
        >>> source = MemoryMappedTensor.zeros(2, 3)
        >>> td = TensorDict({}, [2])
        >>> td.make_memmap_from_storage("a", source.untyped_storage(), (2, 3)).shape
        torch.Size([2, 3])
        """
        dtype = torch.get_default_dtype() if dtype is None else dtype

        def view() -> MemoryMappedTensor:
            return MemoryMappedTensor.from_storage(storage, shape=tuple(shape), dtype=dtype)

        from tensordict._memmap_backing import backing_of

        raw = storage.untyped() if isinstance(storage, torch.TypedStorage) else storage
        backing = backing_of(raw)
        own = backing.filename if backing is not None else getattr(raw, "filename", None)
        return self._new_memmap_leaf(
            "make_memmap_from_storage",
            key,
            lambda: view().as_subclass(Tensor),
            like=False,
            in_memory=view,
            storage_file=own,
        )

    def _new_memmap_leaf(
        self,
        op: str,
        key: Any,
        source: Any,
        like: bool,
        in_memory: Any,
        storage_file: str | None = None,
    ) -> MemoryMappedTensor:
        """Add a memory-mapped leaf at ``key``: written into the folder this collection is
        saved to (``source()``'s values, or zeros with ``like``), else ``in_memory()``."""
        from tensordict._memmap_add import add_leaf, saved_folder

        call = self._call(op)
        if self._stack_parts() is not None:
            raise RuntimeError(
                f"{call}: a lazy stack cannot hold a new memory-mapped leaf (it would not be "
                "one contiguous view); make it in each member instead"
            )
        self._check_new_memmap_key(op, key)
        folder = saved_folder(self)
        if folder is None:
            leaf: MemoryMappedTensor = in_memory()
            self._add_memmap_leaf(key, leaf)
            return leaf
        from tensordict._keys import key_path

        return add_leaf(self, folder, call, key_path(key, call), source(), like, storage_file)

    def _add_memmap_leaf(self, key: Any, leaf: Any) -> None:
        """``set`` for the make_memmap family, which adds to a memory-mapped (so locked)
        collection as upstream's does; the lock, where there was one, is put back."""
        if not self._is_locked:
            self.set(key, leaf)
            return
        self.unlock_()
        try:
            self.set(key, leaf)
        finally:
            self.lock_()

    def _check_new_memmap_key(self, op: str, key: Any) -> None:
        if key in self.keys(include_nested=True):
            from tensordict._memmap_add import EntryExistsError

            raise EntryExistsError(
                f"{self._call(op)}: the key {key!r} already exists within the target "
                "tensordict; delete that entry before making a new memory-mapped leaf there"
            )

    def memmap_refresh_(self, *, allow_pickle: bool | None = None) -> Self:
        """Re-read the checkpoint this collection maps (its :attr:`saved_path`) and take
        its entries as they are on disk now (keys no longer there are removed); a
        RuntimeError when it maps no checkpoint.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/ckpt"
        >>> td = TensorDict({"a": torch.zeros(2)}, [2]).memmap(path)
        >>> _ = TensorDict({"a": torch.ones(2)}, [2]).memmap(path, existsok=True)
        >>> td.memmap_refresh_()["a"].tolist()
        [1.0, 1.0]
        """
        path = self.saved_path  # (None unless every leaf maps a file of that checkpoint)
        if path is None:
            raise RuntimeError(
                f"{self._call('memmap_refresh_')}: not memory-mapped from a checkpoint "
                "(saved_path is None); nothing to refresh"
            )
        _adopt(self, type(self).load_memmap(path, allow_pickle=allow_pickle))
        return self

    @classmethod
    def load_memmap(
        cls,
        prefix: str | os.PathLike[str],
        device: Any = None,
        non_blocking: bool = False,
        *,
        out: Any = None,
        robust_key: bool | None = True,
        subpath: Any = None,
        mode: str | None = None,
        num_threads: int = _DEFAULT_THREADS,
        allow_pickle: bool | None = None,
        verify: bool = False,
        pbar: bool = False,
    ) -> Any:
        """Load a checkpoint (docs/format.md) lazily: leaves map their files.

        Everything is validated first; a sub-folder loads on its own (partial loading),
        named directly or as ``subpath`` under ``prefix`` (a ``/``-separated path or a
        tuple of folder names). ``prefix`` may be an archive file (``.tdz``): its leaves
        map the one file. ``mode="r"`` maps copy-on-write (writes to the leaves stay in
        memory, the files never change), ``mode="r+"`` shared (writes reach the files; a
        ``PermissionError`` for a file this process may not write); the default, None,
        is ``"r"`` for an archive and, for a folder, shared where the file is writable and
        copy-on-write elsewhere. With ``out``, ``out`` takes the loaded entries (as
        :meth:`load_memmap_`) and is returned.
        ``pbar=True`` shows a progress bar advancing per leaf.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/ckpt"
        >>> _ = TensorDict({"net": {"w": torch.ones(2)}}, []).memmap(path)
        >>> TensorDict.load_memmap(path, subpath=("net",))["w"].tolist()
        [1.0, 1.0]
        """
        call = "TensorDict.load_memmap"
        # (robust_key: names are never decoded, keys are read from the metadata: any value)
        if allow_pickle is not None and type(allow_pickle) is not bool:
            raise TypeError(f"{call}: allow_pickle must be a bool or None, got {allow_pickle!r}")
        if mode is not None and mode not in ("r", "r+"):
            raise ValueError(f"{call}: mode must be 'r', 'r+' or None, got {mode!r}")
        path = os.fspath(prefix)
        if type(subpath) is str:  # (the common case, without the general one's generator)
            if type(path) is str and subpath[:1] != os.sep:
                path = path + os.sep + subpath  # (os.path.join; the loader normalises it)
            else:
                path = os.path.join(path, subpath)
        elif subpath is not None:
            parts = [subpath] if isinstance(subpath, os.PathLike) else _folders(subpath)
            path = os.path.join(path, *(os.fspath(part) for part in parts))
        try:
            loaded = _load(
                path,
                call=call,
                device=device,
                num_threads=num_threads,
                verify=verify,
                allow_pickle=allow_pickle,
                mode=mode,
                non_blocking=non_blocking,
                pbar=pbar,
            )
        except FormatError as err:
            from tensordict._load_upstream import is_upstream, load_upstream

            if out is None:  # (nothing at path / key: a non-tensor entry of the parent?)
                entry = load_entry(path, call=call, allow_pickle=allow_pickle)
                if entry is not None:
                    return entry
            if not is_upstream(path):  # (a folder saved by upstream tensordict: read it)
                if subpath is not None and isinstance(err, CheckpointNotFoundError):
                    raise CheckpointNotFoundError(
                        f"{call}: No tensordict found under subpath {subpath!r} of "
                        f"{os.fspath(prefix)!r} ({str(err).split(': ', 1)[-1]})"
                    ) from None
                raise
            loaded = load_upstream(path, call, allow_pickle, mode)
            if device is not None:
                loaded = loaded.to(device, non_blocking=non_blocking)
        if out is None:
            return _unwrap()(loaded)  # (a non-tensor entry saved on its own: the entry)
        _adopt(out, loaded)
        return out

    def load_memmap_(self, prefix: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Load a checkpoint into this collection, returned: its leaves are replaced by the
        loaded (memory-mapped) ones, its nested collections kept and filled the same way,
        and its keys the checkpoint lacks removed (upstream's; to copy the values into the
        existing leaves instead, ``self.update_(TensorDict.load_memmap(prefix))``).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp()
        >>> _ = TensorDict({"a": torch.ones(2)}, [2]).memmap(path)
        >>> td = TensorDict({"b": torch.zeros(2)}, [2]).load_memmap_(path)
        >>> list(td.keys()), td["a"].tolist()
        (['a'], [1.0, 1.0])
        """
        kwargs.setdefault("device", self.device)
        return type(self).load_memmap(prefix, out=self, **kwargs)  # type: ignore[no-any-return]

    def save(self, prefix: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Alias of :meth:`memmap` (the checkpoint is written; a memory-mapped copy returned)."""
        return self.memmap(prefix, **kwargs)

    def dumps(self, prefix: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Alias of :meth:`save` (upstream's other spelling).

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> TensorDict({"a": torch.ones(1)}, [1]).dumps(tempfile.mkdtemp()).is_memmap()
        True
        """
        return self.memmap(prefix, **kwargs)

    def load_(self, prefix: str | os.PathLike[str], **kwargs: Any) -> Self:
        """Alias of :meth:`load_memmap_`: copy a checkpoint's values into this collection.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp()
        >>> _ = TensorDict({"a": torch.ones(2)}, [2]).memmap(path)
        >>> TensorDict({"a": torch.zeros(2)}, [2]).load_(path)["a"].tolist()
        [1.0, 1.0]
        """
        return self.load_memmap_(prefix, **kwargs)

    @classmethod
    def load(cls, prefix: str | os.PathLike[str], **kwargs: Any) -> Any:
        """Alias of :meth:`load_memmap`."""
        return cls.load_memmap(prefix, **kwargs)

    @property
    def saved_path(self) -> str | None:
        """The checkpoint folder this collection was saved as or loaded from (also while it
        holds no leaf; :meth:`make_memmap` adds leaves there), as long as every tensor leaf
        maps a file of it; else None (leaves in memory or shared memory, mixed checkpoints,
        an archive). A collection assembled from mapped leaves gives the folder of their
        checkpoint's root.

        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> path = tempfile.mkdtemp() + "/ckpt"
        >>> td = TensorDict({"net": {"w": torch.zeros(2)}}, []).memmap(path)
        >>> td.saved_path == path, TensorDict({"a": torch.zeros(2)}, [2]).saved_path
        (True, None)
        """
        from tensordict._memmap_add import saved_folder

        folder = saved_folder(self)
        if folder is not None:
            return folder
        roots: set[str] = set()
        if not _checkpoint_roots(self, 0, roots) or len(roots) != 1:
            return None
        return roots.pop()


@functools.cache
def _unwrap() -> Callable[[Any], Any]:
    """``_nontensor_root.unwrap`` (imported once, late: that module builds on TensorDict)."""
    from tensordict._nontensor_root import unwrap

    return unwrap


def _adopt(target: Any, loaded: Any) -> None:
    """Give ``target`` the entries of ``loaded`` (``load_memmap(out=)``): leaves replaced,
    nested collections reused and filled the same way, keys ``loaded`` lacks removed."""
    parts, new_parts = target._stack_parts(), loaded._stack_parts()
    if parts is not None or new_parts is not None:
        if parts is None or new_parts is None or len(parts[1]) != len(new_parts[1]):
            target.update_(loaded)  # (no member-by-member correspondence: copy the values)
            return
        for member, new in zip(parts[1], new_parts[1], strict=True):
            _adopt(member, new)
        return
    locked = target.is_locked
    if locked:
        target.unlock_()
    try:
        entries = loaded._tensordict
        for key in [k for k in target._tensordict if k not in entries]:
            del target[key]
        for key, value in entries.items():
            current = target._tensordict.get(key)
            if isinstance(current, CollectionPrimitives) and isinstance(
                value, CollectionPrimitives
            ):
                _adopt(current, value)
            else:
                target.set(key, value)
    finally:
        if locked:
            target.lock_()


def _swap_leaves(td: Any, new: Any) -> None:
    """Give ``td`` the leaves (and the device) of ``new`` (same structure), level by
    level, in place."""
    td._device = new._device
    parts = td._stack_parts()
    if parts is not None:
        for a, b in zip(parts[1], new._stack_parts()[1], strict=True):
            _swap_leaves(a, b)
        return
    for key, value in td._tensordict.items():
        replacement = new._tensordict[key]
        if isinstance(value, Tensor):
            td._tensordict[key] = replacement
        elif isinstance(value, CollectionPrimitives):
            _swap_leaves(value, replacement)


def _checkpoint_roots(td: Any, depth: int, roots: set[str]) -> bool:
    """Add to ``roots`` the folder ``depth`` levels above each leaf file of ``td`` (the
    checkpoint root: one folder per nesting level, one per member of a stack); False
    when a tensor leaf maps no file."""
    parts = td._stack_parts()
    if parts is not None:  # members are saved as the sub-folders 0, 1, ...
        return all(_checkpoint_roots(member, depth + 1, roots) for member in parts[1])
    for value in td._tensordict.values():
        if isinstance(value, Tensor):
            name = value.filename if isinstance(value, MemoryMappedTensor) else None
            if not name:
                return False
            root = os.path.dirname(name)
            for _ in range(depth):
                root = os.path.dirname(root)
            roots.add(root)
        elif isinstance(value, CollectionPrimitives) and not _checkpoint_roots(
            value, depth + 1, roots
        ):
            return False
    return True
