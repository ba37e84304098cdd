"""append_memmap: rows grow a saved folder in place; bad rows and hostile checkpoints or
journals are refused before anything is written; a failed or killed append leaves the old rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import (
    NonTensorStack,
    TensorDict,
    _append,
    append_memmap,
    lazy_stack,
    tensorclass,
)
from tensordict._format import FormatError

GOLDEN = Path(__file__).parent / "data"


@tensorclass
class AppendClass:
    pos: torch.Tensor
    tag: str


def _rows(n: int, start: float = 0.0, tag: str = "a") -> TensorDict:
    base = torch.arange(n, dtype=torch.float32) + start
    return TensorDict(
        {
            "x": base[:, None].expand(n, 3).clone(),
            "ids": base.to(torch.int16),
            "nest": {"y": base.to(torch.float64)[:, None, None].expand(n, 2, 2).clone()},
            "tc": AppendClass(pos=base.to(torch.bfloat16), tag=tag, batch_size=[n]),
            "note": "same",
            "word": NonTensorStack(*[f"w{int(v)}" for v in base.tolist()]),
        },
        [n],
    )


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _check(loaded: Any, parts: list[TensorDict]) -> None:
    expected = torch.cat(parts)
    assert loaded.batch_size == expected.batch_size
    for key in ("x", "ids", ("nest", "y"), ("tc", "pos")):
        a, b = loaded[key], expected[key]
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.as_subclass(torch.Tensor), b.as_subclass(torch.Tensor)), key
    assert loaded["note"] == "same"
    assert loaded["word"] == expected["word"]
    assert loaded["tc"].tag == expected["tc"].tag


def test_rows_are_appended_leaf_by_leaf(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    parts = [_rows(3), _rows(2, 3.0), _rows(4, 5.0, tag="b")]
    parts[0].memmap(path)
    for part in parts[1:]:
        append_memmap(path, part)
    loaded = TensorDict.load_memmap(path)
    assert isinstance(loaded["tc"], AppendClass)
    _check(loaded, parts)
    # every sub-folder stays a checkpoint of its own, with the new rows
    nested = TensorDict.load_memmap(path / "nest")
    assert torch.equal(nested["y"].as_subclass(torch.Tensor), torch.cat(parts)["nest", "y"])
    assert not [p.name for p in path.rglob(".*")]  # no journal or temporary file left


def test_zero_rows_change_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    _rows(3).memmap(path)
    before = _snapshot(path)
    append_memmap(path, _rows(0))
    assert _snapshot(path) == before


def test_checksums_follow_the_new_bytes(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    parts = [_rows(2), _rows(3, 2.0)]
    parts[0].memmap(path, checksum=True)
    append_memmap(path, parts[1])
    _check(TensorDict.load_memmap(path, verify=True), parts)


def test_rows_from_a_lazy_stack(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    TensorDict({"x": torch.zeros(2, 3)}, [2]).memmap(path)
    rows = lazy_stack([TensorDict({"x": torch.ones(3)}, []) for _ in range(2)])
    append_memmap(path, rows)
    assert TensorDict.load_memmap(path)["x"].sum().item() == 6.0


def test_a_version_1_folder_grows(tmp_path: Path) -> None:
    from tests.test_golden import GoldenClass  # registers the class the folder names

    assert GoldenClass is not None
    path = tmp_path / "v1"
    shutil.copytree(GOLDEN / "v1" / "td", path)
    old = TensorDict.load_memmap(path).to_tensordict()
    rows = old[:1].clone()
    append_memmap(path, rows)
    grown = TensorDict.load_memmap(path)
    assert grown.batch_size[0] == old.batch_size[0] + 1
    for key, value in old.items(True, True):
        if isinstance(value, torch.Tensor):
            want = torch.cat([value, rows[key]])
            assert torch.equal(grown[key].as_subclass(torch.Tensor), want), key


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (lambda: _rows(2).exclude("ids"), r"rows lack the key \('ids',\)"),
        (
            lambda: _rows(2).set("z", torch.zeros(2)),
            r"keys the checkpoint lacks at the root: \['z'\]",
        ),
        (
            lambda: _rows(2).set("ids", torch.zeros(2)),
            r"\('ids',\) has dtype torch.int16, rows give torch.float32",
        ),
        (
            lambda: _rows(2).set("x", torch.zeros(2, 4)),
            r"\('x',\) needs rows of shape \[2, 3\], got \[2, 4\]",
        ),
        (lambda: _rows(2).set("note", {1, 2}), r"non-JSON data at \('note',\)"),
        (lambda: _rows(2).set("x", "text"), r"\('x',\) is a tensor, rows give NonTensorData"),
        (lambda: _rows(2).unsqueeze(1), r"rows have batch_size \[2, 1\]"),
    ],
)
def test_bad_rows_are_refused_before_anything_is_written(
    rows: Any, message: str, tmp_path: Path
) -> None:
    path = tmp_path / "ckpt"
    _rows(3).memmap(path)
    before = _snapshot(path)
    with pytest.raises(ValueError, match=r"append_memmap: .*" + message):
        append_memmap(path, rows())
    assert _snapshot(path) == before


def test_every_problem_is_named_at_once(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    _rows(3).memmap(path)
    rows = _rows(2).exclude("ids").set("x", torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"\('x',\) needs rows .*; rows lack the key \('ids',\)"):
        append_memmap(path, rows)


def test_what_cannot_grow_is_refused(tmp_path: Path) -> None:
    lazy = tmp_path / "lazy"
    lazy_stack([TensorDict({"x": torch.zeros(2)}, [2]) for _ in range(2)]).memmap(lazy)
    with pytest.raises(ValueError, match=r"the root is a lazy stack, which cannot grow"):
        append_memmap(lazy, TensorDict({"x": torch.zeros(1, 2)}, [1, 2]))
    pickled = tmp_path / "pickled"
    TensorDict({"x": torch.zeros(2), "s": {1}}, [2]).memmap(pickled)
    with pytest.raises(ValueError, match=r"\('s',\) holds pickled data"):
        append_memmap(pickled, TensorDict({"x": torch.zeros(1), "s": {1}}, [1]))
    flat = tmp_path / "flat"
    TensorDict({"x": torch.zeros(2)}, []).memmap(flat)
    with pytest.raises(ValueError, match=r"has batch_size \[\]: there is no dim"):
        append_memmap(flat, TensorDict({"x": torch.zeros(2)}, []))
    archive = tmp_path / "a.tdz"
    TensorDict({"x": torch.zeros(2)}, [2]).memmap(archive)
    with pytest.raises(ValueError, match=r"append_memmap: .*a\.tdz' is an archive"):
        append_memmap(archive, TensorDict({"x": torch.zeros(1)}, [1]))
    with pytest.raises(ValueError, match=r"append_memmap: .*missing' does not exist"):
        append_memmap(tmp_path / "missing", TensorDict({"x": torch.zeros(1)}, [1]))


def test_a_hostile_checkpoint_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = tmp_path / "ckpt"
    _rows(3).memmap(path)
    meta = json.loads((path / "meta.json").read_text())
    meta["entries"]["x"]["shape"] = [30, 3]  # lies about its leaf file's size
    (path / "meta.json").write_text(json.dumps(meta))
    before = _snapshot(path)
    with pytest.raises(FormatError, match=r"append_memmap: leaf file .*x\.memmap.* key 'x'"):
        append_memmap(path, _rows(2))
    assert _snapshot(path) == before


def test_a_failing_append_leaves_the_old_rows(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "ckpt"
    _rows(3).memmap(path)
    before = _snapshot(path)
    real = _append._write_json

    def failing(target: str, value: Any) -> None:
        if target.endswith(_append.TMP) and "nest" in target:
            raise OSError(28, "No space left on device")
        real(target, value)

    monkeypatch.setattr(_append, "_write_json", failing)
    with pytest.raises(OSError, match="No space left"):
        append_memmap(path, _rows(2))
    assert _snapshot(path) == before  # the grown files cut back, no journal left


def test_an_append_killed_before_its_commit_is_undone(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "ckpt"
    parts = [_rows(3), _rows(2, 3.0)]
    parts[0].memmap(path)
    monkeypatch.setattr(_append, "_undo", lambda root, plan: None)  # the process dies
    monkeypatch.setattr(os, "replace", _dies_on(os.replace, _append.COMMIT))
    with pytest.raises(KeyboardInterrupt):
        append_memmap(path, _rows(5, 100.0))
    monkeypatch.undo()
    with pytest.raises(FormatError, match=r"an append_memmap to .*ckpt' was interrupted"):
        TensorDict.load_memmap(path)
    append_memmap(path, parts[1])  # undoes the killed one first
    _check(TensorDict.load_memmap(path), parts)


def test_an_append_killed_after_its_commit_is_finished(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "ckpt"
    parts = [_rows(3), _rows(2, 3.0), _rows(1, 5.0)]
    parts[0].memmap(path)
    monkeypatch.setattr(_append, "_finish", _dies_on(lambda root, plan: None, ""))
    with pytest.raises(KeyboardInterrupt):
        append_memmap(path, parts[1])
    monkeypatch.undo()
    assert (path / _append.COMMIT).exists()
    append_memmap(path, parts[2])  # finishes the killed one first
    _check(TensorDict.load_memmap(path), parts)


def _dies_on(fn: Any, marker: str) -> Any:
    def wrapped(*args: Any) -> Any:
        if marker in str(args[-1]):
            raise KeyboardInterrupt
        return fn(*args)

    return wrapped


@pytest.mark.parametrize("name", [_append.JOURNAL, _append.COMMIT])
@pytest.mark.parametrize(
    "plan",
    [
        {"sizes": {"../victim": 0}, "folders": []},
        {"sizes": {}, "folders": ["../"]},
        {"sizes": {"x.memmap": -1}, "folders": []},
        {"sizes": [], "folders": []},
        "not an object",
    ],
)
def test_a_hostile_journal_is_refused_and_touches_nothing(
    name: str, plan: Any, tmp_path: Path
) -> None:
    path = tmp_path / "ckpt"
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    _rows(3).memmap(path)
    (path / name).write_text(json.dumps(plan))
    before = _snapshot(tmp_path)
    with pytest.raises(FormatError, match=r"append_memmap: .*journal|leaves"):
        append_memmap(path, _rows(1))
    assert _snapshot(tmp_path) == before
