"""consolidate / is_consolidated / from_consolidated: one storage, views, files, pickling."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from tensordict import LazyStackedTensorDict, TensorClass, TensorDict, lazy_stack
from tests.catalogue import CATALOGUE, assert_same, leaves


class Obs(TensorClass):
    """A tensorclass for the consolidation tests."""

    pixels: torch.Tensor
    reward: torch.Tensor
    label: str


def _mixed() -> TensorDict:
    return TensorDict(
        {
            "f64": torch.randn(4, 3, dtype=torch.float64),
            "i8": torch.randint(-5, 5, (4,), dtype=torch.int8),
            "f32": torch.randn(4, 2),
            "b": torch.rand(4) > 0.5,
            "nested": {"f16": torch.randn(4, 5).half(), "i64": torch.arange(4)},
            "c": torch.randn(4, dtype=torch.complex64),
        },
        [4],
    )


def _storages(td: Any) -> set[int]:
    """The storages the leaves live in (a lazy stack's ``get`` builds new tensors, so its
    members' leaves are looked at)."""
    if isinstance(td, LazyStackedTensorDict):
        return set().union(*(_storages(m) for m in td.tensordicts))
    return {v.untyped_storage().data_ptr() for v in leaves(td).values()}


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_catalogue_consolidates_into_one_storage(name: str) -> None:
    td = CATALOGUE[name]()
    ctd = td.consolidate()
    assert ctd.is_consolidated() and not td.is_consolidated()
    assert ctd.is_locked
    assert len(_storages(ctd)) <= 1
    assert_same(ctd, td.detach())


def test_mixed_dtypes_are_aligned_views_of_the_storage() -> None:
    td = _mixed()
    ctd = td.consolidate(metadata=True)
    storage = ctd._consolidated["storage"]
    assert storage.dtype == torch.uint8 and storage.dim() == 1
    nbytes = sum(v.numel() * v.element_size() for v in leaves(td).values())
    assert storage.numel() == nbytes
    for key, leaf in leaves(ctd).items():
        assert leaf.untyped_storage().data_ptr() == storage.untyped_storage().data_ptr(), key
        assert leaf.data_ptr() % leaf.element_size() == 0, key
    assert_same(ctd, td)
    assert ctd._consolidated["metadata"]["version"] == 1


def test_writes_to_a_leaf_reach_the_storage() -> None:
    ctd = TensorDict({"a": torch.zeros(3), "b": torch.zeros(3, dtype=torch.int64)}, [3])
    ctd = ctd.consolidate()
    ctd["a"][1] = 5.0
    ctd.set_("b", torch.tensor([1, 2, 3]))
    rebuilt = ctd._consolidated.plan.views(ctd._consolidated.storage)
    assert rebuilt[0].tolist() == [0.0, 5.0, 0.0]
    assert rebuilt[1].tolist() == [1, 2, 3]


def test_lazy_stack_and_tensorclass_keep_their_kind() -> None:
    td = _mixed()
    stack = lazy_stack([td[0], td[1], td[2]], 0)
    cstack = stack.consolidate()
    assert type(cstack) is type(stack) and cstack.is_consolidated()
    assert set.union(*(_storages(m) for m in cstack.tensordicts)) == {
        cstack._consolidated["storage"].untyped_storage().data_ptr()
    }
    assert_same(cstack.densify(), stack.densify())

    obs = Obs(torch.rand(4, 2), torch.rand(4), "left", batch_size=[4])
    cobs = obs.consolidate()
    assert type(cobs) is Obs and cobs.is_consolidated()
    assert cobs.label == "left"
    torch.testing.assert_close(cobs.pixels, obs.pixels, rtol=0, atol=0)


def test_non_tensor_entries_travel_in_files(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.arange(3), "meta": {"text": "hello"}}, [3])
    td["stack"] = lazy_stack(
        [TensorDict({"s": "x"}), TensorDict({"s": "y"}), TensorDict({"s": "z"})]
    )
    path = tmp_path / "td.bin"
    td.consolidate(path)
    back = TensorDict.from_consolidated(path)
    assert back.is_consolidated()
    assert back["meta", "text"] == "hello"
    assert back["a"].tolist() == [0, 1, 2]


def test_from_consolidated_file_and_bytes(tmp_path: Path) -> None:
    td = _mixed()
    path = tmp_path / "td.bin"
    written = td.consolidate(str(path))
    back = TensorDict.from_consolidated(path)
    assert_same(back, td)
    back["f32"][0, 0] = 42.0  # the file is mapped: writes reach it
    assert TensorDict.from_consolidated(path)["f32"][0, 0].item() == 42.0
    assert written.device == torch.device("cpu") or written.device is None
    raw = torch.from_file(str(path), size=path.stat().st_size, dtype=torch.uint8)
    assert_same(TensorDict.from_consolidated(raw.clone()), back)
    stack = lazy_stack([td[0], td[1]])
    stack.consolidate(tmp_path / "stack.bin")
    assert_same(TensorDict.from_consolidated(tmp_path / "stack.bin").densify(), stack.densify())


def test_from_consolidated_validates_the_description(tmp_path: Path) -> None:
    data = torch.zeros(4, dtype=torch.uint8)
    with pytest.raises(ValueError, match="from_consolidated: expected a 1-d uint8 storage"):
        TensorDict.from_consolidated(data)
    bad = torch.cat([torch.zeros(8, dtype=torch.uint8), torch.tensor([999]).view(torch.uint8)])
    with pytest.raises(ValueError, match="description length 999 does not fit"):
        TensorDict.from_consolidated(bad)
    path = tmp_path / "td.bin"
    TensorDict({"a": torch.arange(3)}, [3]).consolidate(path)
    raw = bytearray(path.read_bytes())
    text = raw.replace(b'"int64"', b'"int32"')  # the runs now cover fewer bytes
    with pytest.raises(ValueError, match="the runs cover 12 bytes, the storage has 24"):
        TensorDict.from_consolidated(torch.frombuffer(text, dtype=torch.uint8))


def test_non_json_non_tensor_refused_in_a_file(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.zeros(2), "obj": object()}, [2])
    with pytest.raises(TypeError, match=r"consolidate: key \('obj',\) holds a non-tensor"):
        td.consolidate(tmp_path / "x.bin")
    assert td.consolidate().is_consolidated()  # in memory the object is carried along


def test_consolidated_pickle_moves_one_storage() -> None:
    td = _mixed()
    td["text"] = "note"
    ctd = td.consolidate()
    reduced = ctd.__reduce_ex__(2)
    tensors = [a for a in reduced[1] if isinstance(a, torch.Tensor)]
    assert len(tensors) == 1 and tensors[0] is ctd._consolidated["storage"]
    back = pickle.loads(pickle.dumps(ctd))
    assert back.is_consolidated() and back["text"] == "note"
    assert_same(back, td)
    assert len(_storages(back)) == 1


def test_inplace_same_object_and_return_early() -> None:
    td = _mixed()
    expected = td.clone()
    nested = td["nested"]
    out = td.consolidate(inplace=True)
    assert out is td and td["nested"] is nested and td.is_consolidated()
    assert_same(td, expected)
    future = expected.consolidate(num_threads=2, return_early=True)
    assert_same(future.result(), expected)
    with pytest.raises(NotImplementedError, match="consolidate: return_early=True cannot be"):
        expected.consolidate(num_threads=2, return_early=True, non_blocking=True)


def test_share_memory_and_to_device() -> None:
    ctd = _mixed().consolidate(share_memory=True)
    assert ctd._consolidated["storage"].is_shared()
    moved = ctd.to("cpu")
    assert moved.is_consolidated() and moved.device == torch.device("cpu")
    assert moved._consolidated["storage"] is ctd._consolidated["storage"]
    cast = ctd.exclude("c").to(torch.float64)
    assert not cast.is_consolidated() and cast["f32"].dtype == torch.float64


def test_already_consolidated_is_returned_and_unlock_drops_it() -> None:
    ctd = _mixed().consolidate()
    assert ctd.consolidate() is ctd
    ctd.unlock_()
    assert not ctd.is_consolidated()


def test_file_with_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="consolidate: a consolidated file lives on the CPU"):
        _mixed().consolidate(tmp_path / "x.bin", device="meta")


class _Local:
    @staticmethod
    def make() -> Any:
        class Hidden(TensorClass):  # pickle cannot import it by name
            """A tensorclass defined in a function."""

            v: torch.Tensor

        return Hidden


def test_pickle_of_a_class_pickle_cannot_import() -> None:
    hidden = _Local.make()
    ctd = TensorDict({"h": hidden(v=torch.arange(2.0), batch_size=[2])}, [2]).consolidate()
    back = pickle.loads(pickle.dumps(ctd))
    assert type(back["h"]) is hidden and back["h"].v.tolist() == [0.0, 1.0]


def _echo(queue_in: Any, queue_out: Any) -> None:
    td = queue_in.get(timeout=60)
    queue_out.put((td.is_consolidated(), len(_storages(td)), td["nested", "i64"].tolist()))


def test_through_a_multiprocessing_queue() -> None:
    ctx = mp.get_context("spawn")
    queue_in, queue_out = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=_echo, args=(queue_in, queue_out), daemon=True)
    proc.start()
    try:
        queue_in.put(_mixed().consolidate(share_memory=True))
        assert queue_out.get(timeout=120) == (True, 1, [0, 1, 2, 3])
    finally:
        proc.join(timeout=30)
        if proc.is_alive():
            proc.kill()


def test_a_peer_named_twice_or_not_at_all_is_refused() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(ValueError, match="TensorDict.send: Exactly one of `dst`"):
        td.send()
    with pytest.raises(ValueError, match="TensorDict.recv: `group_src` requires `group`"):
        td.recv(0, group_src=0)
    with pytest.raises(ValueError, match="TensorDict.init_remote: dst is required"):
        td.init_remote()
