"""The one-message wire with real processes (gloo, spawn): 4-process transfers and
collectives of nested, lazy-stacked, tensorclass and non-tensor content against plain
torch, a peer that dies mid-transfer, and groups torn down and made again.

Every launch is bounded: a child that outlives its limit is killed and the test fails.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.distributed as dist

from tensordict import TensorClass, TensorDict, lazy_stack
from tests._spawn import launch

LAUNCH_TIMEOUT_S = 240  # the whole launch, start-up of 4 processes on a loaded machine included


class Pair(TensorClass):
    """A tensorclass that travels."""

    x: torch.Tensor
    y: torch.Tensor


def _content(rank: int) -> dict[str, Any]:
    """One collection of each kind, with values that depend on ``rank``."""
    b = float(rank + 1)
    nested = TensorDict(
        {
            "obs": torch.arange(8.0).view(2, 4) * b,
            "n": {"i": torch.arange(4).view(2, 2) + rank, "h": torch.ones(2, 3).double() * b},
            "label": "text",
        },
        [2],
    )
    stack = lazy_stack(
        [
            TensorDict({"a": torch.full((3,), b + i), "m": {"c": torch.ones(2) * i}})
            for i in range(3)
        ]
    )
    pair = Pair(x=torch.full((2, 2), b), y=torch.arange(2.0) + b, batch_size=[2])
    return {"nested": nested, "stack": stack, "pair": pair}


def _leaves(td: Any) -> list[torch.Tensor]:
    return list(td._tensor_leaves([]))


def _same(a: Any, b: Any) -> None:
    la, lb = _leaves(a), _leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


def _raises(fn: Callable[[], object], exc: type[BaseException], text: str) -> None:
    with pytest.raises(exc, match=re.escape(text)):
        fn()


# ------------------------------------------------------------------ 4 processes
def _four(rank: int, world: int) -> None:
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    for name in ("nested", "stack", "pair"):
        for consolidated in (False, True):
            mine = _content(rank)[name]
            target = _content(0)[name].apply(torch.zeros_like)
            if consolidated:
                mine, target = mine.consolidate(), target.consolidate()
            handles = mine.isend(nxt, return_early=True)
            target.recv(prev)
            for h in handles:  # type: ignore[union-attr]
                h.wait()
            _same(target, _content(prev)[name])

    # peers named by their rank in a subgroup: global ranks 1 and 3 are 0 and 1 there
    pair_group = dist.new_group([1, 3])
    if rank == 1:
        _content(1)["nested"].send(group=pair_group, group_dst=1)
    if rank == 3:
        got = _content(0)["nested"].apply(torch.zeros_like)
        got.recv(group=pair_group, group_src=0)
        _same(got, _content(1)["nested"])

    # init_remote / from_remote_init over a broadcast: every rank takes part
    if rank == 0:
        _content(0)["nested"].init_remote(use_broadcast=True)
    else:
        made = TensorDict.from_remote_init(0, use_broadcast=True)
        _same(made, _content(0)["nested"])

    # a lazy stack whose members differ from the sender's: the key is named
    if rank == 0:
        TensorDict({"a": torch.zeros(3), "m": {"c": torch.zeros(2)}}).send(1)
    if rank == 1:
        wrong = TensorDict({"a": torch.zeros(3), "m": {"d": torch.zeros(2)}})
        _raises(lambda: wrong.recv(0), RuntimeError, "keys only on the sender [('m', 'c')]")

    # collectives, against the same collective on the flattened leaves
    for name in ("nested", "stack", "pair"):
        td = _content(rank)[name].exclude("label") if name == "nested" else _content(rank)[name]
        flat = torch.cat([leaf.reshape(-1).double() for leaf in _leaves(td)])
        dist.all_reduce(flat)
        td.all_reduce()
        got = torch.cat([leaf.reshape(-1).double() for leaf in _leaves(td)])
        torch.testing.assert_close(got, flat, rtol=0, atol=0)

        td = _content(rank)[name].consolidate()
        flat = torch.cat([leaf.reshape(-1).double() for leaf in _leaves(td)])
        dist.reduce(flat, 0, op=dist.ReduceOp.MAX)
        before = torch.cat([leaf.reshape(-1).double() for leaf in _leaves(td)])
        td.reduce(0, op=dist.ReduceOp.MAX)
        got = torch.cat([leaf.reshape(-1).double() for leaf in _leaves(td)])
        torch.testing.assert_close(got, flat if rank == 0 else before, rtol=0, atol=0)

    td = _content(rank)["nested"].exclude("label")
    works = td.all_reduce(async_op=True)
    for w in works:  # type: ignore[union-attr]
        w.wait()
    expected = sum(_leaves(_content(r)["nested"])[0] for r in range(world))
    torch.testing.assert_close(td["obs"], expected, rtol=0, atol=0)

    got = (_content(2)["stack"] if rank == 2 else TensorDict()).broadcast(2)
    _same(got.densify(), _content(2)["stack"].densify())

    gathered = _content(rank)["pair"].all_gather()
    for r, part in enumerate(gathered):
        _same(part, _content(r)["pair"])

    parts = [_content(r)["nested"] for r in range(world)] if rank == 3 else None
    _same(TensorDict().scatter(3, parts), _content(rank)["nested"])

    row = TensorDict({"v": torch.full((2,), float(rank))}, [2])
    if rank == 0:
        rows = TensorDict({"v": torch.zeros(world - 1, 2)}, [world - 1, 2])
        assert rows.gather_and_stack(0) is rows
        assert rows["v"][:, 0].tolist() == [1.0, 2.0, 3.0]
    else:
        assert row.gather_and_stack(0) is None


# ------------------------------------------------------------------ a peer that dies
def _dies(rank: int, world: int) -> None:
    td = TensorDict({"a": torch.zeros(1000, 100)}, [1000])
    if rank == 0:
        # the header and the description go out (one message), then the process is gone
        from tensordict._consolidate import wire_plan
        from tensordict._dist_wire import DATA, one_header

        plan, _, _, (desc, fps) = wire_plan(td)
        cpu = torch.device("cpu")
        dist.send(one_header(DATA, fps, plan.nleaves, desc, plan.nbytes, cpu), 1)
        os._exit(0)
    start = time.monotonic()
    with pytest.raises(RuntimeError):
        td.recv(0)
    assert time.monotonic() - start < 60, "the receive waited past the group's timeout"


def _regroup(rank: int, world: int) -> None:
    """A refused transfer, the group torn down and made again: transfers still work."""
    if rank == 0:
        TensorDict({"a": torch.zeros(3)}, [3]).send(1)
    else:
        target = TensorDict({"b": torch.zeros(3)}, [3])
        _raises(lambda: target.recv(0), RuntimeError, "keys only here [('b',)]")
    folder = os.environ["TD_TEST_FOLDER"]
    dist.destroy_process_group()
    dist.init_process_group(
        "gloo",
        init_method=f"file://{folder}/second-store",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=30),
    )
    if rank == 0:
        TensorDict({"a": torch.arange(3.0)}, [3]).send(1)
    else:
        target = TensorDict({"a": torch.zeros(3)}, [3])
        target.recv(0)
        assert target["a"].tolist() == [0.0, 1.0, 2.0]


# ------------------------------------------------------------------ a stale plan
def _stale_plan(rank: int, world: int) -> None:
    """A send matches the last plans on each run's first shape only: a later leaf of a run
    whose shape changed makes the stack refuse, and the leaves are planned in full."""
    shapes = {"a": (2, 3), "b": (2, 3), "c": (2, 3)}
    if rank == 0:
        td = TensorDict(
            {k: torch.full(s, float(i)) for i, (k, s) in enumerate(shapes.items())}, [2]
        )
        td.send(1)  # one run of three (2, 3) leaves
        td["c"] = torch.arange(8.0).view(2, 4)  # the run's first leaf keeps its shape
        td.send(1)
        td.send(1)
        return
    old = TensorDict({k: torch.zeros(s) for k, s in shapes.items()}, [2])
    old.recv(0)
    for i, k in enumerate(shapes):
        torch.testing.assert_close(old[k], torch.full(shapes[k], float(i)))
    _raises(lambda: old.recv(0), RuntimeError, "key ('c',) is float32 (2, 4) on the sender")
    new = TensorDict({"a": torch.zeros(2, 3), "b": torch.zeros(2, 3), "c": torch.zeros(2, 4)}, [2])
    new.recv(0)
    torch.testing.assert_close(new["a"], torch.zeros(2, 3))
    torch.testing.assert_close(new["b"], torch.ones(2, 3))
    torch.testing.assert_close(new["c"], torch.arange(8.0).view(2, 4))


# ------------------------------------------------------------------ a file-backed collection
def _file_backed(rank: int, world: int) -> None:
    """A PersistentTensorDict sends its values; receiving or reducing into one is refused
    after the transfer is consumed (the next transfer arrives whole)."""
    from tensordict import PersistentTensorDict

    td = TensorDict({"a": torch.arange(6.0).view(3, 2) + rank, "n": {"b": torch.ones(3)}}, [3])
    path = os.path.join(os.environ["TD_TEST_FOLDER"], f"rank{rank}.h5")
    on_disk = PersistentTensorDict.from_dict(td, filename=path)
    if rank == 0:
        on_disk.send(1)
        on_disk.send(1)
        td.send(1)
        _raises(on_disk.all_reduce, TypeError, "reads its leaves from its file")
        on_disk.reduce(1)  # a rank that only contributes sends its values
        return
    got = td.apply(torch.zeros_like)
    got.recv(0)
    torch.testing.assert_close(got["a"], torch.arange(6.0).view(3, 2))
    torch.testing.assert_close(got["n", "b"], torch.ones(3))
    _raises(lambda: on_disk.recv(0), TypeError, "reads its leaves from its file")
    torch.testing.assert_close(on_disk["a"], torch.arange(6.0).view(3, 2) + 1)  # unchanged
    got = td.apply(torch.zeros_like)
    got.recv(0)
    torch.testing.assert_close(got["a"], torch.arange(6.0).view(3, 2))
    _raises(td.all_reduce, RuntimeError, "rank(s) [0] cannot take part in the reduction")
    total = td.clone()
    total.reduce(1)
    torch.testing.assert_close(total["a"], torch.arange(6.0).view(3, 2) * 2 + 1)
    torch.testing.assert_close(total["n", "b"], torch.full((3,), 2.0))


# ------------------------------------------------------------------ the launcher
def _child(
    fn: Callable[[int, int], None], rank: int, world: int, folder: str, timeout_s: int, out: Any
) -> None:
    os.environ["TD_TEST_FOLDER"] = folder
    try:
        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=f"file://{folder}/store",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        try:
            fn(rank, world)
        finally:
            dist.destroy_process_group()
        out.put((rank, None))
    except BaseException:
        out.put((rank, traceback.format_exc()))
        raise


def _launch(
    fn: Callable[[int, int], None], world: int, group_timeout_s: int = 30
) -> dict[int, str]:
    """Run ``fn(rank, world)`` in ``world`` spawned processes; the reports of those that
    finished (None when they passed)."""
    with tempfile.TemporaryDirectory() as folder:
        run = launch(
            _child,
            world,
            lambda rank, results: (fn, rank, world, folder, group_timeout_s, results),
            LAUNCH_TIMEOUT_S,
        )
    assert not run.stuck, f"ranks {run.stuck} still running after {LAUNCH_TIMEOUT_S}s (a hang)"
    return run.reports


def _check(reports: dict[int, Any], ranks: list[int]) -> None:
    failures = {r: tb for r, tb in reports.items() if tb is not None}
    assert not failures, "\n".join(f"rank {r}:\n{tb}" for r, tb in failures.items())
    assert sorted(reports) == ranks, f"ranks without a report: {set(ranks) - set(reports)}"


def test_four_processes_transfers_and_collectives() -> None:
    _check(_launch(_four, 4), [0, 1, 2, 3])


def test_a_peer_that_dies_mid_transfer_gives_an_error() -> None:
    reports = _launch(_dies, 2, group_timeout_s=10)
    _check({r: v for r, v in reports.items() if r == 1}, [1])  # rank 0 exits on purpose


def test_a_group_made_again_after_a_refused_transfer() -> None:
    _check(_launch(_regroup, 2), [0, 1])


def test_a_send_after_a_leaf_changed_shape_plans_in_full() -> None:
    _check(_launch(_stale_plan, 2), [0, 1])


def test_a_file_backed_collection_sends_and_refuses_to_receive() -> None:
    pytest.importorskip("h5py")
    _check(_launch(_file_backed, 2), [0, 1])


def test_torchrun_example_trains_four_identical_replicas(tmp_path: pathlib.Path) -> None:
    root = pathlib.Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
        "OMP_NUM_THREADS": "1",
    }
    script = root / "examples" / "ddp_tensordict.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    done = subprocess.run(
        [*command, "--nproc-per-node", "4", str(script)],
        capture_output=True,
        text=True,
        timeout=LAUNCH_TIMEOUT_S,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = re.findall(r"rank (\d)/4: final loss ([\d.]+), checksum (-?\d+\.\d{10})", done.stdout)
    assert sorted(int(r) for r, _, _ in lines) == [0, 1, 2, 3], done.stdout
    assert len({c for _, _, c in lines}) == 1, lines  # the replicas stayed identical
    assert all(float(loss) < 0.1 for _, loss, _ in lines), lines  # and it trained
