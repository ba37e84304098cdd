"""Jagged nested tensor leaves through consolidate, files, pickling, queues and the wire.

A jagged leaf is stored as its parts (values, offsets, lengths when present); every check
compares those parts and the ragged dim, leaf by leaf, with the original's.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
import re
import traceback
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictPipe, from_consolidated
from tensordict._consolidate import explain_mismatch, wire_plan
from tests._spawn import free_port, launch, over_a_pipe

# torch: nested tensors are a prototype (it warns on building a strided one)
pytestmark = pytest.mark.filterwarnings(
    "ignore:The PyTorch API of nested tensors is in prototype stage:UserWarning"
)

GROUP_TIMEOUT_S = 30  # a blocked transfer raises in the child after this
LAUNCH_TIMEOUT_S = 150  # the whole launch, process start-up on a loaded machine included


# ------------------------------------------------------------------ examples
def _jagged(lengths: bool = False, ragged: int = 1, scale: float = 1.0) -> Any:
    """A jagged tensor of 2 rows: plain, with lengths (rows shorter than their slots), or
    ragged along dim 2."""
    if ragged == 2:
        values = torch.arange(21.0).view(3, 7) * scale
        return torch.nested.nested_tensor_from_jagged(values, torch.tensor([0, 3, 7]), jagged_dim=2)
    if lengths:
        values = torch.arange(20.0).view(10, 2) * scale
        return torch.nested.nested_tensor_from_jagged(
            values, torch.tensor([0, 3, 8]), lengths=torch.tensor([2, 4])
        )
    values = torch.arange(12.0).view(6, 2) * scale
    return torch.nested.nested_tensor_from_jagged(values, torch.tensor([0, 2, 6]))


def _flat(scale: float = 1.0) -> TensorDict:
    return TensorDict({"a": _jagged(scale=scale), "x": torch.ones(2, 3) * scale, "n": "text"}, [2])


def _nested(scale: float = 1.0) -> TensorDict:
    """Jagged leaves at two levels, with lengths, along dim 2, next to plain leaves."""
    return TensorDict(
        {
            "a": _jagged(scale=scale),
            "x": torch.ones(2, 3) * scale,
            "sub": {
                "b": _jagged(lengths=True, scale=scale),
                "r": _jagged(ragged=2, scale=scale),
                "i": torch.arange(2, dtype=torch.int32),
            },
        },
        [2],
    )


def _stacked(scale: float = 1.0) -> LazyStackedTensorDict:
    """A lazy stack whose members hold jagged leaves of different structures."""
    return LazyStackedTensorDict(
        TensorDict({"a": _jagged(scale=scale), "y": torch.zeros(3)}, []),
        TensorDict({"a": _jagged(lengths=True, scale=scale), "y": torch.ones(3)}, []),
    )


def _moved(scale: float = 1.0) -> TensorDict:
    """:func:`_nested` whose jagged leaf ``a`` has rows of 1 and 5 (not 2 and 4)."""
    td = _nested(scale)
    td["a"].offsets()[1] = 1
    return td


def _softmax_is_fresh(leaf: Any) -> bool:
    """Whether a softmax over the ragged dim of ``leaf`` (which reads the longest row's
    length, cached on the leaf once computed) matches one of a leaf built anew."""
    fresh = torch.nested.nested_tensor_from_jagged(leaf.values(), leaf.offsets())
    return torch.equal(leaf.softmax(dim=1).values(), fresh.softmax(dim=1).values())


EXAMPLES: dict[str, Callable[[], Any]] = {"flat": _flat, "nested": _nested, "stacked": _stacked}


def _leaves(td: Any) -> list[tuple[Any, torch.Tensor]]:
    """Every tensor leaf with its key (a lazy stack's members as ``#i``)."""
    if isinstance(td, LazyStackedTensorDict):
        return [
            ((f"#{i}", *(k if isinstance(k, tuple) else (k,))), v)
            for i, member in enumerate(td.tensordicts)
            for k, v in _leaves(member)
        ]
    return [(k, v) for k, v in td.items(True, True) if isinstance(v, torch.Tensor)]


def _ragged_dim(t: torch.Tensor) -> int:
    return next(i for i, size in enumerate(t.shape) if not isinstance(size, int))


def _parts(t: Any) -> list[torch.Tensor]:
    lengths = t.lengths()
    return [t.values(), t.offsets()] + ([] if lengths is None else [lengths])


def _assert_same(got: Any, want: Any) -> None:
    """Leaf by leaf: the same keys; a jagged leaf with the same values, offsets, lengths,
    ragged dim and dtype; a plain leaf equal."""
    got_leaves, want_leaves = _leaves(got), _leaves(want)
    assert [k for k, _ in got_leaves] == [k for k, _ in want_leaves]
    for (key, g), (_, w) in zip(got_leaves, want_leaves, strict=True):
        assert g.is_nested == w.is_nested, key
        if not w.is_nested:
            assert torch.equal(g, w), key
            continue
        assert g.layout is torch.jagged and g.dtype == w.dtype, key
        assert _ragged_dim(g) == _ragged_dim(w), key
        assert (g.lengths() is None) == (w.lengths() is None), key
        for gp, wp in zip(_parts(g), _parts(w), strict=True):
            assert gp.dtype == wp.dtype and torch.equal(gp, wp), key


def _storage_ptr(td: Any) -> int:
    return int(td._consolidated["storage"].untyped_storage().data_ptr())


def _all_in_storage(td: Any) -> bool:
    """Every leaf, every part of a jagged leaf, a view of the consolidated storage."""
    ptr = _storage_ptr(td)
    tensors = [p for _, v in _leaves(td) for p in (_parts(v) if v.is_nested else [v])]
    return all(t.untyped_storage().data_ptr() == ptr for t in tensors)


# ------------------------------------------------------------------ in one process
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_consolidate_keeps_every_part_of_a_jagged_leaf(name: str) -> None:
    td = EXAMPLES[name]()
    ctd = td.consolidate()
    assert ctd.is_consolidated() and _all_in_storage(ctd)
    _assert_same(ctd, td)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_consolidate_inplace_puts_jagged_views_in_place(name: str) -> None:
    td = EXAMPLES[name]()
    out = td.consolidate(inplace=True)
    assert out is td and _all_in_storage(td)
    _assert_same(td, EXAMPLES[name]())


def test_consolidate_in_a_thread_returns_early_with_jagged_leaves() -> None:
    future = _nested().consolidate(num_threads=2, return_early=True)
    ctd = future.result()
    assert _all_in_storage(ctd)
    _assert_same(ctd, _nested())


def test_writes_to_a_rebuilt_jagged_leaf_reach_the_storage() -> None:
    ctd = _nested().consolidate()
    storage = ctd._consolidated["storage"]
    before = storage.clone()
    ctd["sub", "b"].values()[0, 0] = 100.0
    ctd["a"].offsets()[0] = 1
    changed = (storage != before).nonzero().flatten()
    assert changed.numel() > 0
    assert float(ctd["sub", "b"].values()[0, 0]) == 100.0
    assert int(ctd["a"].offsets()[0]) == 1
    # the storage is what pickling carries: the rebuilt copy sees both writes
    back = pickle.loads(pickle.dumps(ctd))
    assert float(back["sub", "b"].values()[0, 0]) == 100.0 and int(back["a"].offsets()[0]) == 1


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_pickle_round_trip(name: str) -> None:
    ctd = EXAMPLES[name]().consolidate()
    back = pickle.loads(pickle.dumps(ctd))
    assert back.is_consolidated() and _all_in_storage(back)
    _assert_same(back, EXAMPLES[name]())


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_file_round_trip_and_writes_reach_the_file(name: str, tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "td.bin")
    ctd = EXAMPLES[name]().consolidate(filename=path)
    _assert_same(ctd, EXAMPLES[name]())
    loaded = TensorDict.from_consolidated(path)
    assert loaded.is_consolidated() and _all_in_storage(loaded)
    _assert_same(loaded, EXAMPLES[name]())
    key, leaf = next((k, v) for k, v in _leaves(loaded) if v.is_nested)
    leaf.values().view(-1)[0] = -5.0
    again = from_consolidated(path)
    assert float(dict(_leaves(again))[key].values().view(-1)[0]) == -5.0


def test_to_device_of_a_consolidated_td_moves_jagged_leaves() -> None:
    ctd = _nested().consolidate()
    moved = ctd.to("cpu")
    assert moved.device == torch.device("cpu") and moved.is_consolidated()
    assert _all_in_storage(moved)
    _assert_same(moved, _nested())


def test_metadata_lists_the_jagged_leaves() -> None:
    ctd = _nested().consolidate(metadata=True)
    # (leaf index in walk order, ragged dim, parts): a, then sub's b (lengths) and r
    assert ctd._consolidated["metadata"]["jagged"] == [[0, 1, 2], [2, 1, 3], [3, 2, 2]]


def test_a_td_without_jagged_leaves_is_described_as_before() -> None:
    ctd = TensorDict({"x": torch.ones(2)}, [2]).consolidate(metadata=True)
    assert "jagged" not in ctd._consolidated["metadata"]


def test_a_strided_nested_tensor_is_refused_naming_the_key(tmp_path: Any) -> None:
    strided = torch.nested.nested_tensor([torch.zeros(2), torch.ones(3)])
    td = TensorDict({"sub": TensorDict({"s": strided}, []), "x": torch.ones(1)}, [])
    message = re.escape("TensorDict.consolidate: the entry ('sub', 's') is a nested tensor ")
    with pytest.raises(NotImplementedError, match=message + ".*layout=torch.jagged"):
        td.consolidate()
    with pytest.raises(NotImplementedError, match=message):
        td.consolidate(filename=os.path.join(tmp_path, "td.bin"))


def test_a_plan_kept_from_a_plain_td_does_not_stop_a_jagged_leaf() -> None:
    # the kept plan of two float32 (6, 2) leaves matches on its run's first leaf only,
    # so the jagged "q" (float32, values (6, 2)) is caught by the fill, then planned
    TensorDict({"p": torch.ones(6, 2), "q": torch.ones(6, 2)}, []).consolidate()
    td = TensorDict({"p": torch.ones(6, 2), "q": _jagged()}, [])
    ctd = td.consolidate()
    assert _all_in_storage(ctd)
    _assert_same(ctd, td)


# ------------------------------------------------------------------ untrusted files
def _rewrite_description(path: str, change: Callable[[dict[str, Any]], None]) -> None:
    with open(path, "rb") as f:
        data = bytearray(f.read())
    length = int.from_bytes(data[-8:], "little")
    end = len(data) - 8 - length
    meta = json.loads(bytes(data[end:-8]))
    change(meta)
    raw = json.dumps(meta).encode()
    with open(path, "wb") as f:
        f.write(bytes(data[:end]) + raw + len(raw).to_bytes(8, "little"))


def test_a_file_whose_offsets_leave_the_values_is_refused_naming_the_key(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "td.bin")
    ctd = _nested().consolidate(filename=path)
    ctd["sub", "b"].lengths()[1] = 50  # writes the file: row 1 now ends past the values
    with pytest.raises(ValueError, match=r"jagged leaf \('sub', 'b'\): rows outside"):
        TensorDict.from_consolidated(path)


@pytest.mark.parametrize(
    ("jagged", "message"),
    [
        ([[0, 1, 4]], r"a jagged leaf is \[leaf index, ragged dim >= 1, parts 2 or 3\]"),
        ([[0, 0, 2]], r"a jagged leaf is \[leaf index"),
        ([[3, 1, 2], [0, 1, 2]], r"not in walk order"),
        ([[9, 1, 2]], r"lies past the runs"),
        ("no", r"jagged leaves are not a list"),
    ],
)
def test_a_malformed_jagged_description_is_refused(
    jagged: Any, message: str, tmp_path: Any
) -> None:
    path = os.path.join(tmp_path, "td.bin")
    _nested().consolidate(filename=path)
    _rewrite_description(path, lambda meta: meta.__setitem__("jagged", jagged))
    with pytest.raises(ValueError, match="TensorDict.from_consolidated: .*" + message):
        TensorDict.from_consolidated(path)


def test_a_file_describing_a_plain_leaf_as_jagged_is_refused(tmp_path: Any) -> None:
    path = os.path.join(tmp_path, "td.bin")
    TensorDict({"x": torch.ones(2, 3), "i": torch.arange(2)}, [2]).consolidate(filename=path)
    # leaf 0 (x, float32 (2, 3)) with leaf 1 (i) taken as its offsets: i is 1-d int64, so
    # only the leaf count can give it away
    _rewrite_description(path, lambda meta: meta.__setitem__("jagged", [[0, 1, 2]]))
    with pytest.raises(ValueError, match="TensorDict.from_consolidated: "):
        TensorDict.from_consolidated(path)


# ------------------------------------------------------------------ the wire description
def test_a_wire_mismatch_names_the_jagged_key() -> None:
    _, _, _, (jagged, _) = wire_plan(TensorDict({"a": _jagged(), "x": torch.ones(2)}, [2]))
    plain = TensorDict({"a": torch.ones(2, 3, 2), "x": torch.ones(2)}, [2])
    _, _, _, (dense, _) = wire_plan(plain)
    text = explain_mismatch(jagged, dense)
    assert "key ('a',) is jagged float32 (ragged dim 1, 2 rows) (6, 2) on the sender" in text
    assert "float32 (2, 3, 2) here" in text and "'x'" not in text


def test_a_wire_mismatch_tells_lengths_apart() -> None:
    _, _, _, (with_lengths, _) = wire_plan(TensorDict({"a": _jagged(lengths=True)}, [2]))
    _, _, _, (without, _) = wire_plan(TensorDict({"a": _jagged()}, [2]))
    text = explain_mismatch(with_lengths, without)
    assert "(ragged dim 1, 2 rows, lengths) (10, 2) on the sender" in text
    assert "(ragged dim 1, 2 rows) (6, 2) here" in text


# ------------------------------------------------------------------ a pipe
def _pipe(body: Callable[[TensorDictPipe, TensorDictPipe], Any]) -> Any:
    return over_a_pipe(body, 60.0)


def test_a_pipe_carries_jagged_leaves_and_overwrites_them_in_place() -> None:
    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> None:
        await _nested(2.0).asend(sender)
        first = await receiver.arecv()
        _assert_same(first, _nested(2.0))
        assert _softmax_is_fresh(first["a"])  # caches the longest row of 'a': 4
        await _moved(3.0).asend(sender)  # same structure, a row of 5
        second = await receiver.arecv()
        assert second is first  # the same structure lands in place
        _assert_same(second, _moved(3.0))
        assert _softmax_is_fresh(second["a"])

    _pipe(body)


def test_a_pipe_refuses_a_frame_whose_rows_leave_the_values() -> None:
    async def body(sender: TensorDictPipe, receiver: TensorDictPipe) -> None:
        ctd = _nested().consolidate()
        await ctd.asend(sender)
        await receiver.arecv()
        ctd["sub", "b"].lengths()[1] = 50  # same structure, row 1 now past the values
        await ctd.asend(sender)
        with pytest.raises(ValueError, match=r"jagged leaf \('sub', 'b'\): rows outside"):
            await receiver.arecv()

    _pipe(body)


# ------------------------------------------------------------------ real processes
def _check_p2p(rank: int) -> None:
    """send/recv (consolidated and not, both sides), init_remote, a mismatch, a reduction."""
    peer = 1 - rank
    if rank == 0:
        _nested(2.0).send(peer)  # leaves consolidated on the fly
        _moved(3.0).consolidate().send(peer)  # the storage as it is
        _moved(4.0).consolidate().send(peer)
        _nested(5.0).init_remote(dst=peer)
        _nested(6.0).send(peer)
        _flat().send(peer)  # a jagged leaf where the receiver holds a plain one
        _stacked(7.0).consolidate().send(peer)
    else:
        into = _nested()
        into.recv(peer)  # into the leaves' parts, in place
        _assert_same(into, _nested(2.0))
        assert _softmax_is_fresh(into["a"])  # caches the longest row of 'a': 4
        into.recv(peer)  # a row of 5
        _assert_same(into, _moved(3.0))
        assert _softmax_is_fresh(into["a"])
        ctd = _nested().consolidate()
        storage = _storage_ptr(ctd)
        assert _softmax_is_fresh(ctd["a"])  # caches the longest row of 'a': 4
        ctd.recv(peer)  # straight into the storage, a row of 5
        assert _storage_ptr(ctd) == storage
        _assert_same(ctd, _moved(4.0))
        assert _softmax_is_fresh(ctd["a"])
        remote = TensorDict.from_remote_init(src=peer)
        assert remote.is_consolidated() and _all_in_storage(remote)
        _assert_same(remote, _nested(5.0))
        remote.recv(peer)
        _assert_same(remote, _nested(6.0))
        plain = TensorDict({"a": torch.ones(2, 3, 2), "x": torch.ones(2, 3), "n": "text"}, [2])
        with pytest.raises(RuntimeError, match=r"key \('a',\) is jagged float32"):
            plain.recv(peer)
        stacked = _stacked().consolidate()
        stacked.recv(peer)
        _assert_same(stacked, _stacked(7.0))
    if rank == 0:
        out = _nested(8.0).broadcast(src=0)
        # a strided nested leaf is refused before anything is posted
        strided = TensorDict({"s": torch.nested.nested_tensor([torch.zeros(2)])}, [])
        with pytest.raises(NotImplementedError, match=r"TensorDict.send: the entry 's' is"):
            strided.send(peer)
        with pytest.raises(NotImplementedError, match=r"TensorDict.init_remote: the entry 's'"):
            strided.init_remote(dst=peer)
    else:
        out = TensorDict().broadcast(src=0)
    assert out.is_consolidated() and _all_in_storage(out)
    _assert_same(out, _nested(8.0))
    # every rank's own structure
    gathered = (_flat(1.0) if rank == 0 else _nested(2.0)).all_gather()
    _assert_same(gathered[0], _flat(1.0))
    _assert_same(gathered[1], _nested(2.0))
    mine = TensorDict().scatter(0, [_moved(9.0), _nested(10.0)] if rank == 0 else None)
    _assert_same(mine, _moved(9.0) if rank == 0 else _nested(10.0))
    # a reduction would add the offsets: both ranks refuse, naming the keys
    with pytest.raises(NotImplementedError, match=r"entries \['a', \('sub', 'b'\), \('sub', 'r'"):
        _nested().all_reduce()


def _child(rank: int, port: int, results: Any) -> None:
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=2,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
        )
        try:
            _check_p2p(rank)
        finally:
            dist.destroy_process_group()
        results.put((rank, None))
    except BaseException:
        results.put((rank, traceback.format_exc()))
        raise


def test_send_recv_and_init_remote_between_two_processes() -> None:
    port = free_port()
    run = launch(_child, 2, lambda rank, results: (rank, port, results), LAUNCH_TIMEOUT_S)
    failures = {r: tb for r, tb in run.reports.items() if tb is not None}
    assert not failures, "\n".join(f"rank {r}:\n{tb}" for r, tb in failures.items())
    assert not run.stuck, f"ranks {run.stuck} still running after {LAUNCH_TIMEOUT_S}s (a hang)"
    assert sorted(run.reports) == [0, 1], f"ranks without a report: exit codes {run.exitcodes}"


def _echo(queue_in: Any, queue_out: Any) -> None:
    try:
        td = queue_in.get(timeout=60)
        _assert_same(td, _nested(2.0))
        assert td.is_consolidated() and _all_in_storage(td)
        td["sub", "b"].values()[0, 0] = -1.0  # shared memory: the parent sees it
        queue_out.put(None)
    except BaseException:
        queue_out.put(traceback.format_exc())


def test_through_a_multiprocessing_queue() -> None:
    ctx = mp.get_context("spawn")
    queue_in, queue_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_echo, args=(queue_in, queue_out), daemon=True)
    proc.start()
    try:
        ctd = _nested(2.0).consolidate(share_memory=True)
        queue_in.put(ctd)
        assert queue_out.get(timeout=120) is None
        assert float(ctd["sub", "b"].values()[0, 0]) == -1.0
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()


@pytest.mark.parametrize(
    ("key", "offsets"),
    [
        ("a", [2, 2, 6]),  # no lengths: the rows must start at the values' first row
        ("a", [0, 2, 5]),  # ... and end at their last (torch splits the values by them)
    ],
)
def test_a_file_whose_rows_do_not_tile_the_values_is_refused(
    tmp_path: Any, key: str, offsets: list[int]
) -> None:
    path = os.path.join(tmp_path, "td.bin")
    ctd = _nested().consolidate(filename=path)
    ctd[key].offsets().copy_(torch.tensor(offsets))  # writes the file
    with pytest.raises(ValueError, match=rf"jagged leaf \('{key}',\): rows outside the 6"):
        TensorDict.from_consolidated(path)
