"""The command line `python -m tensordict`: inspect, verify, diff; exit codes; one-line errors."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import NonTensorData, TensorDict, is_tensor_collection, lazy_stack, tensorclass
from tensordict._cli import main

GOLDEN = Path(__file__).parent / "data" / "v1"
ROOT = Path(__file__).parent.parent


@tensorclass
class CliClass:
    vals: torch.Tensor
    label: str


def _run(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    code = main([os.fspath(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _save(td: Any, path: Path, **kwargs: Any) -> Path:
    td.memmap(path, **kwargs)
    return path


def _sample() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.arange(12.0).reshape(4, 3),
            "done": torch.tensor([False, True, False, True]),
            "info": {"step": torch.arange(4), "deep": {"x": torch.ones(4, 2, dtype=torch.int16)}},
            "note": "hello",
            "tc": CliClass(torch.zeros(4), "lbl", batch_size=[4]),
        },
        [4],
    )


def _meta(path: Path) -> dict[str, Any]:
    return json.loads((path / "meta.json").read_text())  # type: ignore[no-any-return]


def _write_meta(path: Path, meta: dict[str, Any]) -> None:
    (path / "meta.json").write_text(json.dumps(meta))


# ------------------------------------------------------------------ inspect
def test_inspect_prints_keys_shapes_dtypes_sizes_and_totals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    td = _sample()
    path = _save(td, tmp_path / "ckpt", checksum=True)
    code, out, err = _run(capsys, "inspect", path)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(str(path)) and "TensorDict  batch_size=[4]" in lines[0]
    rows = {line.split("── ")[1].split()[0]: line for line in lines[1:-1]}  # by key
    assert "float32  [4, 3]  48 B  sha256" in rows["obs"]
    assert "bool  [4]  4 B" in rows["done"]
    assert "int16  [4, 2]  16 B" in rows["x"]
    assert 'json  "hello"' in rows["note"]
    assert f"tensorclass:{CliClass.__qualname__}  batch_size=[4]" in rows["tc"]
    # nesting shows as indentation under the parent's branch
    assert lines.index(rows["deep"]) == lines.index(rows["info"]) + 2
    assert rows["x"].index("x") > rows["deep"].index("deep")
    tensors = [v for v in td.values(True, True) if isinstance(v, torch.Tensor)]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    collections = 1 + sum(is_tensor_collection(v) for v in td.values(True))
    assert lines[-1] == (
        f"{len(tensors) + 2} leaves ({len(tensors)} tensors, 2 non-tensor) in {collections} "
        f"collections; "
        f"tensor data {nbytes} bytes ({nbytes} B)"
    )


def test_inspect_golden_shows_decoded_keys_and_lazy_members(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(capsys, "inspect", GOLDEN / "td")
    assert code == 0
    assert "└── odd/key" in out and "odd%2Fkey" not in out  # the key, not the file name
    assert "json_stack  2 distinct values" in out
    code, out, _ = _run(capsys, "inspect", GOLDEN / "lazy")
    assert code == 0
    assert "LazyStackedTensorDict  batch_size=[2]  stack_dim=0" in out.splitlines()[0]
    assert "├── [0]" in out and "└── [1]" in out


def test_inspect_quotes_odd_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _save(TensorDict({"two\nlines": torch.zeros(1), " pad": torch.zeros(1)}, []), tmp_path)
    code, out, _ = _run(capsys, "inspect", path / "")
    assert code == 0
    assert "'two\\nlines'" in out and "' pad'" in out


def test_inspect_maps_no_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _save(_sample(), tmp_path / "ckpt")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("inspect mapped a leaf file")

    monkeypatch.setattr("torch.from_file", refuse)  # (every leaf mapping goes through it)
    assert _run(capsys, "inspect", path)[0] == 0
    assert _run(capsys, "verify", path)[0] == 0


def test_inspect_of_an_invalid_checkpoint_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(_sample(), tmp_path / "ckpt")
    (path / "obs.memmap").write_bytes(b"\0" * 7)
    code, out, err = _run(capsys, "inspect", path)
    assert (code, out) == (1, "")
    assert "holds 7 bytes" in _one_line_error(err) and "verify" in err


# ------------------------------------------------------------------ verify
def _lazy_of_lazy() -> Any:
    inner = lazy_stack([_sample()[0], _sample()[1]])
    return lazy_stack([inner, inner.clone()])


@pytest.mark.parametrize("make", [_sample, lambda: lazy_stack(list(_sample())), _lazy_of_lazy])
def test_verify_accepts_valid_checkpoints(
    make: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(make(), tmp_path / "ckpt", checksum=True)
    code, out, err = _run(capsys, "verify", path)
    assert (code, err) == (0, "")
    count = sum(1 for _ in path.rglob("*.memmap"))
    assert f"valid checkpoint, format version 2; {count} tensor files, {count} checksums" in out


def test_verify_golden_and_without_checksums(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "verify", GOLDEN / "td")
    assert code == 0 and "7 checksums verified, 0 without a checksum" in out
    path = _save(TensorDict({"a": torch.zeros(3)}, [3]), tmp_path / "plain")
    code, out, _ = _run(capsys, "verify", path)
    assert code == 0 and "0 checksums verified, 1 without a checksum" in out


def test_verify_notes_an_undefined_tensorclass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(CliClass(torch.zeros(2), "x", batch_size=[2]), tmp_path / "tc")
    meta = _meta(path)
    meta["type"] = "tensorclass:NotDefinedHere"
    _write_meta(path, meta)
    code, out, _ = _run(capsys, "verify", path)
    assert code == 0
    assert "type 'tensorclass:NotDefinedHere' is not defined in this process" in out
    code, out, _ = _run(capsys, "inspect", path)
    assert code == 0 and "note: " in out and "NotDefinedHere" in out
    meta["type"] = "NotATensorclass"
    _write_meta(path, meta)
    code, _, err = _run(capsys, "verify", path)
    assert code == 1 and "'NotATensorclass', which is not registered" in _one_line_error(err)


class _Bomb:
    """Unpickling it creates a folder: proof that something was unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.marker,))


def test_verify_reports_pickled_entries_and_never_unpickles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(TensorDict({"obj": {1, 2}}, []), tmp_path / "p", allow_pickle=True)
    marker = tmp_path / "unpickled"
    (path / "obj.pkl").write_bytes(pickle.dumps(_Bomb(str(marker))))
    code, out, _ = _run(capsys, "verify", path)
    assert code == 0 and "key 'obj' holds pickled data, not loaded" in out
    code, out, _ = _run(capsys, "inspect", path)
    size = (path / "obj.pkl").stat().st_size
    assert code == 0 and re.search(rf"└── obj +pickle  {size} B  \(not loaded\)", out)
    assert _run(capsys, "diff", path, path)[0] == 0
    assert not marker.exists()
    (path / "obj.pkl").unlink()
    code, _, err = _run(capsys, "verify", path)
    assert code == 1 and "pickle file" in _one_line_error(err) and "missing" in err


def _corrupt_meta(path: Path) -> None:
    (path / "meta.json").write_text('{"format": "tensordict", "version": ')


def _truncate_leaf(path: Path) -> None:
    with open(path / "obs.memmap", "r+b") as handle:
        handle.truncate(10)


def _flip_a_byte(path: Path) -> None:
    data = bytearray((path / "obs.memmap").read_bytes())
    data[0] ^= 0xFF
    (path / "obs.memmap").write_bytes(bytes(data))


def _break_nested(path: Path) -> None:
    (path / "info" / "deep" / "x.memmap").unlink()


def _future_version(path: Path) -> None:
    meta = _meta(path)
    meta["version"] = 99
    _write_meta(path, meta)


def _edit(change: Any) -> Any:
    def corrupt(path: Path) -> None:
        meta = _meta(path)
        change(meta)
        _write_meta(path, meta)

    return corrupt


def _fifo_leaf(path: Path) -> None:
    (path / "obs.memmap").unlink()
    os.mkfifo(path / "obs.memmap")


def _alias_folders(path: Path) -> None:
    meta = _meta(path)
    meta["entries"]["info2"] = dict(meta["entries"]["info"])
    _write_meta(path, meta)


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (_edit(lambda m: m.update(stack_dim=0)), "and a stack_dim, which only lazy stacks have"),
        (_edit(lambda m: m.update(type="LazyStackedTensorDict")), "without a stack_dim"),
        (_edit(lambda m: m["entries"]["obs"].update(dtype=["x"])), r"unknown dtype \['x'\]"),
        (_edit(lambda m: m["entries"]["obs"].update(shape=[0, 2**61, 2**61])), "beyond"),
        (_fifo_leaf, "is missing or not a regular file"),
        (_alias_folders, "names 'info', which another entry names too"),
        (_corrupt_meta, "is not valid JSON"),
        (_truncate_leaf, r"holds 10 bytes; shape \[4, 3\] of float32 needs 48"),
        (_flip_a_byte, "fails its checksum"),
        (_break_nested, "leaf file .*deep/x.memmap' of key 'x' is missing"),
        (_future_version, "has format version 99"),
    ],
)
def test_verify_fails_as_a_load_does(
    corrupt: Any, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(_sample(), tmp_path / "ckpt", checksum=True)
    corrupt(path)
    with pytest.raises(ValueError, match=message) as load_error:
        TensorDict.load_memmap(path, verify=True)
    code, out, err = _run(capsys, "verify", path)
    assert (code, out) == (1, "")
    line = _one_line_error(err)
    assert line.startswith("tensordict verify: ")
    # the same validation: the loader's own message, under the command's name
    assert line.removeprefix("tensordict verify: ") == " ".join(
        str(load_error.value).removeprefix("TensorDict.load_memmap: ").splitlines()
    )


def test_checksums_are_checked_by_verify_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(_sample(), tmp_path / "ckpt", checksum=True)
    _flip_a_byte(path)
    assert _run(capsys, "inspect", path)[0] == 0
    assert _run(capsys, "verify", path)[0] == 1


# ------------------------------------------------------------- not a checkpoint
@pytest.mark.parametrize("command", ["inspect", "verify", "diff"])
@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("missing", "'{p}' does not exist"),
        ("file", "'{p}' is a file, not a checkpoint folder or archive"),
        ("empty", "'{p}' is not a checkpoint \\(no meta.json in it\\)"),
    ],
)
def test_no_checkpoint_is_a_one_line_error_with_status_2(
    command: str, where: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / where
    if where == "file":
        path.write_text("not a folder")
    elif where == "empty":
        path.mkdir()
    good = _save(TensorDict({"a": torch.zeros(1)}, []), tmp_path / "good")
    args = [path, good] if command == "diff" else [path]
    code, out, err = _run(capsys, command, *args)
    assert (code, out) == (2, "")
    line = _one_line_error(err)
    assert line.startswith(f"tensordict {command}: ")
    assert re.search(message.format(p=path), line)


def test_missing_path_after_an_interrupted_save(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ckpt.abc123.old").mkdir()
    code, _, err = _run(capsys, "verify", tmp_path / "ckpt")
    assert code == 2 and "interrupted save" in _one_line_error(err)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="2"):
        main(["frobnicate"])
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):
        main(["diff", "only-one"])
    assert "the following arguments are required: B" in capsys.readouterr().err


# -------------------------------------------------------------------- diff
def _diff(tmp_path: Path, capsys: pytest.CaptureFixture[str], a: Any, b: Any) -> tuple[int, str]:
    pa, pb = _save(a, tmp_path / "a"), _save(b, tmp_path / "b")
    code, out, err = _run(capsys, "diff", pa, pb)
    assert err == ""
    return code, out


def test_diff_of_equal_checkpoints_is_silent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    td = _sample()
    td["nan"] = torch.full((4,), float("nan"))
    td["empty"] = torch.zeros(4, 0)
    assert _diff(tmp_path, capsys, td, td.clone()) == (0, "")
    assert _run(capsys, "diff", GOLDEN / "td", GOLDEN / "td")[:2] == (0, "")


def test_diff_lists_keys_shapes_dtypes_and_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _sample(), _sample()
    del b["done"]
    b["extra"] = torch.zeros(4)
    b["obs"] = b["obs"].double()
    b["info", "step"] = torch.arange(8).reshape(4, 2)
    b["info", "deep", "x"][1, 0] = 5
    b["note"] = "bye"
    b["tc"].vals = torch.tensor([0.0, 0.5, 0.0, -2.0])
    code, out = _diff(tmp_path, capsys, a, b)
    assert code == 1
    assert out.splitlines() == [
        "only in A: 'done'",
        "only in B: 'extra'",
        "'obs': dtype float32 != float64",
        "('info', 'step'): shape [4] != [4, 2]",
        "('info', 'deep', 'x'): 1 of 8 values differ (largest absolute difference 4)",
        '\'note\': value "hello" != "bye"',
        "('tc', 'vals'): 2 of 4 values differ (largest absolute difference 2)",
    ]


def test_diff_compares_bits_so_signed_zeros_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = TensorDict({"z": torch.tensor([0.0, 1.0])}, [])
    b = TensorDict({"z": torch.tensor([-0.0, 1.0])}, [])
    assert _diff(tmp_path, capsys, a, b) == (
        1,
        "'z': 1 of 2 values differ (largest absolute difference 0)\n",
    )


def test_diff_of_batch_sizes_kinds_and_lazy_members(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = TensorDict({"k": torch.zeros(2), "n": {"m": torch.zeros(2)}}, [2])
    b = TensorDict({"k": {"inner": torch.zeros(2)}, "n": {"m": torch.zeros(2)}}, [])
    code, out = _diff(tmp_path / "1", capsys, a, b)
    assert (code, out.splitlines()) == (
        1,
        ["(root): batch_size [2] != []", "'k': tensor != TensorDict", "'n': batch_size [2] != []"],
    )
    one = TensorDict({"v": torch.zeros(1)}, [])
    la = lazy_stack([one, one.clone()])
    lb = lazy_stack([one, TensorDict({"v": torch.ones(1)}, []), one.clone()])
    code, out = _diff(tmp_path / "2", capsys, la, lb)
    assert (code, out.splitlines()) == (
        1,
        [
            "(root): batch_size [2] != [3]",
            "only in B: 2",
            "(1, 'v'): 1 of 1 values differ (largest absolute difference 1)",
        ],
    )
    code, out = _diff(tmp_path / "3", capsys, la, la.contiguous())
    assert (code, out) == (1, "(root): type LazyStackedTensorDict != TensorDict\n")


def test_diff_of_pickled_entries_compares_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = _save(TensorDict({"obj": {1, 2}}, []), tmp_path / "a", allow_pickle=True)
    pb = _save(TensorDict({"obj": {1, 2}}, []), tmp_path / "b", allow_pickle=True)
    assert _run(capsys, "diff", pa, pb)[:2] == (0, "")
    _save(TensorDict({"obj": {3}}, []), pb, allow_pickle=True)
    code, out, _ = _run(capsys, "diff", pa, pb)
    assert (code, out) == (1, "'obj': pickled data differs (compared as bytes, not unpickled)\n")


def test_diff_of_an_invalid_checkpoint_is_trouble(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pa = _save(_sample(), tmp_path / "a")
    pb = _save(_sample(), tmp_path / "b")
    _corrupt_meta(pb)
    code, out, err = _run(capsys, "diff", pa, pb)
    assert (code, out) == (2, "")
    assert "is not valid JSON" in _one_line_error(err)


# ------------------------------------------------------------ end to end
def _module(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tensordict", *map(os.fspath, args)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_python_dash_m_end_to_end(tmp_path: Path) -> None:  # two runs: each imports torch
    done = _module("inspect", GOLDEN / "td")
    assert done.returncode == 0 and done.stderr == ""
    assert "tensorclass:GoldenClass" in done.stdout and "└── odd/key" in done.stdout
    done = _module("verify", tmp_path / "missing")
    assert done.returncode == 2 and done.stdout == ""
    assert (
        _one_line_error(done.stderr)
        == f"tensordict verify: '{tmp_path / 'missing'}' does not exist"
    )


@pytest.mark.parametrize(
    ("dtype", "gap"),
    [
        (torch.bfloat16, "largest absolute difference 1.5"),
        (torch.complex128, "largest absolute difference 1.5"),
        (torch.int8, "largest absolute difference 1"),
        (torch.uint64, "largest absolute difference 1"),
        (torch.bool, None),
    ],
)
def test_diff_values_of_every_width(
    dtype: torch.dtype, gap: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = torch.zeros(5, dtype=dtype)
    changed = base.clone()
    changed[3] = {torch.bool: True, torch.int8: 1, torch.uint64: 1}.get(dtype, 1.5)
    code, out = _diff(tmp_path, capsys, TensorDict({"v": base}, []), TensorDict({"v": changed}, []))
    expected = "'v': 1 of 5 values differ" + (f" ({gap})" if gap else "") + "\n"
    assert (code, out) == (1, expected)


def test_diff_reports_a_read_failure_as_trouble(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def vanished(*args: Any) -> None:
        raise FileNotFoundError(2, "No such file or directory", "v.memmap")

    monkeypatch.setattr("tensordict._cli_diff._value_difference", vanished)
    pa = _save(TensorDict({"v": torch.zeros(2)}, []), tmp_path / "a")
    pb = _save(TensorDict({"v": torch.ones(2)}, []), tmp_path / "b")
    code, out, err = _run(capsys, "diff", pa, pb)
    assert (code, out) == (2, "")
    assert _one_line_error(err) == (
        "tensordict diff: [Errno 2] No such file or directory: 'v.memmap'"
    )


def test_inspect_can_draw_with_ascii_only() -> None:
    from tensordict._cli_inspect import render
    from tensordict._survey import survey

    text = render("lazy", survey(os.fspath(GOLDEN / "lazy"), "test"), ascii_only=True)
    assert text.isascii()
    assert [line.split()[0] for line in text.splitlines()[1:4]] == ["|--", "|", "`--"]


def test_a_cuda_checkpoint_is_read_on_any_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _save(TensorDict({"a": torch.zeros(2)}, [2]), tmp_path / "ckpt")
    meta = _meta(path)
    meta["device"] = "cuda:0"  # as written from a GPU: the commands never map the data
    _write_meta(path, meta)
    code, out, _ = _run(capsys, "inspect", path)
    assert code == 0 and "TensorDict  batch_size=[2]  device=cuda:0" in out.splitlines()[0]
    assert _run(capsys, "verify", path)[0] == 0


def test_diff_tells_json_types_apart_and_escapes_what_it_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = TensorDict({"flag": NonTensorData(True), "cfg": NonTensorData({"lr": 1})}, [])
    b = TensorDict({"flag": NonTensorData(1), "cfg": NonTensorData({"lr": 1.0})}, [])
    a, b = _save(a, tmp_path / "a"), _save(b, tmp_path / "b")
    code, out, _ = _run(capsys, "diff", a, b)
    assert code == 1
    assert "'flag': value true != 1" in out and "'cfg': value" in out
    meta = _meta(b)
    meta["type"] = "tensorclass:\x1b[2Jevil"  # an unregistered name with a terminal escape
    _write_meta(b, meta)
    for argv in (("verify", b), ("inspect", b), ("diff", a, b)):
        _, out, err = _run(capsys, *argv)
        assert "\x1b" not in out + err, argv
