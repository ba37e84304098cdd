"""Point-to-point and collective methods of TensorDict over ``torch.distributed`` (gloo, nccl).

Each method packs the leaves of one dtype into one contiguous buffer, sends a small
checked header first and raises on the receiving side when the structures differ; see
``tensordict/_dist_wire.py`` for the protocol and ``docs/distributed.md`` for a guide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._consolidate import (
    Plan,
    explain_mismatch,
    file_backed,
    in_memory,
    leaf_path,
    sent_record,
    wire_description,
    wire_fill,
)
from tensordict._dist_wire import (
    DTYPES,
    FIXED,
    GATHER,
    HEADER_LEN,
    INIT,
    Layout,
    Link,
    Pending,
    Tags,
    as_bytes,
    build,
    check_magic,
    drain,
    empty_buffers,
    file_backed_error,
    post_recv,
    post_send,
    recv_new,
    require_init,
    structure,
    wire_device,
)
from tensordict._primitives import CollectionPrimitives
from tensordict._staging import give_back, take

if TYPE_CHECKING:
    from typing import Self

    from tensordict._base import TensorDictBase


def _ranks(dist: Any, group: Any) -> list[int]:
    """The global ranks of ``group`` (the default group when None), in group order."""
    if group is None:
        return list(range(dist.get_world_size()))
    return list(dist.get_process_group_ranks(group))


def _jagged_refusal(td: Any, plan: Plan, call: str) -> NotImplementedError:
    """The error of a reduction over jagged leaves (it would combine their offsets)."""
    assert plan.jagged is not None
    dense = in_memory(td, call)
    keys = [leaf_path(dense, index) for index, _, _ in plan.jagged]
    return NotImplementedError(
        f"{call}: the entries {keys} are jagged nested tensors, whose offsets (and lengths) "
        "a reduction would combine as numbers; reduce their values instead, e.g. a "
        "TensorDict of value.values() for each"
    )


def _exchange_headers(dist: Any, header: Tensor, group: Any, call: str) -> list[list[int]]:
    """Every rank's header, so that every rank sees a mismatch and raises alike."""
    header = header.to(wire_device(dist, group))
    headers = [torch.empty_like(header) for _ in _ranks(dist, group)]
    dist.all_gather(headers, header, group=group)
    infos = [h.tolist() for h in headers]
    for rank, info in zip(_ranks(dist, group), infos, strict=True):
        check_magic(call, info, rank)
    return infos


class DistributedOps(CollectionPrimitives):
    """send/recv, init_remote, broadcast, all_reduce, reduce, all_gather, scatter, gather_and_stack.

    Tensor leaves travel; a ``NonTensorData`` entry is part of the structure check, and its
    value travels only with the calls that send the structure (``init_remote``,
    ``broadcast``, ``scatter``, ``all_gather``), as JSON.
    """

    __slots__ = ()

    # ------------------------------------------------------------ over a pipe (asyncio)
    async def asend(self, dst: Any) -> None:
        """Send this collection through a pipe: ``await dst.asend(self)``.

        ``dst`` is a :class:`~tensordict.TensorDictPipe` (a TCP channel, no process
        group needed) or any object with the same ``asend`` coroutine, such as
        upstream's UCXX pipe.
        """
        await dst.asend(self)

    async def arecv(self, src: Any, *, device: Any = None) -> Any:
        """The next collection from a pipe: ``await src.arecv(self, device=device)``.

        With a :class:`~tensordict.TensorDictPipe`, when this collection is the one the
        pipe received last and the structure is unchanged, the data is written into it
        and it is returned; otherwise a new collection is returned.
        """
        return await src.arecv(self, device=device)

    # ------------------------------------------------------------ point to point
    def send(
        self,
        dst: int | None = None,
        *,
        group: Any = None,
        group_dst: int | None = None,
        init_tag: int = 0,
        pseudo_rand: bool = False,
        consolidated: bool = False,
    ) -> None:
        """Send the leaves to rank ``dst``, whose ``recv`` fills a TensorDict of the same structure.

        A header, a description of the structure and ONE buffer: the storage of a
        consolidated TensorDict as it is, else the leaves consolidated on the fly (so
        ``consolidated=`` is accepted for compatibility and changes nothing).
        ``group_dst`` names the peer by its rank in ``group`` instead (``group`` required;
        the group's own ``send`` carries the messages, so a process group built on a store
        and never registered serves too). ``init_tag`` numbers
        the messages (``init_tag``, ``init_tag + 1``, ...) and ``pseudo_rand=True`` draws
        the tags from a generator seeded by ``init_tag``; the receiver passes the same values.

        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"a": torch.zeros(3)}, [3])
        >>> td.send(1)
        Traceback (most recent call last):
        RuntimeError: TensorDict.send: torch.distributed is not initialised; ...
        """
        call = self._call("send")
        link = _link(call, dst, group_dst, group, "dst")
        post_send(self, link, Tags(init_tag, pseudo_rand), call).wait()

    def isend(
        self,
        dst: int | None = None,
        *,
        group: Any = None,
        group_dst: int | None = None,
        init_tag: int = 0,
        pseudo_rand: bool = False,
        return_early: bool = False,
        consolidated: bool = False,
    ) -> int | list[Pending]:
        """As :meth:`send` (``consolidated=`` too), with every message posted at once.

        Returns the next free tag once sent, or with ``return_early=True`` a list with one
        handle to ``wait()`` on before the leaves are changed.
        """
        call = self._call("isend")
        link = _link(call, dst, group_dst, group, "dst")
        pending = post_send(self, link, Tags(init_tag, pseudo_rand), call)
        if return_early:
            return [pending]
        pending.wait()
        return pending.next_tag

    def recv(
        self,
        src: int | None = None,
        *,
        group: Any = None,
        group_src: int | None = None,
        init_tag: int = 0,
        pseudo_rand: bool = False,
        consolidated: bool = False,
    ) -> int:
        """Receive what rank ``src`` sends into the leaves of this TensorDict, in place
        (straight into its storage when it is consolidated).

        The keys (in order), shapes and dtypes must be the sender's: otherwise a
        ``RuntimeError`` names every key that differs, after the sender's messages are
        consumed. Returns the next free tag.
        """
        call = self._call("recv")
        link = _link(call, src, group_src, group, "src")
        pending = post_recv(self, link, Tags(init_tag, pseudo_rand), call)
        pending.wait()
        return pending.next_tag

    def irecv(
        self,
        src: int | None = None,
        *,
        group: Any = None,
        group_src: int | None = None,
        return_premature: bool = False,
        init_tag: int = 0,
        pseudo_rand: bool = False,
        consolidated: bool = False,
    ) -> int | list[Pending]:
        """As :meth:`recv` (``consolidated=`` too); with ``return_premature=True``, returns
        a list with one handle.

        The handle's ``wait()`` receives the buffer and writes it into the leaves, so read
        the TensorDict only after it returns.
        """
        call = self._call("irecv")
        link = _link(call, src, group_src, group, "src")
        pending = post_recv(self, link, Tags(init_tag, pseudo_rand), call)
        if return_premature:
            return [pending]
        pending.wait()
        return pending.next_tag

    def init_remote(
        self,
        dst: int | None = None,
        group: Any = None,
        device: Any = None,
        use_broadcast: bool = False,
    ) -> None:
        """Send the structure (as JSON) and the leaves to ``dst``, which calls
        :meth:`from_remote_init` and needs to know nothing in advance.

        With ``use_broadcast=True`` every rank of the group takes part (as
        :meth:`broadcast` from this rank) and calls ``from_remote_init(...,
        use_broadcast=True)``. ``device`` is accepted for compatibility: leaves are sent
        from where they live.
        """
        call = self._call("init_remote")
        if use_broadcast:
            self.broadcast(require_init(call).get_rank(), group=group)
            return
        if dst is None:
            raise ValueError(f"{call}: dst is required unless use_broadcast=True")
        spec = structure(self, call)
        post_send(self, Link(call, dst, group), Tags(), call, INIT, spec).wait()

    @classmethod
    def from_remote_init(
        cls, src: int, group: Any = None, device: Any = None, use_broadcast: bool = False
    ) -> TensorDictBase:
        """The TensorDict that rank ``src`` sends with :meth:`init_remote`.

        The result is consolidated (see :meth:`consolidate`: locked, its leaves views of
        one storage, on ``device``, the CPU by default), so that later ``recv`` calls write
        straight into that storage. The structure is JSON: nothing is unpickled or imported.
        A tensorclass comes back as that class when this process defines it (else a
        ``RuntimeError`` names it). Two processes are needed (see docs/distributed.md):

        >>> from tensordict import TensorDict
        >>> TensorDict.from_remote_init(src=0)
        Traceback (most recent call last):
        RuntimeError: TensorDict.from_remote_init: torch.distributed is not initialised; ...
        """
        if use_broadcast:
            from tensordict._td import TensorDict

            return TensorDict().broadcast(src, group=group, device=device)
        call = f"{cls.__name__}.from_remote_init"
        return recv_new(Link(call, src, group), device, call)

    # ------------------------------------------------------------ collectives
    def broadcast(self, src: int, *, group: Any = None, device: Any = None) -> Self:
        """Rank ``src``'s TensorDict on every rank of the group (every rank calls it).

        The others need not know the structure: call it on an empty TensorDict. Every rank
        gets a consolidated collection (see :meth:`consolidate`): rank ``src`` its own
        (``self`` when it is consolidated already, else a consolidated copy), the others a
        new one on ``device`` (the CPU by default), of the sender's tensorclass when this
        process defines it.

        >>> import torch, torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> TensorDict({"a": torch.arange(3)}, [3]).broadcast(src=0)["a"]
        tensor([0, 1, 2])
        >>> dist.destroy_process_group()
        """
        call = self._call("broadcast")
        dist = require_init(call)
        if dist.get_rank() == src:
            out: Any = self.consolidate()  # type: ignore[attr-defined]
            lay = Layout(out, call)
            spec = structure(out, call)
            bufs = lay.pack()
            wire = wire_device(dist, group)
            header = lay.header(INIT, bufs, len(spec)).to(wire)
            dist.broadcast(header, src, group=group)
            raw = torch.frombuffer(bytearray(spec), dtype=torch.uint8).to(wire)
            dist.broadcast(raw, src, group=group)
            for code in sorted(bufs):
                dist.broadcast(as_bytes(bufs[code]), src, group=group)
            return out  # type: ignore[no-any-return]
        wire = wire_device(dist, group)
        header = torch.empty(HEADER_LEN, dtype=torch.int64, device=wire)
        dist.broadcast(header, src, group=group)
        info = header.tolist()
        check_magic(call, info, src)
        dev = wire if device is None else torch.device(device)
        raw = torch.empty(info[6], dtype=torch.uint8, device=wire)
        dist.broadcast(raw, src, group=group)
        bufs = empty_buffers(info, dev)
        for code in sorted(bufs):
            dist.broadcast(as_bytes(bufs[code]), src, group=group)
        return build(call, raw, bufs, dev).consolidate(inplace=True)  # type: ignore[no-any-return]

    def all_reduce(
        self,
        op: Any = None,
        *,
        group: Any = None,
        async_op: bool = False,
        bucket_bytes: int | None = None,
    ) -> list[Pending] | None:
        """Reduce every leaf over the ranks (sum by default), in place, on every rank.

        One ``torch.distributed.all_reduce`` per dtype buffer, after the headers of all
        ranks are compared (a mismatch raises on every rank); ``bucket_bytes`` caps each
        reduction at that many bytes (a buffer is reduced in slices; the ranks hold the
        same layout, checked, so they slice alike). With ``async_op=True``, returns a list
        with one handle whose ``wait()`` writes the results into the leaves.

        >>> import torch, torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> td = TensorDict({"grad": torch.ones(2)}, [2])
        >>> td.all_reduce()  # a group of one: the sum is the value itself
        >>> td["grad"]
        tensor([1., 1.])
        >>> dist.destroy_process_group()
        """
        call = self._call("all_reduce")
        return self._reduce(call, None, op, group, async_op, bucket_bytes)

    def reduce(
        self,
        dst: int,
        op: Any = None,
        async_op: bool = False,
        return_premature: bool = False,
        group: Any = None,
        *,
        bucket_bytes: int | None = None,
    ) -> list[Pending] | None:
        """Reduce every leaf over the ranks into the TensorDict of rank ``dst`` (sum by default).

        The other ranks keep their values (their buffers are copies). With
        ``async_op=True`` and ``return_premature=True``, returns a list with one handle
        whose ``wait()`` writes the result into the leaves on ``dst``. ``bucket_bytes``
        as in :meth:`all_reduce`.
        """
        premature = async_op and return_premature
        return self._reduce(self._call("reduce"), dst, op, group, premature, bucket_bytes)

    def _reduce(
        self,
        call: str,
        dst: int | None,
        op: Any,
        group: Any,
        async_op: bool,
        bucket_bytes: int | None = None,
    ) -> list[Pending] | None:
        if bucket_bytes is not None and (type(bucket_bytes) is not int or bucket_bytes < 1):
            raise ValueError(f"{call}: bucket_bytes must be an int >= 1, got {bucket_bytes!r}")
        dist = require_init(call)
        op = dist.ReduceOp.SUM if op is None else op
        # A rank that cannot take part says so in its header (-1 leaves), so that every
        # rank raises after the exchange and none waits in the reduction: a file-backed
        # collection cannot take the result (on a rank that only contributes, reduce to
        # another rank, it sends its values), and leaves that cannot be stacked fail here.
        # The leaves are stacked before the exchange: the stack checks every shape against
        # a plan matched on each run's first shape (see ``wire_fill``).
        receives = dst is None or dist.get_rank() == dst
        refused = file_backed(self) and receives
        staging, leaves, error = None, None, None
        desc, fps = b"", (0, 0, 0)
        nleaves = nbytes = -1
        record = None if refused else sent_record(self)
        if record is not None:
            plan, storage = record.plan, record.storage
            desc, fps = wire_description(self, plan)
            if not receives:  # the other ranks keep their values: reduce a copy
                storage = storage.clone()
        elif not refused:
            try:
                plan, staging, leaves, (desc, fps) = wire_fill(self, take, _any_dtype, call)
            except Exception as err:  # raised again after the exchange
                error = err
            else:
                storage = staging.storage
        if not refused and error is None and plan.jagged is not None:
            error = _jagged_refusal(self, plan, call)
        if not refused and error is None:
            nleaves, nbytes = plan.nleaves, plan.nbytes
        header = torch.tensor([*fps, nleaves, nbytes, len(desc)]).to(wire_device(dist, group))
        gathered = [torch.empty_like(header) for _ in _ranks(dist, group)]
        dist.all_gather(gathered, header, group=group)
        if refused:
            raise file_backed_error(self, call)
        if error is not None:
            raise error
        headers = [h.tolist() for h in gathered]
        ranks = _ranks(dist, group)
        refusing = [rank for rank, h in zip(ranks, headers, strict=True) if h[3] == -1]
        if refusing:
            raise RuntimeError(
                f"{call}: rank(s) {refusing} cannot take part in the reduction (see the error "
                "raised there: a file-backed collection receiving the result, or leaves that "
                "cannot be stacked); no data moved"
            )
        differ = [rank for rank, h in zip(ranks, headers, strict=True) if h != headers[0]]
        if differ:  # (every rank is here: the descriptions are exchanged to name the keys)
            descs = [
                d.cpu().numpy().tobytes()
                for d in _gather_padded(dist, group, desc, [h[5] for h in headers])
            ]
            first = f"rank {ranks[0]}"
            details = "; ".join(
                f"rank {rank} against {first}: "
                + explain_mismatch(descs[0], descs[ranks.index(rank)], first, f"rank {rank}")
                for rank in differ
            )
            raise RuntimeError(
                f"{call}: the ranks hold different structures: {details}; every rank must "
                "hold the same keys in the same order, with the same shapes and dtypes"
            )
        works = []
        for dtype, start, end in plan.dtype_spans():
            if end == start:
                continue
            step = end - start
            if bucket_bytes is not None:  # whole elements, at least one per bucket
                size = torch.empty((), dtype=dtype).element_size()
                step = max(size, bucket_bytes - bucket_bytes % size)
            for lo in range(start, end, step):
                buf = storage[lo : min(lo + step, end)].view(dtype)
                if dst is None:
                    works.append(dist.all_reduce(buf, op, group=group, async_op=True))
                else:
                    works.append(dist.reduce(buf, dst, op, group=group, async_op=True))
        finish = None
        if staging is not None:
            kept, used = leaves, staging

            def finish() -> None:
                if receives:
                    assert kept is not None
                    used.copy_to(kept)
                give_back(used)

        pending = Pending(works, finish, storage)
        if async_op:
            return [pending]
        pending.wait()
        return None

    def all_gather(self, *, group: Any = None) -> list[TensorDictBase]:
        """Every rank's TensorDict, in rank order, on every rank (structures may differ).

        The entries are new TensorDicts whose leaves are views of the gathered buffers.

        >>> import torch, torch.distributed as dist
        >>> from tensordict import TensorDict
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> [td["a"] for td in TensorDict({"a": torch.ones(2)}, [2]).all_gather()]
        [tensor([1., 1.])]
        >>> dist.destroy_process_group()
        """
        call = self._call("all_gather")
        dist = require_init(call)
        lay = Layout(self, call)
        spec = structure(self, call)
        bufs = lay.pack()
        infos = _exchange_headers(dist, lay.header(GATHER, bufs, len(spec)), group, call)
        n = len(infos)
        wire = wire_device(dist, group)
        raws = _gather_padded(dist, group, spec, [info[6] for info in infos])
        per_rank: list[dict[int, Tensor]] = [{} for _ in range(n)]
        for code in range(len(DTYPES)):
            most = max(info[FIXED + code] for info in infos)
            if not most:
                continue
            mine = bufs.get(code)
            padded = torch.zeros(most, dtype=DTYPES[code], device=wire)
            if mine is not None:
                padded[: mine.numel()] = mine
            out = [torch.empty_like(padded) for _ in range(n)]
            dist.all_gather([as_bytes(o) for o in out], as_bytes(padded), group=group)
            for r, info in enumerate(infos):
                if info[FIXED + code]:
                    per_rank[r][code] = out[r][: info[FIXED + code]]
        return [build(call, raws[r], per_rank[r], wire) for r in range(n)]

    def scatter(
        self,
        src: int,
        tensordicts: Sequence[Any] | None = None,
        *,
        group: Any = None,
        device: Any = None,
    ) -> Self:
        """Rank ``src`` gives ``tensordicts[i]`` to the i-th rank of the group; each rank
        returns its own (every rank calls it; the TensorDict it is called on is not used).
        """
        call = self._call("scatter")
        dist = require_init(call)
        ranks = _ranks(dist, group)
        if dist.get_rank() != src:
            return recv_new(Link(call, src, group), device, call)  # type: ignore[return-value]
        if tensordicts is None or len(tensordicts) != len(ranks):
            got = None if tensordicts is None else len(tensordicts)
            raise ValueError(
                f"{call}: rank {src} must pass one tensordict per rank of the group "
                f"({len(ranks)}), got {got}"
            )
        # every structure is checked before anything is sent: a refusal then leaves no
        # rank waiting for a message that will not come
        outgoing = [
            (rank, td, structure(td, call), Layout(td, call))
            for rank, td in zip(ranks, tensordicts, strict=True)
            if rank != src
        ]
        pending = [
            post_send(td, Link(call, rank, group), Tags(), call, INIT, raw)
            for rank, td, raw, _ in outgoing
        ]
        for p in pending:
            p.wait()
        return tensordicts[ranks.index(src)]  # type: ignore[no-any-return]

    def gather_and_stack(self, dst: int, group: Any = None) -> TensorDictBase | None:
        """Write the TensorDicts of the other ranks into rank ``dst``'s, stacked along dim 0.

        Every rank calls it. On ``dst`` the TensorDict has one row per *other* rank
        (``batch_size[0] == world_size - 1``), filled in rank order; its own data is not
        included. Returns ``self`` on ``dst`` and None elsewhere.
        """
        call = self._call("gather_and_stack")
        dist = require_init(call)
        ranks = _ranks(dist, group)
        if dist.get_rank() != dst:
            post_send(self, Link(call, dst, group), Tags(), call).wait()
            return None
        others = [r for r in ranks if r != dst]
        bs = self._batch_size
        if not bs or bs[0] != len(others):
            for rank in others:  # the other ranks are mid-send: take their messages first
                drain(Link(call, rank, group), call)
            raise ValueError(
                f"{call}: on rank {dst} the tensordict needs one row per other rank: "
                f"batch_size[0] == {len(others)}, got batch_size {tuple(bs)}"
            )
        problems = []
        for row, rank in enumerate(others):
            try:
                post_recv(self._index(row), Link(call, rank, group), Tags(), call).wait()
            except RuntimeError as err:  # keep receiving: the other ranks are mid-send
                problems.append(str(err))
        if problems:
            raise RuntimeError("; ".join(problems))
        return self  # type: ignore[return-value]


def _any_dtype(plan: Plan) -> None:
    """A reduction takes every dtype torch.distributed reduces (no wire codes involved)."""


def _link(call: str, rank: int | None, group_rank: int | None, group: Any, what: str) -> Link:
    """The peer of a point-to-point call, named by its global rank (``dst``/``src``) or by
    its rank in ``group`` (``group_dst``/``group_src``: reached through the group's own
    send and recv, so an unregistered group serves too)."""
    if group_rank is not None:
        if group is None:
            raise ValueError(
                f"{call}: `group_{what}` requires `group` to be passed (group_{what} is a "
                f"rank in that group), got group_{what}={group_rank!r} and group=None"
            )
        if rank is not None:
            raise ValueError(
                f"{call}: `{what}` and `group_{what}` are mutually exclusive (a global rank, "
                f"or a rank in group), got {what}={rank!r}, group_{what}={group_rank!r}"
            )
        return Link(call, group_rank, group, raw=True)
    if rank is None:
        raise ValueError(
            f"{call}: Exactly one of `{what}` (a global rank) and `group_{what}` (a rank in "
            "group) must be provided, got neither"
        )
    return Link(call, rank, group)


def _gather_padded(dist: Any, group: Any, data: bytes, sizes: list[int]) -> list[Tensor]:
    """Every rank's bytes (``sizes``, in rank order, as the headers announced them; ``data``
    is this rank's), in one all_gather of buffers padded to the longest."""
    wire = wire_device(dist, group)
    mine = torch.zeros(max(sizes), dtype=torch.uint8, device=wire)
    if data:
        mine[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(wire)
    out = [torch.empty_like(mine) for _ in sizes]
    dist.all_gather(out, mine, group=group)
    return [o[:n] for o, n in zip(out, sizes, strict=True)]
