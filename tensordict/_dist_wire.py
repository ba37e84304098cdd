"""The wire protocol of TensorDict transfers: leaves packed per dtype after a checked header.

Every transfer starts with a fixed-size int64 *header*: a magic number, the kind of
message, 64-bit fingerprints of the keys, the shapes and the dtypes, the number of
entries, the length of an optional structure description and the element count of
each dtype's buffer. Then comes one contiguous buffer per dtype (every leaf of that
dtype flattened, in storage order), never one message per leaf. A receiver compares
the header with its own structure before it posts a receive of the buffers; on a
mismatch it still receives the announced buffers (so the sender completes and the
stream stays aligned) and raises, naming what differs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import marshal
import random
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from tensordict._nontensor import NonTensor, NonTensorData
from tensordict._protocol import CollectionProtocol
from tensordict._torch_compat import flatten_dense, foreach, unflatten_dense

if TYPE_CHECKING:
    from tensordict._td import TensorDict

# The position of a dtype in this table is its code on the wire: append, never reorder.
_DTYPE_NAMES = (
    "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128", "uint16", "uint32", "uint64", "float8_e4m3fn",
    "float8_e5m2",
)  # fmt: skip
_DTYPES: tuple[torch.dtype | None, ...] = tuple(getattr(torch, n, None) for n in _DTYPE_NAMES)
_CODES: dict[torch.dtype, int] = {d: i for i, d in enumerate(_DTYPES) if d is not None}
_NODE, _LAZY, _NONTENSOR = -1, -2, -3  # entry codes of nested collections and non-tensors

_MAGIC = 0x7D1C_0001  # "td" and the protocol version
_DATA, _INIT, _REDUCE, _GATHER = 1, 2, 3, 4
_KIND_NAMES = {
    _DATA: "send/isend",
    _INIT: "init_remote/broadcast/scatter",
    _REDUCE: "all_reduce/reduce",
    _GATHER: "all_gather",
}
_FIXED = 7  # magic, kind, keys fp, shapes fp, dtypes fp, entries, structure length
HEADER_LEN = _FIXED + len(_DTYPES)


def _dist() -> Any:
    import torch.distributed as dist

    return dist


def _require_init(call: str) -> Any:
    dist = _dist()
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            f"{call}: torch.distributed is not initialised; call "
            "torch.distributed.init_process_group(...) in every process first"
        )
    return dist


def _fingerprint(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}\x1f{key}" if prefix else key


def _shown(path: str) -> str:
    return path.replace("\x1f", "/")


class Layout:
    """The flattened structure of a collection: entry keys, shapes, codes, leaves per dtype."""

    __slots__ = ("codes", "dims", "groups", "keys")

    def __init__(self, td: CollectionProtocol, call: str) -> None:
        # keys: entry keys, with markers around each nested level; dims: every entry's
        # shape, flattened, each closed by -1; codes: a dtype code or an entry kind.
        self.keys: list[str] = []
        self.dims: list[int] = []
        self.codes: list[int] = []
        self.groups: dict[int, list[Tensor]] = {}
        self._walk(td, "", call)

    def _walk(self, td: CollectionProtocol, prefix: str, call: str) -> None:
        keys, dims, codes, groups = self.keys, self.dims, self.codes, self.groups
        if td._lazy:
            for i, member in enumerate(td.tensordicts):  # type: ignore[attr-defined]
                keys.append(str(i))
                dims.extend(member._batch_size)
                dims.append(-1)
                codes.append(_NODE)
                keys.append("\x1e")
                self._walk(member, _join(prefix, str(i)), call)
                keys.append("\x1d")
            return
        for key, value in td._tensordict.items():
            if isinstance(value, Tensor):
                code = _CODES.get(value.dtype)
                if code is None:
                    raise TypeError(
                        f"{call}: key {_shown(_join(prefix, key))!r} has dtype {value.dtype}, "
                        f"which cannot be sent; cast it to one of {', '.join(_DTYPE_NAMES)}"
                    )
                keys.append(key)
                dims.extend(value.shape)
                dims.append(-1)
                codes.append(code)
                group = groups.get(code)
                if group is None:
                    groups[code] = [value]
                else:
                    group.append(value)
            elif isinstance(value, NonTensor):
                keys.append(key)
                dims.extend(value.batch_size)
                dims.append(-1)
                codes.append(_NONTENSOR)
            else:
                keys.append(key)
                dims.extend(value._batch_size)
                dims.append(-1)
                codes.append(_LAZY if value._lazy else _NODE)
                keys.append("\x1e")
                self._walk(value, _join(prefix, key), call)
                keys.append("\x1d")

    def device(self) -> torch.device:
        """Where receive buffers are allocated: the device of the first leaf, or the CPU."""
        for leaves in self.groups.values():
            return leaves[0].device
        return torch.device("cpu")

    def numels(self) -> list[int]:
        out = [0] * len(_DTYPES)
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
        numels = [0] * len(_DTYPES)
        for code, buf in buffers.items():
            numels[code] = buf.numel()
        return torch.tensor([_MAGIC, kind, *self.fingerprints(), len(self.codes), extra, *numels])

    def fingerprints(self) -> tuple[int, int, int]:
        return (
            _fingerprint("\x00".join(self.keys).encode()),
            _fingerprint(marshal.dumps(self.dims)),
            _fingerprint(bytes(c + 8 for c in self.codes)),
        )

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
            f"{info[5]} entries ({_describe(info[_FIXED:])}), this TensorDict has "
            f"{len(self.codes)} ({_describe(self.numels())}); every process must hold the same "
            "keys in the same order, with the same shapes and dtypes (to send a structure the "
            "receiver does not know, use init_remote/from_remote_init)"
        )

    def unpack(self, buffers: dict[int, Tensor]) -> None:
        """Copy each dtype buffer back into this structure's leaves (under no_grad)."""
        copy_ = foreach("copy_")
        with torch.no_grad():
            for code, leaves in self.groups.items():
                buf = buffers[code]
                if buf.data_ptr() == leaves[0].data_ptr():
                    continue  # received straight into the leaves (see span)
                if len(leaves) == 1:
                    leaves[0].copy_(buf.view(leaves[0].shape))
                    continue
                views = unflatten_dense(buf, leaves)
                if copy_ is not None and buf.device.type == "cpu":
                    copy_(leaves, list(views))
                else:
                    for leaf, view in zip(leaves, views, strict=True):
                        leaf.copy_(view)


def _describe(numels: Sequence[int]) -> str:
    parts = [f"{_DTYPE_NAMES[c]} x {n}" for c, n in enumerate(numels) if n]
    return ", ".join(parts) if parts else "no tensor data"


def _tags(init_tag: int, pseudo_rand: bool) -> Iterator[int]:
    if not pseudo_rand:
        return itertools.count(init_tag)
    rng = random.Random(init_tag)
    return (rng.randrange(1 << 30) for _ in itertools.count())


def _as_bytes(buf: Tensor) -> Tensor:
    """A byte view of a flat buffer: non-reducing transfers do not depend on the dtype."""
    return buf if buf.dtype == torch.uint8 else buf.view(torch.uint8)


def _empty_buffers(
    info: list[int], device: torch.device, into: Layout | None = None
) -> dict[int, Tensor]:
    out = {}
    for code, numel in enumerate(info[_FIXED:]):
        span = into.span(code) if numel and into is not None and code in into.groups else None
        if span is not None and span.device == device and span.numel() == numel:
            out[code] = span
            continue
        if numel:
            dtype = _DTYPES[code]
            if dtype is None:
                raise RuntimeError(
                    f"the sender uses dtype {_DTYPE_NAMES[code]}, which this torch lacks"
                )
            out[code] = torch.empty(numel, dtype=dtype, device=device)
    return out


def _check_magic(call: str, info: list[int], src: object) -> None:
    if len(info) != HEADER_LEN or info[0] != _MAGIC:
        raise RuntimeError(
            f"{call}: the message from rank {src} is not a tensordict header (was the matching "
            "call on the other side a tensordict send of the same tensordict version?)"
        )


class Pending:
    """A transfer in flight: ``wait()`` completes it, and also unpacks what it received."""

    __slots__ = ("_done", "_finish", "_keep", "_works")

    def __init__(
        self,
        works: list[Any],
        finish: Callable[[], None] | None = None,
        keep: object = None,
    ) -> None:
        self._works = works
        self._finish = finish
        self._keep = keep  # the buffers in flight stay alive until wait()
        self._done = False

    def is_completed(self) -> bool:
        """Whether ``wait()`` has completed (it runs the unpacking, so call it)."""
        return self._done

    def wait(self) -> bool:
        """Wait for every message, then write received values into the TensorDict."""
        if not self._done:
            for work in self._works:
                work.wait()
            if self._finish is not None:
                self._finish()
            self._done = True
            self._keep = None
        return True


# ---------------------------------------------------------------- point to point
def post_send(
    td: CollectionProtocol,
    dst: int,
    group: Any,
    tags: Iterator[int],
    call: str,
    kind: int = _DATA,
    structure: bytes | None = None,
) -> Pending:
    """Start sending ``td``: the header goes first, and the leaves are packed while it travels."""
    dist = _require_init(call)
    lay = Layout(td, call)
    numels = lay.numels()
    header = torch.tensor(
        [_MAGIC, kind, *lay.fingerprints(), len(lay.codes), len(structure or b""), *numels]
    )
    messages = [header]
    works = [dist.isend(header, dst, group=group, tag=next(tags))]
    if structure is not None:
        messages.append(torch.frombuffer(bytearray(structure), dtype=torch.uint8))
        works.append(dist.isend(messages[-1], dst, group=group, tag=next(tags)))
    bufs = lay.pack()
    for code in sorted(bufs):
        if numels[code]:
            messages.append(_as_bytes(bufs[code]))
            works.append(dist.isend(messages[-1], dst, group=group, tag=next(tags)))
    return Pending(works, keep=messages)


def post_recv(
    td: CollectionProtocol, src: int, group: Any, tags: Iterator[int], call: str
) -> Pending:
    """Post the header receive; ``wait()`` checks it, receives the buffers and unpacks them.

    The receiver's own structure is read while the header travels.
    """
    dist = _require_init(call)
    header = torch.empty(HEADER_LEN, dtype=torch.int64)
    work = dist.irecv(header, src, group=group, tag=next(tags))
    lay = Layout(td, call)
    mine = lay.fingerprints()

    def finish() -> None:
        info = header.tolist()
        _check_magic(call, info, src)
        problem = lay.compare(info, _DATA, mine)
        into = lay if problem is None else None
        bufs = _recv_buffers(dist, info, src, group, tags, lay.device(), into)
        if problem is not None:
            raise RuntimeError(f"{call}: the tensordict from rank {src} does not fit: {problem}")
        lay.unpack(bufs)

    return Pending([work], finish)


def _recv_buffers(
    dist: Any,
    info: list[int],
    src: int,
    group: Any,
    tags: Iterator[int],
    device: torch.device,
    into: Layout | None = None,
) -> dict[int, Tensor]:
    """Receive the buffers ``info`` announces; straight into ``into``'s leaves where they
    lie back to back (``into`` is given only when the structures match)."""
    if info[6]:  # a structure this receiver did not ask for: drain it
        dist.recv(torch.empty(info[6], dtype=torch.uint8), src, group=group, tag=next(tags))
    bufs = _empty_buffers(info, device, into)
    works = [
        dist.irecv(_as_bytes(bufs[code]), src, group=group, tag=next(tags)) for code in sorted(bufs)
    ]
    for work in works:
        work.wait()
    return bufs


def recv_new(src: int, group: Any, device: Any, call: str) -> TensorDict:
    """Receive a structure and its buffers (``init_remote``'s messages) as a new TensorDict."""
    dist = _require_init(call)
    tags = itertools.count(0)
    header = torch.empty(HEADER_LEN, dtype=torch.int64)
    dist.recv(header, src, group=group, tag=next(tags))
    info = header.tolist()
    _check_magic(call, info, src)
    dev = torch.device("cpu") if device is None else torch.device(device)
    if info[1] != _INIT or not info[6]:
        _recv_buffers(dist, info, src, group, tags, dev)
        raise RuntimeError(
            f"{call}: rank {src} called {_KIND_NAMES.get(info[1], '?')}, which sends no "
            "structure; pair from_remote_init with init_remote"
        )
    raw = torch.empty(info[6], dtype=torch.uint8)
    dist.recv(raw, src, group=group, tag=next(tags))
    info[6] = 0
    bufs = _recv_buffers(dist, info, src, group, tags, dev)
    return build(call, raw, bufs, dev)


# ---------------------------------------------------------------- structure on the wire
def structure(td: CollectionProtocol, call: str) -> bytes:
    """The JSON description of ``td`` that a receiver rebuilds it from (no code, no pickle)."""
    return json.dumps(_spec(td, "", call), separators=(",", ":")).encode()


def _spec(td: CollectionProtocol, prefix: str, call: str) -> dict[str, Any]:
    if td._lazy:
        return {
            "lazy": [_spec(m, _join(prefix, str(i)), call) for i, m in enumerate(td.tensordicts)],  # type: ignore[attr-defined]
            "dim": td.stack_dim,  # type: ignore[attr-defined]
        }
    entries: list[Any] = []
    for key, value in td._tensordict.items():
        path = _join(prefix, key)
        if isinstance(value, Tensor):
            code = _CODES.get(value.dtype)
            if code is None:
                raise TypeError(
                    f"{call}: key {_shown(path)!r} has dtype {value.dtype}, which cannot be sent"
                )
            entries.append([key, {"dtype": code, "shape": list(value.shape)}])
        elif isinstance(value, NonTensorData):
            try:
                json.dumps(value.data)
            except (TypeError, ValueError):
                raise TypeError(
                    f"{call}: key {_shown(path)!r} holds a {type(value.data).__name__}; non-tensor "
                    "entries travel as JSON (str, int, float, bool, None, lists and dicts)"
                ) from None
            entries.append([key, {"data": value.data, "batch_size": list(value.batch_size)}])
        elif isinstance(value, NonTensor):
            raise TypeError(
                f"{call}: key {_shown(path)!r} is a {type(value).__name__}, which cannot be sent; "
                "only NonTensorData with a JSON value travels"
            )
        else:
            entries.append([key, _spec(value, path, call)])
    device = None if td._device is None else str(td._device)
    return {"batch_size": list(td._batch_size), "device": device, "entries": entries}


def build(call: str, raw: Tensor, bufs: dict[int, Tensor], device: torch.device) -> TensorDict:
    """A TensorDict from a received structure; its leaves are views of the received buffers."""
    try:
        spec = json.loads(bytes(raw.numpy()).decode())
    except (UnicodeDecodeError, ValueError) as err:
        raise RuntimeError(f"{call}: the received structure is not valid JSON ({err})") from None
    offsets = dict.fromkeys(bufs, 0)
    try:
        td: TensorDict = _build(spec, bufs, offsets, device)
    except (KeyError, TypeError, IndexError, AttributeError) as err:
        raise RuntimeError(f"{call}: the received structure is malformed ({err!r})") from None
    short = {c: (offsets[c], b.numel()) for c, b in bufs.items() if offsets[c] != b.numel()}
    if short:
        raise RuntimeError(
            f"{call}: the received structure does not use the received buffers exactly "
            f"(used, received elements per dtype code): {short}"
        )
    return td


def _build(
    spec: dict[str, Any], bufs: dict[int, Tensor], offsets: dict[int, int], device: torch.device
) -> Any:
    from tensordict._lazy import LazyStackedTensorDict
    from tensordict._td import TensorDict

    if "lazy" in spec:
        members = [_build(m, bufs, offsets, device) for m in spec["lazy"]]
        return LazyStackedTensorDict(members, stack_dim=int(spec["dim"]))
    entries: dict[str, Any] = {}
    for key, node in spec["entries"]:
        if "dtype" in node:
            code, shape = int(node["dtype"]), [int(s) for s in node["shape"]]
            if any(s < 0 for s in shape):
                raise IndexError(f"negative size in {shape}")
            n = 1
            for s in shape:
                n *= s
            start = offsets[code]
            if start + n > bufs[code].numel():
                raise IndexError(f"key {key!r} reads past the received buffer")
            offsets[code] = start + n
            entries[key] = bufs[code][start : start + n].view(shape)
        elif "data" in node:
            entries[key] = NonTensorData(node["data"], batch_size=node["batch_size"])
        else:
            entries[key] = _build(node, bufs, offsets, device)
    dev = spec["device"]
    keep_device = dev is not None and torch.device(dev) == device
    return TensorDict(
        entries, batch_size=spec["batch_size"], device=device if keep_device else None
    )
