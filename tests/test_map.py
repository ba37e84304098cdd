"""TensorDict.map / map_iter with real worker processes (every test bounded by an alarm)."""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, tensorclass

_LIMIT_S = 60  # no test may wait on workers longer than this


@pytest.fixture(autouse=True)
def _bounded() -> Iterator[None]:
    """Fail (never hang) a test whose workers do not answer: SIGALRM interrupts the wait."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"test_map: a map call did not finish within {_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(_LIMIT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert mp.active_children() == [], "map left worker processes running"


def data(n: int = 10) -> TensorDict:
    return TensorDict(
        {"x": torch.arange(float(n)), "nested": {"y": torch.arange(2.0 * n).view(n, 2)}}, [n]
    )


def double_x(chunk: TensorDict) -> TensorDict:
    return chunk.set("x2", chunk["x"] * 2)


def loop_cat(fn, td: TensorDict, size: int, dim: int = 0) -> TensorDict:  # type: ignore[no-untyped-def]
    parts = [fn(c) for c in td.split(size, dim)]
    return torch.cat(parts, dim)


def test_results_in_chunk_order() -> None:
    td = data(11)
    got = td.map(double_x, num_workers=2, chunksize=3)
    expected = loop_cat(double_x, td, 3)
    assert (got == expected).all()
    assert got["x2"].tolist() == [2.0 * i for i in range(11)]
    assert got["nested", "y"].shape == (11, 2)


def test_dim_one_and_negative() -> None:
    td = TensorDict({"a": torch.arange(30.0).view(3, 10), "b": torch.ones(3, 10, 2)}, [3, 10])
    for dim in (1, -1):
        got = td.map(lambda c: c * c, dim=dim, num_workers=2, chunksize=4)
        assert got.batch_size == (3, 10)
        assert torch.equal(got["a"], td["a"] ** 2)


def test_num_chunks_sets_how_many_calls() -> None:
    td = data(10)
    sizes = td.map(lambda c: torch.full((len(c),), len(c)), num_workers=2, num_chunks=3)
    assert sizes.tolist() == [4] * 4 + [3] * 3 + [3] * 3
    # without chunksize or num_chunks: one chunk per worker
    halves = td.map(lambda c: torch.full((len(c),), len(c)), num_workers=2)
    assert halves.tolist() == [5] * 10


def test_chunksize_zero_calls_fn_on_items_and_stacks() -> None:
    td = data(7)

    def item(x: TensorDict) -> TensorDict:
        if x.batch_size != torch.Size([]):
            raise ValueError(f"expected one item, got batch {x.batch_size}")
        return x.set("sum", x["nested", "y"].sum())

    got = td.map(item, num_workers=2, chunksize=0)
    assert got.batch_size == (7,)
    assert got["sum"].tolist() == [float(4 * i + 1) for i in range(7)]
    # along dim 1, items are columns
    td2 = TensorDict({"a": torch.arange(6.0).view(2, 3)}, [2, 3])
    cols = td2.map(lambda c: c["a"].cumsum(0), dim=1, num_workers=2, chunksize=0)
    assert torch.equal(cols, td2["a"].cumsum(0))


def test_chunksize_zero_keeps_the_other_dims_names() -> None:
    td = TensorDict({"a": torch.arange(18.0).view(6, 3)}, [6, 3], names=["rows", "cols"])
    got = td.map(lambda item: item.set("b", item["a"] + 1), num_workers=2, chunksize=0)
    assert got.names == [None, "cols"]
    assert got.names == torch.stack([td[i].set("b", td[i]["a"] + 1) for i in range(6)]).names


def test_results_travel_on_by_name_and_their_files_go_with_them() -> None:
    from multiprocessing.reduction import ForkingPickler

    td = data(9)
    result = td.map(double_x, num_workers=2, chunksize=3)
    chunk = next(iter(td.map_iter(double_x, num_workers=2, chunksize=3)))
    owned = {result["x2"].filename, chunk["x2"].filename}
    assert all(f and f.startswith("/dev/shm/tensordict-out-") for f in owned), owned
    assert all(os.path.exists(f) for f in owned)
    for value in (result["x2"], chunk["x2"]):
        sent = ForkingPickler.loads(ForkingPickler.dumps(value))
        assert torch.equal(sent, value)
        assert len(ForkingPickler.dumps(value)) < 1000  # a file name, not the data
    chained = result.map(lambda c: c["x2"] + 1, num_workers=2, chunksize=4)
    assert torch.equal(chained, td["x"] * 2 + 1)
    del result, chunk, value, sent, chained
    gc.collect()
    assert not any(os.path.exists(f) for f in owned)  # deleted with the tensors


def test_a_full_dev_shm_sends_result_files_to_the_temporary_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import tensordict._map as map_module

    real = os.statvfs

    def full(path: str) -> os.statvfs_result:
        values = list(real(path))
        values[4] = 0  # f_bavail: no room
        return os.statvfs_result(values)

    monkeypatch.setattr(map_module.os, "statvfs", full)
    monkeypatch.setattr(map_module.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(map_module, "_scratch_root", lambda: "/dev/shm")
    result = data(6).map(double_x, num_workers=2, chunksize=2)
    assert torch.equal(result["x2"], data(6)["x"] * 2)
    assert str(result["x2"].filename).startswith(str(tmp_path))  # not in /dev/shm


def test_tensor_results_and_varying_chunk_lengths() -> None:
    td = data(10)
    assert td.map(lambda c: c["x"] + 1, num_workers=2, chunksize=4).tolist() == [
        float(i + 1) for i in range(10)
    ]
    # a filter returns chunks shorter than their inputs: joined all the same
    kept = td.map(lambda c: c[c["x"] % 3 == 0], num_workers=2, chunksize=4)
    assert kept["x"].tolist() == [0.0, 3.0, 6.0, 9.0]


def test_out_plain_and_memmapped(tmp_path: Path) -> None:
    td = data(9)
    plain = TensorDict({"x": torch.zeros(9), "nested": {"y": torch.zeros(9, 2)}}, [9])
    got = td.map(lambda c: c + 1, num_workers=2, chunksize=2, out=plain)
    assert got is plain
    assert torch.equal(plain["x"], td["x"] + 1)
    mm = plain.apply(torch.zeros_like).memmap(tmp_path / "out")
    assert td.map(lambda c: c * 3, num_workers=2, chunksize=2, out=mm) is mm
    assert torch.equal(mm["nested", "y"], td["nested", "y"] * 3)
    # the workers wrote the files themselves: a fresh load sees the values
    assert torch.equal(TensorDict.load_memmap(tmp_path / "out")["x"], td["x"] * 3)


def add_one_inplace(chunk: TensorDict) -> None:
    chunk.set_("x", chunk["x"] + 1)


@pytest.mark.parametrize("placement", ["memmap", "shared", "plain"])
def test_inplace_writes_reach_the_parent(placement: str, tmp_path: Path) -> None:
    td = data(8)
    if placement == "memmap":
        td = td.memmap(tmp_path / "d")
    elif placement == "shared":
        td.share_memory_()
    assert td.map(add_one_inplace, num_workers=2, chunksize=3) is None
    assert td["x"].tolist() == [float(i + 1) for i in range(8)]
    assert td.map(add_one_inplace, num_workers=2, chunksize=0) is None  # the seed's form
    assert td["x"].tolist() == [float(i + 2) for i in range(8)]
    if placement == "plain":
        assert td.is_shared()  # moved to shared memory in place, once


def fail_on_five(chunk: TensorDict) -> TensorDict:
    if (chunk["x"] == 5).any():
        raise ValueError("found a five")
    return chunk


def test_worker_exception_names_chunk_with_traceback() -> None:
    with pytest.raises(RuntimeError, match=r"ValueError on chunk 2 \(items 4:6") as info:
        data(10).map(fail_on_five, num_workers=2, chunksize=2)
    assert "fail_on_five" in str(info.value)  # the worker's traceback
    assert "found a five" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    with pytest.raises(RuntimeError, match=r"ValueError on item 5 along dim 0 \(chunksize=0\)"):
        data(10).map(fail_on_five, num_workers=2, chunksize=0)
    # the autouse fixture checks that the pool's workers are gone


def test_a_task_of_a_call_that_has_ended_does_not_run(tmp_path: Path) -> None:
    # A pool cannot cancel queued tasks: a caller's pool still hands out the chunks of a
    # call that failed. Each task checks that its call's scratch folder still exists.
    from tensordict import CloudpickleWrapper
    from tensordict._map_worker import Done, Job, run_task

    calls = []
    td = data(4)
    job = Job(
        CloudpickleWrapper(calls.append), td, 0, False, 4, None, str(tmp_path / "gone"), False
    )
    receipt = run_task((job, 1, 2, 4))
    assert isinstance(receipt, Done) and receipt.kind == "cancelled" and calls == []
    (tmp_path / "gone").mkdir()
    assert run_task((job, 1, 2, 4)).kind == "none" and len(calls) == 1  # the same task runs


def test_dead_worker_is_reported_not_awaited() -> None:
    with pytest.raises(RuntimeError, match=r"worker process died \(exit code 3\)"):
        data(4).map(lambda c: os._exit(3), num_workers=2)


def test_caller_pool_is_reused_and_left_open() -> None:
    pool = mp.get_context("fork").Pool(2)
    try:
        td = data(10)
        got = td.map(double_x, chunksize=3, pool=pool)
        assert torch.equal(got["x2"], td["x"] * 2)
        with pytest.raises(RuntimeError, match="ValueError on chunk"):
            td.map(fail_on_five, chunksize=2, pool=pool)
        assert pool.apply(abs, (-3,)) == 3  # still open after both calls
        items = list(td.map_iter(lambda c: c["x"].sum(), num_chunks=2, pool=pool))
        assert [float(i) for i in items] == [10.0, 35.0]
    finally:
        pool.terminate()
        pool.join()


def test_max_tasks_per_child() -> None:
    got = data(10).map(double_x, num_workers=2, chunksize=1, max_tasks_per_child=1)
    assert got["x2"].tolist() == [2.0 * i for i in range(10)]


def test_spawn_start_method() -> None:
    got = data(4).map(double_x, num_workers=1, mp_start_method="spawn")
    assert got["x2"].tolist() == [0.0, 2.0, 4.0, 6.0]


def test_map_iter_order_items_and_early_close() -> None:
    td = data(6)
    chunks = list(td.map_iter(double_x, num_workers=2, chunksize=4))
    assert [c["x2"].tolist() for c in chunks] == [[0.0, 2.0, 4.0, 6.0], [8.0, 10.0]]
    items = list(td.map_iter(lambda x: x["x"] * 10, num_workers=2, chunksize=0))
    assert [float(i) for i in items] == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]
    it = td.map_iter(double_x, num_workers=2, chunksize=1)
    assert next(it)["x2"].tolist() == [0.0]
    it.close()  # the workers end with the iterator (the fixture checks)


@tensorclass
class Pair:
    left: torch.Tensor
    right: torch.Tensor


def test_lazy_stack_and_tensorclass_inputs() -> None:
    lazy = LazyStackedTensorDict(
        [TensorDict({"a": torch.full((3,), float(i))}, [3]) for i in range(4)]
    )
    got = lazy.map(lambda c: c["a"] * 2, num_workers=2, chunksize=2)
    assert torch.equal(got, lazy["a"] * 2)

    pair = Pair(left=torch.arange(6.0), right=torch.ones(6), batch_size=[6])
    summed = pair.map(
        lambda p: Pair(left=p.left + p.right, right=p.right, batch_size=p.batch_size),
        num_workers=2,
        chunksize=4,
    )
    assert type(summed) is Pair
    assert summed.left.tolist() == [float(i + 1) for i in range(6)]


def test_empty_input_calls_fn_here() -> None:
    got = data(0).map(double_x, num_workers=2)
    assert got.batch_size == (0,)
    assert "x2" in got.keys()


def test_mixed_none_results_are_refused() -> None:
    with pytest.raises(ValueError, match="returned None on chunk 0 and a value on others"):
        data(4).map(lambda c: None if c["x"][0] == 0 else c, num_workers=2, chunksize=2)


def test_pbar_shows_progress(capsys: pytest.CaptureFixture[str]) -> None:
    data(6).map(double_x, num_workers=2, chunksize=2, pbar=True)
    err = capsys.readouterr().err
    assert "TensorDict.map" in err
    assert "6/6" in err


def test_pbar_without_tqdm_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` now raises ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    with pytest.raises(ModuleNotFoundError, match=r"pbar=True needs tqdm.*pip install tqdm"):
        data(4).map(double_x, num_workers=2, pbar=True)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"chunksize": 2, "num_chunks": 2}, ValueError, "chunksize or num_chunks, not both"),
        ({"chunksize": -1}, ValueError, "chunksize must be an int >= 0, got -1"),
        ({"num_chunks": 0}, ValueError, "num_chunks must be an int >= 1, got 0"),
        ({"num_workers": 0}, ValueError, "num_workers must be an int >= 1, got 0"),
        ({"dim": 1}, IndexError, r"dim 1 is out of range for batch_size \(4,\)"),
        ({"mp_start_method": "teleport"}, ValueError, "mp_start_method must be one of"),
        ({"pool": object()}, TypeError, "pool must be a multiprocessing.pool.Pool, got object"),
        ({"out": TensorDict({}, [3])}, ValueError, r"out must have size 4 along dim 0.*got \(3,\)"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        data(4).map(double_x, **kwargs)  # type: ignore[arg-type]


def test_bad_arguments_without_workers() -> None:
    with pytest.raises(TypeError, match="fn must be callable, got int"):
        data(4).map(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"cannot split a TensorDict with batch_size=\[\]"):
        TensorDict({"a": torch.zeros(2)}, []).map(double_x)
    pool = mp.get_context("fork").Pool(1)
    try:
        with pytest.raises(ValueError, match="max_tasks_per_child applies to a pool map starts"):
            data(4).map(double_x, pool=pool, max_tasks_per_child=1)
    finally:
        pool.terminate()
        pool.join()
    with pytest.raises(ValueError, match="chunksize must be an int >= 0"):
        data(4).map_iter(double_x, chunksize=-2)  # checked at the call, not at the first next()


def test_gathered_dtypes_and_non_contiguous_results() -> None:
    td = TensorDict(
        {
            "b": torch.arange(10) % 3 == 0,
            "h": torch.arange(10.0).to(torch.bfloat16),
            "c": torch.arange(20.0).view(10, 2).to(torch.complex64),
            "t": torch.arange(30).view(3, 10).t(),  # non-contiguous
        },
        [10],
    )
    for chunksize in (3, 0):
        got = td.map(lambda c: c.apply(lambda x: x.clone()), num_workers=2, chunksize=chunksize)
        assert (got == td).all()
        assert got["h"].dtype == torch.bfloat16


def test_some_chunks_gathered_others_sent_back() -> None:
    # chunk 0:4 keeps every row (written in place), 4:8 some, 8:10 none (sent back)
    got = data(10).map(lambda c: c[c["x"] < 6], num_workers=2, chunksize=4)
    assert got["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert got["nested", "y"].shape == (6, 2)


def keys_by_chunk(chunk: TensorDict) -> TensorDict:
    return chunk.select("x") if chunk["x"][0] == 0 else chunk.select("nested")


def test_results_that_cannot_be_joined() -> None:
    with pytest.raises(RuntimeError, match="could not concatenate the results of the chunks"):
        data(6).map(keys_by_chunk, num_workers=2, chunksize=3)


def draw(chunk: TensorDict) -> TensorDict:
    return chunk.set("r", torch.rand(chunk.batch_size))


def test_workers_draw_different_random_numbers_and_seeds_reproduce() -> None:
    td = TensorDict({"x": torch.zeros(8)}, [8])
    first = td.map(draw, num_workers=2, chunksize=2)["r"]
    chunks = first.view(4, 2)
    assert len({tuple(c.tolist()) for c in chunks}) == 4  # forked workers do not repeat
    assert not torch.equal(first, td.map(draw, num_workers=2, chunksize=2)["r"])
    torch.manual_seed(7)
    a = td.map(draw, num_workers=2, chunksize=2)["r"]
    torch.manual_seed(7)
    b = td.map(draw, num_workers=1, chunksize=2)["r"]  # the seed follows the chunk
    assert torch.equal(a, b)
    g = td.map(draw, num_workers=2, chunksize=2, generator=torch.Generator().manual_seed(3))
    h = td.map(draw, num_workers=2, chunksize=2, generator=torch.Generator().manual_seed(3))
    assert torch.equal(g["r"], h["r"])


def test_map_iter_shuffle_covers_every_item_once() -> None:
    td = data(12)
    gen = torch.Generator().manual_seed(0)
    got = list(td.map_iter(double_x, num_workers=2, chunksize=3, shuffle=True, generator=gen))
    xs = torch.cat([c["x"] for c in got])
    assert sorted(xs.tolist()) == list(range(12)) and xs.tolist() != list(range(12))
    for c in got:  # every row stays whole: x2 and nested y follow their x
        assert torch.equal(c["x2"], c["x"] * 2)
        assert torch.equal(c["nested", "y"], torch.stack([c["x"] * 2, c["x"] * 2 + 1], -1))
    chunks = {tuple(c["x"].long().tolist()) for c in got}
    assert len(chunks) == 4 and all(len(c) == 3 for c in chunks)
    assert chunks != {(0, 1, 2), (3, 4, 5), (6, 7, 8), (9, 10, 11)}  # drawn, not in order
    again = td.map_iter(
        double_x,
        num_workers=2,
        chunksize=3,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    assert {tuple(c["x"].long().tolist()) for c in again} == chunks  # the generator decides


def threads(chunk: TensorDict) -> torch.Tensor:
    return torch.full(chunk.batch_size, float(torch.get_num_threads()))


def test_worker_threads() -> None:
    assert data(4).map(threads, num_workers=2, worker_threads=2).unique().tolist() == [2.0]
    assert data(4).map(threads, num_workers=2).unique().tolist() == [1.0]


def test_bad_seeding_arguments() -> None:
    with pytest.raises(RuntimeError, match="shuffle=True .* needs index_with_generator=True"):
        data(4).map_iter(double_x, shuffle=True, index_with_generator=False)
    with pytest.raises(ValueError, match="worker_threads must be an int >= 1, got 0"):
        data(4).map(double_x, worker_threads=0)
    with pytest.raises(TypeError, match="generator must be a torch.Generator, got int"):
        data(4).map(double_x, generator=3)  # type: ignore[arg-type]


def test_shuffled_failures_name_the_items_and_thread_pools_refuse_a_generator() -> None:
    td = data(8)
    gen = torch.Generator().manual_seed(1)
    with pytest.raises(RuntimeError, match=r"item 5 along dim 0 \(chunksize=0\)"):
        list(td.map_iter(fail_on_five, num_workers=2, chunksize=0, shuffle=True, generator=gen))
    with pytest.raises(RuntimeError, match=r"chunk \d \(items \[.*5.*\] along dim 0\)"):
        list(td.map_iter(fail_on_five, num_workers=2, chunksize=2, shuffle=True, generator=gen))
    from multiprocessing.pool import ThreadPool

    with ThreadPool(2) as pool, pytest.raises(ValueError, match="threads of a ThreadPool share"):
        td.map(double_x, pool=pool, generator=torch.Generator())
