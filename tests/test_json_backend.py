"""``tensordict.utils.set_json_backend`` / ``get_json_backend`` / ``json_dumps`` (deprecated
upstream: each access warns, as upstream's)."""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

from tensordict import TensorDict
from tensordict._json_backend import get_json_backend, json_dumps, set_json_backend


@pytest.fixture
def fake_orjson(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    # a stand-in with orjson's two traits that matter here: bytes out, 64-bit integers
    module = types.ModuleType("orjson")

    def dumps(data: object, **kwargs: object) -> bytes:
        assert "separators" not in kwargs  # (orjson takes none)
        if any(isinstance(v, int) and abs(v) >= 2**63 for v in _ints(data)):
            raise TypeError("Integer exceeds 64-bit range")
        return json.dumps(data, separators=(",", ":")).encode()

    module.dumps = dumps  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "orjson", module)
    yield module
    set_json_backend("json")


def _ints(data: object) -> list[object]:
    if isinstance(data, dict):
        return [x for v in data.values() for x in _ints(v)]
    if isinstance(data, list):
        return [x for v in data for x in _ints(v)]
    return [data]


def test_the_default_is_the_standard_library() -> None:
    assert get_json_backend() is json
    assert json_dumps({"a": [1, 2]}, separators=(",", ":")) == '{"a":[1,2]}'


def test_orjson_gives_bytes_and_hands_big_integers_to_json(fake_orjson: types.ModuleType) -> None:
    set_json_backend("orjson")
    assert get_json_backend() is fake_orjson
    assert json_dumps({"a": [1, 2]}, separators=(",", ":")) == b'{"a":[1,2]}'
    assert json_dumps({"big": 2**70}) == '{"big": 1180591620717411303424}'
    set_json_backend("json")
    assert get_json_backend() is json


def test_bad_names_are_refused_and_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="Backend must be either 'json' or 'orjson', got 'yaml'"):
        set_json_backend("yaml")
    monkeypatch.setitem(sys.modules, "orjson", None)  # (not installed)
    with pytest.raises(ImportError):
        set_json_backend("orjson")
    assert get_json_backend() is json


def test_checkpoints_stay_exact_json_whatever_the_backend(
    fake_orjson: types.ModuleType, tmp_path: object
) -> None:
    set_json_backend("orjson")
    td = TensorDict({"a": torch.zeros(2)}, [])
    td.set_non_tensor("n", float("nan"))
    td.set_non_tensor("big", 2**70)
    td.memmap(f"{tmp_path}/ckpt")
    back = TensorDict.load_memmap(f"{tmp_path}/ckpt", allow_pickle=True)  # (NaN: pickled)
    assert back["big"] == 2**70 and back["n"] != back["n"]  # (NaN, not None)
    assert isinstance(back["n"], float)


@pytest.mark.parametrize(
    ("name", "hint"),
    [("set_json_backend", r"\.$"), ("get_json_backend", r"\.$"), ("json_dumps", "json.dumps")],
)
def test_upstream_deprecates_them_and_so_do_we(name: str, hint: str) -> None:
    import tensordict.utils

    with pytest.warns(DeprecationWarning, match=rf"tensordict.utils.{name} is deprecated.*{hint}"):
        found = getattr(tensordict.utils, name)
    assert found is globals()[name]
