"""Parity with upstream 0.15.3 outside the conformance tiers: deprecated module aliases,
the type aliases of ``tensordict.utils``, and a few tensorclass / module / compile cases."""

from __future__ import annotations

import collections
import functools
import importlib
import math
import typing
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import tdnn
import tensordict
from tensordict import (
    LazyStackedTensorDict,
    NonTensorData,
    TensorDict,
    tensorclass,
    unravel_key,
)

# (module, name, check of the value)
_ALIASES = [
    ("tensordict.utils", "unravel_keys", lambda f: f("a", ("b", ("c",))) == ("a", ("b", "c"))),
    ("tensordict.utils", "prod", lambda f: f([2, 3, 4]) == 24),
    ("tensordict.utils", "is_nested_key", lambda f: f(["a", "b"]) and not f(("a", ("b",)))),
    ("tensordict.utils", "is_seq_of_nested_key", lambda f: f([]) and not f([1])),
    ("tensordict.tensordict", "is_nested_key", lambda f: f("a") and not f(())),
    ("tensordict.tensordict", "is_seq_of_nested_key", lambda f: f(["a", ("b", "c")])),
    ("tensordict.utils", "is_namedtuple", lambda f: f(collections.namedtuple("P", "x")(1))),
    ("tensordict.utils", "is_namedtuple_class", lambda f: not f(tuple)),
    (
        "tensordict.utils",
        "NUMPY_TO_TORCH_DTYPE_DICT",
        lambda d: d[np.dtype("int16")] is torch.int16 and len(d) == 14,
    ),
    ("tensordict.utils", "TORCH_TO_NUMPY_DTYPE_DICT", lambda d: d[torch.bool] == np.dtype(bool)),
    ("tensordict.nn.utils", "StrEnum", lambda c: issubclass(c, str)),
    ("tensordict.nn.distributions", "distributions_maps", lambda d: "delta" in d),
    (
        "tensordict.nn.distributions.truncated_normal",
        "CONST_LOG_SQRT_2PI_E",
        lambda c: c == pytest.approx(0.5 * math.log(2 * math.pi * math.e)),
    ),
]


@pytest.mark.parametrize(
    ("module", "name", "check"), _ALIASES, ids=[f"{m}.{n}" for m, n, _ in _ALIASES]
)
def test_deprecated_alias_warns_and_works(module: str, name: str, check: object) -> None:
    mod = importlib.import_module(module)
    with pytest.warns(
        DeprecationWarning, match=rf"{module.rsplit('.', maxsplit=1)[-1]}\.{name} is deprecated"
    ):
        value = getattr(mod, name)
    assert callable(check) and check(value)


def test_unravel_keys_matches_unravel_key() -> None:
    with pytest.warns(DeprecationWarning, match="use unravel_key or unravel_key_list"):
        from tensordict.utils import unravel_keys  # type: ignore[attr-defined]
    for key in ["a", ("a",), ("a", ("b", ("c",)))]:
        assert unravel_keys(key) == unravel_key(key)


def test_unknown_module_attribute_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'tensordict.utils' has no attribute 'nope'"):
        tensordict.utils.nope  # type: ignore[attr-defined]
    assert not hasattr(tensordict.utils, "KeyDependentDefaultDict")


def test_utils_type_aliases_and_buffer() -> None:
    from tensordict.utils import Buffer, DeviceType, IndexType

    assert Buffer is torch.nn.Buffer
    assert isinstance(torch.device("cpu"), DeviceType)
    assert {slice, type(None), torch.Tensor} <= set(typing.get_args(IndexType))
    assert {"Buffer", "DeviceType", "IndexType"} <= set(tensordict.utils.__all__)


# ---------------------------------------------------------------- tensorclass, modules


def test_from_tensordict_runs_post_init() -> None:
    @tensorclass
    class Doubled:
        x: torch.Tensor

        def __post_init__(self) -> None:
            self.x = self.x * 2

    td = TensorDict(x=torch.ones(3), batch_size=[3])
    out = Doubled.from_tensordict(td)
    torch.testing.assert_close(out.x, torch.full((3,), 2.0))
    torch.testing.assert_close(out[0].x, torch.tensor(2.0))  # a rebuild: not again
    lazy = Doubled.from_tensordict(LazyStackedTensorDict(td[0], td[1], td[2]))
    torch.testing.assert_close(torch.stack([m.x for m in lazy.tensordicts]), out.x)


def _prob_module(kwargs: Any) -> tdnn.ProbabilisticTensorDictModule:
    return tdnn.ProbabilisticTensorDictModule(
        in_keys=["loc"],
        out_keys=["sample"],
        distribution_class=torch.distributions.Normal,
        distribution_kwargs=kwargs,
        default_interaction_type=tdnn.InteractionType.DETERMINISTIC,
    )


def test_prob_module_takes_distribution_kwargs_as_tensordict_params() -> None:
    params = tdnn.TensorDictParams(
        TensorDict(scale=2.0, validate_args=NonTensorData(False)), no_convert=True
    )
    module = _prob_module(params)
    assert [b.item() for b in module.buffers()] == [2.0]  # its tensors are buffers
    dist = module.get_dist(TensorDict(loc=torch.zeros(3)))
    plain = torch.distributions.Normal(torch.zeros(3), 2.0, validate_args=False)
    torch.testing.assert_close(dist.stddev, plain.stddev)
    params["scale"].fill_(3.0)  # read at each call: the current value
    torch.testing.assert_close(
        module.get_dist(TensorDict(loc=torch.zeros(3))).stddev.max(), torch.tensor(3.0)
    )
    mapping = {"scale": torch.tensor(1.0)}
    assert _prob_module(mapping).distribution_kwargs is not mapping  # a dict is copied


# --------------------------------------------------------------------- torch.compile


@pytest.fixture
def fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compiled_shallow_clone_of_locked_td_and_fresh_keys(fresh_dynamo: None) -> None:
    def fn(td: TensorDict) -> tuple[TensorDict, list[str]]:
        return td.clone(recurse=False), list(TensorDict(a=td["a"]).keys())

    td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2]).lock_()
    out, keys = torch.compile(fn, fullgraph=True, backend="eager")(td)
    assert out["a"] is td["a"] and out["n", "b"] is td["n", "b"]
    assert not out.is_locked and keys == ["a"]


def test_compiled_prob_module_with_tensordict_params(fresh_dynamo: None) -> None:
    params = tdnn.TensorDictParams(TensorDict(scale=1.0), no_convert=True)
    module = _prob_module(params)
    td = TensorDict(loc=torch.randn(3))
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(td.clone())["sample"], td["loc"])


def test_nested_compile_region_takes_a_tensordict(fresh_dynamo: None) -> None:
    @torch.compiler.nested_compile_region
    def step(td: TensorDict) -> TensorDict:
        return td.set("x", td["x"] + 1)

    def fn(td: TensorDict) -> torch.Tensor:
        return step(step(td.clone()))["x"]

    td = TensorDict(x=torch.zeros(2), batch_size=[2])
    torch.testing.assert_close(torch.compile(fn, backend="eager")(td), torch.full((2,), 2.0))


def test_export_with_a_symbolic_batch_size(fresh_dynamo: None) -> None:
    class Build(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> TensorDict:
            return TensorDict({"x": x, "y": x * 2}, batch_size=[x.shape[0], x.shape[1]])

    batch = torch.export.Dim("batch", min=1)
    strict = torch.export.export(
        Build(), (torch.zeros(2, 6, 8),), dynamic_shapes=({0: batch},), strict=True
    )
    out = strict.module()(torch.ones(4, 6, 8))
    assert out.batch_size == torch.Size([4, 6])
    torch.testing.assert_close(out["y"], torch.full((4, 6, 8), 2.0))

    class Scalar(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> TensorDict:
            return TensorDict({"x": x}, batch_size=x.shape[0])

    loose = torch.export.export(
        Scalar(), (torch.zeros(2, 3),), strict=False, dynamic_shapes=({0: batch},)
    )
    assert loose.module()(torch.zeros(5, 3)).batch_size == torch.Size([5])


def test_module_with_no_out_keys_may_return_none() -> None:
    seen: list[int] = []
    module = tdnn.TensorDictModule(lambda: seen.append(1), in_keys=[], out_keys=[])
    td = TensorDict(a=torch.zeros(2), batch_size=[2])
    assert module(td) is td and seen == [1] and list(td.keys()) == ["a"]
    with pytest.raises(RuntimeError, match=r"returned None for out_keys \['b'\]"):
        tdnn.TensorDictModule(lambda a: None, in_keys=["a"], out_keys=["b"])(td)


@pytest.mark.parametrize("as_class", [False, True])
def test_to_as_a_context_writes_back(as_class: bool) -> None:
    @tensorclass
    class XY:
        x: torch.Tensor
        y: torch.Tensor | None = None

    td: Any = TensorDict(x=torch.zeros(3), batch_size=[3])
    if as_class:
        td = XY.from_tensordict(td)
    with td.to(torch.float64) as moved:
        assert moved["x"].dtype == torch.float64
        moved["x"] = moved["x"] + 1
        moved["y"] = moved["x"] * 2
    torch.testing.assert_close(td["x"], torch.ones(3))  # back to its float32
    torch.testing.assert_close(td["y"], torch.full((3,), 2.0, dtype=torch.float64))  # new
    with td.to("cpu") as moved:  # a device move keeps the dtypes it finds
        moved["x"] = moved["x"].double()
    assert td["x"].dtype == torch.float64


def test_legacy_aggregated_log_prob_writes_each_member_entry() -> None:
    dists = {"a": torch.distributions.Normal, ("n", "b"): torch.distributions.Normal}
    params = TensorDict(
        {"params": {k: {"loc": torch.zeros(3, 2), "scale": torch.ones(3, 2)} for k in dists}}, [3]
    )
    with tdnn.set_composite_lp_aggregate(True):
        module = tdnn.ProbabilisticTensorDictModule(
            in_keys=["params"],
            out_keys=["a", ("n", "b")],
            distribution_class=tdnn.CompositeDistribution,
            distribution_kwargs={"distribution_map": dists},
            default_interaction_type=tdnn.InteractionType.MEAN,
        )
        sample = module(params)
        lp = module.log_prob(sample)
    normal = torch.distributions.Normal(torch.zeros(3, 2), torch.ones(3, 2))
    torch.testing.assert_close(sample["a_log_prob"], normal.log_prob(torch.zeros(3, 2)))
    torch.testing.assert_close(sample["n", "b_log_prob"], sample["a_log_prob"])
    torch.testing.assert_close(lp, 2 * sample["a_log_prob"].sum(-1))


def test_sequence_log_prob_of_a_composite_and_tuple_log_prob_keys() -> None:
    dists = {"a": torch.distributions.Normal, ("n", "b"): torch.distributions.Normal}
    params = TensorDict(
        {"params": {k: {"loc": torch.zeros(3, 2), "scale": torch.ones(3, 2)} for k in dists}}, [3]
    )
    seq = tdnn.ProbabilisticTensorDictSequential(
        tdnn.TensorDictModule(lambda: None, in_keys=[], out_keys=[]),
        tdnn.ProbabilisticTensorDictModule(
            in_keys=["params"],
            out_keys=["a", ("n", "b")],
            distribution_class=tdnn.CompositeDistribution,
            distribution_kwargs={"distribution_map": dists},
            default_interaction_type=tdnn.InteractionType.MEAN,
            return_log_prob=True,
            log_prob_keys=("lp_a", ("n", "lp_b")),  # a tuple of keys
        ),
    )
    sample = seq(params)
    assert {"lp_a", ("n", "lp_b")} <= set(sample.keys(True, True))
    lp = seq.log_prob(sample.clone())
    torch.testing.assert_close(lp["lp_a"], sample["lp_a"])  # at the module's keys
    torch.testing.assert_close(lp["n", "lp_b"], sample["n", "lp_b"])


def test_composite_whose_members_differ_from_out_keys_writes_each_member_log_prob() -> None:
    module = tdnn.ProbabilisticTensorDictModule(
        in_keys=["params"],
        out_keys=[("a", "b")],  # not the members' keys
        distribution_class=tdnn.CompositeDistribution,
        distribution_kwargs={
            "distribution_map": {
                "a": torch.distributions.Normal,
                "b": torch.distributions.Categorical,
            }
        },
        return_log_prob=True,
    )
    params = {"a": {"loc": torch.zeros(2), "scale": torch.ones(2)}, "b": {"logits": torch.zeros(3)}}
    out = module(TensorDict(params=params))
    assert {"a_log_prob", "b_log_prob"} <= set(out.keys())
    torch.testing.assert_close(out["b_log_prob"], torch.tensor(3.0).log().neg())


def test_prob_sequence_slices_and_nested_name_map_keys() -> None:
    normal = torch.distributions.Normal
    m0 = tdnn.ProbabilisticTensorDictModule(["loc"], ["s0"], distribution_class=normal)
    m1 = tdnn.TensorDictModule(lambda x: x, in_keys=["other"], out_keys=["something"])
    m2 = tdnn.ProbabilisticTensorDictModule(["scale"], ["s2"], distribution_class=normal)
    seq = tdnn.ProbabilisticTensorDictSequential(m0, m1, m2)
    assert type(seq[:2]) is tdnn.TensorDictSequential  # ends with a plain module
    assert type(seq[-2:]) is tdnn.ProbabilisticTensorDictSequential
    composite = tdnn.ProbabilisticTensorDictSequential(m0, m1, m2, return_composite=True)
    assert type(composite[:2]) is tdnn.ProbabilisticTensorDictSequential
    assert composite[:2].return_composite and seq[-2:][0] is m1

    params = TensorDict(
        {
            "c": {"loc": torch.zeros(3), "scale": torch.ones(3)},
            ("n", "d"): {"logits": torch.zeros(3, 4)},
        },
        [3],
    )
    dist = tdnn.CompositeDistribution(
        params,
        distribution_map={"c": normal, ("n", "d"): torch.distributions.Categorical},
        name_map={"c": ("s", "c"), (("n",), "d"): ("s", "d")},  # a nested-tuple spelling
    )
    assert dist.sample((2,))["s", "d"].shape == torch.Size([2, 3])


def test_as_tensordict_module_on_a_method() -> None:
    class Shift:
        def __init__(self, by: float) -> None:
            self.by = by

        @tdnn.as_tensordict_module(in_keys=["c"], out_keys=["d"])
        def func(self, c: torch.Tensor) -> torch.Tensor:
            return c + self.by

    one, two = Shift(1.0), Shift(2.0)
    td = TensorDict(c=torch.zeros(2), batch_size=[2])
    torch.testing.assert_close(one.func(td.clone())["d"], torch.ones(2))
    torch.testing.assert_close(two.func(td.clone())["d"], torch.full((2,), 2.0))


def test_interaction_type_from_str_error_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"'foo' is not a valid InteractionType \(one of \['mode'"):
        tdnn.InteractionType.from_str("foo")


def test_deterministic_fallbacks_follow_upstream() -> None:
    def value(dist: Any, kind: str = "DETERMINISTIC") -> Any:
        module = tdnn.ProbabilisticTensorDictModule(
            in_keys=[], out_keys=["x"], distribution_class=dist
        )
        with tdnn.set_interaction_type(kind):
            return module(TensorDict())["x"]

    poisson = functools.partial(torch.distributions.Poisson, rate=torch.tensor([2.5]))
    torch.testing.assert_close(value(poisson), torch.tensor([2.5]))  # torch's: the mean
    wishart = functools.partial(
        torch.distributions.Wishart, df=torch.tensor([2]), covariance_matrix=torch.eye(2)
    )
    torch.testing.assert_close(value(wishart), 2 * torch.eye(2).unsqueeze(0))
    lkj = functools.partial(torch.distributions.LKJCholesky, dim=3, concentration=1.0)
    for kind in ("DETERMINISTIC", "MEAN", "MODE"):
        with pytest.raises(RuntimeError, match="DETERMINISTIC, MEAN and MODE are not implemented"):
            value(lkj, kind)


def test_as_td_module_refuses_types_that_are_not_tensorclasses() -> None:
    class Plain(tdnn.TensorClassModuleBase[torch.Tensor, torch.Tensor]):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1

    with pytest.raises(ValueError, match="both input and output type as TensorClass.*Tensor"):
        Plain().as_td_module()
