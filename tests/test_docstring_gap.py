"""Behaviours upstream's own docstring examples use that were missing here."""

from __future__ import annotations

import pytest
import torch

from tensordict import TensorDict


def _nested() -> TensorDict:
    inner = TensorDict(c=torch.arange(24.0).reshape(3, 4, 2), batch_size=(3, 4))
    return TensorDict(a=torch.arange(12.0).reshape(3, 4), b=inner, batch_size=(3, 4))


@pytest.mark.parametrize("op", ["sum", "mean", "std", "var"])
def test_reduction_key_transform_renames_every_level(op: str) -> None:
    td = _nested()
    out = getattr(td, op)(dim=0, key_transform=lambda key: f"{op}_{key}")
    assert list(out.keys(True, True)) == [f"{op}_a", (f"{op}_b", f"{op}_c")]
    assert out.batch_size == torch.Size([4])
    plain = getattr(td, op)(dim=0)
    torch.testing.assert_close(out[f"{op}_b", f"{op}_c"], plain["b", "c"])
    torch.testing.assert_close(out[f"{op}_a"], plain["a"])


def test_quantile_and_norm_key_transform() -> None:
    td = _nested()
    q = td.quantile(0.5, key_transform=str.upper)
    assert list(q.keys(True, True)) == ["A", ("B", "C")]
    torch.testing.assert_close(q["B", "C"], td.quantile(0.5)["b", "c"])
    n = td.norm(key_transform=lambda key: f"{key}_norm")
    assert list(n.keys(True, True)) == ["a_norm", ("b_norm", "c_norm")]
    torch.testing.assert_close(n["a_norm"], torch.linalg.vector_norm(td["a"]))


def test_key_transform_ignored_with_reduce() -> None:
    td = _nested()
    out = td.sum(reduce=True, key_transform=str.upper)
    torch.testing.assert_close(out, td.sum(reduce=True))


def test_non_tensor_stack_data_is_the_shared_value() -> None:
    from tensordict import NonTensorData, NonTensorStack, set_capture_non_tensor_stack

    with set_capture_non_tensor_stack(False):
        stack = torch.stack([NonTensorData("a"), NonTensorData("a")])
    assert type(stack) is NonTensorStack
    assert stack.data == "a"
    mixed = NonTensorStack("a", "b")
    assert mixed[:1].data == "a"  # only the elements the view holds count
    with pytest.raises(AttributeError, match=r"NonTensorStack.data: .* do not all hold one"):
        _ = mixed.data


def test_permute_takes_dims_by_keyword() -> None:
    from tensordict import LazyStackedTensorDict, NonTensorStack

    td = TensorDict(a=torch.zeros(3, 4, 5), batch_size=[3, 4, 5])
    assert td.permute(dims=[2, 0, 1]).batch_size == td.permute(2, 0, 1).batch_size
    assert td.permute(dims=(2, 0, 1))["a"].shape == (5, 3, 4)
    stack = LazyStackedTensorDict(*td[:, :, 0].unbind(0))
    assert stack.permute(dims=(1, 0)).batch_size == (4, 3)
    assert NonTensorStack.from_list([["a", "b"]]).permute(dims=(1, 0)).tolist() == [["a"], ["b"]]
    with pytest.raises(TypeError, match=r"TensorDict.permute: pass the dims positionally or"):
        td.permute(0, dims=(1, 0))


def test_rename_none_clears_every_name() -> None:
    td = TensorDict(batch_size=[1, 2, 3], names=["a", "b", "c"])
    assert td.rename(None).names == [None, None, None]
    assert td.names == ["a", "b", "c"]
    assert td.rename_(None) is td
    assert td.names == [None, None, None]
    one = TensorDict(batch_size=[2], names=["x"])
    assert one.rename(None).names == [None]


def test_split_keys_takes_predicates() -> None:
    td = TensorDict(
        s=torch.zeros(4),
        v=torch.zeros(4, 3),
        m=torch.zeros(4, 2, 2),
        nested=TensorDict(t=torch.zeros(4, 3), batch_size=[4]),
        text="not a tensor",
        batch_size=[4],
    )
    seen: list[tuple[str, ...]] = []

    def record(key: tuple[str, ...], leaf: torch.Tensor) -> bool:
        seen.append(key)
        return False

    td.split_keys(record)
    assert seen == [("s",), ("v",), ("m",), ("nested", "t")]  # tensor leaves, tuple keys
    scalars, vectors, rest = td.split_keys(
        lambda key, leaf: leaf.ndim == 1, lambda key, leaf: leaf.ndim == 2
    )
    assert list(scalars.keys(True, True)) == ["s"]
    assert list(vectors.keys(True, True)) == ["v", ("nested", "t")]
    assert list(rest.keys()) == ["m", "text"]
    # a predicate only sees what the earlier sets left
    _, vectors, _ = td.split_keys(["nested"], lambda key, leaf: leaf.ndim == 2)
    assert list(vectors.keys()) == ["v"]


def test_module_dict_in_keys_two_arguments_read_one_key() -> None:
    from tensordict.nn import TensorDictModule

    module = TensorDictModule(
        lambda x, *, y, z: x + 10 * y + 100 * z,
        in_keys={"x": "1", "y": "2", "z": "2"},
        out_keys=["t"],
    )
    assert module.in_keys == ["1", "2", "2"]
    td = module(TensorDict({"1": torch.tensor(1.0), "2": torch.tensor(2.0)}))
    assert td["t"].item() == 221.0
    from tensordict.nn import TensorDictSequential

    assert TensorDictSequential(module).in_keys == ["1", "2"]  # each key once, as upstream


def test_lazy_stack_from_list_of_dicts() -> None:
    from tensordict import LazyStackedTensorDict

    td = LazyStackedTensorDict.from_dict(
        [{"a": torch.zeros(3)}, {"a": torch.ones(4)}], stack_dim_name="t"
    )
    assert isinstance(td, LazyStackedTensorDict)
    assert td.batch_size == (2,) and td.names == ["t"]
    assert td[1]["a"].tolist() == [1.0] * 4
    keyed = {"0": {"a": torch.zeros(3)}, "1": {"a": torch.ones(3)}}
    td = LazyStackedTensorDict.from_dict(keyed, batch_size=[3], names=["t", "x"], stack_dim=1)
    assert td.batch_size == (3, 2) and td.names == ["t", "x"]
    assert td[:, 1]["a"].tolist() == [1.0] * 3
    with pytest.raises(ValueError, match=r"from_dict: pass names or stack_dim_name, not both"):
        LazyStackedTensorDict.from_dict([{"a": 0}], names=["t"], stack_dim_name="t")


def _samples() -> list[TensorDict]:
    return [TensorDict(ids=torch.arange(n), feats=torch.ones(n, 2), batch_size=[n]) for n in (2, 3)]


def test_pad_sequence_padding_value_by_key() -> None:
    from tensordict import pad_sequence

    out = pad_sequence(_samples(), padding_value={"ids": 7})
    assert out["ids"].tolist() == [[0, 1, 7], [0, 1, 2]]
    assert out["feats"][0, 2].tolist() == [0.0, 0.0]  # a key the mapping leaves out: 0
    with pytest.raises(KeyError, match=r"pad_sequence: padding_value names keys \['nope'\]"):
        pad_sequence(_samples(), padding_value={"nope": 1})


def test_pad_sequence_padding_side_left_round_trips() -> None:
    from tensordict import pad_sequence, unpad_sequence

    out = pad_sequence(_samples(), return_mask=True, padding_side="left")
    assert out["ids"].tolist() == [[0, 0, 1], [0, 1, 2]]
    assert out["masks", "ids"].tolist() == [[False, True, True], [True, True, True]]
    back = unpad_sequence(out)
    assert back[0]["ids"].tolist() == [0, 1]
    assert back[1]["feats"].shape == (3, 2)
    with pytest.raises(ValueError, match=r"pad_sequence: padding_side must be 'left' or 'right'"):
        pad_sequence(_samples(), padding_side="middle")


def test_pad_sequence_positional_order_is_upstreams() -> None:
    from tensordict import pad_sequence

    out = pad_sequence(_samples(), 0, 0.0, None, "m")  # return_mask is the 5th argument
    assert out["m", "ids"].shape == (2, 3)


def test_collate_nested_keys_become_jagged() -> None:
    from tensordict import collate

    samples = [
        TensorDict(ids=torch.ones(n), points=torch.full((n + 1, 3), float(n)), score=n)
        for n in (2, 3)
    ]
    out = collate(samples, pad_keys={"ids": 7.0}, nested_keys=["points"], mask_key="mask")
    assert out["ids"].tolist() == [[1.0, 1.0, 7.0], [1.0, 1.0, 1.0]]
    assert out["points"].is_nested
    assert out["points"][1].shape == (4, 3) and out["points"][0].unique().item() == 2.0
    assert out["score"].tolist() == [2, 3]
    with pytest.raises(ValueError, match=r"collate: keys \['ids'\] are in both pad_keys and"):
        collate(samples, pad_keys={"ids": 0.0}, nested_keys=["ids", "points"])
    with pytest.raises(ValueError, match=r"collate: mask_key holds the masks of pad_keys"):
        collate(samples, nested_keys=["ids", "points"], mask_key="mask")


def test_tensorclass_bracket_takes_skip_post_init_on_rebuild() -> None:
    from tensordict import TensorClass

    calls: list[str] = []

    class Checked(TensorClass["skip_post_init_on_rebuild"]):
        x: torch.Tensor

        def __post_init__(self) -> None:
            calls.append("checked")

    foo = Checked(x=torch.zeros(3))
    assert calls == ["checked"]
    foo.clone()
    assert calls == ["checked"]
    assert Checked._skip_post_init_on_rebuild


def test_non_tensor_data_xor_and_or() -> None:
    from tensordict import NonTensorData

    a = NonTensorData(True, batch_size=[3])
    assert (a ^ NonTensorData(True, batch_size=[3])).tolist() == [False] * 3
    assert (a | NonTensorData(False, batch_size=[3])).tolist() == [True] * 3
    with pytest.raises(TypeError, match=r"unsupported operand type\(s\) for \^"):
        _ = a ^ 1


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("a", True),
        (("a", "b"), True),
        (("a", ("b", ("c",))), True),
        (("a", 1), False),
        ((), False),
        (["a"], False),
        (1, False),
    ],
)
def test_isinstance_nested_key(key: object, expected: bool) -> None:
    from tensordict import NestedKey

    assert isinstance(key, NestedKey) is expected


def test_pack_layout_offsets_and_numel() -> None:
    td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), w=torch.ones(5, 2, 2), batch_size=[5])
    flat, layout = td.pack()
    assert layout.offsets == (0, 1, 4) and layout.numel == 8 == flat.shape[-1]
    for key, start, shape in zip(layout.keys, layout.offsets, layout.shapes, strict=True):
        width = shape.numel()
        assert torch.equal(flat[:, start : start + width].reshape(5, *shape), td[key])


def test_load_memmap_under_fake_tensor_mode(tmp_path: object) -> None:
    from torch._subclasses import FakeTensor, FakeTensorMode

    td = TensorDict(a=torch.zeros(3), nested=TensorDict(b=torch.ones(3, 2, dtype=torch.int16)))
    td.memmap(str(tmp_path))
    with FakeTensorMode():
        loaded = TensorDict.load_memmap(str(tmp_path))
        leaf = loaded["nested", "b"]
        assert isinstance(loaded["a"], FakeTensor) and isinstance(leaf, FakeTensor)
        assert leaf.shape == (3, 2) and leaf.dtype == torch.int16
    assert TensorDict.load_memmap(str(tmp_path))["nested", "b"].sum().item() == 6


def test_from_arrow_variable_length_list_columns() -> None:
    pa = pytest.importorskip("pyarrow")
    from tensordict import from_arrow

    table = pa.table(
        {
            "ids": pa.array([[1, 2], [3], []]),
            "words": pa.array([["a"], ["b", "c"], []]),
        }
    )
    td = from_arrow(table)
    assert [row.tolist() for row in td["ids"].unbind(0)] == [[1, 2], [3], []]
    assert td["ids"].dtype == torch.int64 and td.batch_size == (3,)
    assert td.get("words").tolist() == [["a"], ["b", "c"], []]
    assert [row.tolist() for row in from_arrow(table.slice(1, 2))["ids"].unbind(0)] == [[3], []]
