"""unflatten_keys resolves each prefix once: errors and merges still hold key by key."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict


def _flat(*keys: str) -> TensorDict:
    return TensorDict({k: torch.full((2,), float(i)) for i, k in enumerate(keys)}, [2])


def test_shared_prefixes_build_one_level_each() -> None:
    td = _flat("a.b.c", "a.b.d", "a.e", "f", "a.b.g.h").unflatten_keys()
    assert list(td.keys(True, True)) == [
        "f",
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "g", "h"),
        ("a", "e"),
    ]
    torch.testing.assert_close(td["a", "b", "g", "h"], torch.full((2,), 4.0))
    assert td["a"] is not td["a", "b"] and td["a", "b"].batch_size == (2,)


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        (("x.a", "x.a.b"), r"key 'x.a.b' needs 'a' to be nested, but it holds a leaf"),
        (("x.a.b", "x.a"), r"key 'x.a' collides with an existing entry"),
        (("a.b.",), r"key 'a.b.' splits into an empty part on separator '.'"),
        ((".a",), r"key '.a' splits into an empty part"),
        (("a..b", "a.c"), r"key 'a..b' splits into an empty part"),
    ],
)
def test_errors_name_the_key(keys: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _flat(*keys).unflatten_keys()


def test_merging_into_a_longer_nested_batch_checks_each_leaf() -> None:
    td = TensorDict({"n": TensorDict({"x": torch.zeros(2, 3)}, [2, 3])}, [2])
    td["n.y"] = torch.ones(2, 3, 4)
    out = td.unflatten_keys()
    assert out["n"].batch_size == (2, 3) and out["n", "y"].shape == (2, 3, 4)
    td["n.z"] = torch.ones(2, 5)
    with pytest.raises(ValueError, match=r"shape \(2, 5\) of key 'n.z' does not start with"):
        td.unflatten_keys()


def test_multi_character_separator() -> None:
    td = _flat("a::b", "a::c", "d").unflatten_keys("::")
    assert list(td.keys(True, True)) == ["d", ("a", "b"), ("a", "c")]
