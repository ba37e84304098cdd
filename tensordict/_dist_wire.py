"""The wire protocol of TensorDict transfers: a checked header, then as few buffers as can be.

Every transfer starts with a fixed-size message holding the int64 *header*: a magic
number, the kind of message, three 64-bit fingerprints of the structure, the number of
entries, the length of the description that follows and the element count of each
dtype's buffer.

``send``/``isend`` also send the *wire description* (JSON: the keys in walk order and
the dtype and shape runs, see ``_consolidate.wire_description``), then ONE byte buffer:
the consolidated storage (see ``_consolidate.py``), or the leaves consolidated on the
fly. A description or structure of at most ``INLINE`` bytes rides in the header's own
message, so such a send is two messages; a longer one travels as a message of its own.
The header message has one size whatever it carries (padded to ``INLINE`` bytes after
the header), as every transport needs: nccl and gloo's libuv transport (macOS,
Windows) take only a message of exactly the size posted. A receiver
whose fingerprints match receives straight into its own storage when it is consolidated,
else into one buffer copied into its leaves. The calls that send a structure
(``init_remote``, ``scatter``) send JSON and one buffer per dtype instead.

A receive never risks a buffer smaller than the message (gloo aborts the process then):
each buffer receive is posted after the header announcing its size was read. Nothing is
left posted between calls, so no state outlives a call or a process group. On a
mismatch the receiver still receives what the header announces (the sender completes
and the next transfer is aligned) and raises, naming the keys that differ. A peer that
dies or stalls makes the waiting side raise after the process group's timeout (gloo
enforces it on every send and receive).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import marshal
import math
import random
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._consolidate import (
    Plan,
    explain_mismatch,
    file_backed,
    in_memory,
    leaf_device,
    sent_record,
    storage_overwritten,
    wire_description,
    wire_fill,
    wire_plan,
)
from tensordict._format import FormatError, is_json_value, lookup_type, type_name
from tensordict._jagged import JaggedError, collapse, jag_of_nested, jagged_parts
from tensordict._nontensor import NonTensor, NonTensorData
from tensordict._nontensor_class import UnnamedClass, class_tag, entry_of
from tensordict._primitives import CollectionPrimitives
from tensordict._staging import give_back, take
from tensordict._torch_compat import flatten_dense, foreach

if TYPE_CHECKING:
    from tensordict._base import TensorDictBase

# The position of a dtype in this table is its code on the wire: append, never reorder.
_DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn",
    "float8_e5m2",
)  # fmt: skip
DTYPES: tuple[torch.dtype | None, ...] = tuple(getattr(torch, n, None) for n in _DTYPE_NAMES)
_CODES: dict[torch.dtype, int] = {d: i for i, d in enumerate(DTYPES) if d is not None}
_NODE, _NONTENSOR, _JAGGED = -1, -3, -4  # entry codes of TensorDicts, non-tensors, jagged

_MAGIC = 0x7D1C_0002  # "td" and the protocol version
DATA, INIT, REDUCE, GATHER = 1, 2, 3, 4
_KIND_NAMES = {
    DATA: "send/isend",
    INIT: "init_remote/broadcast/scatter",
    REDUCE: "all_reduce/reduce",
    GATHER: "all_gather",
}
FIXED = 7  # magic, kind, keys fp, shapes fp, dtypes fp, entries, structure length
HEADER_LEN = FIXED + len(DTYPES)
_HEAD_BYTES = HEADER_LEN * 8
_HEAD_FORMAT = struct.Struct(f"={HEADER_LEN}q")  # native order, as a tensor view reads it
INLINE = 1 << 13  # the description bytes that ride in a header message (~600 leaves)
_HEAD_MESSAGE = _HEAD_BYTES + INLINE  # every header message's size, on every transport


def inlined(nbytes: int) -> bool:
    """Whether ``nbytes`` of description travel inside the header message (both sides
    apply this rule to the length the header announces)."""
    return nbytes <= INLINE


def header_message(values: Sequence[int], extra: bytes, wire: torch.device) -> Tensor:
    """The header message: the header ``values`` as bytes, then ``extra`` (a description
    or a structure) when it is :func:`inlined` (else ``extra`` travels as a message of
    its own), padded to its one size."""
    data = bytearray(_HEAD_MESSAGE)
    _HEAD_FORMAT.pack_into(data, 0, *values)
    if inlined(len(extra)):
        data[_HEAD_BYTES : _HEAD_BYTES + len(extra)] = extra
    return torch.frombuffer(data, dtype=torch.uint8).to(wire)


def post_header(link: Link, tag: int) -> tuple[Any, Tensor]:
    """Post the receive of a header message."""
    buf = torch.empty(_HEAD_MESSAGE, dtype=torch.uint8, device=link.wire)
    return link.irecv(buf, tag), buf


def read_header(buf: Tensor) -> list[int]:
    """The header values of a received header message."""
    return buf[:_HEAD_BYTES].view(torch.int64).tolist()


def recv_extra(link: Link, info: list[int], head: Tensor, tag: int) -> tuple[Tensor, Any]:
    """The description or structure the header ``info`` announces: a view of the header
    message when it was inlined (and None), else a posted receive of it (and its work)."""
    if inlined(info[6]):
        return head[_HEAD_BYTES : _HEAD_BYTES + info[6]], None
    raw = torch.empty(info[6], dtype=torch.uint8, device=head.device)
    return raw, link.irecv(raw, tag)


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def require_init(call: str) -> Any:
    dist = _dist()
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            f"{call}: torch.distributed is not initialised; call "
            "torch.distributed.init_process_group(...) in every process first"
        )
    return dist


def wire_device(dist: Any, group: Any) -> torch.device:
    """Where headers and structures travel: the current CUDA device with nccl, else the CPU."""
    return _wire_of(str(dist.get_backend(group)))


def _wire_of(backend: str) -> torch.device:
    if "nccl" in backend and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


class Link:
    """The peer of a point-to-point transfer, and how messages reach it.

    Named by its global rank, the peer is reached through ``torch.distributed``'s
    functions (the default group, or ``group`` registered by ``new_group``). Named by its
    rank in ``group`` (``raw``: ``group_dst``/``group_src``), through the group's own
    ``send``/``recv``, so that a process group built on a store and never registered
    (no ``init_process_group``) serves too.
    """

    __slots__ = ("_dist", "group", "peer", "raw", "wire")

    def __init__(self, call: str, peer: int, group: Any = None, raw: bool = False) -> None:
        self.peer = peer
        self.group = group
        self.raw = raw
        self._dist: Any = None
        if raw:
            name = getattr(group, "name", None)
            self.wire = _wire_of(str(name()) if callable(name) else "")
        else:
            self._dist = require_init(call)
            self.wire = wire_device(self._dist, group)

    def isend(self, tensor: Tensor, tag: int) -> Any:
        if self.raw:
            return self.group.send([tensor], self.peer, tag)
        return self._dist.isend(tensor, self.peer, group=self.group, tag=tag)

    def irecv(self, tensor: Tensor, tag: int) -> Any:
        if self.raw:
            return self.group.recv([tensor], self.peer, tag)
        return self._dist.irecv(tensor, self.peer, group=self.group, tag=tag)


def _fingerprint(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}\x1f{key}" if prefix else key


def _shown(path: str) -> str:
    return path.replace("\x1f", "/")


class Layout:
    """The flattened structure of a collection: entry keys, shapes, codes, leaves per dtype."""

    __slots__ = ("_fps", "codes", "dims", "groups", "keys", "runs")

    def __init__(self, td: CollectionPrimitives, call: str) -> None:
        # keys: entry keys, with markers around each nested level; dims: every entry's
        # shape, flattened, each closed by -1; codes: a dtype code or an entry kind.
        # A dtype's buffer holds its leaves grouped by shape (shapes in the order they
        # first occur, leaves in walk order within a shape), so that unpacking views each
        # run of one shape with a single view + unbind: see ``wire_order``.
        if td._stack_parts() is not None:  # a lazy stack travels as its dense equivalent
            td = td._as_dense(call)
        # nested tensor leaves are looked for only when the plain walk fails (a strided
        # one has no shape; a jagged one's ragged size cannot be fingerprinted): no cost
        # otherwise
        try:
            shaped = self._walked(td, call, False)
        except (RuntimeError, ValueError):
            shaped = self._walked(td, call, True)
        self.groups: dict[int, list[Tensor]] = {
            code: [t for run in by_shape.values() for t in run] for code, by_shape in shaped.items()
        }
        self.runs: dict[int, list[tuple[torch.Size, int]]] = {
            code: [(shape, len(run)) for shape, run in by_shape.items()]
            for code, by_shape in shaped.items()
        }

    def _walked(
        self, td: Any, call: str, nested: bool
    ) -> dict[int, dict[torch.Size, list[Tensor]]]:
        self.keys: list[str] = []
        self.dims: list[int] = []
        self.codes: list[int] = []
        shaped: dict[int, dict[torch.Size, list[Tensor]]] = {}
        self._walk(td, "", call, shaped, nested)
        self._fps = (
            _fingerprint("\x00".join(self.keys).encode()),
            _fingerprint(marshal.dumps(self.dims)),
            _fingerprint(bytes(c + 8 for c in self.codes)),
        )
        return shaped

    def _walk(
        self,
        td: Any,
        prefix: str,
        call: str,
        groups: dict[int, dict[torch.Size, list[Tensor]]],
        nested: bool,
    ) -> None:
        keys, dims, codes = self.keys, self.dims, self.codes
        for key, value in td._tensordict.items():
            if nested and isinstance(value, Tensor) and value.is_nested:
                self._walk_jagged(value, key, prefix, call, groups)
            elif isinstance(value, Tensor):
                code = _CODES.get(value.dtype)
                if code is None:
                    raise TypeError(
                        f"{call}: key {_shown(_join(prefix, key))!r} has dtype {value.dtype}, "
                        f"which cannot be sent; cast it to one of {', '.join(_DTYPE_NAMES)}"
                    )
                keys.append(key)
                shape = value.shape
                dims.extend(shape)
                dims.append(-1)
                codes.append(code)
                by_shape = groups.get(code)
                if by_shape is None:
                    groups[code] = {shape: [value]}
                else:
                    run = by_shape.get(shape)
                    if run is None:
                        by_shape[shape] = [value]
                    else:
                        run.append(value)
            elif isinstance(value, NonTensor):
                keys.append(key)
                dims.extend(value.batch_size)
                dims.append(-1)
                codes.append(_NONTENSOR)
            else:
                keys.append(key)
                dims.extend(value._batch_size)
                dims.append(-1)
                codes.append(_NODE)
                keys.append("\x1e")
                self._walk(value, _join(prefix, key), call, groups, nested)
                keys.append("\x1d")

    def _walk_jagged(
        self,
        value: Tensor,
        key: str,
        prefix: str,
        call: str,
        groups: dict[int, dict[torch.Size, list[Tensor]]],
    ) -> None:
        """A jagged leaf travels as its parts (values, offsets, lengths when present), each
        packed with the leaves of its dtype; its entry's dims are the parts' shapes."""
        path = _join(prefix, key)
        _, ragged, nparts = jag_of_nested(value, call, _shown(path))
        self.keys.append(key)
        self.codes.append(_JAGGED)
        self.dims.append(ragged)
        for part in jagged_parts(value, nparts):
            code = _CODES.get(part.dtype)
            if code is None:
                raise TypeError(
                    f"{call}: key {_shown(path)!r} has values of dtype {part.dtype}, which "
                    f"cannot be sent; cast it to one of {', '.join(_DTYPE_NAMES)}"
                )
            self.dims.extend(part.shape)
            self.dims.append(-2)
            by_shape = groups.setdefault(code, {})
            by_shape.setdefault(part.shape, []).append(part)
        self.dims.append(-1)

    def device(self) -> torch.device:
        """Where receive buffers are allocated: the device of the first leaf, or the CPU."""
        for leaves in self.groups.values():
            return leaves[0].device
        return torch.device("cpu")

    def numels(self) -> list[int]:
        out = [0] * len(DTYPES)
        for code, leaves in self.groups.items():
            out[code] = sum(leaf.numel() for leaf in leaves)
        return out

    def span(self, code: int) -> Tensor | None:
        """A flat view over the leaves of ``code`` when they already lie back to back, in
        order, in one storage (one leaf, or a TensorDict from ``from_remote_init``)."""
        leaves = self.groups[code]
        first = leaves[0]
        if len(leaves) == 1:
            return first.view(-1) if first.is_contiguous() else None
        last = leaves[-1]
        if first.untyped_storage().data_ptr() != last.untyped_storage().data_ptr():
            return None
        size = first.element_size()
        ptr = start = first.data_ptr()
        for leaf in leaves:
            if leaf.data_ptr() != ptr or not leaf.is_contiguous():
                return None
            ptr += leaf.numel() * size
        return first.as_strided(((ptr - start) // size,), (1,))

    def pack(self, copy: bool = False) -> dict[int, Tensor]:
        """One flat buffer per dtype code: a view when the leaves already are one (unless
        ``copy``), else one packed copy."""
        out: dict[int, Tensor] = {}
        for code in sorted(self.groups):
            span = None if copy else self.span(code)
            out[code] = flatten_dense(self.groups[code]) if span is None else span
        return out

    def header(self, kind: int, buffers: dict[int, Tensor], extra: int = 0) -> Tensor:
        numels = [0] * len(DTYPES)
        for code, buf in buffers.items():
            numels[code] = buf.numel()
        return torch.tensor([_MAGIC, kind, *self.fingerprints(), len(self.codes), extra, *numels])

    def fingerprints(self) -> tuple[int, int, int]:
        """Of the keys, the dims and the codes (made once, with the walk)."""
        return self._fps

    def compare(
        self, info: list[int], kind: int, mine: tuple[int, int, int] | None = None
    ) -> str | None:
        """None when the header ``info`` describes this structure, else what differs."""
        if info[1] != kind:
            return (
                f"the sender called {_KIND_NAMES.get(info[1], '?')}, which does not pair "
                f"with {_KIND_NAMES[kind]}"
            )
        mine = self.fingerprints() if mine is None else mine
        if tuple(info[2:5]) == mine:
            return None
        what = [
            name
            for name, a, b in zip(("keys", "shapes", "dtypes"), info[2:5], mine, strict=True)
            if a != b
        ]
        return (
            f"the structures differ in their {' and '.join(what)}: the sender has "
            f"{info[5]} entries ({_describe(info[FIXED:])}), this TensorDict has "
            f"{len(self.codes)} ({_describe(self.numels())}); every process must hold the same "
            "keys in the same order, with the same shapes and dtypes (to send a structure the "
            "receiver does not know, use init_remote/from_remote_init)"
        )

    def _views(self, code: int, buf: Tensor) -> list[Tensor]:
        """Views of ``buf`` shaped like the leaves of ``code``, in order: one view and one
        unbind per run of a shape (not one view per leaf)."""
        views: list[Tensor] = []
        offset = 0
        for shape, count in self.runs[code]:
            size = shape.numel() * count
            views.extend(buf[offset : offset + size].view(count, *shape).unbind(0))
            offset += size
        return views

    def unpack(self, buffers: dict[int, Tensor]) -> None:
        """Copy each dtype buffer back into this structure's leaves (under no_grad)."""
        copy_ = foreach("copy_")
        with torch.no_grad():
            for code, leaves in self.groups.items():
                buf = buffers[code]
                if buf.data_ptr() == leaves[0].data_ptr():
                    continue  # reduced in place (see span)
                span = self.span(code)
                if span is not None:  # the leaves lie back to back: one copy
                    span.copy_(buf)
                    continue
                views = self._views(code, buf)
                if copy_ is not None and buf.device.type == "cpu":
                    copy_(leaves, views)
                else:
                    for leaf, view in zip(leaves, views, strict=True):
                        leaf.copy_(view)


def _describe(numels: Sequence[int]) -> str:
    parts = [f"{_DTYPE_NAMES[c]} x {n}" for c, n in enumerate(numels) if n]
    return ", ".join(parts) if parts else "no tensor data"


class Tags:
    """The tags of a transfer's messages, by position: ``init_tag``, ``init_tag + 1``, ...
    or, with ``pseudo_rand``, draws of a generator seeded by ``init_tag``."""

    __slots__ = ("_draw", "_values")

    def __init__(self, init_tag: int = 0, pseudo_rand: bool = False) -> None:
        rng = random.Random(init_tag) if pseudo_rand else None
        counter = itertools.count(init_tag)
        self._draw: Iterator[int] = (
            counter if rng is None else (rng.randrange(1 << 30) for _ in counter)
        )
        self._values: list[int] = []

    def __getitem__(self, position: int) -> int:
        while len(self._values) <= position:
            self._values.append(next(self._draw))
        return self._values[position]


_TAG_MASK = (1 << 30) - 1


def _payload_tag(tag: int, fingerprints: Sequence[int], kind: int) -> int:
    """A buffer's tag also names its structure and the kind of call: a receive posted
    before the header is read then only ever matches a buffer of the size it expects
    (gloo aborts the process on a larger one)."""
    mix = fingerprints[0] * 3 + fingerprints[1] * 5 + fingerprints[2] * 7 + kind * 11
    return (tag * 40503 + mix) & _TAG_MASK


def _post_buffer_recv(
    link: Link, numel: int, code: int, device: torch.device, tag: int
) -> tuple[Any, Tensor]:
    """Post the receive of a buffer the header announced (so never smaller than the message)."""
    dtype = DTYPES[code]
    if dtype is None:
        raise RuntimeError(f"the sender uses dtype {_DTYPE_NAMES[code]}, which this torch lacks")
    buf = torch.empty(numel, dtype=dtype, device=device)
    return link.irecv(as_bytes(buf), tag), buf


def as_bytes(buf: Tensor) -> Tensor:
    """A byte view of a flat buffer: non-reducing transfers do not depend on the dtype."""
    return buf if buf.dtype == torch.uint8 else buf.view(torch.uint8)


def empty_buffers(info: list[int], device: torch.device) -> dict[int, Tensor]:
    """Fresh buffers of the sizes the header ``info`` announces (for the collectives)."""
    out = {}
    for code, numel in enumerate(info[FIXED:]):
        if numel:
            dtype = DTYPES[code]
            if dtype is None:
                raise RuntimeError(
                    f"the sender uses dtype {_DTYPE_NAMES[code]}, which this torch lacks"
                )
            out[code] = torch.empty(numel, dtype=dtype, device=device)
    return out


def check_magic(call: str, info: list[int], src: object) -> None:
    if len(info) != HEADER_LEN or info[0] != _MAGIC:
        raise RuntimeError(
            f"{call}: the message from rank {src} is not a tensordict header (was the matching "
            "call on the other side a tensordict send of the same tensordict version?)"
        )


class Pending:
    """A transfer in flight: ``wait()`` completes it, and also unpacks what it received."""

    __slots__ = ("_done", "_finish", "_keep", "_lock", "_works", "next_tag")

    def __init__(
        self,
        works: list[Any],
        finish: Callable[[], None] | None = None,
        keep: object = None,
        next_tag: int = 0,
    ) -> None:
        self._works = works
        self._finish = finish
        self._keep = keep  # the buffers in flight stay alive until wait()
        self._done = False
        self._lock = threading.Lock()  # the finish step runs once, whoever waits
        self.next_tag = next_tag  # the tag after the last message (set by wait() for recv)

    def is_completed(self) -> bool:
        """Whether ``wait()`` has completed (it runs the unpacking, so call it)."""
        return self._done

    def wait(self) -> bool:
        """Wait for every message, then write received values into the TensorDict."""
        if not self._done:
            for work in self._works:
                work.wait()
            with self._lock:  # (two threads waiting on one transfer: one unpacks)
                if not self._done:
                    if self._finish is not None:
                        self._finish()
                    self._done = True
                    self._keep = None
                    self._finish = None  # (its closure holds the header and the target)
        return True


# ---------------------------------------------------------------- point to point
_U8 = _CODES[torch.uint8]


def post_send(
    td: CollectionPrimitives,
    link: Link,
    tags: Tags,
    call: str,
    kind: int = DATA,
    structure: bytes | None = None,
) -> Pending:
    """Start sending ``td``: a ``send`` is the header, the wire description and one buffer
    (the consolidated storage, or the leaves consolidated on the fly); ``init_remote``
    (``structure`` given) is the header, the structure and one buffer per dtype."""
    if kind == DATA:
        return _post_send_one(td, link, tags, call)
    lay = Layout(td, call)
    numels = lay.numels()
    fps = lay.fingerprints()
    wire = link.wire
    extra = structure or b""
    values = [_MAGIC, kind, *fps, len(lay.codes), len(extra), *numels]
    messages = [header_message(values, extra, wire)]
    works = [link.isend(messages[0], tags[0])]
    pos = 1
    if structure is not None:
        if not inlined(len(structure)):
            messages.append(torch.frombuffer(bytearray(structure), dtype=torch.uint8).to(wire))
            works.append(link.isend(messages[-1], tags[1]))
        pos = 2
    bufs = lay.pack()
    for code in sorted(bufs):
        if numels[code]:
            messages.append(as_bytes(bufs[code]))
            tag = _payload_tag(tags[pos], fps, kind)
            works.append(link.isend(messages[-1], tag))
            pos += 1
    return Pending(works, keep=messages, next_tag=tags[pos])


def _check_dtypes(td: CollectionPrimitives, call: str, plan: Plan) -> None:
    """Refuse, naming the key, a leaf whose dtype has no code on the wire."""
    if all(run[0] in _CODES for run in plan.runs):
        return
    bad = [
        (k, v.dtype)
        for k, v in td.items(True, True)
        if isinstance(v, Tensor) and v.dtype not in _CODES
    ]
    if bad:
        key, dtype = bad[0]
        raise TypeError(
            f"{call}: key {key!r} has dtype {dtype}, which cannot be sent; cast it to one "
            f"of {', '.join(_DTYPE_NAMES)}"
        )


def one_header(
    kind: int, fps: Sequence[int], entries: int, desc: bytes, nbytes: int, wire: torch.device
) -> Tensor:
    """The header message of a transfer of one ``nbytes`` buffer described by ``desc``."""
    values = [_MAGIC, kind, *fps, entries, len(desc)] + [0] * len(DTYPES)
    values[FIXED + _U8] = nbytes
    return header_message(values, desc, wire)


def _post_send_one(td: CollectionPrimitives, link: Link, tags: Tags, call: str) -> Pending:
    record = sent_record(td)
    staging = None
    if record is not None:
        plan, storage, (desc, fps) = record.plan, record.storage, wire_description(td, record.plan)
    else:  # stacked before anything is posted: a leaf that cannot be stacked (another
        # device, say) fails this send alone, the peer sees nothing of it
        check = partial(_check_dtypes, td, call)
        plan, staging, _, (desc, fps) = wire_fill(td, take, check, call)
        storage = staging.storage
    wire = link.wire
    header = one_header(DATA, fps, plan.nleaves, desc, plan.nbytes, wire)
    works = [link.isend(header, tags[0])]
    raw = None
    if not inlined(len(desc)):
        raw = torch.frombuffer(bytearray(desc), dtype=torch.uint8).to(wire)
        works.append(link.isend(raw, tags[1]))
    pos = 2
    if plan.nbytes:
        tag = _payload_tag(tags[2], fps, DATA)
        works.append(link.isend(storage, tag))
        pos = 3
    done = None if staging is None else partial(give_back, staging)
    return Pending(works, done, keep=(header, raw, storage), next_tag=tags[pos])


def file_backed_error(td: CollectionPrimitives, call: str) -> TypeError:
    """The error of a receive or a reduction into a collection that reads its leaves from
    a file on each access (the values would land in a temporary copy of them)."""
    return TypeError(
        f"{call}: a {type(td).__name__} reads its leaves from its file, so received "
        "values cannot be written into them; receive into a TensorDict, then write it "
        "to the file with update_()"
    )


def post_recv(td: CollectionPrimitives, link: Link, tags: Tags, call: str) -> Pending:
    """Post the header receive; ``wait()`` checks it, receives the description and the one
    buffer, and writes it into the leaves (straight into the storage of a consolidated
    TensorDict). A structure that does not fit is received all the same (the sender
    completes, the next transfer is aligned), then refused naming the keys that differ.
    """
    src = link.peer
    work, head = post_header(link, tags[0])
    # a file-backed collection is refused once the transfer is consumed, as a mismatch is
    backed = file_backed(td)
    plan, storage, leaves, (mine_desc, mine) = wire_plan(in_memory(td, call))
    pending = Pending([work])

    def finish() -> None:
        info = read_header(head)
        check_magic(call, info, src)
        if info[1] != DATA:
            _, _, end = _recv_buffers(link, info, head, tags, torch.device("cpu"))
            pending.next_tag = tags[end]
            raise RuntimeError(
                f"{call}: the tensordict from rank {src} does not fit: the sender called "
                f"{_KIND_NAMES.get(info[1], '?')}, which does not pair with send/isend"
            )
        nbytes = info[FIXED + _U8]
        raw, raw_work = recv_extra(link, info, head, tags[1])
        works = [] if raw_work is None else [raw_work]
        fits = not backed and tuple(info[2:5]) == mine and nbytes == plan.nbytes
        staging = None
        if fits and storage is not None:
            buf = storage
        elif fits:
            assert leaves is not None
            staging = take(plan, leaf_device(leaves))
            buf = staging.storage
        else:
            dev = storage.device if storage is not None else leaf_device(leaves or [])
            buf = torch.empty(nbytes, dtype=torch.uint8, device=dev)
        if nbytes:  # the description and the buffer are received together
            tag = _payload_tag(tags[2], info[2:5], DATA)
            works.append(link.irecv(buf, tag))
            pending.next_tag = tags[3]
        else:
            pending.next_tag = tags[2]
        for w in works:
            w.wait()
        if backed:
            raise file_backed_error(td, call)
        if not fits:
            theirs = bytes(raw.cpu().numpy())
            raise RuntimeError(
                f"{call}: the tensordict from rank {src} does not fit: "
                f"{explain_mismatch(theirs, mine_desc)} (every process must hold the same keys "
                "in the same order, with the same shapes and dtypes; to send a structure the "
                "receiver does not know, use init_remote/from_remote_init)"
            )
        if staging is not None:
            assert leaves is not None
            staging.copy_to(leaves)
            give_back(staging)
        elif plan.jagged is not None:  # received into the storage of a consolidated td
            storage_overwritten(td, plan, call)

    pending._finish = finish
    return pending


def _recv_buffers(
    link: Link,
    info: list[int],
    head: Tensor,
    tags: Tags,
    device: torch.device,
) -> tuple[dict[int, Tensor], Tensor | None, int]:
    """Receive what the header ``info`` (from the header message ``head``) announces
    after it: the structure (if any) and the buffers. Returns them and the position of
    the next tag."""
    raw = None
    pos = 1
    if info[6]:
        raw, work = recv_extra(link, info, head, tags[1])
        if work is not None:
            work.wait()
        pos = 2
    posted = {}
    for code, numel in enumerate(info[FIXED:]):
        if numel:
            tag = _payload_tag(tags[pos], info[2:5], info[1])
            posted[code] = _post_buffer_recv(link, numel, code, device, tag)
            pos += 1
    for work, _ in posted.values():
        work.wait()
    return {code: buf for code, (_, buf) in posted.items()}, raw, pos


def _recv_header(link: Link, call: str) -> tuple[Tags, list[int], Tensor]:
    """Block for the header of the next transfer from ``link``'s peer; check it is one."""
    tags = Tags()
    work, head = post_header(link, tags[0])
    work.wait()
    info = read_header(head)
    check_magic(call, info, link.peer)
    return tags, info, head


def drain(link: Link, call: str) -> None:
    """Receive and drop one transfer from ``link``'s peer (header, then what it announces),
    so a sender is not left blocked when this rank refuses the call."""
    tags, info, head = _recv_header(link, call)
    _recv_buffers(link, info, head, tags, torch.device("cpu"))


def recv_new(link: Link, device: Any, call: str) -> TensorDictBase:
    """Receive a structure and its buffers (``init_remote``'s messages) as a new,
    consolidated collection (of the sender's class when this process knows it)."""
    tags, info, head = _recv_header(link, call)
    dev = torch.device("cpu") if device is None else torch.device(device)
    bufs, raw, _ = _recv_buffers(link, info, head, tags, dev)
    if info[1] != INIT or raw is None:
        raise RuntimeError(
            f"{call}: rank {link.peer} called {_KIND_NAMES.get(info[1], '?')}, which sends no "
            "structure; pair from_remote_init with init_remote"
        )
    # consolidated (one local copy, once): later transfers go straight into its storage
    return build(call, raw, bufs, dev).consolidate(inplace=True)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- structure on the wire
def structure(td: CollectionPrimitives, call: str) -> bytes:
    """The JSON description of ``td`` that a receiver rebuilds it from (no code, no pickle)."""
    if td._stack_parts() is not None:
        td = td._as_dense(call)
    try:  # nested tensor leaves looked for only when this fails, as in Layout
        return json.dumps(_spec(td, "", call, False), separators=(",", ":")).encode()
    except (RuntimeError, TypeError):
        return json.dumps(_spec(td, "", call, True), separators=(",", ":")).encode()


def _spec(td: Any, prefix: str, call: str, nested: bool) -> dict[str, Any]:
    entries: list[Any] = []
    for key, value in td._tensordict.items():
        path = _join(prefix, key)
        if nested and isinstance(value, Tensor) and value.is_nested:
            _, ragged, nparts = jag_of_nested(value, call, _shown(path))
            parts = [
                {"dtype": _CODES.get(p.dtype), "shape": list(p.shape)}
                for p in jagged_parts(value, nparts)
            ]  # (a dtype without a code was refused by Layout, which runs first)
            entries.append([key, {"jagged": ragged, "parts": parts}])
        elif isinstance(value, Tensor):
            code = _CODES.get(value.dtype)
            if code is None:
                raise TypeError(
                    f"{call}: key {_shown(path)!r} has dtype {value.dtype}, which cannot be sent"
                )
            entries.append([key, {"dtype": code, "shape": list(value.shape)}])
        elif isinstance(value, NonTensorData):
            record = {"data": value.data, "batch_size": list(value.batch_size)}
            tag: str | None = None
            sendable = is_json_value(value.data)
            if sendable:
                try:
                    tag = class_tag(value)
                except UnnamedClass:
                    sendable = False
            if not sendable:
                raise TypeError(
                    f"{call}: key {_shown(path)!r} holds a {type(value.data).__name__}; non-tensor "
                    "entries travel as JSON (exactly str, int, finite float, bool, None, lists "
                    "and dicts with str keys: another type would arrive as a different one)"
                )
            if tag is not None:
                record["class"] = tag
            entries.append([key, record])
        elif isinstance(value, NonTensor):
            raise TypeError(
                f"{call}: key {_shown(path)!r} is a {type(value).__name__}, which cannot be sent; "
                "only NonTensorData with a JSON value travels"
            )
        else:
            entries.append([key, _spec(value, path, call, nested)])
    device = None if td._device is None else str(td._device)
    node = {"batch_size": list(td._batch_size), "device": device, "entries": entries}
    name = _class_name(type(td))
    if name is not None:
        node["type"] = name
    return node


def _class_name(cls: type) -> str | None:
    """The registered name a tensorclass travels under (None for a TensorDict): the
    receiver rebuilds that class when it is defined there (nothing is imported)."""
    from tensordict._tensorclass import TensorClass

    if cls is TensorClass or not issubclass(cls, TensorClass):
        return None
    try:
        return type_name(cls)
    except TypeError:  # not registered (or redefined since): it travels as a TensorDict
        return None


def build(call: str, raw: Tensor, bufs: dict[int, Tensor], device: torch.device) -> TensorDictBase:
    """A TensorDict from a received structure; its leaves are views of the received buffers."""
    try:
        spec = json.loads(bytes(raw.cpu().numpy()).decode())
    except (UnicodeDecodeError, ValueError) as err:
        raise RuntimeError(f"{call}: the received structure is not valid JSON ({err})") from None
    try:
        cursors, used = wire_order(spec)
        td: TensorDictBase = _build(spec, bufs, cursors, device, call)
    except FormatError as err:  # a class this process does not define
        raise RuntimeError(str(err)) from None
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as err:
        raise RuntimeError(f"{call}: the received structure is malformed ({err!r})") from None
    short = {c: (used.get(c, 0), b.numel()) for c, b in bufs.items() if used.get(c, 0) != b.numel()}
    if short:
        raise RuntimeError(
            f"{call}: the received structure does not use the received buffers exactly "
            f"(used, received elements per dtype code): {short}"
        )
    return td


def _leaf_specs(spec: dict[str, Any], out: list[tuple[int, tuple[int, ...]]]) -> None:
    for _, node in spec["entries"]:
        for part in node["parts"] if "jagged" in node else [node] if "dtype" in node else ():
            shape = tuple(int(s) for s in part["shape"])
            if any(s < 0 for s in shape):
                raise IndexError(f"negative size in {list(shape)}")
            out.append((int(part["dtype"]), shape))
        if "jagged" not in node and "dtype" not in node and "data" not in node:
            _leaf_specs(node, out)


def wire_order(
    spec: dict[str, Any],
) -> tuple[dict[tuple[int, tuple[int, ...]], int], dict[int, int]]:
    """Where each (dtype code, shape) run starts in its buffer, as :class:`Layout` packs
    them (shapes in first-occurrence order), and how many elements each buffer holds."""
    leaves: list[tuple[int, tuple[int, ...]]] = []
    _leaf_specs(spec, leaves)
    counts: dict[int, dict[tuple[int, ...], int]] = {}
    for code, shape in leaves:
        by_shape = counts.setdefault(code, {})
        by_shape[shape] = by_shape.get(shape, 0) + 1
    cursors: dict[tuple[int, tuple[int, ...]], int] = {}
    used: dict[int, int] = {}
    for code, by_shape in counts.items():
        position = 0
        for shape, count in by_shape.items():
            cursors[(code, shape)] = position
            position += math.prod(shape) * count
        used[code] = position
    return cursors, used


def _part(
    key: str,
    node: dict[str, Any],
    bufs: dict[int, Tensor],
    cursors: dict[tuple[int, tuple[int, ...]], int],
) -> Tensor:
    """The view of the next received tensor of ``node``'s dtype and shape."""
    code, shape = int(node["dtype"]), tuple(int(s) for s in node["shape"])
    n = math.prod(shape)
    start = cursors[(code, shape)]
    if start + n > bufs[code].numel():
        raise IndexError(f"key {key!r} reads past the received buffer")
    cursors[(code, shape)] = start + n
    return bufs[code][start : start + n].view(shape)


def _build(
    spec: dict[str, Any],
    bufs: dict[int, Tensor],
    cursors: dict[tuple[int, tuple[int, ...]], int],
    device: torch.device,
    call: str,
) -> Any:
    from tensordict._td import TensorDict

    entries: dict[str, Any] = {}
    for key, node in spec["entries"]:
        if "jagged" in node:
            parts = node["parts"]
            if not (isinstance(parts, list) and len(parts) in (2, 3)):
                raise ValueError(f"key {key!r}: a jagged leaf has 2 or 3 parts, got {parts!r}")
            views = [_part(key, p, bufs, cursors) for p in parts]
            try:
                (leaf,) = collapse(views, [(0, int(node["jagged"]), len(parts))], call)
            except JaggedError as err:
                raise ValueError(f"key {key!r}: {err}") from None
            entries[key] = leaf
        elif "dtype" in node:
            entries[key] = _part(key, node, bufs, cursors)
        elif "data" in node:
            tag, size = node.get("class"), node["batch_size"]
            entries[key] = entry_of(tag, node["data"], size, call, f"key {key!r}")
        else:
            entries[key] = _build(node, bufs, cursors, device, call)
    dev = spec["device"]
    keep_device = dev is not None and torch.device(dev) == device
    td = TensorDict(entries, batch_size=spec["batch_size"], device=device if keep_device else None)
    name = spec.get("type")
    if name is None:
        return td
    cls = lookup_type(str(name), call, "the received structure")
    if not issubclass(cls, TensorDict):
        raise TypeError(f"the received structure names {name!r}, not a tensorclass")
    return cls._new_unsafe(td._tensordict, td._batch_size, td._device, None)
