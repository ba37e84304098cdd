"""Cases for transfers (issues 7 and 17): a TensorDict of 1,000 leaves (4 MB) against one
4 MB tensor: consolidate, send/recv round trips and all_reduce over gloo with a peer
process on 127.0.0.1 (started before timing), and a torch.multiprocessing queue.

The harness times both callables in this process, so each point-to-point call is a
round trip: a one-element command tells the peer what comes (the same cost on both
sides), the payload goes to the peer, which receives it and sends it back.

The "floor" rows (no target) do the work any library must do for 1,000 separate leaves,
with no TensorDict: stack them into one buffer and copy it back into them (send/recv,
all_reduce), make 1,000 views of one storage (consolidate, the queue's receiver).
"""

from __future__ import annotations

import atexit
import datetime
import socket
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import Tensor

from benchmarks._harness import Case, Fn
from tensordict import TensorDict

(
    _STOP,
    _TENSOR,
    _TD,
    _SHARE,
    _SHARED,
    _CONSOLIDATED,
    _REDUCE_TD,
    _REDUCE_FLAT,
    _REDUCE_CTD,
    _FLOOR_TD,
    _FLOOR_REDUCE,
    _FLOOR_HEADED,
    _FLOOR_HEADED_TD,
) = range(13)
_NUMEL = 1_000_000  # 4 MB of float32


def _payload() -> TensorDict:
    """1,000 float32 leaves of 1,000 elements: 10 sub-TensorDicts of 100 leaves each."""
    return TensorDict(
        {f"group{g}": {f"leaf{i}": torch.rand(10, 100) for i in range(100)} for g in range(10)},
        [10],
    )


class _Floor:
    """The work any transfer of 1,000 separate leaves through one buffer does: stack them
    into a kept buffer, and copy the buffer back into them (one multi-tensor copy from
    views made once); no TensorDict, no plan, no header."""

    def __init__(self) -> None:
        self.leaves = list(_payload().values(True, True))
        self.block = torch.empty(len(self.leaves), *self.leaves[0].shape)
        self.flat = self.block.view(-1)
        self.views = list(self.block.unbind(0))

    def pack(self) -> None:
        torch.stack(self.leaves, out=self.block)

    def unpack(self) -> None:
        torch._foreach_copy_(self.leaves, self.views)


def _send_headed(header: Tensor, payload: Tensor, dst: int) -> None:
    """A header, then the payload: both posted at once (what a TensorDict send posts)."""
    works = [dist.isend(header, dst, tag=1), dist.isend(payload, dst, tag=2)]
    for work in works:
        work.wait()


def _recv_headed(header: Tensor, payload: Tensor, src: int) -> None:
    """The header first, then the payload once the header was read: the receive of a
    TensorDict posts no buffer before a header announced its size."""
    dist.recv(header, src, tag=1)
    header.tolist()
    dist.recv(payload, src, tag=2)


def _init(rank: int, port: int) -> None:
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=2,
        timeout=datetime.timedelta(seconds=120),
    )


def _peer(port: int) -> None:
    """Rank 1: receive whatever the command announces and send it back, until told to stop."""
    _init(1, port)
    td, flat = _payload(), torch.empty(_NUMEL)
    shared = td
    consolidated = _payload().consolidate()
    reduced = _payload()
    floor = _Floor()
    header = torch.zeros(24, dtype=torch.int64)
    cmd = torch.zeros(1, dtype=torch.int64)
    while True:
        dist.recv(cmd, 0)
        what = int(cmd)
        if what == _STOP:
            break
        if what == _TENSOR:
            dist.recv(flat, 0)
            dist.send(flat, 0)
        elif what == _TD:
            td.recv(0)
            td.send(0)
        elif what == _SHARE:  # both sides get a TensorDict laid out as one buffer
            shared = TensorDict.from_remote_init(0)
            shared.init_remote(0)
        elif what == _REDUCE_TD:
            reduced.all_reduce()
        elif what == _REDUCE_CTD:
            consolidated.all_reduce()
        elif what == _REDUCE_FLAT:
            dist.all_reduce(flat)
        elif what == _FLOOR_TD:
            dist.recv(floor.flat, 0)
            floor.unpack()
            floor.pack()
            dist.send(floor.flat, 0)
        elif what == _FLOOR_REDUCE:
            floor.pack()
            dist.all_reduce(floor.flat)
            floor.unpack()
        elif what == _FLOOR_HEADED:
            _recv_headed(header, flat, 0)
            _send_headed(header, flat, 0)
        elif what == _FLOOR_HEADED_TD:
            _recv_headed(header, floor.flat, 0)
            floor.unpack()
            floor.pack()
            _send_headed(header, floor.flat, 0)
        elif what == _CONSOLIDATED:
            consolidated.recv(0)
            consolidated.send(0)
        else:
            shared.recv(0)
            shared.send(0)
    dist.destroy_process_group()


_STATE: dict[str, object] = {}


def _connect() -> None:
    if _STATE:
        return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    peer = mp.get_context("spawn").Process(target=_peer, args=(port,), daemon=True)
    peer.start()
    _init(0, port)
    _STATE["peer"] = peer

    def stop() -> None:
        dist.send(torch.tensor([_STOP]), 1)
        peer.join(timeout=30)
        dist.destroy_process_group()

    atexit.register(stop)


def _tensor_round_trip() -> Fn:
    """The baseline of every send/recv row: one 4 MB tensor there and back."""
    flat, cmd = torch.rand(_NUMEL), torch.tensor([_TENSOR])

    def base() -> None:
        dist.send(cmd, 1)
        dist.send(flat, 1)
        dist.recv(flat, 1)

    return base


def _td_round_trip(td: TensorDict, cmd: Tensor) -> Fn:
    """A TensorDict there and back (the peer answers the command ``cmd`` names)."""

    def lib() -> None:
        dist.send(cmd, 1)
        td.send(1)
        td.recv(1)

    return lib


def send_recv_vs_tensor() -> tuple[Fn, Fn]:
    _connect()
    td, cmd_td = _payload(), torch.tensor([_TD])

    return _td_round_trip(td, cmd_td), _tensor_round_trip()


def send_recv_floor_vs_tensor() -> tuple[Fn, Fn]:
    """The floor under a non-consolidated round trip: each side stacks its 1,000 leaves
    into one kept buffer before sending it and copies the received buffer back into them
    (see :class:`_Floor`), with no TensorDict, header or description."""
    _connect()
    floor, cmd_floor = _Floor(), torch.tensor([_FLOOR_TD])

    def lib() -> None:
        dist.send(cmd_floor, 1)
        floor.pack()
        dist.send(floor.flat, 1)
        dist.recv(floor.flat, 1)
        floor.unpack()

    return lib, _tensor_round_trip()


def send_recv_headed_floor_vs_tensor() -> tuple[Fn, Fn]:
    """The floor under a consolidated round trip: a header, then the one 4 MB buffer,
    received once the header was read (the payload's receive waits for a header that
    announces its size: a posted receive cannot be withdrawn, and gloo aborts on a
    message larger than the buffer), with no TensorDict."""
    _connect()
    header, payload = torch.zeros(24, dtype=torch.int64), torch.rand(_NUMEL)
    cmd_floor = torch.tensor([_FLOOR_HEADED])

    def lib() -> None:
        dist.send(cmd_floor, 1)
        _send_headed(header, payload, 1)
        _recv_headed(header, payload, 1)

    return lib, _tensor_round_trip()


def send_recv_headed_stack_floor_vs_tensor() -> tuple[Fn, Fn]:
    """The floor under a non-consolidated round trip with its header: :class:`_Floor`'s
    stack and copy back, and the payload received once the header was read."""
    _connect()
    floor, header = _Floor(), torch.zeros(24, dtype=torch.int64)
    cmd_floor = torch.tensor([_FLOOR_HEADED_TD])

    def lib() -> None:
        dist.send(cmd_floor, 1)
        floor.pack()
        _send_headed(header, floor.flat, 1)
        _recv_headed(header, floor.flat, 1)
        floor.unpack()

    return lib, _tensor_round_trip()


def all_reduce_floor_vs_tensor() -> tuple[Fn, Fn]:
    """The floor under a non-consolidated ``all_reduce``: stack the 1,000 leaves into a
    kept buffer, reduce it, copy it back into them (both processes), no TensorDict."""
    _connect()
    floor, flat = _Floor(), torch.rand(_NUMEL)
    cmd_floor, cmd_flat = torch.tensor([_FLOOR_REDUCE]), torch.tensor([_REDUCE_FLAT])

    def lib() -> None:
        dist.send(cmd_floor, 1)
        floor.pack()
        dist.all_reduce(floor.flat)
        floor.unpack()

    def base() -> None:
        dist.send(cmd_flat, 1)
        dist.all_reduce(flat)

    return lib, base


def send_recv_received_vs_tensor() -> tuple[Fn, Fn]:
    """The same round trip between TensorDicts built by from_remote_init, whose leaves
    already lie in one buffer per dtype: they are sent and received without packing."""
    _connect()
    dist.send(torch.tensor([_SHARE]), 1)
    _payload().init_remote(1)
    td = TensorDict.from_remote_init(1)
    cmd_td = torch.tensor([_SHARED])

    return _td_round_trip(td, cmd_td), _tensor_round_trip()


def consolidate_vs_cat() -> tuple[Fn, Fn]:
    """``consolidate()`` of 1,000 leaves (gathering them, the views, the lock and all)
    against one ``torch.cat`` of their flattened views, made beforehand."""
    td = _payload()
    flats = [v.reshape(-1) for v in td.values(True, True)]

    def lib() -> None:
        td.consolidate()

    def base() -> None:
        torch.cat(flats)

    return lib, base


def consolidate_floor_vs_cat() -> tuple[Fn, Fn]:
    """The floor under ``consolidate()``: the copy (one ``torch.stack`` into a fresh
    storage) and the 1,000 leaf views (one ``unbind``), made and released, with no
    TensorDict at all, against the same ``torch.cat``."""
    td = _payload()
    leaves = list(td.values(True, True))
    flats = [v.reshape(-1) for v in leaves]

    def lib() -> None:
        block = torch.empty(_NUMEL * 4, dtype=torch.uint8).view(torch.float32)
        torch.stack(leaves, out=block.view(len(leaves), *leaves[0].shape))
        block.view(len(leaves), *leaves[0].shape).unbind(0)

    def base() -> None:
        torch.cat(flats)

    return lib, base


def send_recv_consolidated_vs_tensor() -> tuple[Fn, Fn]:
    """The round trip between consolidated TensorDicts: one storage each way, received in
    place, plus the header and the (cached) description."""
    _connect()
    td, cmd_td = _payload().consolidate(), torch.tensor([_CONSOLIDATED])

    return _td_round_trip(td, cmd_td), _tensor_round_trip()


def all_reduce_vs_tensor() -> tuple[Fn, Fn]:
    """``all_reduce`` of a 1,000-leaf TensorDict (packed into one buffer per dtype and
    unpacked, on both processes) against ``all_reduce`` of one flat tensor."""
    _connect()
    td, flat = _payload(), torch.rand(_NUMEL)
    cmd_td, cmd_flat = torch.tensor([_REDUCE_TD]), torch.tensor([_REDUCE_FLAT])

    def lib() -> None:
        dist.send(cmd_td, 1)
        td.all_reduce()

    def base() -> None:
        dist.send(cmd_flat, 1)
        dist.all_reduce(flat)

    return lib, base


def all_reduce_consolidated_vs_tensor() -> tuple[Fn, Fn]:
    """``all_reduce`` of a consolidated 1,000-leaf TensorDict (its storage reduced in
    place, one call per dtype) against ``all_reduce`` of one flat tensor."""
    _connect()
    td, flat = _payload().consolidate(), torch.rand(_NUMEL)
    cmd_td, cmd_flat = torch.tensor([_REDUCE_CTD]), torch.tensor([_REDUCE_FLAT])

    def lib() -> None:
        dist.send(cmd_td, 1)
        td.all_reduce()

    def base() -> None:
        dist.send(cmd_flat, 1)
        dist.all_reduce(flat)

    return lib, base


def _echo(inbox: Any, outbox: Any) -> None:
    """The queue peer: take each item and answer with a one-element ack."""
    while True:
        item = inbox.get()
        if item is None:
            break
        if isinstance(item, tuple):  # the floor case: 1,000 views of the tensor
            item[1].view(1000, 10, 100).unbind(0)
        outbox.put(1)


def _queue_peer() -> tuple[Any, Any]:
    if "queue" not in _STATE:
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        peer = ctx.Process(target=_echo, args=(inbox, outbox), daemon=True)
        peer.start()

        def stop() -> None:
            inbox.put(None)
            peer.join(timeout=30)

        atexit.register(stop)
        _STATE["queue"] = (inbox, outbox)
    return _STATE["queue"]  # type: ignore[return-value]


def queue_vs_tensor() -> tuple[Fn, Fn]:
    """A consolidated TensorDict (shared memory) through a ``torch.multiprocessing`` queue
    to a peer, which answers, against one tensor of the same bytes the same way."""
    inbox, outbox = _queue_peer()
    td = _payload().consolidate(share_memory=True)
    flat = torch.rand(_NUMEL).share_memory_()  # type: ignore[no-untyped-call]

    def lib() -> None:
        inbox.put(td)
        outbox.get()

    def base() -> None:
        inbox.put(flat)
        outbox.get()

    return lib, base


def queue_floor_vs_tensor() -> tuple[Fn, Fn]:
    """The floor under the queue case: the same shared tensor, of which the peer makes
    the 1,000 leaf views (one ``unbind``) before it answers."""
    inbox, outbox = _queue_peer()
    flat = torch.rand(_NUMEL).share_memory_()  # type: ignore[no-untyped-call]

    def lib() -> None:
        inbox.put(("views", flat))
        outbox.get()

    def base() -> None:
        inbox.put(flat)
        outbox.get()

    return lib, base


CASES = [
    Case(
        "consolidate() TensorDict 1,000 leaves 4 MB",
        "torch.cat of the 1,000 flattened views",
        1.2,
        consolidate_vs_cat,
    ),
    Case(
        "floor of consolidate(): stack + 1,000 views, no TensorDict, 1,000 leaves 4 MB",
        "torch.cat of the 1,000 flattened views",
        None,
        consolidate_floor_vs_cat,
    ),
    Case(
        "send/recv TensorDict 1,000 leaves 4 MB (gloo, 2 procs, round trip)",
        "dist.send/recv one 4 MB tensor",
        1.5,
        send_recv_vs_tensor,
    ),
    Case(
        "floor of send/recv: stack + copy back into 1,000 leaves, no TensorDict, 4 MB "
        "(gloo, 2 procs, round trip)",
        "dist.send/recv one 4 MB tensor",
        None,
        send_recv_floor_vs_tensor,
    ),
    Case(
        "floor of send/recv with a header: stack, header then payload, copy back, no "
        "TensorDict, 4 MB (gloo, 2 procs, round trip)",
        "dist.send/recv one 4 MB tensor",
        None,
        send_recv_headed_stack_floor_vs_tensor,
    ),
    Case(
        "send/recv consolidated TensorDict 1,000 leaves 4 MB (gloo, 2 procs, round trip)",
        "dist.send/recv one 4 MB tensor",
        1.2,
        send_recv_consolidated_vs_tensor,
    ),
    Case(
        "floor of consolidated send/recv: a header, then 4 MB received once the header "
        "was read, no TensorDict (gloo, 2 procs, round trip)",
        "dist.send/recv one 4 MB tensor",
        None,
        send_recv_headed_floor_vs_tensor,
    ),
    Case(
        "all_reduce TensorDict 1,000 leaves 4 MB (gloo, 2 procs)",
        "dist.all_reduce one 4 MB tensor",
        1.3,
        all_reduce_vs_tensor,
    ),
    Case(
        "floor of all_reduce: stack + copy back into 1,000 leaves, no TensorDict, 4 MB "
        "(gloo, 2 procs)",
        "dist.all_reduce one 4 MB tensor",
        None,
        all_reduce_floor_vs_tensor,
    ),
    Case(
        "all_reduce consolidated TensorDict 1,000 leaves 4 MB (gloo, 2 procs)",
        "dist.all_reduce one 4 MB tensor",
        1.3,
        all_reduce_consolidated_vs_tensor,
    ),
    Case(
        "consolidated TensorDict 1,000 leaves 4 MB through a torch.multiprocessing queue",
        "one 4 MB shared tensor through the queue",
        1.5,
        queue_vs_tensor,
    ),
    Case(
        "floor of the queue: one shared tensor, 1,000 views made by the peer, 1,000 leaves 4 MB",
        "one 4 MB shared tensor through the queue",
        None,
        queue_floor_vs_tensor,
    ),
    Case(
        "send/recv from_remote_init TensorDicts 1,000 leaves 4 MB (gloo, round trip)",
        "dist.send/recv one 4 MB tensor",
        None,
        send_recv_received_vs_tensor,
    ),
]
