"""Distributed parity with upstream: consolidated broadcasts, tensorclasses over the wire,
unregistered process groups named by group ranks, DTensor leaves, peer-argument checks.

One launch of two real processes (gloo on 127.0.0.1) runs every multi-process check;
each raises in the child, the parent reports the child's traceback and fails (never
hangs) when a child outlives its time limit.
"""

from __future__ import annotations

import datetime
import re
import tempfile
import traceback
from collections.abc import Callable

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tensordict import MemoryMappedTensor, TensorDict, tensorclass
from tensordict.testing import MyDistData
from tests._spawn import free_port, launch

GROUP_TIMEOUT_S = 30
LAUNCH_TIMEOUT_S = 120


def _raises(fn: Callable[[], object], exc: type[BaseException], text: str) -> None:
    with pytest.raises(exc, match=re.escape(text)):
        fn()


def _same(a: object, b: object) -> None:
    """Leaf by leaf equal (keys, dtypes, shapes and values)."""
    assert isinstance(a, TensorDict) and isinstance(b, TensorDict)
    keys = sorted(a.keys(True, True), key=str)
    assert keys == sorted(b.keys(True, True), key=str)
    for key in keys:
        torch.testing.assert_close(a.get(key), b.get(key), rtol=0, atol=0)


def _nested(value: float) -> TensorDict:
    return TensorDict(
        {("a", "b"): torch.full((2,), value), "c": torch.full((2, 3), value)},
        [2],
    )


# ------------------------------------------------------------------ collectives
def _broadcasts(rank: int) -> None:
    # the receiver holds an empty TensorDict; every rank gets a consolidated result
    sent = _nested(1.0)
    sent["d", "e"] = MemoryMappedTensor.from_tensor(torch.arange(4.0).view(2, 2))
    got = (sent if rank == 0 else TensorDict({}, [])).broadcast(src=0)
    assert got.is_consolidated()
    _same(got, sent)
    if rank == 0:
        assert got is not sent  # a consolidated copy; one already consolidated is itself
        again = got.broadcast(src=0)
        assert again is got
    else:
        TensorDict().broadcast(src=0)

    # init_remote over a broadcast gives a consolidated TensorDict too
    if rank == 0:
        _nested(3.0).init_remote(use_broadcast=True)
    else:
        made = TensorDict.from_remote_init(src=0, use_broadcast=True)
        assert made.is_consolidated()
        _same(made, _nested(3.0))


def _tensorclasses(rank: int) -> None:
    def data(value: float) -> MyDistData:
        return MyDistData(
            a=torch.full((3,), value), b=torch.full((3, 2), value + 10), batch_size=[3]
        )

    # broadcast: the receivers get the sender's class, consolidated
    mine = data(1.0) if rank == 0 else MyDistData(a=torch.zeros(1), b=torch.zeros(1))
    got = mine.broadcast(src=0)
    assert type(got) is MyDistData and got.is_consolidated()
    _same(got, data(1.0))

    # all_reduce in place, all_gather gives one instance per rank
    summed = data(float(rank))
    summed.all_reduce()
    torch.testing.assert_close(summed.a, torch.full((3,), 1.0), rtol=0, atol=0)
    torch.testing.assert_close(summed.b, torch.full((3, 2), 21.0), rtol=0, atol=0)
    gathered = data(float(rank)).all_gather()
    assert [type(g) for g in gathered] == [MyDistData, MyDistData]
    for r, part in enumerate(gathered):
        torch.testing.assert_close(part.a, data(float(r)).a, rtol=0, atol=0)
        torch.testing.assert_close(part.b, data(float(r)).b, rtol=0, atol=0)

    # scatter: each rank gets its instance
    parts = [data(0.0), data(1.0)] if rank == 0 else None
    mine = MyDistData(a=torch.empty(0), b=torch.empty(0), batch_size=[]).scatter(0, parts)
    assert type(mine) is MyDistData
    torch.testing.assert_close(mine.b, data(float(rank)).b, rtol=0, atol=0)

    # init_remote / from_remote_init keep the class; later sends land in its storage
    if rank == 0:
        tc = data(1.0)
        tc.init_remote(dst=1)
        tc.a = torch.full((3,), 42.0)
        tc.send(dst=1, consolidated=True)
    else:
        made = TensorDict.from_remote_init(src=0)
        assert type(made) is MyDistData and made.is_consolidated()
        torch.testing.assert_close(made.b, data(1.0).b, rtol=0, atol=0)
        made.recv(src=0, consolidated=True)
        torch.testing.assert_close(made.a, torch.full((3,), 42.0), rtol=0, atol=0)

    # a tensorclass the receiver does not define is named, never imported; the
    # transfer is consumed, so the next one is aligned
    if rank == 0:

        @tensorclass
        class OnlyOnRankZero:
            x: torch.Tensor

        OnlyOnRankZero(x=torch.ones(2), batch_size=[2]).init_remote(dst=1)
        _nested(5.0).init_remote(dst=1)
    else:
        _raises(
            lambda: TensorDict.from_remote_init(src=0),
            RuntimeError,
            "OnlyOnRankZero', which is not registered in this process",
        )
        _same(TensorDict.from_remote_init(src=0), _nested(5.0))


def _dtensor(rank: int) -> None:
    """memmap() (in memory) of a TensorDict of DTensor leaves holds their whole values
    (each leaf is gathered: the other rank takes part in the same gathers)."""
    from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor

    mesh = DeviceMesh("cpu", torch.arange(2))
    full = torch.arange(32.0).view(8, 4)
    td = TensorDict({"w": distribute_tensor(full, mesh, [Shard(0)]), "n": {"v": torch.ones(3)}}, [])
    if rank == 0:
        out = td.memmap()
        assert isinstance(out.get("w"), MemoryMappedTensor)
        torch.testing.assert_close(out["w"].clone(), full, rtol=0, atol=0)
        torch.testing.assert_close(out["n", "v"].clone(), torch.ones(3), rtol=0, atol=0)
    else:
        td.apply(lambda t: t.full_tensor() if hasattr(t, "full_tensor") else t)


# ------------------------------------------------------------------ a raw process group
def _raw_group(rank: int, port: int) -> None:
    """A gloo group built on a TCPStore, never registered (no init_process_group for
    it), used with group_dst/group_src: the group's own send and recv carry it."""
    store = dist.TCPStore(
        "127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S)
    )
    pg = dist.ProcessGroupGloo(
        dist.PrefixStore("raw_pair", store), rank, 2, datetime.timedelta(seconds=GROUP_TIMEOUT_S)
    )
    if rank == 1:
        _nested(1.0).send(group=pg, group_dst=0)
        _nested(2.0).send(group=pg, group_dst=0, pseudo_rand=True, init_tag=9)
        assert _nested(3.0).isend(group=pg, group_dst=0) == 3
        for work in _nested(4.0).isend(group=pg, group_dst=0, return_early=True):  # type: ignore[union-attr]
            work.wait()
        _nested(5.0).consolidate().send(group=pg, group_dst=0, consolidated=True)
        TensorDict({"other": torch.zeros(2)}, [2]).send(group=pg, group_dst=0)
        _nested(7.0).send(group=pg, group_dst=0)
    else:
        td = _nested(0.0)
        td.recv(group=pg, group_src=1)
        _same(td, _nested(1.0))
        td.recv(group=pg, group_src=1, pseudo_rand=True, init_tag=9)
        _same(td, _nested(2.0))
        td.irecv(group=pg, group_src=1)
        _same(td, _nested(3.0))
        for work in td.irecv(group=pg, group_src=1, return_premature=True):  # type: ignore[union-attr]
            work.wait()
        _same(td, _nested(4.0))
        target = _nested(0.0).consolidate(metadata=True)
        target.recv(group=pg, group_src=1, consolidated=True)
        _same(target, _nested(5.0))
        _raises(lambda: td.recv(group=pg, group_src=1), RuntimeError, "keys only on the sender")
        td.recv(group=pg, group_src=1)  # a refused transfer leaves the stream aligned
        _same(td, _nested(7.0))


# ------------------------------------------------------------------ the launcher
def _child(rank: int, folder: str, raw_port: int, results: mp.Queue) -> None:
    try:
        _raw_group(rank, raw_port)  # before any init_process_group: nothing registered
        dist.init_process_group(
            "gloo",
            init_method=f"file://{folder}/gloo-store",
            rank=rank,
            world_size=2,
            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S),
        )
        try:
            _broadcasts(rank)
            _tensorclasses(rank)
            _dtensor(rank)
        finally:
            dist.destroy_process_group()
        results.put((rank, None))
    except BaseException:
        results.put((rank, traceback.format_exc()))
        raise


def test_two_processes() -> None:
    with tempfile.TemporaryDirectory() as folder:
        raw_port = free_port()
        run = launch(
            _child, 2, lambda rank, results: (rank, folder, raw_port, results), LAUNCH_TIMEOUT_S
        )
    failures = {r: tb for r, tb in run.reports.items() if tb is not None}
    assert not failures, "\n".join(f"rank {r}:\n{tb}" for r, tb in failures.items())
    assert not run.stuck, f"ranks {run.stuck} still running after {LAUNCH_TIMEOUT_S}s (a hang)"
    assert sorted(run.reports) == [0, 1], f"exit codes {run.exitcodes}"


# ------------------------------------------------------------------ in one process
@pytest.mark.parametrize("name", ["send", "isend", "recv", "irecv"])
def test_a_group_rank_needs_its_group(name: str) -> None:
    td = TensorDict({"a": torch.zeros(1)}, [])
    which = "group_dst" if "send" in name else "group_src"
    with pytest.raises(ValueError, match=f"TensorDict.{name}: `{which}` requires `group`"):
        getattr(td, name)(**{which: 0})


@pytest.mark.parametrize("name", ["send", "isend", "recv", "irecv"])
def test_a_peer_named_both_ways_is_refused(name: str) -> None:
    store = dist.HashStore()
    pg = dist.ProcessGroupGloo(dist.PrefixStore("solo", store), 0, 1, datetime.timedelta(seconds=5))
    td = TensorDict({"a": torch.zeros(1)}, [])
    which = "group_dst" if "send" in name else "group_src"
    with pytest.raises(ValueError, match=f"TensorDict.{name}: .* are mutually exclusive"):
        getattr(td, name)(0, group=pg, **{which: 0})


@pytest.mark.parametrize("name", ["send", "isend", "recv", "irecv"])
def test_a_peer_not_named_is_refused(name: str) -> None:
    td = TensorDict({"a": torch.zeros(1)}, [])
    with pytest.raises(ValueError, match=f"TensorDict.{name}: Exactly one of"):
        getattr(td, name)()
