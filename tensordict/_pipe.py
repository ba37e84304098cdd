"""``TensorDictPipe``: a point-to-point asyncio TCP channel for TensorDicts, no process group.

A frame is one flag byte, an 8-byte little-endian payload length, and the payload. The
first frame of a structure (flag 0) carries the consolidated storage followed by its JSON
description, exactly as ``consolidate(filename)`` lays out a file, and is rebuilt by the
validated reader of ``from_consolidated``. While the structure does not change, later
frames (flag 1) carry the storage alone, and the receiver overwrites the storage of the
collection it received last, in place: no allocation and no parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._consolidate import _TRAILER, _from_file_bytes, file_meta, storage_overwritten

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from typing import Self

    from tensordict._base import TensorDictBase

_NEW, _SAME = 0, 1


class PipeClosed(ConnectionError):
    """The peer closed the pipe between two frames (nothing was cut short)."""


_HEADER = struct.Struct("<BQ")


def _wire(td: TensorDictBase, call: str) -> tuple[Tensor, bytes]:
    """``td``'s consolidated CPU storage and the description (with its trailer) after it."""
    ctd: Any = td.consolidate()
    if ctd._consolidated.storage.device.type != "cpu":
        ctd = ctd.to("cpu")
    record = ctd._consolidated
    meta = file_meta(ctd, record.plan, call)
    raw = json.dumps(meta, separators=(",", ":")).encode()
    return record.storage, raw + struct.pack("<q", len(raw))


class TensorDictPipe:
    """A TCP channel that sends and receives whole TensorDicts, one frame each.

    One side :meth:`listen` s, the other :meth:`connect` s; both then :meth:`asend` and
    :meth:`arecv`. The first TensorDict of a structure travels with its description; while
    the structure (keys, dtypes, shapes, batch size) stays the same, only the storage
    travels, and the receiver writes it into the collection it received last, returning
    that same object. A pipe is an async iterator of received TensorDicts and an async
    context manager (closing on exit). Received data is checked before use: nothing is
    unpickled or imported, and a malformed frame raises ``ValueError`` and closes the pipe
    (the stream is out of step after it: later calls raise ``ConnectionError``).

    :meth:`TensorDictBase.asend <tensordict.TensorDictBase.asend>` and
    :meth:`~tensordict.TensorDictBase.arecv` call a pipe from the collection's side.

    >>> import asyncio, socket, torch
    >>> from tensordict import TensorDict, TensorDictPipe
    >>> async def main(port):
    ...     server = asyncio.ensure_future(TensorDictPipe.listen(port))
    ...     client = await TensorDictPipe.connect("127.0.0.1", port)
    ...     async with await server as receiver, client:
    ...         await TensorDict(a=torch.arange(3), batch_size=[3]).asend(client)
    ...         return (await receiver.arecv())["a"]
    >>> with socket.socket() as s:
    ...     _ = s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    >>> asyncio.run(main(port))
    tensor([0, 1, 2])
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_frame_bytes: int | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        # drain() waits until the OS has every byte: asend may send a live storage without
        # copying it, so it must not return while a part of it is still queued
        writer.transport.set_write_buffer_limits(high=0)
        self._max = max_frame_bytes
        self._sent: bytes | None = None  # the description of the structure last sent
        self._received: Any = None  # the collection received last (its storage is reused)
        self._broken: str | None = None  # why the pipe stopped (an error left it out of step)

    @classmethod
    async def listen(
        cls, port: int, host: str = "127.0.0.1", *, max_frame_bytes: int | None = None
    ) -> TensorDictPipe:
        """Wait on ``host:port`` for one peer to :meth:`connect`, and return the pipe to it.
        ``max_frame_bytes`` refuses (``ValueError``) a frame the peer says is larger, before
        reading it."""
        accepted: asyncio.Future[TensorDictPipe] = asyncio.get_running_loop().create_future()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if accepted.done():  # a second peer: this pipe is point to point
                writer.close()
                return
            accepted.set_result(cls(reader, writer, max_frame_bytes))

        server = await asyncio.start_server(on_connect, host, port)
        try:
            return await accepted
        finally:
            server.close()

    @classmethod
    async def connect(
        cls,
        host: str,
        port: int,
        *,
        timeout: float = 30.0,
        max_frame_bytes: int | None = None,
    ) -> TensorDictPipe:
        """Connect to a peer that :meth:`listen` s on ``host:port``, retrying while it is not
        listening yet; ``ConnectionError`` after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                left = max(deadline - loop.time(), 0.01)
                opening = asyncio.open_connection(host, port)
                reader, writer = await asyncio.wait_for(opening, left)
                return cls(reader, writer, max_frame_bytes)
            except (OSError, asyncio.TimeoutError) as err:
                if loop.time() >= deadline:
                    raise ConnectionError(
                        f"TensorDictPipe.connect: no peer listening on {host}:{port} after "
                        f"{timeout} s ({err})"
                    ) from None
                await asyncio.sleep(0.05)

    def _check_open(self, call: str) -> None:
        if self._broken is not None:
            raise ConnectionError(f"{call}: the pipe is closed ({self._broken})")

    async def asend(self, td: TensorDictBase) -> None:
        """Send ``td``: its storage, and its description when the structure is new. It
        returns once every byte is handed to the OS, so ``td`` may change afterwards."""
        self._check_open("TensorDictPipe.asend")
        storage, description = _wire(td, "TensorDictPipe.asend")
        data = memoryview(storage.numpy())  # type: ignore[arg-type]
        if description == self._sent:
            self._writer.write(_HEADER.pack(_SAME, len(data)))
            self._writer.write(data)
        else:
            self._writer.write(_HEADER.pack(_NEW, len(data) + len(description)))
            self._writer.write(data)
            self._writer.write(description)
            self._sent = description
        await self._writer.drain()

    async def arecv(self, td: Any = None, *, device: Any = None) -> Any:
        """The next TensorDict from the peer (a locked, consolidated collection).

        When the structure is the one received last, its storage is overwritten in place
        and that collection is returned, whatever ``td`` is (``td`` is accepted for
        upstream's ``td.arecv(pipe)``). ``device`` moves a newly received collection
        (later frames then land on that device too).
        """
        call = "TensorDictPipe.arecv"
        self._check_open(call)
        try:
            return await self._arecv(call, device)
        except PipeClosed as err:
            self._broken = str(err)
            raise
        except BaseException as err:  # the stream is out of step: nothing after it is trusted
            self._broken = f"{call} failed: {err}"
            self._received = None
            self._writer.close()
            raise

    async def _arecv(self, call: str, device: Any) -> Any:
        flag, size = _HEADER.unpack(await self._read(_HEADER.size, call, boundary=True))
        if flag not in (_NEW, _SAME):
            raise ValueError(f"{call}: unknown frame flag {flag} (is the peer a TensorDictPipe?)")
        if self._max is not None and size > self._max:
            raise ValueError(
                f"{call}: the peer sends a frame of {size} bytes, over max_frame_bytes={self._max}"
            )
        if flag == _SAME:
            last = self._received
            if last is None:
                raise ValueError(f"{call}: a same-structure frame came before any structure")
            storage = last._consolidated.storage
            if storage.numel() != size:
                raise ValueError(
                    f"{call}: a same-structure frame of {size} bytes for a storage of "
                    f"{storage.numel()} bytes"
                )
            payload = await self._read(size, call)
            storage.copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
            storage_overwritten(last, last._consolidated.plan, call, check=True)
            return last
        if size < _TRAILER:
            raise ValueError(f"{call}: a frame of {size} bytes is too short to be a TensorDict")
        self._received = None  # until this frame is whole and valid
        data = torch.frombuffer(bytearray(await self._read(size, call)), dtype=torch.uint8)
        out = _from_file_bytes(data, call)
        if device is not None:
            out = out.to(device)
        self._received = out
        return out

    async def _read(self, size: int, call: str, boundary: bool = False) -> bytes:
        try:
            return await self._reader.readexactly(size)
        except asyncio.IncompleteReadError as err:
            if boundary and not err.partial:
                raise PipeClosed(f"{call}: the peer closed the pipe") from None
            raise ConnectionError(
                f"{call}: the peer closed the pipe after {len(err.partial)} of {size} bytes"
            ) from None

    async def aclose(self) -> None:
        """Close the connection (the peer's next :meth:`arecv` raises ``ConnectionError``)."""
        self._broken = self._broken or "closed by aclose()"
        self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Any]:
        while True:
            try:
                yield await self.arecv()
            except PipeClosed:
                return
