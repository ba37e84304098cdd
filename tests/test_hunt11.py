"""Bugs found by a user's-eye hunt through the module layer and tensorclass, each pinned."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch.distributions import Categorical, Normal

from tdnn import (
    CompositeDistribution,
    CudaGraphModule,
    EnsembleModule,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorClassModuleBase,
    TensorDictModule,
    TensorDictModuleWrapper,
    set_composite_lp_aggregate,
)
from tensordict import PersistentTensorDict, TensorClass, TensorDict, lazy_stack


def _composite_params() -> TensorDict:
    disc = TensorDict(logits=torch.zeros(3, 4), batch_size=[3])
    return TensorDict(
        cont=TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3]),
        disc=disc,
        n=TensorDict(disc=disc.clone(), batch_size=[3]),
        batch_size=[3],
    )


def _composite_module(out_keys: list[str], **kwargs: object) -> ProbabilisticTensorDictModule:
    return ProbabilisticTensorDictModule(
        in_keys=["params"],
        out_keys=out_keys,
        distribution_class=CompositeDistribution,
        distribution_kwargs={"distribution_map": {"cont": Normal, "disc": Categorical}},
        return_log_prob=True,
        **kwargs,  # type: ignore[arg-type]
    )


def test_composite_module_naming_some_members_scores_every_member() -> None:
    # out_keys naming one member: every member is sampled, so every member's
    # log-probability is written, and the aggregated one sums them all (it summed the
    # named member only)
    params = _composite_params()
    dist = CompositeDistribution(params, {"cont": Normal, "disc": Categorical})
    sample = dist.deterministic_sample
    want_cont = dist.dists["cont"].log_prob(sample["cont"])
    want_disc = dist.dists["disc"].log_prob(sample["disc"])
    with set_composite_lp_aggregate(True):
        td = _composite_module(["cont"])(TensorDict(params=params, batch_size=[3]))
    torch.testing.assert_close(td["disc_log_prob"], want_disc)
    torch.testing.assert_close(td["sample_log_prob"], want_cont + want_disc)
    td = _composite_module(["disc"], log_prob_keys=["b"])(TensorDict(params=params, batch_size=[3]))
    torch.testing.assert_close(td["b"], want_disc)
    torch.testing.assert_close(td["cont_log_prob"], want_cont)
    assert "disc_log_prob" not in td.keys()


def test_composite_distribution_is_a_mapping_of_its_members() -> None:
    # upstream's dist["cont"], len, iteration and ``in`` (they raised TypeError)
    dist = CompositeDistribution(_composite_params(), {"cont": Normal, ("n", "disc"): Categorical})
    assert isinstance(dist["cont"], Normal)
    assert dist["n", "disc"] is dist.dists[("n", "disc")]
    assert len(dist) == 2
    assert list(dist) == ["cont", ("n", "disc")]
    assert ("n", "disc") in dist
    assert "disc" not in dist
    with pytest.raises(KeyError, match=r"CompositeDistribution\['zz'\]: no such member.*'cont'"):
        dist["zz"]


def test_composite_distribution_key_none_is_the_default() -> None:
    dist = CompositeDistribution(
        _composite_params(), {"cont": Normal}, log_prob_key=None, entropy_key=None
    )
    assert (dist.log_prob_key, dist.entropy_key) == ("sample_log_prob", "entropy")
    assert "sample_log_prob" in dist.log_prob_composite(dist.sample(), include_sum=True).keys()
    dist.entropy_key = None
    assert dist.entropy_key == "entropy"


def _normal(in_key: str, out_key: str) -> ProbabilisticTensorDictModule:
    return ProbabilisticTensorDictModule(
        in_keys={"loc": in_key},
        out_keys=[out_key],
        distribution_class=Normal,
        distribution_kwargs={"scale": 1.0},
        return_log_prob=True,
    )


def _inner() -> ProbabilisticTensorDictSequential:
    return ProbabilisticTensorDictSequential(
        TensorDictModule(lambda z: z + 1, ["z"], ["loc"]), _normal("loc", "y")
    )


def test_probabilistic_sequence_nested_in_one_is_probabilistic() -> None:
    # a ProbabilisticTensorDictSequential member was taken for a deterministic one:
    # get_dist gave an empty composite, log_prob an empty TensorDict, no sample keys
    seq = ProbabilisticTensorDictSequential(
        TensorDictModule(lambda x: x * 2, ["x"], ["z"]), _inner()
    )
    td = TensorDict(x=torch.ones(3, 2), y=torch.zeros(3, 2), batch_size=[3])
    dist = seq.get_dist(td)
    assert isinstance(dist, Normal)
    torch.testing.assert_close(dist.mean, torch.full((3, 2), 3.0))
    torch.testing.assert_close(seq.log_prob(td), Normal(3.0, 1.0).log_prob(torch.zeros(3, 2)))
    assert (seq.dist_sample_keys, seq.log_prob_keys, seq.log_prob_key) == (
        ["y"],
        ["y_log_prob"],
        "y_log_prob",
    )
    assert seq.det_part is not None and seq.det_part.out_keys == ["z"]
    # beside another probabilistic module: the joint distribution has both members
    joint = ProbabilisticTensorDictSequential(_normal("x", "z"), _inner())
    assert sorted(joint.get_dist(td).dists) == ["y", "z"]
    td["z"] = torch.zeros(3, 2)
    lp = joint.log_prob(td)
    torch.testing.assert_close(lp["z_log_prob"], Normal(1.0, 1.0).log_prob(torch.zeros(3, 2)))
    assert "y_log_prob" in lp.keys()


def test_probabilistic_sequence_without_a_distribution_is_refused() -> None:
    # upstream refuses an empty sequence, and return_composite=False ending with a
    # deterministic module; a sequence without a probabilistic member has no
    # distribution (get_dist returned an empty composite, log_prob_key an IndexError)
    with pytest.raises(ValueError, match="ProbabilisticTensorDictSequential: no module given"):
        ProbabilisticTensorDictSequential()
    det = TensorDictModule(lambda x: x, ["x"], ["loc"])
    with pytest.raises(
        TypeError,
        match=r"return_composite=False\): the last module .* got "
        "TensorDictModule",
    ):
        ProbabilisticTensorDictSequential(det, return_composite=False)
    seq = ProbabilisticTensorDictSequential(det)
    td = TensorDict(x=torch.zeros(3), batch_size=[3])
    with pytest.raises(
        RuntimeError,
        match=r"get_dist: no probabilistic module among the "
        r"members \['TensorDictModule'\]",
    ):
        seq.get_dist(td)
    with pytest.raises(RuntimeError, match="log_prob_key: no probabilistic module"):
        seq.log_prob_key
    assert seq(td)["loc"].shape == (3,)  # running it is fine, as upstream


def test_module_dict_and_tensordict_outputs_follow_upstreams_rules() -> None:
    td = TensorDict(a=torch.ones(3, 2), batch_size=[3])
    # a dict keyed by the nested out key (it was looked up by the key's last name)
    out = TensorDictModule(lambda x: {("x", "y"): x}, ["a"], [("x", "y")])(td.clone())
    assert (out["x", "y"] == 1).all()
    # a dict or TensorDict not keyed by the out_keys is one output, written whole
    for make in (lambda x: {"c": x}, lambda x: TensorDict(c=x, batch_size=[3])):
        out = TensorDictModule(make, ["a"], ["d"])(td.clone())
        assert (out["d", "c"] == 1).all()
    # ... and with several out_keys, the error names the call and the keys it lacks
    with pytest.raises(
        ValueError,
        match=r"TensorDictModule\(<lambda>\): the module returned 1 outputs \(a TensorDict "
        r"without \['d'\]\) for 2 out_keys \['c', 'd'\]",
    ):
        TensorDictModule(lambda x: TensorDict(c=x, batch_size=[3]), ["a"], ["c", "d"])(td)
    with pytest.raises(ValueError, match=r"\(a dict without \[\('n', 'd'\)\]\)"):
        TensorDictModule(lambda x: {"c": x}, ["a"], ["c", ("n", "d")])(td)


def test_module_must_be_callable() -> None:
    # upstream refuses these when built; here they were accepted, and the first call
    # failed inside (a class was instantiated with the inputs)
    with pytest.raises(
        TypeError,
        match=r"TensorDictModule: Module .*Linear'> is not callable as a module.*"
        r"\(this is a class: instantiate it\)",
    ):
        TensorDictModule(torch.nn.Linear, ["a"], ["c"])
    with pytest.raises(TypeError, match="Module 3 is not callable as a module; pass a"):
        TensorDictModule(3, ["a"], ["c"])  # type: ignore[arg-type]
    # upstream raises ValueError: the error is both
    with pytest.raises(ValueError, match=r"Module \[123\] is not callable"):
        TensorDictModule([123], ["a"], ["c"])  # type: ignore[arg-type]


def test_from_module_and_to_module_refuse_what_is_not_a_module() -> None:
    # an AttributeError from inside (``'int' object has no attribute '_parameters'``)
    params = TensorDict.from_module(torch.nn.Linear(2, 2))
    with pytest.raises(
        TypeError, match="TensorDict.from_module: module must be an nn.Module, got int"
    ):
        TensorDict.from_module(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="TensorDict.from_modules: module 1 must be an nn.Module"):
        TensorDict.from_modules(torch.nn.Linear(2, 2), "x")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match="TensorDict.to_module: module must be an nn.Module, got dict"
    ):
        params.to_module({})  # type: ignore[arg-type]


def test_to_module_result_compares_as_the_originals() -> None:
    # upstream returns the TensorDict of the originals; ours is a proxy of it whose ``==``
    # was object identity (a bool: ``(old == new).all()`` raised, ``old != new`` was True)
    model = torch.nn.Linear(2, 2)
    weight = model.weight
    zeros = TensorDict.from_module(model).apply(torch.zeros_like)
    old = zeros.to_module(model)
    try:
        assert not (old == zeros).all()
        assert (old * 0 == zeros).all()
        assert (old == old).all() and not (old != old).any()
        assert ((-old)["weight"] == -weight).all()
    finally:
        old.to_module(model)
    assert model.weight is weight


def test_ensemble_and_wrapper_check_their_arguments() -> None:
    # a float count failed inside ("can't multiply sequence by non-int"); a wrapper of
    # a non-module raised KeyError('td_module') at its first attribute read
    with pytest.raises(TypeError, match="EnsembleModule: num_copies must be an int, got float 2.5"):
        EnsembleModule(torch.nn.Linear(3, 2), num_copies=2.5)  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match="EnsembleModule: module must be an nn.Module, got function"
    ):
        EnsembleModule(lambda x: x, num_copies=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"TensorDictModuleWrapper: td_module must be .* got int"):
        TensorDictModuleWrapper(3)


class _Pose(TensorClass):
    q: torch.Tensor
    r: torch.Tensor | None = None


class _Obs(TensorClass):
    pose: _Pose
    spare: _Pose | None = None
    w: torch.Tensor | None = None


class _Count(TensorClass, autocast=True):
    n: int


def _pose_td() -> TensorDict:
    return TensorDict(q=torch.zeros(3), batch_size=[3])


def test_from_tensordict_refuses_keys_that_are_not_fields() -> None:
    # they were stored as entries no field reads (upstream: ValueError); a dict failed
    # inside with an AttributeError
    td = TensorDict(q=torch.zeros(3), z=torch.zeros(3), batch_size=[3])
    with pytest.raises(
        ValueError,
        match=r"_Pose.from_tensordict: keys \['z'\] are not fields of _Pose; "
        r"fields are \['q', 'r'\]",
    ):
        _Pose.from_tensordict(td)
    with pytest.raises(ValueError, match=r"keys \['z'\] are not fields"):
        _Pose.fromkeys(["q", "z"], 0)
    with pytest.raises(ValueError, match=r"_Pose.from_dict: keys \['z'\] are not fields"):
        _Pose.from_dict({"q": torch.zeros(3), "z": torch.zeros(3)})  # (it was a TypeError)
    with pytest.raises(ValueError, match=r"keys \['z'\] are not fields"):
        _Pose.from_any({"q": torch.zeros(3), "z": torch.zeros(3)})
    with pytest.raises(
        TypeError, match=r"_Pose.from_tensordict: expected a TensorDict .* got dict; densify"
    ):
        _Pose.from_tensordict({"q": torch.zeros(3)})


def test_from_tensordict_and_from_dict_build_nested_tensorclass_fields() -> None:
    # a TensorDict under a field annotated with a tensorclass (or Optional of one)
    # becomes that class, sharing its entries, as upstream (it stayed a TensorDict)
    pose = _pose_td()
    obs = _Obs.from_tensordict(TensorDict(pose=pose, spare=_pose_td(), batch_size=[3]))
    assert type(obs.pose) is _Pose and type(obs.spare) is _Pose
    assert obs.pose.q is pose["q"]
    assert type(obs[0].pose) is _Pose
    assert type(_Obs.from_dict({"pose": _pose_td()}, batch_size=[3]).pose) is _Pose
    # keys the class does not declare: left a TensorDict (as upstream)
    other = TensorDict(q=torch.zeros(3), extra=torch.zeros(3), batch_size=[3])
    assert type(_Obs.from_tensordict(TensorDict(pose=other, batch_size=[3])).pose) is TensorDict


def test_tensorclass_setitem_with_a_key_is_a_field_write() -> None:
    # tc["z"] = t stored an entry no field reads (tc.z then raised AttributeError); the
    # same through a TensorDict holding the instance; autocast was skipped
    pose = _Pose(q=torch.zeros(3), batch_size=[3])
    with pytest.raises(AttributeError, match=r"_Pose\[\]=: 'z' is not a field of _Pose"):
        pose["z"] = torch.zeros(3)
    td = TensorDict(pose=pose, batch_size=[3])
    with pytest.raises(AttributeError, match=r"TensorDict\[\]=: 'z' is not a field of _Pose"):
        td["pose", "z"] = torch.zeros(3)
    assert list(pose.keys()) == ["q"]
    td["pose", "r"] = torch.ones(3)
    assert (pose.r == 1).all()
    count = _Count(n=1)
    count["n"] = torch.tensor(3)
    assert count.n == 3 and type(count.n) is int


def test_tensorclass_get_of_an_unset_field_is_none() -> None:
    # as the attribute and upstream's get; it raised KeyError (a key that is not a field
    # still does: upstream gives None there too)
    obs = _Obs(pose=_Pose(q=torch.zeros(3), batch_size=[3]), batch_size=[3])
    assert obs.get("w") is None and obs["w"] is None and obs.w is None
    assert obs.get(("pose", "r")) is None and obs["pose", "r"] is None
    assert obs.get(("spare", "q")) is None
    assert TensorDict(obs=obs, batch_size=[3]).get(("obs", "spare")) is None
    assert obs.get("w", 5) == 5
    with pytest.raises(KeyError, match="_Obs.get: key 'z' was not found in"):
        obs.get("z")
    with pytest.raises(KeyError, match=r"key \('pose', 'z'\) was not found in"):
        obs.get(("pose", "z"))


class _Named(TensorClass):
    x: torch.Tensor
    name: str


def test_where_chooses_non_tensor_values_element_wise() -> None:
    # the input's value was kept whole: torch.where(c, a, b) lost b's non-tensor data
    cond = torch.tensor([True, False, True])
    a = TensorDict(x=torch.zeros(3), s="a", n=TensorDict(s="a", batch_size=[3, 2]), batch_size=[3])
    b = TensorDict(x=torch.ones(3), s="b", n=TensorDict(s="b", batch_size=[3, 2]), batch_size=[3])
    out = torch.where(cond, a, b)
    assert out["s"].tolist() == ["a", "b", "a"]
    assert out["n", "s"].tolist() == [["a", "a"], ["b", "b"], ["a", "a"]]
    assert out["x"].tolist() == [0.0, 1.0, 0.0]
    assert a.where(cond, b)[1]["s"] == "b"
    assert torch.where(cond, a, a.clone())["s"] == "a"  # equal values stay one
    one, two = (
        _Named(torch.zeros(3), "a", batch_size=[3]),
        _Named(torch.ones(3), "b", batch_size=[3]),
    )
    assert torch.where(cond, one, two).name == ["a", "b", "a"]
    with pytest.raises(
        TypeError,
        match=r"TensorDict.where: one side holds a Tensor and the "
        "other a NonTensorData",
    ):
        torch.where(cond, TensorDict(s=torch.zeros(3), batch_size=[3]), b.select("s"))


class _In(TensorClass):
    x: torch.Tensor
    pose: _Pose
    o: torch.Tensor | None = None


class _Out(TensorClass):
    y: torch.Tensor


class _AddPose(TensorClassModuleBase[_In, _Out]):
    def forward(self, data: _In) -> _Out:
        assert type(data.pose) is _Pose and data.o is None
        return _Out(y=data.x + data.pose.q, batch_size=data.batch_size)


def test_tensorclass_module_wrapper_reads_the_input_as_from_tensordict() -> None:
    # an unset optional field raised KeyError; a nested tensorclass field came as a
    # TensorDict; entries that are not fields are ignored (as upstream)
    td = TensorDict(
        x=torch.ones(3),
        pose=TensorDict(q=torch.ones(3), batch_size=[3]),
        z=torch.zeros(3),
        batch_size=[3],
    )
    out = _AddPose().as_td_module()(td)
    assert out["y"].tolist() == [2.0, 2.0, 2.0]
    assert list(out.keys()) == ["y"]


def test_from_tensordict_refuses_an_h5_collection(tmp_path: Path) -> None:
    # (an AttributeError from inside: it has no store to share)
    h5 = PersistentTensorDict.from_dict(
        TensorDict(q=torch.zeros(3), batch_size=[3]), filename=str(tmp_path / "x.h5")
    )
    try:
        with pytest.raises(
            TypeError,
            match=r"_Pose.from_tensordict: expected a TensorDict or a lazy stack of them "
            r"\(shared without a copy\), got PersistentTensorDict; densify it first",
        ):
            _Pose.from_tensordict(h5)
        assert _Pose.from_tensordict(h5.to_tensordict()).q.shape == (3,)
    finally:
        h5.close()


def test_distribution_keyword_errors_name_the_module_and_its_keys() -> None:
    # the TypeError of Normal.__init__ alone did not say where 'mu' came from
    module = ProbabilisticTensorDictModule(
        in_keys={"mu": "loc"},
        out_keys=["x"],
        distribution_class=Normal,
        distribution_kwargs={"scale": 1.0},
    )
    with pytest.raises(
        TypeError,
        match=r"ProbabilisticTensorDictModule.get_dist: Normal was given the keywords "
        r"\['mu'\] \(read from \['loc'\]\) and \['scale'\] \(distribution_kwargs\): .*'mu'",
    ):
        module(TensorDict(loc=torch.zeros(3), batch_size=[3]))


class _Snake(TensorClass):
    my_field: torch.Tensor


def test_tensorclass_flatten_and_unflatten_keys_keep_to_fields() -> None:
    # flatten_keys made an instance holding 'pose.q', which no field reads (obs.pose was
    # None), and unflatten_keys nested the instance's own class under a new key
    obs = _Obs(pose=_Pose(q=torch.zeros(3), batch_size=[3]), w=torch.ones(3), batch_size=[3])
    with pytest.raises(
        ValueError,
        match=r"_Obs.flatten_keys: the fields \['pose'\] hold nested collections, whose "
        r"flattened keys \(such as 'pose.q'\) are not fields of _Obs",
    ):
        obs.flatten_keys()
    assert list(obs.to_tensordict().flatten_keys().keys()) == ["pose.q", "w"]
    assert obs.to_arrow(separator=".").column_names == ["pose.q", "w"]  # (columns: fine)
    flat = _Pose(q=torch.zeros(3), batch_size=[3])
    assert flat.flatten_keys().q is flat.q and flat.unflatten_keys().q is flat.q
    snake = _Snake(my_field=torch.zeros(2), batch_size=[2])
    with pytest.raises(
        ValueError,
        match=r"_Snake.unflatten_keys: the fields \['my_field'\] "
        "hold the separator '_'",
    ):
        snake.unflatten_keys("_")


def _normal_module(**kwargs: object) -> ProbabilisticTensorDictModule:
    return ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"],
        out_keys=["x"],
        distribution_class=Normal,
        **kwargs,  # type: ignore[arg-type]
    )


def test_probabilistic_num_samples_repeats_a_deterministic_value() -> None:
    # only a random draw gave num_samples values; upstream repeats the one value of the
    # other interaction types so the output always has the leading num_samples dim
    td = TensorDict(loc=torch.arange(3.0), scale=torch.ones(3), batch_size=[3])
    out = _normal_module(num_samples=4, return_log_prob=True)(td)
    assert out.batch_size == (4, 3)
    assert (out["x"] == torch.arange(3.0)).all() and out["x_log_prob"].shape == (4, 3)
    assert list(td.keys()) == ["loc", "scale"]


def test_probabilistic_module_called_with_tensors() -> None:
    # a second positional tensor was taken for tensordict_out; an unknown keyword was
    # dropped silently
    module = _normal_module(return_log_prob=True)
    x, lp = module(torch.zeros(2), torch.ones(2))
    assert (x == 0).all()
    torch.testing.assert_close(lp, Normal(0.0, 1.0).log_prob(torch.zeros(2)))
    with pytest.raises(
        TypeError, match=r"ProbabilisticTensorDictModule: unexpected keyword arguments \['zz'\]"
    ):
        module(loc=torch.zeros(2), scale=torch.ones(2), zz=1)
    with pytest.raises(TypeError, match="ProbabilisticTensorDictModule: 3 inputs for in_keys"):
        module(torch.zeros(2), torch.ones(2), torch.ones(2))


def test_probabilistic_log_prob_keys_must_pair_with_the_samples() -> None:
    # two keys for one sample: the second was ignored
    with pytest.raises(
        ValueError,
        match=r"ProbabilisticTensorDictModule: 2 log_prob_keys \['a', 'b'\] for 1 sample "
        r"keys \(out_keys\) \['x'\]",
    ):
        _normal_module(log_prob_keys=["a", "b"], return_log_prob=True)


def test_ensemble_refuses_arguments_it_would_ignore() -> None:
    ensemble = EnsembleModule(TensorDictModule(torch.nn.Linear(3, 2), ["x"], ["y"]), num_copies=2)
    td = TensorDict(x=torch.randn(5, 3), batch_size=[5])
    with pytest.raises(TypeError, match="EnsembleModule: called with a TensorDict and 1 more"):
        ensemble(td, td)
    with pytest.raises(TypeError, match=r"vmapped_forward: expected \(input, ..., params\), got 1"):
        ensemble.vmapped_forward(td)  # (the input was taken for the parameters)
    assert ensemble.vmapped_forward(td, ensemble.params_td)["y"].shape == (2, 5, 2)


def test_tensorclass_none_written_by_any_route_unsets_the_field() -> None:
    # set/update/x[key] stored NonTensorData(None): a key that stacks, saves and shows in
    # keys(), unlike assigning the attribute (and upstream)
    writes = {
        "set": lambda p: p.set("r", None),
        "update": lambda p: p.update({"r": None}),
        "setitem": lambda p: p.__setitem__("r", None),
        "nested": lambda p: TensorDict(p=p, batch_size=[3]).set(("p", "r"), None),
    }
    for write in writes.values():
        pose = _Pose(q=torch.zeros(3), r=torch.ones(3), batch_size=[3])
        write(pose)
        assert list(pose.keys()) == ["q"] and pose.r is None


def test_lazy_stack_of_instances_reads_an_unset_field_as_none() -> None:
    # (a KeyError naming every member; a single instance already gave None)
    pose = _Pose(q=torch.zeros(3), batch_size=[3])
    stack = lazy_stack([pose, pose.clone()])
    assert stack.get("r") is None and stack.r is None
    with pytest.raises(KeyError, match="key 'z' is missing from members"):
        stack.get("z")


def test_cuda_graph_module_checks_warmup_and_uses_the_modules_keys() -> None:
    # warmup < 1 was accepted (upstream: ValueError); keys given beside a module's own
    # replaced them, where upstream keeps the module's and warns
    module = TensorDictModule(lambda x: x + 1, ["x"], ["y"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (no CUDA here)
        with pytest.raises(ValueError, match="CudaGraphModule: warmup must be an int >= 1, got 0"):
            CudaGraphModule(module, warmup=0)
        with pytest.warns(UserWarning, match=r"ignores in_keys=\['z'\]: the module has its own"):
            graph = CudaGraphModule(module, in_keys=["z"])
    assert graph.in_keys == ["x"] and graph.out_keys == ["y"]
