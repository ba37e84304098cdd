"""TensorDictStore: a TensorDict whose entries live in a Redis-protocol key-value server.

It is a ``PersistentTensorDict`` over a zarr hierarchy kept in the server (see
``_store_redis.py``), so reading, writing, row indexing, nested levels, non-tensor entries
and pickling to worker processes are the ones written once there. What this module adds:
connecting (``TensorDictStore(...)``, ``from_store``), uploading (``from_tensordict``,
``to_store``), the TensorDict's identity in the server (``td_id``), and removing it
(``clear_redis``). A lazy stack is stored member by member (``LazyStackedTensorDictStore``).
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any, Literal

import torch

from tensordict._io_persistent import _ATTR, PersistentTensorDict
from tensordict._lazy import LazyStackedTensorDict

if TYPE_CHECKING:
    from typing import Self

STORE_BACKENDS = Literal["redis", "dragonfly", "keydb"]
"""Names of Redis-protocol servers; all are reached the same way (recorded, not used)."""

_STACK = "__stack__"  # the raw key of a stored lazy stack: {"members": n, "stack_dim": d}


def _connect(td_id: str | None, **where: Any) -> Any:
    """The zarr store of the TensorDict ``td_id`` (a new identity when None) in the server
    ``where`` names (host, port, db, unix_socket_path, prefix, client, redis.Redis's own)."""
    from tensordict._store_redis import RedisZarrStore

    return RedisZarrStore(td_id=td_id or str(uuid.uuid4()), **where)


def _has_data(store: Any) -> bool:
    return bool(store.client.exists(store.namespace + "zarr.json"))


class TensorDictStore(PersistentTensorDict):
    """A TensorDict kept in a Redis-protocol server (Redis, Dragonfly, KeyDB, ...).

    Each tensor is a value in the server, read on access (``td["obs"]``) and written on
    assignment; ``td[idx]`` and ``to_local()`` return in-memory TensorDicts. Several
    processes, on several machines, share one TensorDict through its ``td_id``:
    ``TensorDictStore.from_store(td_id=...)`` reconnects to it. A pickled store (a ``map``
    worker's copy) reconnects in the receiving process. Loading never unpickles nor
    imports: non-tensor entries are stored as JSON.

    The keyword arguments: ``backend``, the kind of server (``"redis"``, ``"dragonfly"``,
    ``"keydb"``: all speak the Redis protocol); ``host``, ``port``, ``db``, where the
    server is (``"localhost"``, 6379, 0); ``unix_socket_path``, a Unix socket to connect
    through instead; ``prefix``, the namespace of the server's keys (``"tensordict"``);
    ``batch_size``, the batch size of a new, empty TensorDict; ``device``, where tensors
    go when read; ``client``, a ``redis.Redis`` client to use instead of connecting;
    ``td_id``, the identity of an existing TensorDict to reconnect to (a new one by
    default); ``cache_metadata``, accepted for upstream's signature (metadata is cached
    per handle and refreshed by every write through this library); the rest go to
    ``redis.Redis``.

    Requires the ``redis`` package (``pip install redis``) and a server.

    >>> import torch
    >>> from tensordict.store import TensorDictStore
    >>> td = TensorDictStore(port=REDIS_PORT, batch_size=[3])
    >>> td["obs"] = torch.arange(6).view(3, 2)
    >>> TensorDictStore.from_store(port=REDIS_PORT, td_id=td.td_id)["obs"][1]
    tensor([2, 3])
    >>> td.clear_redis()
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        batch_size: Any = None,
        device: Any = None,
        client: Any = None,
        td_id: str | None = None,
        cache_metadata: bool = True,
        **redis_kwargs: Any,
    ) -> None:
        store = _connect(
            td_id, host=host, port=port, db=db, unix_socket_path=unix_socket_path,
            prefix=prefix, client=client, **redis_kwargs,
        )  # fmt: skip
        if td_id is not None and store.client.exists(store.namespace + _STACK):
            raise ValueError(
                f"TensorDictStore: {td_id!r} is a stored lazy stack; reconnect to it with "
                "TensorDictStore.from_store(td_id=...)"
            )
        if td_id is not None and _has_data(store):
            PersistentTensorDict.__init__(
                self, filename=store, mode="a", backend="zarr", device=device
            )
            recorded = self._meta().get("batch_size", [])
            self._batch_size = torch.Size(recorded if batch_size is None else batch_size)
            self._check_batch()
            return
        batch = torch.Size(batch_size if batch_size is not None else ())
        attrs = {_ATTR: json.dumps({"batch_size": list(batch), "non_tensor": {}, "names": None})}
        PersistentTensorDict.__init__(
            self,
            batch_size=batch,
            filename=store,
            mode="w",
            backend="zarr",
            device=device,
            _attrs=attrs,
        )

    # ------------------------------------------------------------------ identity
    @property
    def td_id(self) -> str:
        """The identity of this TensorDict in the server: pass it to :meth:`from_store`."""
        return str(self._handle.filename.td_id)

    @property
    def _td_id(self) -> str:  # upstream's spelling, which its documentation tells to read
        return self.td_id

    @property
    def batch_size(self) -> torch.Size:
        """The leading shape every tensor shares (recorded in the server when set)."""
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
        PersistentTensorDict.batch_size.fset(self, value)  # type: ignore[attr-defined]
        if not self._path:
            self._write_meta((), {"batch_size": list(self._batch_size)})

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_tensordict(
        cls,
        td: Any,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        device: Any = None,
        td_id: str | None = None,
        client: Any = None,
        **redis_kwargs: Any,
    ) -> Any:
        """Upload ``td`` (every entry, nested levels included) and return the store over it;
        a lazy stack is stored member by member as a :class:`LazyStackedTensorDictStore`.
        A tensorclass is stored as the TensorDict of its fields."""
        server = dict(
            host=host, port=port, db=db, unix_socket_path=unix_socket_path, prefix=prefix,
            client=client, **redis_kwargs,
        )  # fmt: skip
        if isinstance(td, LazyStackedTensorDict):
            return LazyStackedTensorDictStore.from_lazy_stack(
                td, td_id=td_id, backend=backend, device=device, **server
            )
        return cls.from_dict(td, _connect(td_id, **server), backend="zarr", device=device)

    @classmethod
    def from_store(
        cls,
        *,
        backend: STORE_BACKENDS = "redis",
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        td_id: str,
        device: Any = None,
        client: Any = None,
        **redis_kwargs: Any,
    ) -> Any:
        """Reconnect to the TensorDict ``td_id`` stored in the server (by this process or
        another); its batch size is the one recorded. ``KeyError`` if the server holds
        no TensorDict of that identity."""
        store = _connect(
            td_id, host=host, port=port, db=db, unix_socket_path=unix_socket_path,
            prefix=prefix, client=client, **redis_kwargs,
        )  # fmt: skip
        stacked = store.client.get(store.namespace + _STACK)
        if stacked is not None:
            return LazyStackedTensorDictStore._reconnect(store, json.loads(stacked), device)
        if not _has_data(store):
            raise KeyError(
                f"TensorDictStore.from_store: no TensorDict {td_id!r} under prefix "
                f"{prefix!r} in {store}"
            )
        out = cls._opened("TensorDictStore.from_store", store, "a", False, None, None)
        out._device = None if device is None else torch.device(device)
        return out

    def to_local(self) -> Any:
        """Every entry read into an in-memory TensorDict (as :meth:`to_tensordict`)."""
        return self.to_tensordict()

    def clear_redis(self) -> None:
        """Delete every key of this TensorDict from the server. This object then holds
        nothing to read: reading or writing through it raises."""
        self._handle.filename.delete_all()
        self._handle.meta.clear()
        self._handle.nodes.clear()
        self._handle.root = None


class LazyStackedTensorDictStore(LazyStackedTensorDict):
    """A lazy stack whose members are :class:`TensorDictStore` s, one per member, stored
    under ``{td_id}/{i}`` with a record of the stack under ``td_id`` itself, so that
    :meth:`TensorDictStore.from_store` reconnects to the whole stack."""

    _store_id: str

    @classmethod
    def from_lazy_stack(cls, td: Any, *, td_id: str | None = None, **where: Any) -> Self:
        """Upload each member of the lazy stack ``td`` and return the stack of stores."""
        td_id = td_id or str(uuid.uuid4())
        members = [
            TensorDictStore.from_tensordict(m, td_id=f"{td_id}/{i}", **where)
            for i, m in enumerate(td.tensordicts)
        ]
        record = {"members": len(members), "stack_dim": td.stack_dim}
        store = members[0]._handle.filename if members else None
        if store is None:
            raise ValueError("LazyStackedTensorDictStore.from_lazy_stack: an empty stack")
        store.client.set(f"{store.prefix}:{{{td_id}}}:{_STACK}", json.dumps(record))
        out = cls(*members, stack_dim=td.stack_dim)
        out._store_id = td_id
        return out

    @classmethod
    def _reconnect(cls, store: Any, record: dict[str, Any], device: Any) -> Self:
        params = dict(store.params)
        members = [
            TensorDictStore.from_store(
                prefix=store.prefix,
                td_id=f"{store.td_id}/{i}",
                device=device,
                client=store._client,
                **params,
            )
            for i in range(int(record["members"]))
        ]
        out = cls(*members, stack_dim=int(record["stack_dim"]))
        out._store_id = store.td_id
        return out

    @property
    def td_id(self) -> str:
        """The identity of the stack in the server: pass it to ``TensorDictStore.from_store``."""
        return str(getattr(self, "_store_id", ""))

    def to_local(self) -> Any:
        """The members read into an in-memory lazy stack."""
        return LazyStackedTensorDict(
            *(m.to_tensordict() for m in self.tensordicts), stack_dim=self.stack_dim
        )

    def clear_redis(self) -> None:
        """Delete the stack and every member from the server."""
        for member in self.tensordicts:
            member.clear_redis()
        store = self.tensordicts[0]._handle.filename
        store.client.delete(f"{store.prefix}:{{{self.td_id}}}:{_STACK}")
