"""Checkpoint format version 2 (docs/format.md): one metadata read per load, read-only
media, hostile metadata."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack
from tensordict._format import FormatError
from tensordict._load import _Loader


def _model_like() -> TensorDict:
    layers = {str(i): {"weight": torch.rand(3, 2), "bias": torch.rand(3)} for i in range(4)}
    return TensorDict({"layers": layers, "step": 7, "scale": torch.ones(())}, [])


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    original = _Loader._read_meta

    def counting(self: _Loader, folder: str, path: str) -> bytes:
        reads.append(path)
        return original(self, folder, path)

    monkeypatch.setattr(_Loader, "_read_meta", counting)
    return reads


def test_a_load_at_any_level_reads_one_metadata_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    td = _model_like()
    td.memmap(tmp_path / "ckpt")
    reads = _count_reads(monkeypatch)
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    assert reads == [str(tmp_path / "ckpt" / "meta.json")]
    for key, value in td.items(True, True):
        if isinstance(value, torch.Tensor):
            assert torch.equal(back[key], value)
    reads.clear()
    sub = TensorDict.load_memmap(tmp_path / "ckpt" / "layers" / "2")
    assert reads == [str(tmp_path / "ckpt" / "layers" / "2" / "meta.json")]
    assert torch.equal(sub["weight"], td["layers", "2", "weight"])
    # every sub-folder still holds its own complete metadata (the same object)
    root = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    nested = json.loads((tmp_path / "ckpt" / "layers" / "meta.json").read_text())
    assert root["entries"]["layers"]["meta"] == nested


def test_lazy_stacks_carry_their_members_inline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = lazy_stack(
        [
            TensorDict({"a": torch.ones(1), "n": {"b": torch.ones(2)}}, []),
            TensorDict({"a": torch.ones(3), "n": {"b": torch.zeros(2)}}, []),
        ]
    )
    stack.memmap(tmp_path / "ckpt")
    reads = _count_reads(monkeypatch)
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    assert len(reads) == 1
    assert isinstance(back, LazyStackedTensorDict)
    assert [m["a"].shape for m in back.tensordicts] == [(1,), (3,)]
    assert torch.equal(back.tensordicts[1]["n", "b"], torch.zeros(2))


def _edit(prefix: Path, edit: Any) -> None:
    meta = json.loads((prefix / "meta.json").read_text())
    edit(meta)
    (prefix / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (lambda m: m["entries"]["layers"].pop("meta"), "lacks its inline metadata object"),
        (lambda m: m["entries"]["layers"].update(meta=[]), "lacks its inline metadata object"),
        (
            lambda m: m["entries"]["layers"]["meta"].update(version=1),
            "has version 1, inside a file of version 2",
        ),
        (
            lambda m: m["entries"]["layers"]["meta"]["entries"]["0"]["meta"].pop("batch_size"),
            "lacks the member 'batch_size'",
        ),
        (
            lambda m: m["entries"]["layers"]["meta"]["entries"]["0"]["meta"]["entries"][
                "weight"
            ].update(shape=[4, 2]),
            "holds 24 bytes; shape",
        ),
        (
            lambda m: m["entries"]["layers"]["meta"]["entries"]["1"].update(dir="0"),
            "names '0', which another entry names too",
        ),
        (
            lambda m: m["entries"]["layers"]["meta"].update(shape=[9]),
            r"member 'shape' \[9\] differs from its 'batch_size' \[\]",
        ),
    ],
)
def test_inline_metadata_is_validated_like_a_file(tmp_path: Path, edit: Any, pattern: str) -> None:
    _model_like().memmap(tmp_path / "ckpt")
    _edit(tmp_path / "ckpt", edit)
    with pytest.raises(FormatError, match=pattern):
        TensorDict.load_memmap(tmp_path / "ckpt")


def test_every_folder_records_its_batch_size_as_shape_too(tmp_path: Path) -> None:
    """Upstream's tools read ``meta.json["shape"]``; a file without it still loads."""
    stack = lazy_stack([TensorDict({"a": torch.ones(3, 1)}, [3])] * 2, 1)
    stack.memmap(tmp_path / "s")
    assert json.loads((tmp_path / "s" / "meta.json").read_text())["shape"] == [3, 2]
    assert json.loads((tmp_path / "s" / "0" / "meta.json").read_text())["shape"] == [3]
    _edit(tmp_path / "s", lambda m: m.pop("shape"))
    assert TensorDict.load_memmap(tmp_path / "s").batch_size == (3, 2)


def test_lazy_stack_without_inline_members_is_refused(tmp_path: Path) -> None:
    lazy_stack([TensorDict({"a": torch.ones(1)}, [])] * 2).memmap(tmp_path / "s")
    _edit(tmp_path / "s", lambda m: m.pop("members"))
    with pytest.raises(FormatError, match="must list 2 member metadata objects"):
        TensorDict.load_memmap(tmp_path / "s")


def test_a_linked_sub_folder_is_still_reached_once(tmp_path: Path) -> None:
    _model_like().memmap(tmp_path / "ckpt")
    layers = tmp_path / "ckpt" / "layers"
    shutil.rmtree(layers / "1")
    os.symlink(layers / "0", layers / "1")
    with pytest.raises(FormatError, match="is the same folder as one already loaded"):
        TensorDict.load_memmap(tmp_path / "ckpt")


def _mutations(meta: Any, rng: random.Random) -> Any:
    """``meta`` with one value somewhere replaced by a hostile one."""
    hostile: list[Any] = [None, -1, 2**70, 1.5, "", "..", "/etc", [], {}, [-1], True, "x" * 300]
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            paths.append((node, key))
            if isinstance(value, (dict, list)):
                walk(value)

    walk(meta)
    node, key = rng.choice(paths)
    if isinstance(node, dict) and rng.random() < 0.2:
        del node[key]
    else:
        node[key] = rng.choice(hostile)
    return meta


def test_fuzzed_metadata_raises_format_error_or_loads_the_truth(tmp_path: Path) -> None:
    td = _model_like()
    td.memmap(tmp_path / "ckpt")
    original = json.loads((tmp_path / "ckpt" / "meta.json").read_text())
    rng = random.Random(0)
    loaded = 0
    for _ in range(300):
        meta = _mutations(json.loads(json.dumps(original)), rng)
        (tmp_path / "ckpt" / "meta.json").write_text(json.dumps(meta))
        try:
            back = TensorDict.load_memmap(tmp_path / "ckpt")
        except FormatError:
            continue
        loaded += 1  # a harmless change (a name, a device): the tensors are still the truth
        for key, value in back.items(True, True):
            if isinstance(value, torch.Tensor) and key in td.keys(True, True):
                truth = td[key]
                if value.shape == truth.shape and value.dtype == truth.dtype:
                    assert torch.equal(value, truth)
    assert loaded < 300


def test_quantized_tensors_are_refused(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="deprecated"):
        q = torch.quantize_per_tensor(torch.rand(3), 0.1, 0, torch.quint8)
    with pytest.raises(TypeError, match=r"memmap: key \('q',\) has dtype torch.quint8"):
        TensorDict({"q": q}, []).memmap(tmp_path / "q")


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


_READ_ONLY_SCRIPT = textwrap.dedent(
    """
    import sys, torch
    from tensordict import TensorDict
    td = TensorDict.load_memmap(sys.argv[1])
    assert float(td["layers", "0", "weight"].sum()) == float(sys.argv[2])
    td["layers", "0", "weight"].fill_(5.0)  # copy-on-write: a private copy
    assert float(td["layers", "0", "weight"].sum()) == 30.0
    assert td["layers", "0", "weight"].filename is None
    print("loaded")
    """
)


def _run_as(prefix: list[str], folder: Path, total: float) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [*prefix, sys.executable, "-c", _READ_ONLY_SCRIPT, str(folder), repr(total)]
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_checkpoint_of_read_only_files_loads_and_is_never_modified() -> None:
    # (pytest's folders are private to this user: another user could not reach them)
    tmp_path = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        _read_only_files(tmp_path)
    finally:
        for path in tmp_path.rglob("*"):
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(tmp_path)


def _read_only_files(tmp_path: Path) -> None:
    td = _model_like()
    td.memmap(tmp_path / "ckpt")
    total = float(td["layers", "0", "weight"].sum())
    for path in (tmp_path / "ckpt").rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    tmp_path.chmod(0o755)
    before = _digest(tmp_path / "ckpt")
    # root may write any file: run as an unprivileged user where this process is root
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: cannot drop the right to write")
    assert "loaded" in _run_as(prefix if os.geteuid() == 0 else [], tmp_path / "ckpt", total)
    assert _digest(tmp_path / "ckpt") == before


def test_a_checkpoint_on_a_read_only_mount_loads(tmp_path: Path) -> None:
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to make a read-only mount")
    td = _model_like()
    td.memmap(tmp_path / "src" / "ckpt")
    (tmp_path / "ro").mkdir()
    total = float(td["layers", "0", "weight"].sum())
    before = _digest(tmp_path / "src")
    script = (
        f"mount --bind {tmp_path / 'src'} {tmp_path / 'ro'} && "
        f'mount -o remount,bind,ro {tmp_path / "ro"} && exec "$@"'
    )
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "true"], check=False, capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not available here")
    out = _run_as(["unshare", "-rm", "sh", "-c", script, "sh"], tmp_path / "ro" / "ckpt", total)
    assert "loaded" in out
    assert _digest(tmp_path / "src") == before
