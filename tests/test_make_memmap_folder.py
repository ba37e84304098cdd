"""make_memmap* on a collection saved to a folder: the new leaf is a file of that checkpoint,
every meta.json describing it is updated, and an interrupted update leaves it loadable."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import tensordict._append as append_module
from tensordict import MemoryMappedTensor, NonTensorData, TensorDict, lazy_stack, tensorclass

GOLDEN_V1 = Path(__file__).parent / "data" / "v1" / "td" / "nested"

# each op adds ``key`` holding ``expected`` (a plain tensor) to ``td``
MAKERS: dict[str, Callable[[Any, Any, torch.Tensor], Any]] = {
    "make_memmap": lambda td, key, expected: td.make_memmap(
        key, expected.shape, dtype=expected.dtype
    ),
    "make_memmap_from_tensor": lambda td, key, expected: td.make_memmap_from_tensor(key, expected),
    "make_memmap_from_tensor(copy_data=False)": lambda td, key, expected: (
        td.make_memmap_from_tensor(key, torch.full_like(expected, 9), copy_data=False)
    ),
    "make_memmap_from_storage": lambda td, key, expected: td.make_memmap_from_storage(
        key,
        MemoryMappedTensor.from_tensor(expected).untyped_storage(),
        expected.shape,
        dtype=expected.dtype,
    ),
}
# what each op's leaf holds before anyone writes to it
VALUES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "make_memmap": torch.zeros_like,
    "make_memmap_from_tensor": lambda e: e,
    "make_memmap_from_tensor(copy_data=False)": torch.zeros_like,
    "make_memmap_from_storage": lambda e: e,
}


def _meta(folder: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((folder / "meta.json").read_text())
    return meta


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("op", list(MAKERS))
@pytest.mark.parametrize("key", ["x", ("n", "x"), ("n", "m", "x")])
def test_a_new_leaf_is_saved_in_the_folder_and_loads(tmp_path: Path, op: str, key: Any) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"a": torch.arange(6.0).reshape(2, 3)}, [2]).memmap_(path)
    expected = torch.arange(8, dtype=torch.int16).reshape(2, 4)
    leaf = MAKERS[op](td, key, expected)
    assert isinstance(leaf, MemoryMappedTensor) and td[key] is leaf
    assert leaf.filename is not None and leaf.filename.startswith(str(path) + os.sep)
    assert torch.equal(leaf, VALUES[op](expected))
    leaf.copy_(expected + 1)  # writes reach the file
    assert td.is_locked and td.saved_path == str(path)
    loaded = TensorDict.load_memmap(path)
    assert loaded.saved_path == str(path)
    assert set(loaded.keys(include_nested=True, leaves_only=True)) == {"a", key}
    assert torch.equal(loaded[key], expected + 1) and loaded[key].dtype == torch.int16
    assert torch.equal(loaded["a"], torch.arange(6.0).reshape(2, 3))


def test_nested_keys_make_sub_folders_that_are_checkpoints_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"n": {"old": torch.zeros(2)}}, [2]).memmap_(path)
    td.make_memmap(("n", "new"), (2, 5)).fill_(3)  # into the existing sub-folder
    td.make_memmap(("fresh", "deep", "x"), (2,), dtype=torch.int64).fill_(7)
    assert td["fresh"].is_locked and td["fresh", "deep"].is_locked
    assert td["fresh", "deep"].saved_path == str(path / "fresh" / "deep")
    root = _meta(path)
    for sub, inline in [
        ("n", root["entries"]["n"]["meta"]),
        ("fresh", root["entries"]["fresh"]["meta"]),
        ("fresh/deep", root["entries"]["fresh"]["meta"]["entries"]["deep"]["meta"]),
    ]:
        assert _meta(path / sub) == inline  # each folder's file is its parent's inline copy
    assert TensorDict.load_memmap(path / "n")["new"].eq(3).all()
    assert TensorDict.load_memmap(path / "fresh" / "deep")["x"].tolist() == [7, 7]
    assert TensorDict.load_memmap(path)["fresh", "deep", "x"].tolist() == [7, 7]
    assert not list(path.rglob(".*"))  # no journal nor temporary file left


def test_a_collection_loaded_from_a_sub_folder_updates_its_parents(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    TensorDict({"net": {"layer": {"w": torch.ones(3)}}}, []).memmap(path)
    layer = TensorDict.load_memmap(path / "net" / "layer")
    assert layer.saved_path == str(path / "net" / "layer")
    layer.make_memmap_from_tensor("b", torch.full((2,), 4.0))
    assert TensorDict.load_memmap(path)["net", "layer", "b"].tolist() == [4.0, 4.0]
    assert TensorDict.load_memmap(path / "net")["layer", "b"].tolist() == [4.0, 4.0]


def test_a_member_of_a_saved_lazy_stack_gains_the_leaf(tmp_path: Path) -> None:
    path = tmp_path / "stack"
    members = [TensorDict({"x": torch.zeros(2)}, [2]), TensorDict({"x": torch.ones(2)}, [2])]
    stack = lazy_stack(members).memmap(path)
    with pytest.raises(RuntimeError, match="a lazy stack cannot hold a new memory-mapped leaf"):
        stack.make_memmap("y", (2, 2))
    member = TensorDict.load_memmap(path / "1")
    member.make_memmap_from_tensor("y", torch.full((2,), 5))
    loaded = TensorDict.load_memmap(path)
    assert loaded.tensordicts[1]["y"].tolist() == [5, 5]
    assert "y" not in loaded.tensordicts[0].keys()


def test_an_empty_collection_remembers_its_folder(tmp_path: Path) -> None:
    td = TensorDict({}, []).memmap_(tmp_path / "ckpt")
    assert td.saved_path == str(tmp_path / "ckpt")
    assert TensorDict.load_memmap(tmp_path / "ckpt").memmap_().saved_path == td.saved_path
    assert TensorDict({}, []).saved_path is None
    td.unlock_()
    td["plain"] = torch.zeros(())  # a leaf in memory: no longer the checkpoint
    assert td.saved_path is None


def test_an_existing_key_is_refused_as_key_and_runtime_error(tmp_path: Path) -> None:
    td = TensorDict({}, []).memmap_(tmp_path / "ckpt")
    td.make_memmap(("b", "c"), (1,))
    for kind in (KeyError, RuntimeError):
        with pytest.raises(kind, match=r"the key \('b', 'c'\) already exists within the target"):
            td.make_memmap(("b", "c"), (1,))
    with pytest.raises(RuntimeError, match=r"\('b', 'c'\) is a MemoryMappedTensor, which cannot"):
        td.make_memmap(("b", "c", "d"), (1,))


@tensorclass
class _MemmapAddPoint:
    x: torch.Tensor


def test_a_tensorclass_field_is_added_and_a_non_field_refused_before_writing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"p": _MemmapAddPoint(x=torch.zeros(2), batch_size=[2])}, [2]).memmap(path)
    before = _files(path)
    with pytest.raises(
        AttributeError, match="_MemmapAddPoint.make_memmap: 'z' is not a field of _MemmapAddPoint"
    ):
        td["p"].make_memmap("z", (2, 3))
    assert _files(path) == before
    empty = TensorDict({"p": _MemmapAddPoint(x=None, batch_size=[2])}, [2]).memmap(tmp_path / "e")
    empty["p"].make_memmap_from_tensor("x", torch.ones(2))
    loaded = TensorDict.load_memmap(tmp_path / "e")
    assert isinstance(loaded["p"], _MemmapAddPoint) and loaded["p"].x.tolist() == [1.0, 1.0]


def test_jagged_tensors_and_bad_nested_shapes_are_refused(tmp_path: Path) -> None:
    td = TensorDict({}, []).memmap_(tmp_path / "ckpt")
    ragged = torch.nested.nested_tensor([torch.zeros(1, 2), torch.zeros(1, 3)], layout=torch.jagged)
    with pytest.raises(TypeError, match=r"make_memmap_from_tensor\('r'\): .*torch.jagged"):
        td.make_memmap_from_tensor("r", ragged)
    with pytest.raises(TypeError, match=r"make_memmap: a nested shape is a 2-D integer"):
        td.make_memmap("r", torch.tensor([[1.0, 2.0], [1.0, 3.0]]))
    with pytest.raises(ValueError, match=r"make_memmap: a nested shape must not hold negative"):
        td.make_memmap("r", torch.tensor([[1, -2], [1, 3]]))
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["meta.json"]


def test_a_shape_without_the_batch_size_is_refused_before_writing(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({}, [4]).memmap_(path)
    before = _files(path)
    with pytest.raises(ValueError, match=r"shape \(3,\) does not start with batch_size \(4,\)"):
        td.make_memmap(("n", "x"), (3,))
    assert _files(path) == before and "n" not in td.keys()


def test_a_storage_mapping_another_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({}, []).memmap_(path)
    other = MemoryMappedTensor.ones(3, filename=tmp_path / "other.memmap")
    with pytest.raises(RuntimeError, match="Providing a storage with an associated filename"):
        td.make_memmap_from_storage("x", other.untyped_storage(), (3,))
    assert "x" not in _meta(path)["entries"] and not (path / "x.memmap").exists()


def test_stray_files_in_the_folder_are_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({}, []).memmap_(path)
    stray = MemoryMappedTensor.full((2,), 8, filename=path / "x.memmap")
    leaf = td.make_memmap_from_tensor("x", torch.zeros(2))
    assert leaf.filename == str(path / "x~1.memmap")
    assert stray.tolist() == [8, 8] and (path / "x.memmap").read_bytes() == stray.numpy().tobytes()
    assert TensorDict.load_memmap(path)["x"].tolist() == [0.0, 0.0]


def test_a_checkpoint_saved_again_meanwhile_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"n": {"a": torch.zeros(1)}}, []).memmap_(path)
    TensorDict({"x": torch.zeros(1)}, []).memmap(path)  # replaces the folder
    before = _files(path)
    with pytest.raises(RuntimeError, match="no longer describes this collection"):
        td.make_memmap(("n", "b"), (1,))
    assert _files(path) == before


def test_a_version_1_checkpoint_is_refused(tmp_path: Path) -> None:
    shutil.copytree(GOLDEN_V1, tmp_path / "v1")
    td = TensorDict.load_memmap(tmp_path / "v1")
    before = _files(tmp_path / "v1")
    with pytest.raises(RuntimeError, match="is a version-1 checkpoint, which cannot gain"):
        td.make_memmap("new", (*td.batch_size, 2))
    assert _files(tmp_path / "v1") == before


def test_a_failed_metadata_write_leaves_the_checkpoint_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"n": {"a": torch.ones(2)}}, [2]).memmap_(path)
    before = _files(path)
    real = append_module._write_json

    def fail_on_metadata(target: str, value: Any) -> None:
        if target.endswith(append_module.TMP) and "/n/" in target:
            raise OSError("disk full")
        real(target, value)

    monkeypatch.setattr(append_module, "_write_json", fail_on_metadata)
    with pytest.raises(OSError, match="disk full"):
        td.make_memmap(("n", "b", "c"), (2,))
    assert _files(path) == before  # leaf, new folder, journal and temporary files gone
    assert set(td.keys(include_nested=True)) == {"n", ("n", "a")}
    monkeypatch.undo()
    td.make_memmap(("n", "b", "c"), (2,)).fill_(1)
    assert TensorDict.load_memmap(path)["n", "b", "c"].tolist() == [1.0, 1.0]


def test_a_killed_update_before_its_commit_loads_and_is_undone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"n": {"a": torch.ones(2)}}, [2]).memmap_(path)
    real = append_module._write_json

    def die(target: str, value: Any) -> None:
        real(target, value)
        if target.endswith(append_module.TMP):
            raise KeyboardInterrupt  # the process is gone: nothing cleans up

    monkeypatch.setattr(append_module, "_write_json", die)
    monkeypatch.setattr(append_module, "_undo", lambda root, plan: None)
    with pytest.raises(KeyboardInterrupt):
        td.make_memmap(("n", "x"), (2,))
    assert (path / append_module.JOURNAL).exists()
    loaded = TensorDict.load_memmap(path)  # the previous checkpoint, whole
    assert set(loaded.keys(include_nested=True)) == {"n", ("n", "a")}
    monkeypatch.undo()
    TensorDict.load_memmap(path).make_memmap(("n", "y"), (2,))  # undoes the journal first
    assert set(TensorDict.load_memmap(path)["n"].keys()) == {"a", "y"}
    assert not list(path.rglob(".*"))


def test_a_killed_update_after_its_commit_is_finished_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"n": {"a": torch.ones(2)}}, [2]).memmap_(path)

    def die(root: str, plan: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(append_module, "_finish", die)
    with pytest.raises(KeyboardInterrupt):
        td.make_memmap_from_tensor(("n", "x"), torch.full((2,), 2.0))
    assert (path / append_module.COMMIT).exists()
    assert "x" not in TensorDict.load_memmap(path)["n"].keys()  # loadable, as before
    monkeypatch.undo()
    TensorDict.load_memmap(path).make_memmap("z", (2,))  # finishes the commit first
    loaded = TensorDict.load_memmap(path)
    assert loaded["n", "x"].tolist() == [2.0, 2.0] and "z" in loaded.keys()
    assert _meta(path / "n") == _meta(path)["entries"]["n"]["meta"]


_READ_ONLY_SCRIPT = """
import sys, torch
from tensordict import TensorDict
td = TensorDict.load_memmap(sys.argv[1])
try:
    td.make_memmap(("n", "x"), (2,))
except PermissionError as err:
    print(err)
"""


def test_a_read_only_folder_is_refused_naming_the_call_and_folder() -> None:
    # (pytest's folders are private to this user: another user could not reach them)
    tmp = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        path = tmp / "ckpt"
        TensorDict({"n": {"a": torch.ones(2)}}, [2]).memmap(path)
        tmp.chmod(0o755)
        for p in [path, *path.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
        before = _files(path)
        prefix: list[str] = []
        if os.geteuid() == 0:  # root may write anywhere: drop to an unprivileged user
            if shutil.which("setpriv") is None:
                pytest.skip("running as root without setpriv: cannot drop the right to write")
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        done = subprocess.run(
            [*prefix, sys.executable, "-c", _READ_ONLY_SCRIPT, str(path)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(
            f"TensorDict.make_memmap: cannot add ('n', 'x'): the checkpoint folder '{path}' "
            "is read-only (nothing was written)"
        )
        assert _files(path) == before
    finally:
        for p in [tmp, *tmp.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(tmp)


def test_an_archive_keeps_new_leaves_in_memory(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path / "x.tdz")
    assert td.saved_path is None
    leaf = td.make_memmap("b", (2,))
    assert leaf.filename is None  # shared memory: an archive cannot grow in place
    assert "b" not in TensorDict.load_memmap(tmp_path / "x.tdz").keys()


# ------------------------------------------------- re-saving leaves no file of the old save
@tensorclass
class _MemmapAddHolder:
    value: Any


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (
            lambda: _MemmapAddHolder(value=1 + 2j, batch_size=[]),
            lambda: _MemmapAddHolder(value="json", batch_size=[]),
        ),
        (
            lambda: torch.stack([NonTensorData(1 + 2j, []), NonTensorData(3 + 4j, [])]),
            lambda: torch.stack([NonTensorData("a", []), NonTensorData("b", [])]),
        ),
    ],
)
def test_saving_over_a_pickle_leaves_no_stale_pickle(
    tmp_path: Path, first: Callable[[], Any], second: Callable[[], Any]
) -> None:
    path = tmp_path / "ckpt"
    first().memmap(path)
    assert list(path.glob("*.pkl"))
    second().memmap(path)
    assert sorted(os.listdir(path)) == ["meta.json"]
    assert "pickle" not in (path / "meta.json").read_text()
    TensorDict.load_memmap(path, allow_pickle=False)  # nothing left to unpickle


@pytest.mark.parametrize("change", ["saved_again", "batch_size", "nested_saved_again"])
def test_a_folder_that_no_longer_describes_the_collection_is_not_written(
    tmp_path: Path, change: str
) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, [2]).memmap_(path)
    target: Any = td
    if change == "saved_again":  # same keys, another batch size: only the sizes tell
        TensorDict({"a": torch.ones(3), "n": {"b": torch.ones(3)}}, [3]).memmap(path, existsok=True)
    elif change == "batch_size":
        td.unlock_()
        td.batch_size = []
    else:  # the nested level saved again with other keys
        TensorDict({"a": torch.ones(2), "n": {"c": torch.ones(2)}}, [2]).memmap(path, existsok=True)
        target = td["n"]
    before = _files(path)
    with pytest.raises(RuntimeError, match="no longer describes this collection"):
        target.make_memmap("k", target.batch_size)
    assert _files(path) == before
    TensorDict.load_memmap(path)  # still whole


def test_a_nested_level_saved_again_as_a_leaf_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    td = TensorDict({"n": {"a": torch.zeros(1)}}, []).memmap_(path)
    TensorDict({"n": torch.zeros(1)}, []).memmap(path, existsok=True)  # same keys, a leaf
    before = _files(path)
    with pytest.raises(RuntimeError, match="holds 'n' as a tensor, not a collection"):
        td.make_memmap(("n", "b"), (1,))
    assert _files(path) == before
