"""TypedTensorDict: declared fields, checked construction, operations, from_tensordict."""

import copy
import pickle
import typing
from collections.abc import Callable
from typing import ClassVar, NotRequired

import pytest
import torch
from torch import Tensor

import tensordict
from tensordict import TensorDict, TypedTensorDict


class Predictor(TypedTensorDict):
    eta: Tensor
    X: Tensor


class Observed(Predictor):
    y: Tensor
    noise: NotRequired[Tensor]
    scale: ClassVar[float] = 2.0


class Survival(Observed):
    event: Tensor


class Holder(TypedTensorDict):
    state: Predictor
    extra: TensorDict


def _state() -> Predictor:
    torch.manual_seed(0)
    return Predictor(eta=torch.randn(5, 3), X=torch.randn(5, 4), batch_size=[5])


# ------------------------------------------------------------------ declaration
def test_fields_merge_along_bases() -> None:
    assert Predictor._fields == ("eta", "X")
    assert Observed._fields == ("eta", "X", "y", "noise")
    assert Survival._fields == ("eta", "X", "y", "noise", "event")
    assert Observed.__required_keys__ == frozenset({"eta", "X", "y"})
    assert Observed.__optional_keys__ == frozenset({"noise"})
    assert Survival.__expected_keys__ == frozenset({"eta", "X", "y", "noise", "event"})
    assert Observed.scale == 2.0  # a ClassVar is no field
    assert TypedTensorDict._fields == ()


def test_string_annotations() -> None:
    # what `from __future__ import annotations` gives the class body
    cls = type(
        "Lazy",
        (TypedTensorDict,),
        {
            "__annotations__": {
                "a": "Tensor",
                "b": "NotRequired[Tensor]",
                "c": "typing.ClassVar[int]",
                "d": "typing_extensions.NotRequired[Tensor]",
            }
        },
    )
    assert cls._fields == ("a", "b", "d")
    assert cls.__required_keys__ == frozenset({"a"})
    assert cls.__optional_keys__ == frozenset({"b", "d"})


def test_field_shadowing_a_method_is_refused() -> None:
    with pytest.raises(
        AttributeError,
        match=r"Bad: field\(s\) \['data', 'keys'\]: each shadows a TensorDictBase attribute",
    ):
        type("Bad", (TypedTensorDict,), {"__annotations__": {"data": Tensor, "keys": Tensor}})


def test_isinstance_chain() -> None:
    obs = Observed(eta=torch.zeros(2), X=torch.zeros(2), y=torch.zeros(2), batch_size=[2])
    for cls in (Observed, Predictor, TypedTensorDict, TensorDict, tensordict.TensorDictBase):
        assert isinstance(obs, cls)


# ------------------------------------------------------------------ construction
def test_construction_stores_the_fields() -> None:
    eta, x = torch.randn(5, 3), torch.randn(5, 4)
    state = Predictor(eta=eta, X=x, batch_size=[5], names=["n"])
    assert state.batch_size == torch.Size([5])
    assert state.names == ["n"]
    assert state["eta"] is eta and state.X is x
    assert list(state.keys()) == ["eta", "X"]
    on_cpu = Predictor(eta=eta, X=x, batch_size=5, device="cpu")
    assert on_cpu.device == torch.device("cpu")
    locked = Predictor(eta=eta, X=x, batch_size=[5], lock=True)
    assert locked.is_locked


def test_construction_from_a_mapping() -> None:
    eta, x = torch.randn(2), torch.randn(2)
    state = Predictor({"eta": eta}, X=x, batch_size=[2])
    assert torch.equal(state.eta, eta) and torch.equal(state.X, x)
    from_dict = Predictor.from_dict({"eta": eta, "X": x}, batch_size=[2])
    assert type(from_dict) is Predictor
    with pytest.raises(TypeError, match=r"Predictor.__init__: missing required field\(s\) \['X'\]"):
        Predictor.from_dict({"eta": eta}, batch_size=[2])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (
            {"eta": torch.zeros(5)},
            r"Predictor.__init__: missing required field\(s\) \['X'\]; required: \['eta', 'X'\]",
        ),
        ({}, r"Predictor.__init__: missing required field\(s\) \['eta', 'X'\]"),
        (
            {"eta": torch.zeros(5), "X": torch.zeros(5), "z": torch.zeros(5)},
            r"Predictor.__init__: unexpected field\(s\) \['z'\]; fields are \['eta', 'X'\]",
        ),
    ],
)
def test_construction_errors(kwargs: dict[str, Tensor], match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Predictor(**kwargs, batch_size=[5])


def test_construction_errors_name_the_class() -> None:
    with pytest.raises(TypeError, match=r"Predictor.__init__: field\(s\) \['X'\] given both"):
        Predictor({"X": torch.zeros(2)}, eta=torch.zeros(2), X=torch.zeros(2), batch_size=[2])
    with pytest.raises(TypeError, match=r"Predictor.__init__: source must be a mapping.*list"):
        Predictor([1, 2], batch_size=[2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Predictor.__init__: shape \(4, 3\) of key 'eta'"):
        Predictor(eta=torch.zeros(4, 3), X=torch.zeros(5), batch_size=[5])
    with pytest.raises(ValueError, match=r"Predictor.__init__: batch_size must not hold negative"):
        Predictor(eta=torch.zeros(4), X=torch.zeros(4), batch_size=[-1])


def test_not_required_field() -> None:
    base = {"eta": torch.zeros(3), "X": torch.zeros(3), "y": torch.ones(3)}
    obs = Observed(**base, batch_size=[3])
    assert "noise" not in obs
    with pytest.raises(AttributeError, match=r"Observed.noise: the field 'noise' is declared but"):
        _ = obs.noise
    obs.noise = torch.full((3,), 0.5)
    assert torch.equal(obs["noise"], torch.full((3,), 0.5))
    del obs.noise
    assert "noise" not in obs
    given = Observed(**base, noise=torch.ones(3), batch_size=[3])
    assert torch.equal(given.noise, torch.ones(3))


# ------------------------------------------------------------------ access
def test_attribute_assignment_is_a_checked_entry() -> None:
    state = _state()
    new = torch.ones(5, 3)
    state.eta = new
    assert state["eta"] is new
    assert "eta" not in vars(state)  # stored as an entry, not an instance attribute
    with pytest.raises(ValueError, match=r"Predictor.eta: shape \(4, 3\) of key 'eta' does not"):
        state.eta = torch.ones(4, 3)
    with pytest.raises(ValueError, match=r"Predictor\[\]=: shape \(4,\) of key 'X' does not"):
        state["X"] = torch.ones(4)
    state.lock_()
    with pytest.raises(RuntimeError, match=r"Predictor.eta: Cannot modify locked TensorDict"):
        state.eta = torch.zeros(5, 3)


def test_undeclared_keys_by_item() -> None:
    state = _state()
    state["free"] = torch.zeros(5)
    assert torch.equal(state["free"], torch.zeros(5))
    with pytest.raises(AttributeError):
        _ = state.free  # type: ignore[attr-defined]


def test_nested_entries() -> None:
    inner = _state()
    holder = Holder(state=inner, extra={"a": torch.zeros(5, 2)}, batch_size=[5])
    assert type(holder["state"]) is Predictor
    assert type(holder.extra) is TensorDict  # a nested dict is a plain TensorDict
    holder["made", "leaf"] = torch.ones(5)
    assert type(holder["made"]) is TensorDict
    holder["mapped"] = {"b": torch.ones(5)}
    assert type(holder["mapped"]) is TensorDict
    assert torch.equal(holder["state", "eta"], inner.eta)
    assert type(holder.clone()["state"]) is Predictor


# ------------------------------------------------------------------ operations
# (operation on the collection, the same operation on one leaf of batch_size [5])
OPS: list[tuple[str, Callable[[typing.Any], typing.Any], Callable[[Tensor], Tensor]]] = [
    ("clone", lambda t: t.clone(), lambda x: x.clone()),
    ("to", lambda t: t.to(torch.float64), lambda x: x.to(torch.float64)),
    ("slice", lambda t: t[1:3], lambda x: x[1:3]),
    ("int", lambda t: t[0].unsqueeze(0), lambda x: x[0].unsqueeze(0)),
    ("mask", lambda t: t[torch.tensor([1, 0, 1, 1, 0]).bool()], lambda x: x[[0, 2, 3]]),
    ("reshape", lambda t: t.reshape(5, 1), lambda x: x.reshape(5, 1, *x.shape[1:])),
    ("unsqueeze", lambda t: t.unsqueeze(0), lambda x: x.unsqueeze(0)),
    ("expand", lambda t: t.expand(2, 5), lambda x: x.expand(2, *x.shape)),
    ("stack", lambda t: torch.stack([t, t], 1), lambda x: torch.stack([x, x], 1)),
    ("cat", lambda t: torch.cat([t, t]), lambda x: torch.cat([x, x])),
    ("apply", lambda t: t.apply(lambda v: v * 2), lambda x: x * 2),
    ("add", lambda t: t + 1, lambda x: x + 1),
    ("mean", lambda t: t.mean(dim=0, keepdim=True), lambda x: x.mean(dim=0, keepdim=True)),
    ("split", lambda t: t.split(2)[1], lambda x: x.split(2)[1]),
    ("unbind", lambda t: t.unbind(0)[3].unsqueeze(0), lambda x: x[3].unsqueeze(0)),
    ("where", lambda t: t.where(torch.arange(5) > 2, t * 0), lambda x: x),  # mask below
    ("pickle", lambda t: pickle.loads(pickle.dumps(t)), lambda x: x),
    ("deepcopy", copy.deepcopy, lambda x: x),
]


@pytest.mark.parametrize(("name", "op", "leaf_op"), OPS, ids=[o[0] for o in OPS])
def test_operations_keep_the_class_and_match_torch(
    name: str, op: Callable[[typing.Any], typing.Any], leaf_op: Callable[[Tensor], Tensor]
) -> None:
    state = _state()
    out = op(state)
    assert type(out) is Predictor
    assert list(out.keys()) == ["eta", "X"]
    for key in ("eta", "X"):
        expected = leaf_op(state[key])
        if name == "where":
            mask = (torch.arange(5) > 2).reshape(5, *[1] * (state[key].dim() - 1))
            expected = torch.where(mask, state[key], state[key] * 0)
        torch.testing.assert_close(out[key], expected, rtol=0, atol=0)
        torch.testing.assert_close(getattr(out, key), expected, rtol=0, atol=0)


def test_operation_errors_name_the_class() -> None:
    with pytest.raises(RuntimeError, match=r"Predictor.reshape: "):
        _state().reshape(7)


def test_spreading_as_a_mapping() -> None:
    state = _state()
    assert {**state}.keys() == {"eta", "X"}
    obs = Observed(**state, y=torch.zeros(5), batch_size=state.batch_size)
    assert type(obs) is Observed and obs.eta is state.eta


def test_pickle_keeps_lock_and_names() -> None:
    state = _state()
    state.names = ["b"]
    state.lock_()
    back = pickle.loads(pickle.dumps(state))
    assert type(back) is Predictor and back.is_locked and back.names == ["b"]
    assert torch.equal(back.eta, state.eta)


def test_save_and_load(tmp_path: typing.Any) -> None:
    state = _state()
    state.memmap(tmp_path / "m")
    loaded = tensordict.load_memmap(tmp_path / "m")
    assert type(loaded) is Predictor
    assert torch.equal(loaded.X, state.X)


# ------------------------------------------------------------------ from_tensordict
def test_from_tensordict_shares_entries_both_ways() -> None:
    td = TensorDict(
        eta=torch.zeros(5, 3), X=torch.zeros(5, 4), other=torch.zeros(5), batch_size=[5]
    )
    state = Predictor.from_tensordict(td)
    assert type(state) is Predictor and state.batch_size == td.batch_size
    assert state.eta is td["eta"]
    assert "other" in state  # keys that are not fields are kept
    state.eta = torch.ones(5, 3)
    assert torch.equal(td["eta"], torch.ones(5, 3))
    td["X"] = torch.full((5, 4), 2.0)
    assert torch.equal(state.X, torch.full((5, 4), 2.0))
    state.X.add_(1)  # in place on the shared tensor
    assert torch.equal(td["X"], torch.full((5, 4), 3.0))
    td["new"] = torch.ones(5)
    assert "new" in state
    del state["other"]
    assert "other" not in td


def test_from_tensordict_check() -> None:
    td = TensorDict(eta=torch.zeros(5, 3), batch_size=[5])
    with pytest.raises(
        TypeError,
        match=r"Predictor.from_tensordict: missing required field\(s\) \['X'\]; the TensorDict "
        r"has keys \['eta'\]",
    ):
        Predictor.from_tensordict(td)
    partial = Predictor.from_tensordict(td, check=False)
    with pytest.raises(AttributeError, match=r"Predictor.X: the field 'X' is declared but not"):
        _ = partial.X
    partial.X = torch.zeros(5, 4)
    assert "X" in td


def test_from_tensordict_keeps_the_lock() -> None:
    td = TensorDict(eta=torch.zeros(2), X=torch.zeros(2), batch_size=[2]).lock_()
    state = Predictor.from_tensordict(td)
    assert state.is_locked
    with pytest.raises(RuntimeError, match=r"Predictor.eta: Cannot modify locked"):
        state.eta = torch.ones(2)


def test_from_tensordict_refuses_a_mapping() -> None:
    with pytest.raises(
        TypeError,
        match=r"Predictor.from_tensordict: expected a TensorDict or a lazy stack of them .*got dict",
    ):
        Predictor.from_tensordict({"eta": torch.zeros(3), "X": torch.zeros(3)})  # type: ignore[arg-type]


# ------------------------------------------------------------------ class options
class Frozen(TypedTensorDict["frozen"]):
    x: Tensor


class FrozenChild(Frozen):
    y: Tensor


class Thawed(FrozenChild, frozen=False):
    pass


def test_frozen_option() -> None:
    assert TypedTensorDict["frozen"] is TypedTensorDict["frozen"]
    assert Frozen._fields == ("x",) and FrozenChild._fields == ("x", "y")
    frozen = Frozen(x=torch.zeros(2), batch_size=[2])
    assert frozen.is_locked
    with pytest.raises(RuntimeError, match=r"Frozen.x: Cannot modify locked TensorDict"):
        frozen.x = torch.ones(2)
    both = {"x": torch.zeros(2), "y": torch.zeros(2)}
    assert FrozenChild(**both, batch_size=[2]).is_locked  # the option is inherited
    assert not Thawed(**both, batch_size=[2]).is_locked  # and can be turned off


class Shadow(TypedTensorDict["shadow", "frozen"]):
    data: Tensor
    other: Tensor


def test_shadow_option() -> None:
    assert Shadow._shadow and Shadow._frozen
    assert TypedTensorDict["frozen", "shadow"] is TypedTensorDict["shadow", "frozen"]
    data = torch.randn(3, 2)
    shadow = Shadow(data=data, other=torch.zeros(3), batch_size=[3])
    assert shadow.data is data and shadow.is_locked
    shadow.unlock_()
    shadow.data = torch.ones(3, 2)
    assert torch.equal(shadow["data"], torch.ones(3, 2))
    assert torch.equal(shadow.reshape(3, 1)["other"], torch.zeros(3, 1))


def test_recorded_options() -> None:
    cls = TypedTensorDict["autocast", "nocast", "tensor_only"]
    assert cls._autocast and cls._nocast and cls._tensor_only and not cls._frozen


def test_unknown_option() -> None:
    with pytest.raises(
        ValueError,
        match=r"TypedTensorDict\[...\]: Unknown TypedTensorDict option 'bogus'; options are "
        r"\['frozen', 'shadow', 'autocast', 'nocast', 'tensor_only'\]",
    ):
        TypedTensorDict["bogus"]


def test_missing_key_errors_name_the_class() -> None:
    state = _state()
    with pytest.raises(KeyError, match=r"Predictor\[\]: key 'nope' was not found in"):
        _ = state["nope"]
    with pytest.raises(KeyError, match=r"Predictor\[\]: .*'nope'"):
        _ = state["nope", "deeper"]


def test_non_tensor_field_reads_its_value() -> None:
    class Tagged(TypedTensorDict):
        x: Tensor
        tag: str

    tagged = Tagged(x=torch.zeros(2), tag="a", batch_size=[2])
    assert tagged.tag == "a" == tagged["tag"]
    tagged.tag = "b"
    assert tagged["tag"] == "b"
