"""Checkpoints (docs/format.md): round trips, partial loading, atomicity, hostile folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from tensordict import (
    LazyStackedTensorDict,
    MemoryMappedTensor,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    lazy_stack,
    tensorclass,
)
from tensordict._format import DTYPES, FormatError
from tensordict._save import raw_bytes
from tests.catalogue import assert_same


@tensorclass
class MyClass:
    data: torch.Tensor
    metadata: str


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_seed_layout(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.rand(10), "b": {"c": torch.rand(10)}}, [10])
    td.memmap_(prefix=tmp_path / "tensordict")
    assert _tree(tmp_path / "tensordict") == [
        "a.memmap",
        "b",
        "b/c.memmap",
        "b/meta.json",
        "meta.json",
    ]
    assert isinstance(td["b", "c"], MemoryMappedTensor)
    meta = json.loads((tmp_path / "tensordict" / "meta.json").read_text())
    assert meta["format"] == "tensordict" and meta["version"] == 2 and meta["type"] == "TensorDict"
    assert meta["entries"]["a"] == {
        "kind": "tensor",
        "file": "a.memmap",
        "dtype": "float32",
        "shape": [10],
    }


def test_seed_nested_lazy_and_tensorclass(tmp_path: Path) -> None:
    td_list = [TensorDict({"item": i}, batch_size=[]) for i in range(4)]
    tc = MyClass(torch.randn(3), metadata="some text", batch_size=[])
    data = TensorDict({"td_list": lazy_stack(td_list), "tensorclass": tc}, [])
    data["td_list"] = lazy_stack(td_list)  # stored densified: one structure
    lazy_only = lazy_stack(td_list)
    lazy_only.memmap_(tmp_path / "lazy")
    assert {"0", "1", "2", "3"} <= set(os.listdir(tmp_path / "lazy"))
    assert isinstance(TensorDict.load_memmap(tmp_path / "lazy"), LazyStackedTensorDict)
    data.memmap_(tmp_path / "data")
    loaded = TensorDict.load_memmap(tmp_path / "data")
    assert (loaded == data).all()
    assert type(loaded["tensorclass"]) is MyClass and loaded["tensorclass"].metadata == "some text"


def test_memmap_twice_and_copy_existing(tmp_path: Path) -> None:
    td = TensorDict({"a": 1}, [])
    td0 = td.memmap()
    td1 = td0.memmap()
    assert td0["a"] is td1["a"]
    td0 = td.memmap(tmp_path / "zero")
    td0 = td.memmap(tmp_path / "zero")  # same prefix: overwritten
    with pytest.raises(
        RuntimeError,
        match="A filename was provided but the tensor already has a file associated: a leaf is already memory-mapped at .* pass copy_existing=True",
    ):
        td0.memmap(tmp_path / "one")
    td0.memmap(tmp_path / "one", copy_existing=True)
    assert (TensorDict.load_memmap(tmp_path / "one") == td).all()
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError, match="is not a checkpoint"):
        TensorDict.load_memmap(tmp_path / "empty")


def test_per_submodule_loading(tmp_path: Path) -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 3))
    params = TensorDict(dict(model.named_parameters()), []).unflatten_keys(".").detach()
    params.memmap(tmp_path / "ckpt", num_threads=4)
    whole = TensorDict.load_memmap(tmp_path / "ckpt", num_threads=4)
    part = TensorDict.load_memmap(tmp_path / "ckpt" / "0")
    assert_same(whole, params)
    assert_same(part, params["0"])


def test_memmap_like_does_not_materialise(tmp_path: Path) -> None:
    datum = TensorDict(
        {
            "images": torch.zeros((64, 64, 3), dtype=torch.uint8),
            "labels": torch.zeros((), dtype=torch.int),
        },
        [],
    )
    data = datum.expand(100_000).memmap_like(tmp_path / "dataset")
    assert data.batch_size == (100_000,)
    assert os.path.getsize(tmp_path / "dataset" / "images.memmap") == 100_000 * 64 * 64 * 3
    batch = data[torch.tensor([1, 10_000, 50_000])]
    assert batch["images"].shape == (3, 64, 64, 3)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_dtype_round_trips(tmp_path: Path, name: str) -> None:
    # built from bytes: most of these dtypes have no kernels to build them from numbers
    dtype = DTYPES[name]
    count = 24 * dtype.itemsize
    raw = torch.arange(count, dtype=torch.uint8) % (2 if dtype is torch.bool else 251)
    leaf = raw.view(dtype).reshape(4, 6)
    td = TensorDict({"x": leaf, "t": leaf.t(), "scalar": leaf[0, 0], "empty": leaf[:0]}, [])
    td.memmap(tmp_path / name)
    back = TensorDict.load_memmap(tmp_path / name)
    for key in ("x", "t", "scalar", "empty"):
        assert back[key].dtype == dtype and back[key].shape == td[key].shape
        assert torch.equal(raw_bytes(back[key]), raw_bytes(td[key]))
    assert torch.equal(raw_bytes(back["x"]), raw)


def test_odd_leaves_and_entries_round_trip(tmp_path: Path) -> None:
    td = TensorDict(
        {
            "noncontig": torch.arange(12.0).reshape(3, 4).t(),
            "expanded": torch.arange(4.0).expand(3, 4).t(),
            "zero": torch.zeros(4, 0),
            "words": ["a", "b", "c", "d"],
            "nested": {"deep": {"x": torch.ones(4, 2)}},
        },
        [4],
    )
    td["json"] = "plain string"
    td["meta"] = NonTensorData({"k": [1, 2]})
    td.memmap(tmp_path / "odd")
    back = TensorDict.load_memmap(tmp_path / "odd")
    assert_same(back, td)
    assert back["words"] == ["a", "b", "c", "d"] and isinstance(back.get("words"), NonTensorStack)
    assert back["json"] == "plain string" and back["meta"] == {"k": [1, 2]}


@pytest.mark.parametrize(
    "key", ["a/b", "..", ".", "nul\0key", "ünïcødé", "x" * 300, "meta.json", "%41", "A", "a"]
)
def test_any_key_maps_inside_the_folder(tmp_path: Path, key: str) -> None:
    td = TensorDict({key: torch.ones(2), "other": {key: torch.zeros(2)}}, [2])
    td.memmap(tmp_path / "keys")
    for path in (tmp_path / "keys").rglob("*"):
        assert str(path.resolve()).startswith(str((tmp_path / "keys").resolve()))
    back = TensorDict.load_memmap(tmp_path / "keys")
    assert torch.equal(back[key], torch.ones(2)) and torch.equal(back["other", key], torch.zeros(2))


def test_pickle_is_the_fallback_and_loading_it_needs_the_opt_in(tmp_path: Path) -> None:
    td = TensorDict({"obj": {1, 2}}, [])
    with pytest.raises(TypeError, match="holds non-JSON data .* allow_pickle=False refuses"):
        td.memmap(tmp_path / "p", allow_pickle=False)
    assert not (tmp_path / "p").exists()
    td.memmap(tmp_path / "p")  # the default: a file of its own beside meta.json
    assert "{1, 2}" not in (tmp_path / "p" / "meta.json").read_text()
    with pytest.raises(FormatError, match="key 'obj' .* is pickled data; pass allow_pickle=True"):
        TensorDict.load_memmap(tmp_path / "p")
    assert TensorDict.load_memmap(tmp_path / "p", allow_pickle=True)["obj"] == {1, 2}


def test_checksums(tmp_path: Path) -> None:
    td = TensorDict({"a": torch.arange(10.0)}, [10])
    td.memmap(tmp_path / "c", checksum=True)
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())
    assert len(meta["entries"]["a"]["sha256"]) == 64
    TensorDict.load_memmap(tmp_path / "c", verify=True)
    with open(tmp_path / "c" / "a.memmap", "r+b") as handle:
        handle.write(b"\xff")
    TensorDict.load_memmap(tmp_path / "c")  # not verified: loads
    with pytest.raises(FormatError, match="fails its checksum"):
        TensorDict.load_memmap(tmp_path / "c", verify=True)


# ------------------------------------------------------------------ atomicity
def test_failed_save_keeps_the_previous_checkpoint(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    TensorDict({"a": torch.ones(3), "b": torch.ones(3)}, [3]).memmap(prefix)
    bad = TensorDict({"a": torch.zeros(3), "obj": {1}}, [3])
    with pytest.raises(TypeError, match="non-JSON"):
        bad.memmap(prefix, allow_pickle=False)
    back = TensorDict.load_memmap(prefix)
    assert set(back.keys()) == {"a", "b"} and (back["a"] == 1).all()
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt"]  # no staging left behind


def test_resave_with_fewer_keys_leaves_no_stale_files(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    TensorDict({"a": torch.ones(3), "b": torch.ones(3)}, [3]).memmap(prefix)
    TensorDict({"a": torch.zeros(3)}, [3]).memmap(prefix)
    assert sorted(os.listdir(prefix)) == ["a.memmap", "meta.json"]


def test_saving_over_live_maps_keeps_their_data(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    TensorDict({"a": torch.ones(1000)}, [1000]).memmap(prefix)
    live = TensorDict.load_memmap(prefix)
    TensorDict({"a": torch.zeros(1000)}, [1000]).memmap(prefix)
    assert (live["a"] == 1).all()
    assert (TensorDict.load_memmap(prefix)["a"] == 0).all()


def test_refuses_to_replace_a_folder_of_other_files(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    with pytest.raises(FileExistsError, match="holds files and is not a checkpoint"):
        TensorDict({"a": torch.ones(1)}, [1]).memmap(tmp_path / "home")
    assert (tmp_path / "home" / "thesis.tex").read_text() == "precious"


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys, torch
    from tensordict import TensorDict, MemoryMappedTensor
    prefix, fill = sys.argv[1], float(sys.argv[2])
    original = MemoryMappedTensor._from_checked_file.__func__  # (maps each leaf written)
    count = [0]
    def dying(*args, **kwargs):
        count[0] += 1
        if count[0] == 3:
            os._exit(9)  # the process dies in the middle of writing leaves
        return original(*args, **kwargs)
    MemoryMappedTensor._from_checked_file = classmethod(dying)
    TensorDict({k: torch.full((100,), fill) for k in "abcdef"}, [100]).memmap(prefix)
    """
)


def test_killed_save_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    TensorDict({k: torch.full((100,), 1.0) for k in "abcdef"}, [100]).memmap(prefix)
    done = subprocess.run(
        [sys.executable, "-c", _KILL_SCRIPT, str(prefix), "2.0"], timeout=120, check=False
    )
    assert done.returncode == 9
    back = TensorDict.load_memmap(prefix)
    assert set(back.keys()) == set("abcdef") and all((v == 1).all() for v in back.values())


_WRITER = textwrap.dedent(
    """
    import sys, torch
    from tensordict import TensorDict
    prefix = sys.argv[1]
    for i in range(30):
        TensorDict({k: torch.full((2000,), float(i)) for k in "abcd"}, [2000]).memmap(prefix)
    """
)


def test_concurrent_reader_sees_whole_versions(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    TensorDict({k: torch.full((2000,), -1.0) for k in "abcd"}, [2000]).memmap(prefix)
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(prefix)])
    seen = 0
    try:
        while writer.poll() is None:
            try:
                td = TensorDict.load_memmap(prefix)
            except (FormatError, FileNotFoundError):
                continue  # between the two renames: a clear error, never a mix
            values = {float(td[k][0]) for k in "abcd"} | {float(td[k][-1]) for k in "abcd"}
            assert len(values) == 1, values
            seen += 1
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0 and seen > 0


# ---------------------------------------------------------- hostile folders
def _ckpt(tmp_path: Path) -> Path:
    prefix = tmp_path / "ckpt"
    TensorDict({"a": torch.arange(4.0), "n": {"b": torch.zeros(4)}}, [4]).memmap(prefix)
    return prefix


def _edit_meta(prefix: Path, edit) -> None:  # type: ignore[no-untyped-def]
    meta = json.loads((prefix / "meta.json").read_text())
    edit(meta)
    (prefix / "meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize(
    ("edit", "pattern"),
    [
        (lambda m: m.pop("entries"), "lacks the member 'entries'"),
        (lambda m: m.update(version="1"), "member 'version' has the wrong type"),
        (lambda m: m.update(version=99), "format version 99"),
        (lambda m: m.update(format="other"), "is not a tensordict checkpoint"),
        (lambda m: m.update(type="os.system"), "names type 'os.system', which is not registered"),
        (lambda m: m["entries"]["a"].update(dtype="float128"), "unknown dtype 'float128'"),
        (lambda m: m["entries"]["a"].update(shape=[-4]), "must be a list of non-negative ints"),
        (lambda m: m["entries"]["a"].update(shape=[2**40, 2**40]), "declares"),
        (
            lambda m: m["entries"]["a"].update(shape=[5]),
            "holds 16 bytes; shape \\[5\\] of float32 needs 20",
        ),
        (
            lambda m: m["entries"]["a"].update(shape=[3]),
            "holds 16 bytes; shape \\[3\\] of float32 needs 12",
        ),
        (lambda m: m["entries"]["a"].update(file="../../etc/passwd"), "is not valid"),
        (lambda m: m["entries"]["a"].update(file="missing.memmap"), "is missing"),
        (lambda m: m["entries"]["a"].update(kind="exec"), "unknown kind 'exec'"),
        (lambda m: m["entries"]["n"].update(dir=".."), "is not valid"),
        (lambda m: m.update(batch_size=[5], shape=[5]), "does not start with batch_size \\[5\\]"),
        (
            lambda m: m.update(batch_size=[5]),
            "member 'shape' \\[4\\] differs from its 'batch_size'",
        ),
        (
            lambda m: m["entries"].update(
                s={"kind": "json_stack", "values": ["x"], "positions": [0]}
            ),
            r"which does not start with batch_size \[4\]",
        ),
        (lambda m: m["entries"]["a"].update(dtype=["float32"]), r"unknown dtype \['float32'\]"),
        (lambda m: m["entries"]["a"].update(shape=[0, 2**61, 2**61]), "beyond"),
        (lambda m: m.update(names=[1]), "'names' must hold one string or null per batch dim"),
        (lambda m: m.update(names=["a", "b"]), "'names' must hold one string or null"),
        (lambda m: m["entries"]["a"].update(sha256=5), "non-string sha256 5"),
        (lambda m: m["entries"]["n"].update(dir="a.memmap"), "names 'a.memmap', which another"),
        (lambda m: m.update(stack_dim=0), "and a stack_dim, which only lazy stacks have"),
        (lambda m: m.update(type="LazyStackedTensorDict"), "without a stack_dim"),
    ],
)
def test_hostile_metadata_is_refused(tmp_path: Path, edit, pattern: str) -> None:  # type: ignore[no-untyped-def]
    prefix = _ckpt(tmp_path)
    size_before = os.path.getsize(prefix / "a.memmap")
    _edit_meta(prefix, edit)
    with pytest.raises(FormatError, match=pattern):
        TensorDict.load_memmap(prefix)
    assert os.path.getsize(prefix / "a.memmap") == size_before  # never grown or truncated


def test_invalid_json_and_symlinks_out(tmp_path: Path) -> None:
    prefix = _ckpt(tmp_path)
    (prefix / "meta.json").write_text("{not json")
    with pytest.raises(FormatError, match="is not valid JSON"):
        TensorDict.load_memmap(prefix)
    prefix = tmp_path / "second"
    TensorDict({"a": torch.arange(4.0)}, [4]).memmap(prefix)
    outside = tmp_path / "outside.memmap"
    outside.write_bytes(b"\0" * 16)
    os.unlink(prefix / "a.memmap")
    os.symlink(outside, prefix / "a.memmap")
    with pytest.raises(FormatError, match="leads outside the checkpoint"):
        TensorDict.load_memmap(prefix)


def test_json_that_is_not_json_and_lazy_stacks_without_stack_dims(tmp_path: Path) -> None:
    prefix = _ckpt(tmp_path)
    text = (prefix / "meta.json").read_text().replace('"batch_size": [4]', '"batch_size": [NaN]')
    (prefix / "meta.json").write_text(text)
    with pytest.raises(FormatError, match="is not valid JSON: NaN is not JSON"):
        TensorDict.load_memmap(prefix)
    stack = tmp_path / "stack"
    lazy_stack(
        [TensorDict({"a": torch.zeros(2)}, [2]), TensorDict({"a": torch.ones(2)}, [2])]
    ).memmap(stack)
    _edit_meta(stack, lambda m: m.update(batch_size=[], shape=[], stack_dim=0))
    with pytest.raises(FormatError, match=r"invalid stack_dim 0 for batch_size \[\]"):
        TensorDict.load_memmap(stack)


def test_a_folder_reached_twice_is_refused(tmp_path: Path) -> None:
    # members 0 and 1 of a lazy stack are one folder: loading would visit it twice, and a
    # chain of such folders would load as an exponentially large tree
    stack = tmp_path / "stack"
    lazy_stack([TensorDict({"a": torch.zeros(2)}, [2]) for _ in range(2)]).memmap(stack)
    shutil.rmtree(stack / "1")
    os.symlink(stack / "0", stack / "1")
    with pytest.raises(FormatError, match="is the same folder as one already loaded"):
        TensorDict.load_memmap(stack)


def test_nesting_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    from tensordict._load import MAX_DEPTH

    nested: dict = {"leaf": torch.zeros(1)}
    for _ in range(MAX_DEPTH):
        nested = {"n": nested}
    TensorDict(nested, []).memmap(tmp_path / "deep")
    with pytest.raises(FormatError, match=f"nested more than {MAX_DEPTH} levels deep"):
        TensorDict.load_memmap(tmp_path / "deep")
    nested = nested["n"]
    TensorDict(nested, []).memmap(tmp_path / "ok")  # exactly the limit loads
    assert TensorDict.load_memmap(tmp_path / "ok")[("n",) * (MAX_DEPTH - 1) + ("leaf",)].shape == (
        1,
    )


def test_the_recorded_device_does_not_claim_cpu_leaves_are_elsewhere(tmp_path: Path) -> None:
    prefix = _ckpt(tmp_path)
    _edit_meta(prefix, lambda m: m.update(device="meta"))
    loaded = TensorDict.load_memmap(prefix)
    assert loaded.device == torch.device("cpu") and loaded["a"].device == torch.device("cpu")
    moved = TensorDict.load_memmap(prefix, device="meta")
    assert moved.device == torch.device("meta") and moved["a"].device == torch.device("meta")


def test_links_inside_are_followed_and_special_files_refused(tmp_path: Path) -> None:
    prefix = tmp_path / "ckpt"
    TensorDict({"a": torch.arange(4.0), "b": torch.ones(4)}, [4]).memmap(prefix)
    os.rename(prefix / "a.memmap", prefix / "real.bin")  # another file of the folder
    os.symlink(prefix / "real.bin", prefix / "a.memmap")
    assert torch.equal(TensorDict.load_memmap(prefix)["a"], torch.arange(4.0))
    outside = tmp_path / "meta-outside.json"
    outside.write_bytes((prefix / "meta.json").read_bytes())
    os.unlink(prefix / "meta.json")
    os.symlink(outside, prefix / "meta.json")
    with pytest.raises(FormatError, match="metadata file 'meta.json' .* leads outside"):
        TensorDict.load_memmap(prefix)
    os.unlink(prefix / "meta.json")
    os.mkfifo(prefix / "meta.json")  # reading it would block forever
    with pytest.raises(FormatError, match=r"is not a checkpoint \(no meta.json\)"):
        TensorDict.load_memmap(prefix)
    second = tmp_path / "second"
    TensorDict({"a": torch.arange(4.0)}, [4]).memmap(second)
    os.unlink(second / "a.memmap")
    os.mkfifo(second / "a.memmap")
    with pytest.raises(
        FormatError, match=r"leaf file .*a.memmap.* of key 'a' is missing or not a regular file"
    ):
        TensorDict.load_memmap(second)


def test_loading_never_runs_code_named_by_a_file(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    prefix = tmp_path / "evil"
    prefix.mkdir()

    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, (f"touch {marker}",))

    torch.save(Evil(), prefix / "x.pkl")
    meta = {
        "format": "tensordict",
        "version": 1,
        "type": "TensorDict",
        "batch_size": [],
        "device": None,
        "names": None,
        "entries": {"x": {"kind": "pickle", "file": "x.pkl"}},
    }
    (prefix / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(FormatError, match="pickled data"):
        TensorDict.load_memmap(prefix)
    _edit_meta(prefix, lambda m: m.update(type="subprocess.Popen"))
    with pytest.raises(FormatError, match="not registered"):
        TensorDict.load_memmap(prefix)
    assert not marker.exists()


_SAVE_MAIN = textwrap.dedent(
    """
    import sys, torch
    from tensordict import tensorclass
    @tensorclass
    class Sample:
        x: torch.Tensor
        tag: str
    Sample(torch.arange(3.0), tag="hi", batch_size=[3]).memmap(sys.argv[1])
    """
)
_LOAD_MAIN = textwrap.dedent(
    """
    import sys, torch
    from tensordict import TensorDict, tensorclass
    if sys.argv[2] == "define":
        @tensorclass
        class Sample:
            x: torch.Tensor
            tag: str
    try:
        loaded = TensorDict.load_memmap(sys.argv[1])
    except ValueError as err:
        print("ERROR", err)
    else:
        print(type(loaded).__name__, loaded.tag, loaded.x.tolist())
    """
)


def test_tensorclass_identity_across_processes(tmp_path: Path) -> None:
    prefix = str(tmp_path / "tc")
    subprocess.run([sys.executable, "-c", _SAVE_MAIN, prefix], check=True, timeout=120)
    meta = json.loads((tmp_path / "tc" / "meta.json").read_text())
    assert meta["type"] == "tensorclass:Sample"
    ok = subprocess.run(
        [sys.executable, "-c", _LOAD_MAIN, prefix, "define"],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert ok.stdout.strip() == "Sample hi [0.0, 1.0, 2.0]"
    missing = subprocess.run(
        [sys.executable, "-c", _LOAD_MAIN, prefix, "no"],
        check=True,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert "names type 'tensorclass:Sample', which is not registered" in missing.stdout


def test_an_instance_of_a_redefined_class_is_refused_not_written_as_the_other(
    tmp_path: Path,
) -> None:
    """A cell run twice defines a second class of the same name: the registry follows the
    newest, so writing an instance of the old one would load as the new one."""

    @tensorclass
    class Redefined:
        x: torch.Tensor

    old = Redefined(x=torch.zeros(2), batch_size=[2])

    @tensorclass  # type: ignore[no-redef]
    class Redefined:
        y: torch.Tensor

    new = Redefined(y=torch.ones(2), batch_size=[2])
    new.memmap(tmp_path / "new")
    with pytest.raises(TypeError, match=r"Redefined is no longer the class registered as "):
        old.memmap(tmp_path / "old")
    back = TensorDict.load_memmap(tmp_path / "new")
    assert type(back) is Redefined and back.y.tolist() == [1.0, 1.0]


def test_a_non_tensor_stack_longer_than_the_batch_loads_back(tmp_path: Path) -> None:
    td = TensorDict(a=NonTensorStack("x", "y").unsqueeze(-1), batch_size=[2])
    td.memmap(tmp_path / "ckpt")
    back = TensorDict.load_memmap(tmp_path / "ckpt")
    assert back.get("a").batch_size == (2, 1) and back["a"] == [["x"], ["y"]]
