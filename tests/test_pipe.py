"""``TensorDictPipe`` and ``asend``/``arecv``: real TCP connections on 127.0.0.1, bounded."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import torch

from tensordict import TensorDict, TensorDictPipe
from tests._spawn import free_port, over_a_pipe
from tests.catalogue import CATALOGUE, assert_same

TIMEOUT = 60.0


def _run(body: Callable[[TensorDictPipe, TensorDictPipe], Awaitable[Any]]) -> Any:
    """``body(sender, receiver)`` over a fresh pipe, closed afterwards, within TIMEOUT."""
    return over_a_pipe(body, TIMEOUT)


def _plain(td: Any) -> Any:
    return td if isinstance(td, TensorDict) else td.to_tensordict()


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_catalogue_round_trip(name: str) -> None:
    td = CATALOGUE[name]()

    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        await td.asend(sender)
        return await receiver.arecv()

    out = _run(body)
    assert type(out) is type(td)
    assert out.is_consolidated()
    assert_same(_plain(out.detach()), _plain(td.detach()))
    for key, value in td.non_tensor_items(include_nested=True):
        assert out.get(key) == value.data


def test_same_structure_lands_in_place() -> None:
    td = CATALOGUE["nested"]()

    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        await td.asend(sender)
        first = await receiver.arecv()
        ptr = first["a"].data_ptr()
        seen = []
        for step in range(1, 4):
            await (td * step).asend(sender)
            out = await first.arecv(receiver)
            seen.append((out is first, out["a"].data_ptr() == ptr, out["n", "m", "c"].clone()))
        return seen

    for step, (same, same_ptr, value) in enumerate(_run(body), start=1):
        assert same and same_ptr
        torch.testing.assert_close(value, td["n", "m", "c"] * step)


def test_a_new_structure_or_value_sends_a_new_description() -> None:
    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        await TensorDict(a=torch.zeros(2), label="x", batch_size=[2]).asend(sender)
        first = await receiver.arecv()
        await TensorDict(a=torch.zeros(2), label="y", batch_size=[2]).asend(sender)
        second = await receiver.arecv()
        await TensorDict(a=torch.zeros(3), label="y", batch_size=[3]).asend(sender)
        third = await receiver.arecv()
        return first, second, third

    first, second, third = _run(body)
    assert first is not second and second is not third
    assert (first["label"], second["label"], third.batch_size) == ("x", "y", (3,))


def test_async_iteration_stops_when_the_peer_closes() -> None:
    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        for i in range(3):
            await TensorDict(i=torch.tensor(i)).asend(sender)
        await sender.aclose()
        return [int(td["i"]) async for td in receiver]

    assert _run(body) == [0, 1, 2]


def test_device_moves_a_new_collection() -> None:
    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        await TensorDict(a=torch.ones(2), batch_size=[2]).asend(sender)
        return await receiver.arecv(device="cpu")

    assert _run(body).device == torch.device("cpu")


def test_asend_and_arecv_call_any_pipe() -> None:
    class Recorder:
        def __init__(self) -> None:
            self.calls: list[Any] = []

        async def asend(self, td: Any) -> None:
            self.calls.append(("asend", td))

        async def arecv(self, td: Any, *, device: Any = None) -> Any:
            self.calls.append(("arecv", td, device))
            return "received"

    pipe = Recorder()
    td = TensorDict(a=torch.zeros(1))
    assert asyncio.run(td.asend(pipe)) is None
    assert asyncio.run(td.arecv(pipe, device="meta")) == "received"
    assert pipe.calls == [("asend", td), ("arecv", td, "meta")]


async def _raw_frames(frames: list[bytes], close: bool = True) -> Any:
    """Send raw bytes to a listening pipe and return what its ``arecv`` raises or gives."""
    port = free_port()
    server = asyncio.ensure_future(TensorDictPipe.listen(port))
    writer = (await TensorDictPipe.connect("127.0.0.1", port))._writer
    receiver = await server
    for frame in frames:
        writer.write(frame)
    await writer.drain()
    if close:
        writer.close()
    try:
        return await receiver.arecv()
    finally:
        await receiver.aclose()


@pytest.mark.parametrize(
    ("frames", "error", "message"),
    [
        ([struct.pack("<BQ", 7, 0)], ValueError, r"TensorDictPipe.arecv: unknown frame flag 7"),
        (
            [struct.pack("<BQ", 1, 4) + b"abcd"],
            ValueError,
            r"a same-structure frame came before any structure",
        ),
        ([struct.pack("<BQ", 0, 3) + b"abc"], ValueError, r"a frame of 3 bytes is too short"),
        (
            [struct.pack("<BQ", 0, 12) + b"{not json" + b"\x09" + b"\x00" * 2],
            ValueError,
            r"TensorDictPipe.arecv: the description",
        ),
        (
            [struct.pack("<BQ", 0, 100) + b"only a part"],
            ConnectionError,
            r"the peer closed the pipe after 11 of 100 bytes",
        ),
    ],
)
def test_malformed_frames_raise(frames: list[bytes], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        asyncio.run(asyncio.wait_for(_raw_frames(frames), TIMEOUT))


def test_an_error_closes_the_pipe_it_left_out_of_step() -> None:
    """After a frame it could not take, the receiver cannot know where the next one starts:
    the pipe closes, and nothing later is read into the collection received before."""

    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        await TensorDict(a=torch.zeros(2), batch_size=[2]).asend(sender)
        first = await receiver.arecv()
        sender._writer.write(struct.pack("<BQ", 1, 3) + b"abc")
        with pytest.raises(
            ValueError, match=r"a same-structure frame of 3 bytes for a storage of 8"
        ):
            await receiver.arecv()
        with pytest.raises(
            ConnectionError, match=r"the pipe is closed \(TensorDictPipe.arecv failed"
        ):
            await receiver.arecv()
        with pytest.raises(ConnectionError, match=r"TensorDictPipe.asend: the pipe is closed"):
            await first.asend(receiver)
        return first

    assert _run(body)["a"].tolist() == [0.0, 0.0]


def test_a_new_structure_that_fails_is_not_the_one_received_last() -> None:
    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        await TensorDict(a=torch.zeros(4), batch_size=[4]).asend(sender)
        first = await receiver.arecv()
        await TensorDict(b=torch.arange(4, dtype=torch.int32), batch_size=[4]).asend(sender)
        with pytest.raises(RuntimeError):
            await receiver.arecv(device="no-such-device")
        assert receiver._received is None
        return first

    assert _run(body)["a"].tolist() == [0.0] * 4


def test_max_frame_bytes_refuses_before_reading() -> None:
    async def main() -> Any:
        port = free_port()
        server = asyncio.ensure_future(TensorDictPipe.listen(port, max_frame_bytes=200))
        sender = await TensorDictPipe.connect("127.0.0.1", port)
        receiver = await server
        async with sender, receiver:
            await TensorDict(a=torch.zeros(2), batch_size=[2]).asend(sender)
            small = await receiver.arecv()
            await TensorDict(a=torch.zeros(100), batch_size=[100]).asend(sender)
            with pytest.raises(ValueError, match=r"a frame of \d+ bytes, over max_frame_bytes=200"):
                await receiver.arecv()
            return small

    small = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert small["a"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: m["root"].update(device="cpu:-1"), "the description is malformed"),
        (lambda m: m["root"].update(device=-1), "the description is malformed"),
        (lambda m: m["root"].update(batch_size=[-5]), "batch_size must be a list of non-neg"),
        (lambda m: m.update(runs="x"), "TensorDictPipe.arecv"),
    ],
)
def test_a_hostile_description_raises_value_error(edit: Any, message: str) -> None:
    from tensordict._pipe import _wire

    storage, description = _wire(TensorDict(a=torch.zeros(2), s="x", batch_size=[2]), "t")
    meta = json.loads(description[:-8])
    edit(meta)
    raw = json.dumps(meta).encode()
    payload = bytes(storage.numpy()) + raw + struct.pack("<q", len(raw))
    frame = struct.pack("<BQ", 0, len(payload)) + payload
    with pytest.raises(ValueError, match=message):
        asyncio.run(asyncio.wait_for(_raw_frames([frame]), TIMEOUT))


def test_deeply_nested_json_is_refused() -> None:
    raw = b"[" * 100_000
    payload = raw + struct.pack("<q", len(raw))
    frame = struct.pack("<BQ", 0, len(payload)) + payload
    with pytest.raises(ValueError, match=r"the description is not valid JSON"):
        asyncio.run(asyncio.wait_for(_raw_frames([frame]), TIMEOUT))


def test_connect_without_a_listener_times_out() -> None:
    port = free_port()
    with pytest.raises(
        ConnectionError, match=rf"no peer listening on 127.0.0.1:{port} after 0.2 s"
    ):
        asyncio.run(TensorDictPipe.connect("127.0.0.1", port, timeout=0.2))


def _sender_process(port: int) -> None:
    async def main() -> None:
        async with await TensorDictPipe.connect("127.0.0.1", port) as pipe:
            for step in range(3):
                td = TensorDict(x=torch.full((4, 2), float(step)), tag="s", batch_size=[4])
                await td.asend(pipe)

    asyncio.run(asyncio.wait_for(main(), TIMEOUT))


def test_between_processes() -> None:
    port = free_port()
    ctx = multiprocessing.get_context("spawn")
    proc = ctx.Process(target=_sender_process, args=(port,))

    async def main() -> list[Any]:
        server = asyncio.ensure_future(TensorDictPipe.listen(port))
        proc.start()
        async with await server as pipe:
            return [(td["x"].sum().item(), td["tag"]) async for td in pipe]

    try:
        got = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    finally:
        proc.join(TIMEOUT)
        if proc.is_alive():
            proc.kill()
    assert proc.exitcode == 0
    assert got == [(0.0, "s"), (8.0, "s"), (16.0, "s")]


def test_changing_a_sent_collection_after_asend_does_not_change_what_arrives() -> None:
    td = TensorDict(x=torch.zeros(2_000_000), batch_size=[]).consolidate()  # sent as is

    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> Any:
        receiving = asyncio.ensure_future(receiver.arecv())
        await td.asend(sender)
        td["x"].fill_(1.0)  # after asend returned: not part of the frame
        return await receiving

    out = _run(body)
    assert out["x"].eq(0).all()
