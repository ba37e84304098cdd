"""``pack`` and ``PackLayout``: the catalogue round trip, the column oracle, layouts, errors."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tdnn import TensorDictParams
from tensordict import PackLayout, TensorDict, lazy_stack
from tests.catalogue import CATALOGUE, RAGGED, Sample, assert_same, leaves
from tests.properties.test_roundtrips import tensordicts

PACKABLE = {
    name: make
    for name, make in CATALOGUE.items()
    if name not in ("with_non_tensor", "bool_int", "tensorclass")
}


def _plain(td: Any) -> Any:
    return td if isinstance(td, TensorDict) else td.to_tensordict()


@pytest.mark.parametrize("name", sorted(PACKABLE))
@pytest.mark.parametrize("dim", [-1, 0])
def test_catalogue_round_trip(name: str, dim: int) -> None:
    td = PACKABLE[name]()
    flat, layout = td.pack(dim)
    assert flat.is_contiguous()
    out = layout.unpack(flat)
    assert type(out) is TensorDict
    assert_same(out, _plain(td))
    assert out.device == td.device


@pytest.mark.parametrize("name", sorted(PACKABLE))
def test_columns_follow_sorted_keys(name: str) -> None:
    """The oracle: each leaf, reshaped to (*batch, -1), sits in its columns, in key order."""
    td = PACKABLE[name]()
    flat, layout = td.pack()
    nb = td.batch_dims
    start = 0
    keys = sorted(td.keys(True, True), key=lambda k: k if isinstance(k, str) else ".".join(k))
    assert layout.keys == tuple(keys)
    for key in keys:
        leaf = td.get(key)
        width = math.prod(leaf.shape[nb:])
        torch.testing.assert_close(
            flat[..., start : start + width],
            leaf.reshape(*td.batch_size, width),
            rtol=0,
            atol=0,
        )
        assert layout.shapes[layout.keys.index(key)] == leaf.shape[nb:]
        start += width
    assert flat.shape == (*td.batch_size, start)


def test_tensorclass_comes_back_as_its_class() -> None:
    td = CATALOGUE["tensorclass"]().filter_non_tensor_data()
    flat, layout = td.pack()
    out = layout.unpack(flat)
    assert type(out) is Sample and layout.cls is Sample
    torch.testing.assert_close(out.obs, td.obs)
    torch.testing.assert_close(out.extra["r"], td.extra["r"])


def test_other_subclasses_come_back_as_tensordict() -> None:
    params = TensorDictParams(TensorDict(w=torch.randn(3, 2), batch_size=[3]))
    flat, layout = params.pack()
    out = layout.unpack(flat)
    assert type(out) is TensorDict and layout.cls is None
    torch.testing.assert_close(out["w"], params["w"].data)


def test_nested_batch_and_empty_collections_are_rebuilt() -> None:
    td = TensorDict(
        a=torch.randn(2, 3),
        n=TensorDict(
            x=torch.randn(2, 5, 4), empty=TensorDict(batch_size=[2, 5, 6]), batch_size=[2, 5]
        ),
        batch_size=[2],
    )
    flat, layout = td.pack()
    assert layout.nested == (
        ("n", torch.Size([5]), None),
        (("n", "empty"), torch.Size([5, 6]), None),
    )
    out = layout.unpack(flat)
    assert out["n"].batch_size == (2, 5)
    assert out["n", "empty"].batch_size == (2, 5, 6)
    assert_same(out, td)


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2, -3])
def test_dim_places_the_packed_dimension_as_torch_stack(dim: int) -> None:
    td = CATALOGUE["two_dims"]()
    flat, layout = td.pack(dim)
    expected = torch.stack([torch.zeros(td.batch_size)] * layout.num_features, dim).shape
    assert flat.shape == expected and flat.is_contiguous()
    assert layout.dim < 0
    assert_same(layout.unpack(flat), td)


def test_positive_and_negative_dims_give_equal_layouts() -> None:
    td = CATALOGUE["flat"]()
    assert td.pack(1)[1] == td.pack(-1)[1]
    assert hash(td.pack(1)[1]) == hash(td.pack(-1)[1])
    assert td.pack(0)[1] != td.pack(-1)[1]


def test_unpack_extra_leading_dims_become_batch_dims() -> None:
    td = CATALOGUE["nested"]()
    flat, layout = td.pack()
    rows = torch.stack([flat, flat * 2, flat * 3])
    out = layout.unpack(rows)
    assert out.batch_size == (3, 4)
    assert out["n"].batch_size == (3, 4)
    assert_same(out[1], td * 2)


def test_unpack_leaves_are_views_for_the_last_dim() -> None:
    td = CATALOGUE["nested"]()
    flat, layout = td.pack()
    out = layout.unpack(flat)
    out["a"].zero_()
    assert (flat[..., : td["a"].shape[-1]] == 0).all()


def test_layout_reuse_follows_its_column_order() -> None:
    layout = PackLayout(("b", "a"), ((), (3,)))
    td = CATALOGUE["flat"]()
    flat, same = td.pack(layout=layout)
    assert same is layout
    torch.testing.assert_close(flat[:, 0], td["b"])
    torch.testing.assert_close(flat[:, 1:], td["a"])
    assert_same(layout.unpack(flat), td)


def test_gradients_flow_through_pack_and_unpack() -> None:
    td = CATALOGUE["requires_grad"]()
    flat, layout = td.pack()
    (layout.unpack(flat * 2)["w"].sum()).backward()
    torch.testing.assert_close(td["w"].grad, torch.full((4, 3), 2.0))


def test_lazy_stack_packs_as_its_dense_equivalent() -> None:
    stack = CATALOGUE["lazy_same"]()
    dense = stack.to_tensordict()
    flat, layout = stack.pack()
    flat_dense, layout_dense = dense.pack()
    assert layout == layout_dense
    torch.testing.assert_close(flat, flat_dense, rtol=0, atol=0)


def test_ragged_lazy_stack_raises() -> None:
    with pytest.raises(RuntimeError):
        RAGGED["lazy_ragged"]().pack()


def test_no_leaves_packs_to_zero_features() -> None:
    td = TensorDict(n=TensorDict(batch_size=[3]), batch_size=[3])
    flat, layout = td.pack()
    assert flat.shape == (3, 0) and layout.keys == ()
    out = layout.unpack(flat)
    assert out.batch_size == (3,) and list(out.keys()) == ["n"]


def test_layout_normalises_its_fields() -> None:
    layout = PackLayout((("a",), ("b", ("c",))), ([2], (3, 1)), nested=((("b",), [], None),))
    assert layout.keys == ("a", ("b", "c"))
    assert layout.shapes == (torch.Size([2]), torch.Size([3, 1]))
    assert layout.nested == (("b", torch.Size([]), None),)
    assert layout.num_features == 5
    assert {layout: 1}[PackLayout(("a", ("b", "c")), ((2,), (3, 1)), nested=(("b", (), None),))]


def test_non_tensor_entries_are_refused() -> None:
    with pytest.raises(
        TypeError, match=r"pack: 'text' holds non-tensor data.*filter_non_tensor_data"
    ):
        CATALOGUE["with_non_tensor"]().pack()


def test_mixed_dtypes_are_refused() -> None:
    with pytest.raises(TypeError, match=r"pack: every leaf must share one dtype.*float32.*int64"):
        CATALOGUE["bool_int"]().pack()
    flat, _ = CATALOGUE["bool_int"]().float().pack()
    assert flat.dtype == torch.float32


@pytest.mark.parametrize("dim", [2, -3, 1.0])
def test_dim_out_of_range(dim: Any) -> None:
    with pytest.raises(
        IndexError,
        match=r"pack: dim .* out of range for 1 batch dims \(expected an int in \[-2, 1\]\)",
    ):
        CATALOGUE["flat"]().pack(dim)


def test_layout_mismatches_are_named() -> None:
    td = CATALOGUE["flat"]()
    _, layout = td.pack()
    with pytest.raises(KeyError, match=r"missing \['b'\], not in the layout \['c'\]"):
        td.rename_keys({"b": "c"}).pack(layout=layout)
    with pytest.raises(
        ValueError, match=r"pack: leaf 'a' has feature shape \(2,\), the layout expects \(3,\)"
    ):
        TensorDict(a=torch.zeros(4, 2), b=torch.zeros(4), batch_size=[4]).pack(layout=layout)
    with pytest.raises(ValueError, match=r"pack: dim -2 does not match the layout's dim -1"):
        td.pack(0, layout=layout)
    with pytest.raises(TypeError, match=r"pack: layout must be a PackLayout, got dict"):
        td.pack(layout={})  # type: ignore[arg-type]


def test_unpack_errors() -> None:
    _, layout = CATALOGUE["flat"]().pack()
    with pytest.raises(
        ValueError, match=r"PackLayout.unpack: the packed dim -1 has size 3, expected 4 features"
    ):
        layout.unpack(torch.zeros(4, 3))
    with pytest.raises(TypeError, match=r"PackLayout.unpack: expected a tensor, got list"):
        layout.unpack([1, 2])  # type: ignore[arg-type]
    _, layout0 = CATALOGUE["two_dims"]().pack(0)
    with pytest.raises(
        ValueError,
        match=r"PackLayout.unpack: the packed dim is -3 but the tensor has shape \(4, 3\)",
    ):
        layout0.unpack(torch.zeros(4, 3))


def test_layout_construction_errors() -> None:
    with pytest.raises(ValueError, match=r"PackLayout: 2 keys but 1 shapes"):
        PackLayout(("a", "b"), ((1,),))
    with pytest.raises(ValueError, match=r"PackLayout: a key is listed twice"):
        PackLayout(("a", ("a",)), ((1,), (1,)))
    with pytest.raises(ValueError, match=r"PackLayout: dim must be a negative int"):
        PackLayout(("a",), ((1,),), dim=0)


def test_pack_under_vmap_and_compile() -> None:
    td = CATALOGUE["nested"]()
    _, layout = td.pack()

    def step(t: TensorDict) -> torch.Tensor:
        return t.pack(layout=layout)[0]

    torch.testing.assert_close(torch.vmap(step)(td), td.pack()[0])
    compiled = torch.compile(
        lambda f: layout.unpack(f)["n", "m", "c"] + 1, fullgraph=True, backend="aot_eager"
    )
    flat = td.pack()[0]
    torch.testing.assert_close(compiled(flat), td["n", "m", "c"] + 1)


def test_lazy_stack_of_tensorclasses_member_classes_are_kept() -> None:
    members = [Sample(torch.randn(3), TensorDict(r=torch.randn(2)), "x") for _ in range(2)]
    stack = lazy_stack(members).filter_non_tensor_data()
    flat, layout = stack.pack()
    assert flat.shape == (2, 5)
    assert_same(_plain(layout.unpack(flat)), _plain(stack))


@settings(max_examples=60, deadline=None)
@given(tensordicts(), st.data())
def test_round_trip_property(td: TensorDict, data: st.DataObject) -> None:
    td = td.float()
    dim = data.draw(st.integers(-(td.batch_dims + 1), td.batch_dims))
    flat, layout = td.pack(dim)
    out = layout.unpack(flat)
    assert_same(out, td)
    assert td.pack(dim, layout=layout)[1] is layout
    assert len(leaves(td)) == len(layout.keys)


def test_a_layout_with_other_nested_batch_shapes_is_refused() -> None:
    wide = TensorDict(n=TensorDict(x=torch.zeros(3, 4), batch_size=[3, 4]), batch_size=[3])
    narrow = TensorDict(n=TensorDict(x=torch.zeros(3, 4), batch_size=[3]), batch_size=[3])
    _, layout = wide.pack()
    with pytest.raises(ValueError, match=r"pack: the nested collections .* differ from the layout"):
        narrow.pack(layout=layout)


def test_a_hand_made_layout_without_nested_entries_keeps_every_leaf() -> None:
    layout = PackLayout(("a", ("b", "c")), ((2,), (1,)))
    out = layout.unpack(torch.arange(6.0).view(2, 3))
    assert out["b", "c"].tolist() == [[2.0], [5.0]]
    assert out["b"].batch_size == (2,)
