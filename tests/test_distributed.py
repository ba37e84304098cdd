"""TensorDicts across processes: send/recv, collectives (gloo on 127.0.0.1) and RPC.

Two real processes run every multi-process check in one launch (starting a process and
a group costs seconds): point to point, then collectives, then RPC over a memory-mapped
TensorDict. Each check raises in the child; the parent reports the child's traceback,
and fails (never hangs) when a child outlives its time limit.
"""

from __future__ import annotations

import datetime
import os
import pickle
import re
import tempfile
import traceback
import warnings
from collections.abc import Callable

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tensordict import (
    CloudpickleWrapper,
    MemoryMappedTensor,
    MetaData,
    NonTensorData,
    NonTensorStack,
    TensorDict,
)
from tensordict._dist_wire import build, structure
from tests._spawn import free_port, launch

GROUP_TIMEOUT_S = 30  # a blocked collective raises in the child after this
LAUNCH_TIMEOUT_S = 150  # the whole launch, process start-up on a loaded machine included


def _raises(fn: Callable[[], object], exc: type[BaseException], text: str) -> None:
    """In a child process: ``fn()`` must raise ``exc`` whose message contains ``text``."""
    with pytest.raises(exc, match=re.escape(text)):
        fn()


def _sample(rank: int = 0) -> TensorDict:
    """Three dtypes, a nested level and a non-contiguous leaf."""
    base = float(rank + 1)
    return TensorDict(
        {
            "obs": torch.arange(12.0).view(3, 4) + base,
            "done": torch.tensor([True, False, True]),
            "nested": {
                "count": torch.arange(6).view(3, 2) * int(base),
                "t": (torch.arange(6.0).view(2, 3) * base).T,  # non-contiguous
            },
            "label": "hello",
        },
        [3],
    )


def _zeros_like_sample() -> TensorDict:
    td = _sample().apply(torch.zeros_like)
    td.set("label", "hello")
    # a non-contiguous receiving leaf: recv writes through the view
    td.set(("nested", "t"), torch.zeros(2, 3).T)
    return td


def _equal(a: TensorDict, b: TensorDict) -> bool:
    keys_a = sorted(a.keys(True, True), key=str)
    keys_b = sorted(b.keys(True, True), key=str)
    if keys_a != keys_b:
        return False
    return all(
        torch.equal(a.get(k), b.get(k)) if isinstance(a.get(k), torch.Tensor) else a[k] == b[k]
        for k in keys_a
    )


def _wide(extra: bool = False) -> TensorDict:
    """A structure whose description and JSON structure are longer than a header message
    carries (``INLINE`` bytes): they travel as messages of their own."""
    keys = [f"{i:04d}" + "k" * 96 for i in range(800)] + (["more"] if extra else [])
    return TensorDict({k: torch.full((2,), float(i)) for i, k in enumerate(keys)}, [2])


# ------------------------------------------------------------------ point to point
def _p2p(rank: int) -> None:
    if rank == 0:
        # a dtype that has no code on the wire is refused before anything is sent
        odd = TensorDict({"z": torch.zeros(2, dtype=torch.complex32)}, [2])
        _raises(lambda: odd.send(1), TypeError, "key 'z' has dtype torch.complex32")

        _sample().send(1)
        assert _sample().isend(1, init_tag=50) == 50 + 3  # header, description, one buffer
        works = _sample().isend(1, return_early=True, consolidated=True)
        assert isinstance(works, list)
        for w in works:
            w.wait()
        _sample().send(1, init_tag=7, pseudo_rand=True)
        # mismatches: the receiver raises, the sender completes
        TensorDict({"obs": torch.zeros(3, 5)}, [3]).send(1)  # shape
        TensorDict({"other": torch.zeros(3, 4)}, [3]).send(1)  # key
        TensorDict({"obs": torch.zeros(3, 4, dtype=torch.float64)}, [3]).send(1)  # dtype
        TensorDict({"obs": torch.ones(3, 4)}, [3]).send(1)  # the stream is still aligned
        _sample().init_remote(1)
        _sample(1).send(1)  # received straight into from_remote_init's buffers
        _sample().send(1)  # from_remote_init on this one: refused
        _sample().init_remote(1)  # recv on this one: refused
        # one structure again and again with new values: the staging buffers are reused
        # on both sides, and a send still in flight keeps its own while a receive runs
        echo = _zeros_like_sample()
        for k in range(3):
            _sample(k).send(1)
            handles = _sample(k + 10).isend(1, return_early=True)
            echo.recv(1)
            for h in handles:  # type: ignore[union-attr]
                h.wait()
            assert _equal(echo, _sample(k + 20)), echo
        # leaves that cannot be stacked fail the send before anything is posted: the peer
        # sees nothing of it, and the next send arrives whole
        mixed = TensorDict(
            {"a": torch.zeros(2), "b": torch.zeros(2, device="meta"), "c": torch.zeros(2)}, [2]
        )
        _raises(lambda: mixed.send(1), RuntimeError, "not on the expected device")
        _sample(5).send(1)
        from tensordict._consolidate import wire_plan
        from tensordict._dist_wire import INLINE, structure

        assert len(wire_plan(_wide())[3][0]) > INLINE
        assert len(structure(_wide(), "test")) > INLINE
        _wide().send(1)
        _wide().init_remote(1)
        _wide(extra=True).send(1)  # refused with the long description's keys
        _sample(6).send(1)  # the stream is still aligned
        return
    td = _zeros_like_sample()
    obs = td["obs"]
    assert td.recv(0) == 3
    assert _equal(td, _sample()), td
    assert td["obs"] is obs  # written in place, the leaves keep their identity

    td = _zeros_like_sample()
    assert td.irecv(0, init_tag=50) == 53
    assert _equal(td, _sample())

    td = _zeros_like_sample()
    handles = td.irecv(0, return_premature=True, consolidated=True)
    assert isinstance(handles, list)
    assert not td["obs"].any()  # nothing is unpacked before wait()
    for h in handles:
        h.wait()
    assert _equal(td, _sample())
    import gc
    import weakref

    gone = weakref.ref(td)
    del td
    gc.collect()
    assert gone() is None and handles  # a finished handle no longer holds its target

    td = _zeros_like_sample()
    td.recv(0, init_tag=7, pseudo_rand=True)
    assert _equal(td, _sample())

    target = TensorDict({"obs": torch.zeros(3, 4)}, [3])
    _raises(lambda: target.recv(0), RuntimeError, "key ('obs',) is float32 (3, 5) on the sender")
    _raises(lambda: target.recv(0), RuntimeError, "keys only on the sender [('other',)]")
    _raises(lambda: target.recv(0), RuntimeError, "key ('obs',) is float64 (3, 4) on the sender")
    assert not target["obs"].any()  # a refused message writes nothing
    target.recv(0)
    assert bool((target["obs"] == 1).all())

    fresh = TensorDict.from_remote_init(0)
    assert _equal(fresh, _sample()), fresh
    assert fresh.batch_size == torch.Size([3])
    obs_ptr = fresh["obs"].data_ptr()
    fresh.recv(0)
    assert _equal(fresh, _sample(1)), fresh
    assert fresh["obs"].data_ptr() == obs_ptr
    _raises(lambda: TensorDict.from_remote_init(0), RuntimeError, "pair from_remote_init")
    _raises(lambda: _zeros_like_sample().recv(0), RuntimeError, "does not pair")
    got = _zeros_like_sample()
    for k in range(3):
        got.recv(0)
        assert _equal(got, _sample(k)), got
        got.recv(0)
        assert _equal(got, _sample(k + 10)), got
        _sample(k + 20).send(0)
    after = _zeros_like_sample()
    after.recv(0)  # the send after the failed one, whole
    assert _equal(after, _sample(5)), after
    wide = _wide().apply(torch.zeros_like)
    assert wide.recv(0) == 3
    assert _equal(wide, _wide())
    assert _equal(TensorDict.from_remote_init(0), _wide())
    _raises(lambda: wide.recv(0), RuntimeError, "keys only on the sender [('more',)]")
    after.recv(0)
    assert _equal(after, _sample(6)), after


# ------------------------------------------------------------------ collectives
def _collectives(rank: int) -> None:
    # all_reduce: one reduction per dtype buffer, in place on every rank
    td = _sample(rank).exclude("done")
    td.all_reduce()
    expected = _sample(0).exclude("done").apply(lambda a, b: a + b, _sample(1).exclude("done"))
    assert _equal(td, expected), td
    for k in range(2, 5):  # the same structure again: its staging buffer is reused
        td = _sample(rank * k).exclude("done")
        handles = td.all_reduce(async_op=True)
        for h in handles:  # type: ignore[union-attr]
            h.wait()
        expected = _sample(0).exclude("done").apply(lambda a, b: a + b, _sample(k).exclude("done"))
        assert _equal(td, expected), (k, td)

    td = TensorDict({"a": torch.full((2,), float(rank))}, [2])
    works = td.all_reduce(op=dist.ReduceOp.MAX, async_op=True)
    assert isinstance(works, list)
    for w in works:
        w.wait()
    assert td["a"].tolist() == [1.0, 1.0]

    # bucket_bytes: each buffer reduced in slices of whole elements, the same result
    for bucket in (4, 6, 100, 10**9):
        td = _sample(rank).exclude("done")
        works = td.all_reduce(async_op=True, bucket_bytes=bucket)
        for w in works:  # type: ignore[union-attr]
            w.wait()
        assert _equal(
            td, _sample(0).exclude("done").apply(lambda a, b: a + b, _sample(1).exclude("done"))
        )
    td = TensorDict({"a": torch.full((5,), float(rank + 1))}, [5])
    td.reduce(1, bucket_bytes=8)
    assert td["a"].tolist() == ([1.0] * 5 if rank == 0 else [3.0] * 5)
    _raises(lambda: td.all_reduce(bucket_bytes=0), ValueError, "bucket_bytes must be an int >= 1")

    # reduce: the result on dst, the other rank keeps its values
    td = TensorDict({"a": torch.full((2,), float(rank + 1)), "b": torch.ones(2, 2)}, [2])
    td.reduce(0)
    if rank == 0:
        assert td["a"].tolist() == [3.0, 3.0] and bool((td["b"] == 2).all())
    else:
        assert td["a"].tolist() == [2.0, 2.0] and bool((td["b"] == 1).all())

    # a structure mismatch raises on every rank, before any data moves
    bad = TensorDict({"a": torch.zeros(2 + rank)}, [])
    _raises(
        bad.all_reduce,
        RuntimeError,
        "different structures: rank 1 against rank 0: key ('a',) is float32 (2,) on rank 0, "
        "float32 (3,) on rank 1",
    )
    # the same number of elements in another shape is a mismatch too (upstream reduces
    # it leaf by leaf; refused here on purpose, docs/api.md)
    reshaped = TensorDict({"a": torch.zeros((1, 2) if rank == 0 else (2,))}, [])
    _raises(
        reshaped.all_reduce,
        RuntimeError,
        "key ('a',) is float32 (1, 2) on rank 0, float32 (2,) on rank 1",
    )
    other = TensorDict({"a" if rank == 0 else "b": torch.zeros(2)}, [2])
    _raises(
        lambda: other.reduce(0),
        RuntimeError,
        "keys only on rank 0 [('a',)]; keys only on rank 1 [('b',)]",
    )

    # leaves that cannot be stacked (rank 0) refuse the reduction on every rank: the
    # header says so, nobody waits in the reduction, and the next one runs as usual
    parts = {"a": torch.zeros(2), "b": torch.zeros(2), "c": torch.zeros(2)}
    if rank == 0:
        parts["b"] = torch.zeros(2, device="meta")
        unstackable = TensorDict(parts, [2])
        _raises(unstackable.all_reduce, RuntimeError, "not on the expected device")
    else:
        _raises(TensorDict(parts, [2]).all_reduce, RuntimeError, "rank(s) [0] cannot take part")
    td = TensorDict({"a": torch.ones(2)}, [2])
    td.all_reduce()
    assert td["a"].tolist() == [2.0, 2.0]

    # broadcast: the others need not know the structure
    got = (_sample() if rank == 0 else TensorDict()).broadcast(0)
    assert _equal(got, _sample()), got

    # all_gather: structures may differ between ranks
    mine = TensorDict({"r": torch.full((2,), rank)}, [2])
    if rank == 1:
        mine["extra"] = torch.ones(2, 3, dtype=torch.float64)
    tds = mine.all_gather()
    assert [td["r"].tolist() for td in tds] == [[0, 0], [1, 1]]
    assert "extra" not in tds[0].keys() and tds[1]["extra"].dtype == torch.float64

    # scatter: one tensordict per rank from rank 0
    if rank == 0:
        parts = [TensorDict({"x": torch.full((2,), float(i))}, [2]) for i in range(2)]
        _raises(lambda: TensorDict().scatter(0, parts[:1]), ValueError, "one tensordict per rank")
        bad = [parts[0], TensorDict({"c": torch.zeros(2, dtype=torch.complex32)}, [2])]
        _raises(lambda: TensorDict().scatter(0, bad), TypeError, "cannot be sent")  # nothing sent
        unsendable = TensorDict({"n": {"c": torch.zeros(2, dtype=torch.complex32)}}, [2])
        _raises(
            lambda: unsendable.send(1), TypeError, "TensorDict.send: key ('n', 'c') has dtype"
        )  # refused before any message
        out = TensorDict().scatter(0, parts)
    else:
        out = TensorDict().scatter(0)
    assert out["x"].tolist() == [float(rank)] * 2

    # gather_and_stack: rank 0 holds one row per other rank
    if rank == 0:
        wrong = TensorDict({"a": torch.zeros(3, 2)}, [3])
        _raises(lambda: wrong.gather_and_stack(0), ValueError, "batch_size[0] == 1")
        stack = TensorDict({"a": torch.zeros(1, 2), "n": {"b": torch.zeros(1, 2, 2)}}, [1, 2])
        assert stack.gather_and_stack(0) is stack
        assert stack["a"].tolist() == [[5.0, 5.0]] and bool((stack["n", "b"] == 5).all())
    else:
        part = TensorDict({"a": torch.full((2,), 5.0), "n": {"b": torch.full((2, 2), 5.0)}}, [2])
        assert part.gather_and_stack(0) is None  # refused by rank 0, which still takes it
        assert part.gather_and_stack(0) is None


# ------------------------------------------------------------------ RPC
def fill_tensordict(tensordict: TensorDict, idx: list[int]) -> TensorDict:
    tensordict[idx] = TensorDict(
        {"memmap": torch.ones(len(idx), 8, 8, dtype=torch.uint8)}, [len(idx)]
    )
    return tensordict


def _rpc(rank: int, port: int, folder: str) -> None:
    from torch.distributed import rpc

    warnings.filterwarnings("ignore", message="You are using a Backend", category=UserWarning)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{port}", rpc_timeout=GROUP_TIMEOUT_S
    )
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    try:
        if rank == 0:
            memmap = MemoryMappedTensor.empty(
                100, 8, 8, dtype=torch.uint8, filename=os.path.join(folder, "m")
            )
            memmap.zero_()
            td = TensorDict({"memmap": memmap}, [100])
            idx = [4, 5, 6, 7, 98]
            fill_cp = CloudpickleWrapper(fill_tensordict)
            out = rpc.rpc_sync("worker1", fill_cp, args=(td, idx))
            assert bool((td["memmap"][idx] == 1).all())  # the caller sees the worker's writes
            assert int(td["memmap"].sum()) == len(idx) * 64  # and nothing else changed
            assert bool((out["memmap"][idx] == 1).all())
            assert isinstance(out.get("memmap"), MemoryMappedTensor)
            # a lambda travels by value
            doubled = rpc.rpc_sync("worker1", CloudpickleWrapper(lambda x: x * 2), args=(21,))
            assert doubled == 42
    finally:
        rpc.shutdown()


# ------------------------------------------------------------------ the launcher
def _child(rank: int, rpc_port: int, folder: str, results: mp.Queue) -> None:
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{folder}/gloo-store",  # no port to race for
            rank=rank,
            world_size=2,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
        )
        try:
            _p2p(rank)
            _collectives(rank)
        finally:
            dist.destroy_process_group()
        _rpc(rank, rpc_port, folder)
        results.put((rank, None))
    except BaseException:
        results.put((rank, traceback.format_exc()))
        raise


def test_two_processes() -> None:
    with tempfile.TemporaryDirectory() as folder:
        rpc_port = free_port()  # (the gloo group meets through a file instead)
        run = launch(
            _child, 2, lambda rank, results: (rank, rpc_port, folder, results), LAUNCH_TIMEOUT_S
        )
    failures = {r: tb for r, tb in run.reports.items() if tb is not None}
    assert not failures, "\n".join(f"rank {r}:\n{tb}" for r, tb in failures.items())
    assert not run.stuck, f"ranks {run.stuck} still running after {LAUNCH_TIMEOUT_S}s (a hang)"
    assert sorted(run.reports) == [0, 1], f"ranks without a report: exit codes {run.exitcodes}"


# ------------------------------------------------------------------ in one process
def test_calls_need_an_initialised_group() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(
        RuntimeError, match=r"TensorDict.recv: torch.distributed is not initialised"
    ):
        td.recv(0)
    with pytest.raises(RuntimeError, match=r"TensorDict.all_reduce: torch.distributed is not"):
        td.all_reduce()
    with pytest.raises(RuntimeError, match=r"from_remote_init: torch.distributed is not"):
        TensorDict.from_remote_init(0)


def test_cloudpickle_wrapper_carries_closures() -> None:
    scale = 3
    wrapped = CloudpickleWrapper(lambda x: x * scale)
    assert pickle.loads(pickle.dumps(wrapped))(2) == 6
    assert "CloudpickleWrapper(" in repr(wrapped)
    with pytest.raises(TypeError, match="CloudpickleWrapper: expected a callable, got int"):
        CloudpickleWrapper(3)  # type: ignore[arg-type]


def test_pickled_memmap_tensordict_does_not_grow_with_its_data(tmp_path: os.PathLike[str]) -> None:
    def pickled(numel: int, name: str) -> bytes:
        data = MemoryMappedTensor.empty(
            numel, dtype=torch.uint8, filename=os.path.join(tmp_path, name)
        )
        return pickle.dumps(TensorDict({"x": data, "n": {"y": data[:10]}}, []))

    small = pickled(1 << 20, "s.memmap")  # 1 MB
    large = pickled(100 << 20, "l.memmap")  # 100 MB
    assert abs(len(large) - len(small)) < 64, (len(small), len(large))
    assert len(large) < 4096
    back = pickle.loads(large)
    assert isinstance(back.get("x"), MemoryMappedTensor) and back["x"].numel() == 100 << 20


def test_structure_sending_calls_refuse_what_json_cannot_carry() -> None:
    stack = TensorDict({"s": NonTensorStack.from_list(["a", "b"])}, [2])
    with pytest.raises(TypeError, match=r"init_remote: key 's' is a NonTensorStack"):
        stack.init_remote(1)
    odd = TensorDict({"n": {"obj": object()}}, [])
    with pytest.raises(TypeError, match=r"init_remote: key 'n/obj' holds a object; non-tensor"):
        odd.init_remote(1)


def test_non_tensor_entries_arrive_as_they_were_sent() -> None:
    """(MetaData arrived as NonTensorData; a tuple as a list, a numpy scalar as a float.)"""
    sent = TensorDict({"m": MetaData[int](3, [2]), "n": {"v": NonTensorData([1, "a"], [2])}}, [2])
    raw = torch.tensor(list(structure(sent, "init_remote")), dtype=torch.uint8)
    back = build("from_remote_init", raw, {}, torch.device("cpu"))
    assert type(back.get("m")) is type(sent.get("m")) and back.get("m").data == 3
    assert back.get(("n", "v")).data == [1, "a"]
    for value in [(1, 2), __import__("numpy").float64(1.5)]:
        odd = TensorDict({"v": NonTensorData(value)}, [])
        with pytest.raises(
            TypeError, match=rf"init_remote: key 'v' holds a {type(value).__name__}"
        ):
            odd.init_remote(1)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"not json", "not valid JSON"),
        (b'{"batch_size": [], "device": null, "entries": [["a", {"dtype": 8}]]}', "malformed"),
        (
            b'{"batch_size": [], "device": null, "entries": [["a", {"dtype": 8, "shape": [5]}]]}',
            "reads past the received buffer",
        ),
        (
            b'{"batch_size": [], "device": null, "entries": [["a", {"dtype": 8, "shape": [3]}]]}',
            "does not use the received buffers exactly",
        ),
        (
            b'{"batch_size": [], "device": null, "entries": [["a", {"dtype": 8, "shape": [-4]}]]}',
            "negative size",
        ),
    ],
)
def test_a_received_structure_is_validated(raw: bytes, message: str) -> None:
    buffers = {8: torch.zeros(4)}  # 4 float32 elements arrived
    with pytest.raises(RuntimeError, match=message):
        build(
            "TensorDict.from_remote_init",
            torch.tensor(list(raw), dtype=torch.uint8),
            buffers,
            torch.device("cpu"),
        )


def test_the_wire_groups_each_dtype_by_shape_and_rebuilds_in_that_order() -> None:
    from tensordict._dist_wire import Layout, structure

    td = TensorDict(
        {
            "a": torch.arange(2.0),
            "b": torch.arange(3.0) + 10,
            "n": {"c": torch.arange(2.0) + 20, "i": torch.arange(2)},
            "d": torch.arange(3.0) + 30,
        },
        [],
    )
    lay = Layout(td, "test")
    float_code = next(c for c, leaves in lay.groups.items() if leaves[0].dtype == torch.float32)
    # runs of one shape, in first-occurrence order: a, c (shape [2]) then b, d (shape [3])
    assert [t.tolist() for t in lay.groups[float_code]] == [
        [0.0, 1.0],
        [20.0, 21.0],
        [10.0, 11.0, 12.0],
        [30.0, 31.0, 32.0],
    ]
    buffers = lay.pack(copy=True)
    assert buffers[float_code].tolist() == [0, 1, 20, 21, 10, 11, 12, 30, 31, 32]
    rebuilt = build(
        "test",
        torch.frombuffer(bytearray(structure(td, "test")), dtype=torch.uint8),
        buffers,
        torch.device("cpu"),
    )
    assert _equal(rebuilt, td)
    assert Layout(rebuilt, "test").span(float_code) is not None  # back to back: no packing copy
    target = td.apply(torch.zeros_like)
    Layout(target, "test").unpack(buffers)
    assert _equal(target, td)


def test_a_header_message_carries_a_description_that_fits() -> None:
    from tensordict._dist_wire import HEADER_LEN, INLINE, header_message, inlined, read_header

    assert inlined(0) and inlined(INLINE) and not inlined(INLINE + 1)
    values = list(range(-3, HEADER_LEN - 3))
    size = HEADER_LEN * 8 + INLINE  # one size, whatever it carries (nccl, gloo's libuv)
    short = header_message(values, b"desc", torch.device("cpu"))
    assert short.dtype == torch.uint8 and short.numel() == size
    assert read_header(short) == values
    assert bytes(short[HEADER_LEN * 8 : HEADER_LEN * 8 + 4].tolist()) == b"desc"
    long = header_message(values, b"x" * (INLINE + 1), torch.device("cpu"))  # on its own
    assert long.numel() == size and read_header(long) == values
    assert not any(long[HEADER_LEN * 8 :].tolist())
