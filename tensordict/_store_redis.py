"""A zarr (v3) store whose keys live in a Redis-protocol server, under one namespace.

``TensorDictStore`` is a ``PersistentTensorDict`` over zarr; this module gives zarr its
storage in Redis (or Dragonfly, KeyDB, ... anything speaking the protocol). Every zarr key
``k`` of one TensorDict is the Redis key ``{prefix}:{{{td_id}}}:{k}`` (the braces keep the
keys of one TensorDict on one cluster shard). The client is synchronous and thread-safe;
it is rebuilt after unpickling, so a ``map`` worker opens its own connection.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from typing import Any

from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from tensordict._io_common import require

_GLOB = str.maketrans({c: "\\" + c for c in "\\*?[]"})


class RedisZarrStore(Store):
    """The zarr keys of one TensorDict, in a Redis-protocol server."""

    supports_writes: bool = True
    supports_deletes: bool = True
    supports_listing: bool = True

    def __init__(
        self,
        *,
        host: str = "localhost",
        port: int = 6379,
        db: int = 0,
        unix_socket_path: str | None = None,
        prefix: str = "tensordict",
        td_id: str,
        read_only: bool = False,
        client: Any = None,
        **redis_kwargs: Any,
    ) -> None:
        super().__init__(read_only=read_only)
        self.params = {
            "host": host,
            "port": port,
            "db": db,
            "unix_socket_path": unix_socket_path,
            **redis_kwargs,
        }
        self.prefix, self.td_id = prefix, td_id
        self.namespace = f"{prefix}:{{{td_id}}}:"
        self._client = client
        self._pid = os.getpid() if client is not None else -1

    # ------------------------------------------------------------------ connection
    @property
    def client(self) -> Any:
        """This process's client (a new one after a fork or unpickling)."""
        if self._client is None or self._pid != os.getpid():
            redis = require("redis", "store", "TensorDictStore")
            params = dict(self.params)
            if params.get("unix_socket_path") is None:
                params.pop("unix_socket_path", None)
            else:
                params.pop("host")
                params.pop("port")
            self._client = redis.Redis(**params)
            self._pid = os.getpid()
        return self._client

    def close(self) -> None:
        """Close this process's connection (a later access reconnects)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        super().close()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_pid"] = None, -1
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def with_read_only(self, read_only: bool = False) -> RedisZarrStore:
        out = RedisZarrStore.__new__(RedisZarrStore)
        out.__setstate__(self.__getstate__())
        out._read_only = read_only
        return out

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RedisZarrStore)
            and self.params == other.params
            and self.namespace == other.namespace
        )

    def __hash__(self) -> int:
        return hash(self.namespace)

    def __str__(self) -> str:
        where = self.params.get("unix_socket_path") or (
            f"{self.params['host']}:{self.params['port']}"
        )
        return f"redis://{where}/{self.params['db']}/{self.namespace}"

    def __repr__(self) -> str:
        return f"RedisZarrStore({str(self)!r})"

    # ------------------------------------------------------------------ zarr's Store
    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        prototype = prototype or default_buffer_prototype()
        name = self.namespace + key
        if byte_range is None:
            data = self.client.get(name)
            return None if data is None else prototype.buffer.from_bytes(data)
        if isinstance(byte_range, RangeByteRequest):
            if byte_range.end <= byte_range.start:
                start, end = 0, -1  # read nothing below, but still learn whether it exists
            else:
                start, end = byte_range.start, byte_range.end - 1
        elif isinstance(byte_range, OffsetByteRequest):
            start, end = byte_range.offset, -1
        elif isinstance(byte_range, SuffixByteRequest):
            start, end = -byte_range.suffix, -1
        else:
            raise ValueError(f"RedisZarrStore.get: unexpected byte range {byte_range!r}")
        pipe = self.client.pipeline(transaction=False)
        pipe.exists(name)
        pipe.getrange(name, start, end)
        exists, data = pipe.execute()
        if not exists:
            return None
        if isinstance(byte_range, RangeByteRequest) and byte_range.end <= byte_range.start:
            data = b""
        return prototype.buffer.from_bytes(data)

    async def get_partial_values(
        self, prototype: BufferPrototype, key_ranges: Iterable[tuple[str, ByteRequest | None]]
    ) -> list[Buffer | None]:
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        return bool(self.client.exists(self.namespace + key))

    async def set(self, key: str, value: Buffer) -> None:
        self._check_writable()
        self.client.set(self.namespace + key, value.to_bytes())

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        self._check_writable()
        self.client.set(self.namespace + key, value.to_bytes(), nx=True)

    async def delete(self, key: str) -> None:
        self._check_writable()
        self.client.delete(self.namespace + key)

    async def clear(self) -> None:
        """Delete every key of this TensorDict."""
        self.delete_all()

    def delete_all(self) -> None:
        """Delete every key of this TensorDict (synchronously)."""
        self._check_writable()
        names = list(self._scan(""))
        for start in range(0, len(names), 512):
            self.client.delete(*(self.namespace + n for n in names[start : start + 512]))

    def _scan(self, prefix: str) -> Iterable[str]:
        pattern = (self.namespace + prefix).translate(_GLOB) + "*"
        skip = len(self.namespace)
        for raw in self.client.scan_iter(match=pattern, count=1000):
            yield (raw.decode() if isinstance(raw, bytes) else raw)[skip:]

    async def list(self) -> AsyncIterator[str]:
        for key in self._scan(""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for key in self._scan(prefix):
            yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        base = prefix + "/" if prefix else ""
        seen: set[str] = set()
        for key in self._scan(base):
            child = key[len(base) :].split("/", 1)[0]
            if child and child not in seen:
                seen.add(child)
                yield child
