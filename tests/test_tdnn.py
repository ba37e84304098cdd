"""tdnn: TensorDictModule and TensorDictSequential, and a training loop over TensorDicts."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from tdnn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from tensordict import TensorDict


def _td() -> TensorDict:
    return TensorDict({"obs": torch.randn(5, 3), "nested": {"x": torch.randn(5, 2)}}, [5])


def test_list_in_keys_inplace_and_nested_keys() -> None:
    m = TensorDictModule(nn.Linear(2, 4), in_keys=[("nested", "x")], out_keys=[("out", "h")])
    td = _td()
    assert m(td) is td and td["out", "h"].shape == (5, 4)


def test_dict_in_keys_and_out_to_in_map() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.sum(-1) - b.sum(-1)

    td = _td()
    want = td["obs"].sum(-1) - td["nested", "x"].sum(-1)
    # upstream's default reads the dict as {argument: key}, as out_to_in_map=True does
    for flag in (None, True):
        m = TensorDictModule(
            fn, in_keys={"a": "obs", "b": ("nested", "x")}, out_keys=["d"], out_to_in_map=flag
        )
        assert m.in_keys == ["obs", ("nested", "x")]
        torch.testing.assert_close(m(td)["d"], want)
    inverted = TensorDictModule(
        fn, in_keys={"obs": "a", ("nested", "x"): "b"}, out_keys=["e"], out_to_in_map=False
    )
    torch.testing.assert_close(inverted(td)["e"], want)
    # both keys present and both names valid arguments: the default must not swap them
    swap = TensorDictModule(lambda a, b: a - b, in_keys={"a": "b", "b": "a"}, out_keys=["c"])
    pair = TensorDict({"a": torch.ones(2), "b": torch.zeros(2)}, [2])
    assert swap(pair)["c"].tolist() == [-1.0, -1.0]


def test_output_kinds_and_discard() -> None:
    td = _td()
    tup = TensorDictModule(lambda x: (x * 2, x * 3), ["obs"], ["two", "_"])
    out = tup(td)
    assert "two" in out.keys() and "_" not in out.keys()
    as_dict = TensorDictModule(lambda x: {"y": x + 1, "z": x}, ["obs"], ["y"])
    assert torch.equal(as_dict(td)["y"], td["obs"] + 1)
    as_td = TensorDictModule(lambda x: TensorDict({"w": x}, [5]), ["obs"], ["w"])
    assert torch.equal(as_td(td)["w"], td["obs"])
    with pytest.raises(ValueError, match=r"returned 2 outputs for 1 out_keys \['only'\]"):
        TensorDictModule(lambda x: (x, x), ["obs"], ["only"])(td)


def test_inplace_modes_and_tensordict_out() -> None:
    m = TensorDictModule(nn.Linear(3, 2), ["obs"], ["act"], inplace=False)
    td = _td()
    out = m(td)
    assert out is not td and "act" not in td.keys() and list(out.keys()) == ["act"]
    empty = TensorDictModule(nn.Linear(3, 2), ["obs"], ["act"], inplace="empty")(td)
    assert list(empty.keys()) == ["act"] and empty.batch_size == (5,)
    target = TensorDict({}, [5])
    assert TensorDictModule(nn.Linear(3, 2), ["obs"], ["act"])(td, tensordict_out=target) is target
    with pytest.raises(ValueError, match="inplace must be True, False or 'empty'"):
        TensorDictModule(nn.Linear(3, 2), ["obs"], ["act"], inplace="no")


@pytest.mark.parametrize("inplace", [False, "empty"])
@pytest.mark.parametrize("select", [False, True])
def test_sequential_not_inplace_leaves_the_input_alone(inplace: bool | str, select: bool) -> None:
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x + 1, ["a"], ["b"]),
        TensorDictModule(lambda x: x * 2, ["b"], ["c"]),
        inplace=inplace,
    )
    if select:
        seq.select_out_keys("c")
    td = TensorDict({"a": torch.ones(2)}, [2])
    out = seq(td)
    assert out is not td and list(td.keys()) == ["a"]
    assert sorted(out.keys()) == (["c"] if select else ["b", "c"])
    assert out["c"].tolist() == [4.0, 4.0] and out.batch_size == ((2,) if inplace else ())


def test_plain_tensor_dispatch() -> None:
    m = TensorDictModule(lambda a, b: (a + b, a - b), ["a", "b"], ["s", "d"])
    s, d = m(torch.ones(2), torch.ones(2))
    assert torch.equal(s, torch.full((2,), 2.0)) and torch.equal(d, torch.zeros(2))
    single = TensorDictModule(nn.Linear(3, 2), ["obs"], ["act"])
    assert single(obs=torch.zeros(4, 3)).shape == (4, 2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        single(nope=torch.zeros(1))
    with pytest.raises(TypeError, match=r"3 inputs for in_keys \['a', 'b'\]"):
        m(torch.ones(1), torch.ones(1), torch.ones(1))
    with pytest.raises(KeyError, match=r"input keys \['b'\] are missing from the inputs"):
        m(torch.ones(1))


def test_sequential_tensor_dispatch_matches_the_tensordict_path() -> None:
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), ["obs"], [("net", "hidden")]),
        lambda td: td.set("scaled", td["net", "hidden"] * 2),  # a plain td -> td callable
        TensorDictModule(lambda h, s: (h + s, h - s), [("net", "hidden"), "scaled"], ["p", "m"]),
    )
    obs = torch.randn(5, 3)
    by_td = seq(TensorDict({"obs": obs}, [5]))
    assert seq.out_keys == [("net", "hidden"), "p", "m"]  # the callable declares no keys
    hidden, p, m = seq(obs)
    by_name = seq(obs=obs)
    torch.testing.assert_close(hidden, by_td["net", "hidden"])
    torch.testing.assert_close(p, by_td["p"])
    torch.testing.assert_close(m, by_td["m"])
    torch.testing.assert_close(by_name[1], p)
    seq.select_out_keys("m")
    torch.testing.assert_close(seq(obs), by_td["m"])
    tolerant = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 2), ["obs"], ["a"]),
        TensorDictModule(nn.Linear(2, 2), ["absent"], ["b"]),
        partial_tolerant=True,
        selected_out_keys=["a"],
    )
    assert tolerant(obs).shape == (5, 2)
    with pytest.raises(TypeError, match="TensorDictSequential: unexpected input 'x'"):
        seq(x=obs)


def test_missing_keys_name_the_module() -> None:
    m = TensorDictModule(nn.Linear(3, 2), ["missing"], ["act"])
    with pytest.raises(
        KeyError, match=r"TensorDictModule\(Linear\): input keys \['missing'\] are missing"
    ):
        m(_td())
    # upstream's words too, which code written for it matches
    with pytest.raises(KeyError, match="Some tensors that are necessary for the module call"):
        m(_td())
    strict = TensorDictModule(lambda x: x, ["missing"], ["y"], strict=True)
    with pytest.raises(KeyError, match="input keys \\['missing'\\] are missing"):
        strict(_td())
    tolerant = TensorDictModule(lambda x: torch.zeros(5) if x is None else x, ["missing"], ["y"])
    assert (tolerant(_td())["y"] == 0).all()


def test_sequential_keys_and_selection() -> None:
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), ["obs"], ["hidden"]),
        TensorDictModule(nn.Linear(4, 2), ["hidden"], ["action"]),
        lambda td: td.set("done", torch.zeros(td.batch_size, dtype=torch.bool)),
    )
    assert seq.in_keys == ["obs"] and seq.out_keys == ["hidden", "action"]
    assert len(seq) == 3 and isinstance(seq[0], TensorDictModule)
    out = seq(_td())
    assert {"hidden", "action", "done"} <= set(out.keys())
    assert seq.select_out_keys("action").out_keys == ["action"]
    sub = seq.select_subsequence(out_keys=["hidden"])
    assert len(sub) == 1 and sub.out_keys == ["hidden"]
    assert len(seq[:2]) == 2
    with pytest.raises(TypeError, match="item 0 is not callable"):
        TensorDictSequential(3)  # type: ignore[arg-type]


def test_partial_tolerant_skips_modules_without_inputs() -> None:
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), ["obs"], ["hidden"]),
        TensorDictModule(nn.Linear(4, 2), ["absent"], ["never"]),
        partial_tolerant=True,
    )
    out = seq(_td())
    assert "hidden" in out.keys() and "never" not in out.keys()


def test_functional_training_loop_reduces_the_loss() -> None:
    torch.manual_seed(0)
    x = torch.randn(256, 4)
    data = TensorDict({"x": x, "y": x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])}, [256])
    model = TensorDictSequential(
        TensorDictModule(nn.Linear(4, 16), ["x"], ["h"]),
        TensorDictModule(nn.Tanh(), ["h"], ["h"]),
        TensorDictModule(nn.Linear(16, 1), ["h"], ["pred"]),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        for batch in data.split(32):
            out = model(batch.clone(recurse=False))
            loss = (out["pred"] - out["y"]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] / 2


def test_compile_a_module_chain() -> None:
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), ["obs"], ["hidden"]),
        TensorDictModule(nn.Linear(4, 2), ["hidden"], ["action"]),
    )

    def run(obs: torch.Tensor) -> torch.Tensor:
        return seq(TensorDict({"obs": obs}, [obs.shape[0]]))["action"]

    obs = torch.randn(5, 3)
    compiled = torch.compile(run, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(obs), run(obs))


def test_symbolic_trace_a_module_chain() -> None:
    seq = TensorDictSequential(
        TensorDictModule(nn.Linear(3, 4), ["obs"], ["hidden"]),
        TensorDictModule(nn.ReLU(), ["hidden"], ["hidden"]),
        TensorDictModule(nn.Linear(4, 2), ["hidden"], ["action"]),
    )

    class Run(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.seq = seq

        def forward(self, obs: torch.Tensor) -> torch.Tensor:
            return self.seq(obs=obs)[-1]  # keyword tensors in, the outputs back

    graph = torch.fx.symbolic_trace(Run())
    called = {n.target for n in graph.graph.nodes if n.op == "call_module"}
    assert {"seq.module.0.module", "seq.module.2.module"} <= called  # the Linears are visible
    obs = torch.randn(5, 3)
    torch.testing.assert_close(graph(obs), seq(TensorDict({"obs": obs}, [5]))["action"])


def test_from_module_as_module_gives_tensordict_params() -> None:
    from tdnn import TensorDictParams

    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    params = TensorDict.from_module(model, as_module=True)
    assert isinstance(params, TensorDictParams)
    assert params["0", "weight"] is model[0].weight  # the same Parameters, no copy
    assert {id(p) for p in params.parameters()} == {id(p) for p in model.parameters()}
    stacked = TensorDict.from_modules(model, copy.deepcopy(model), as_module=True)
    assert isinstance(stacked, TensorDictParams)
    assert [p.shape[0] for p in stacked.parameters()] == [2, 2, 2, 2]
    opt = torch.optim.Adam(stacked.parameters(), lr=0.1)
    before = stacked["1", "bias"].detach().clone()
    with stacked[0].to_module(model):
        model(torch.randn(6, 3)).sum().backward()
    opt.step()
    assert not torch.equal(stacked["1", "bias"][0], before[0])


def test_tensordict_params_is_a_module_and_a_tensordict() -> None:
    from tdnn import TensorDictParams

    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = TensorDictParams(TensorDict.from_modules(model), no_convert=True)  # batch [1]
    names = sorted(n for n, _ in params.named_parameters())
    assert names == ["0.bias", "0.weight", "1.bias", "1.weight"]
    buffers = sorted(n for n, _ in params.named_buffers())
    assert buffers == ["1.num_batches_tracked", "1.running_mean", "1.running_var"]
    # data: the leaves detached, sharing storage (upstream's TensorDictParams.data)
    assert not params.data["0", "weight"].requires_grad
    assert params.data["0", "weight"].data_ptr() == params["0", "weight"].data_ptr()
    opt = torch.optim.SGD(params.parameters(), lr=0.1)
    before = params["0", "weight"].detach().clone()
    with params[0].to_module(model):
        loss = model(torch.randn(8, 3)).sum()
    loss.backward()
    opt.step()
    assert not torch.equal(params["0", "weight"], before)
    sd = params.state_dict()
    assert "0.weight" in sd and "1.num_batches_tracked" in sd
    other = TensorDictParams(
        TensorDict.from_modules(nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))
    )
    result = other.load_state_dict(sd, strict=False)
    assert not result.missing_keys and not result.unexpected_keys
    torch.testing.assert_close(other["0", "weight"], params["0", "weight"])
    params = params.to(torch.float64)  # a new TensorDictParams, as upstream
    assert isinstance(params, TensorDictParams)
    assert params.data["0", "weight"].dtype == torch.float64
    assert params.data["1", "running_mean"].dtype == torch.float64  # buffers re-synced
    with pytest.raises(TypeError, match="expected a TensorDict"):
        TensorDictParams(torch.zeros(1))  # type: ignore[arg-type]


def test_tensordict_params_to_inplace_casts_the_registered_leaves() -> None:
    from tdnn import TensorDictParams

    leaves = TensorDict(
        {"w": torch.zeros(4, 3, dtype=torch.float64), "n": {"i": torch.arange(4)}}, [4]
    )
    params = TensorDictParams(leaves)
    weight = params["w"]
    opt = torch.optim.SGD(params.parameters(), lr=1.0)
    assert params.to(torch.float32, inplace=True) is params
    # every leaf cast, each kept as the same object (as module.float() keeps them)
    assert params.dtype == torch.float32 and params["w"] is weight
    assert type(weight) is nn.Parameter and params["n", "i"].dtype == torch.float32
    params["w"].sum().backward()
    opt.step()  # the optimizer still holds the cast parameter
    assert params["w"].dtype == torch.float32 and (params["w"] == -1).all()
    params.to(torch.float64, inplace=True)  # its gradient follows, as module.double()
    assert params["w"].grad is not None and params["w"].grad.dtype == torch.float64
    torch.optim.Adam([params["w"]], foreach=True).step()
    params.to(torch.float32, inplace=True)
    # a cast a parameter cannot hold (integers) replaces it with a plain tensor, as upstream
    params.to(torch.int64, inplace=True)
    assert type(params["w"]) is torch.Tensor and params["w"].dtype == torch.int64
    assert sorted(n for n, _ in params.named_buffers()) == ["n.i", "w"]
    meta = TensorDictParams(TensorDict({"w": torch.zeros(2)}, [2], device="cpu"))
    meta.to("meta", inplace=True)  # a move a parameter's data cannot take: registered anew
    assert meta.device == torch.device("meta") and meta["w"].is_meta
    assert type(meta["w"]) is nn.Parameter
    with pytest.raises(RuntimeError, match="locked"):
        TensorDictParams(leaves.clone()).lock_().to(torch.float32, inplace=True)


def test_tensordict_params_is_a_tensor_collection() -> None:
    from tdnn import TensorDictParams
    from tensordict import is_tensor_collection

    params = TensorDictParams(TensorDict({"w": torch.zeros(2)}, [2]))
    assert is_tensor_collection(params) and is_tensor_collection(TensorDictParams)
    assert not is_tensor_collection(nn.Linear(2, 2)) and not is_tensor_collection(torch.zeros(1))


def test_ensemble_module_copies_differ_and_match_a_loop() -> None:
    from tdnn import EnsembleModule

    torch.manual_seed(0)
    ensemble = EnsembleModule(
        nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), num_copies=3
    )
    weights = ensemble.params["0", "weight"]
    assert weights.shape == (3, 4, 3) and not torch.equal(weights[0], weights[1])
    x = torch.randn(5, 3)
    out = ensemble(x)
    assert out.shape == (3, 5, 2)
    for i in range(3):
        member = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
        ensemble.params.data[i].to_module(member, inplace=True)
        torch.testing.assert_close(out[i], member(x))
    per_copy = EnsembleModule(nn.Linear(3, 2), num_copies=2, expand_input=False)
    assert per_copy(torch.randn(2, 5, 3)).shape == (2, 5, 2)
    # the template module (registered as upstream, unused by forward) + the 4 stacked
    assert [n for n, _ in ensemble.named_parameters()][4:] == [
        "params_td.0.weight",
        "params_td.0.bias",
        "params_td.2.weight",
        "params_td.2.bias",
    ]
    with pytest.raises(ValueError, match="num_copies must be >= 1"):
        EnsembleModule(nn.Linear(1, 1), num_copies=0)


def test_skip_existing_wrap_module_and_decorator() -> None:
    from tdnn import WrapModule, as_tensordict_module, set_skip_existing

    calls: list[int] = []

    @as_tensordict_module(in_keys=["a"], out_keys=["b"])
    def add_one(a: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        return a + 1

    td = TensorDict({"a": torch.zeros(2)}, [2])
    add_one(td)
    with set_skip_existing(True):
        add_one(td)
    assert calls == [1]
    add_one(td)
    assert calls == [1, 1]
    wrapped = WrapModule(lambda t: t.set("c", t["b"] * 2), in_keys=["b"], out_keys=["c"])
    assert torch.equal(wrapped(td)["c"], torch.full((2,), 2.0))
    assert wrapped.in_keys == ["b"] and wrapped.out_keys == ["c"]


def test_tensor_calls_of_a_sequence_with_td_only_modules_and_discarded_outputs() -> None:
    class Double(TensorDictModuleBase):
        in_keys, out_keys = ["a"], ["b"]

        def forward(self, td: TensorDict) -> TensorDict:
            return td.set("b", td["a"] * 2)

    seen = []
    seq = TensorDictSequential(
        Double(),
        TensorDictModule(lambda b: seen.append(b.clone()), ["b"], ["_"]),  # output discarded
        TensorDictModule(lambda b: b + 1, ["b"], ["c"]),
    )
    b, c = seq(torch.ones(2))
    assert torch.equal(b, torch.full((2,), 2.0)) and torch.equal(c, torch.full((2,), 3.0))
    assert len(seen) == 1 and torch.equal(seen[0], b)


def test_keyword_arguments_reach_the_module_and_a_second_tensordict_is_the_output() -> None:
    m = TensorDictModule(lambda x, scale=1.0: x * scale, ["x"], ["y"])
    td = TensorDict({"x": torch.ones(3)}, [3])
    assert torch.equal(m(td, scale=5.0)["y"], torch.full((3,), 5.0))
    fresh, out = TensorDict({"x": torch.ones(3)}, [3]), TensorDict({}, [3])
    assert m(fresh, out) is out and "y" in out.keys() and "y" not in fresh.keys()
    with pytest.raises(TypeError, match="only a tensordict_out may be passed positionally"):
        m(td, torch.ones(3))
    seq = TensorDictSequential(m)
    fresh, out = TensorDict({"x": torch.ones(3)}, [3]), TensorDict({}, [3])
    assert seq(fresh, out) is out and torch.equal(out["y"], torch.ones(3))
    assert torch.equal(seq(fresh, scale=3.0)["y"], torch.full((3,), 3.0))
    with pytest.raises(TypeError, match="TensorDictSequential: after the TensorDict, only"):
        seq(fresh, torch.ones(3))


def test_sequential_append_and_insert_follow_the_keys() -> None:
    seq = TensorDictSequential(TensorDictModule(lambda x: x + 1, ["a"], ["b"]))
    assert seq.append(TensorDictModule(lambda x: x * 2, ["b"], ["c"])) is seq
    seq.insert(0, TensorDictModule(lambda x: x - 1, ["z"], ["a"]))
    assert seq.in_keys == ["z"] and seq.out_keys == ["a", "b", "c"] and len(seq) == 3
    out = seq(TensorDict({"z": torch.ones(1)}, []))
    assert out["c"].tolist() == [2.0]
    named = TensorDictSequential({"f": TensorDictModule(lambda x: x, ["a"], ["b"])})
    with pytest.raises(TypeError, match=r"insert: this sequence was built from a dict"):
        named.append(TensorDictModule(lambda x: x, ["b"], ["c"]))


def test_a_module_that_returns_nothing_is_refused() -> None:
    td = TensorDict({"a": torch.zeros(2)}, [2])
    with pytest.raises(RuntimeError, match=r"returned None for out_keys \['b'\]"):
        TensorDictModule(lambda x: None, ["a"], ["b"])(td)
    assert list(td.keys()) == ["a"]
    with pytest.raises(RuntimeError, match="returned None"):
        TensorDictModule(lambda x: None, ["a"], ["b"])(torch.zeros(2))


@pytest.mark.parametrize("inplace", [True, None])
def test_sequential_inplace_with_members_returning_new_tensordicts(inplace: bool | None) -> None:
    seq = TensorDictSequential(
        TensorDictModule(lambda x: x + 1, ["a"], ["b"], inplace=False),
        TensorDictModule(lambda x: x * 2, ["b"], ["c"], inplace=False),
        inplace=inplace,
    )
    td = TensorDict({"a": torch.ones(2)}, [2])
    out = seq(td)
    if inplace:  # what the last member returned is written back into the input, as upstream
        assert out is td and sorted(td.keys()) == ["a", "c"]
    else:  # the last member's result, as upstream
        assert out is not td and list(td.keys()) == ["a"] and "a" not in out.keys()
    assert out["c"].tolist() == [4.0, 4.0]


@pytest.mark.parametrize("named", [False, True])
def test_tensordict_params_apply_out_itself_takes_the_results(named: bool) -> None:
    # out= a TensorDictParams: its entries become the results, made parameters; it was
    # left untouched and a plain TensorDict of the results came back
    from tdnn import TensorDictParams

    leaves = {"w": torch.randn(2, 3), "n": {"c": torch.ones(2, dtype=torch.long)}}
    params = TensorDictParams(TensorDict(leaves, [2]))
    fn = (lambda k, x: x.float() * 2) if named else (lambda x: x.float() * 2)
    with params.unlock_():
        out = (params.named_apply if named else params.apply)(fn, out=params)
    assert out is params
    assert isinstance(params["n", "c"], nn.Parameter) and params["n", "c"].dtype == torch.float32
    assert params["n", "c"].tolist() == [2.0, 2.0]
    assert sorted(n for n, _ in params.named_parameters()) == ["n.c", "w"]


def test_a_module_wrapping_a_lambda_or_a_closure_pickles() -> None:
    import pickle

    offset = torch.tensor(2.0)
    for fn, want in ((lambda x: x + 1, 2.0), (lambda x: x * offset, 2.0)):
        module = TensorDictModule(fn, in_keys=["x"], out_keys=["y"])
        back = pickle.loads(pickle.dumps(module))
        assert back.in_keys == ["x"] and back.out_keys == ["y"]
        torch.testing.assert_close(back(x=torch.ones(2)), torch.full((2,), want))
        assert "module" not in dict(back.named_children())  # still a plain callable
    linear = pickle.loads(pickle.dumps(TensorDictModule(nn.Linear(2, 2), ["x"], ["y"])))
    assert isinstance(linear.module, nn.Linear)
    assert isinstance(copy.deepcopy(module).module, type(fn))


@pytest.mark.parametrize("wrong", [None, 123, [123], [("a", 1)]])
@pytest.mark.parametrize("which", ["in_keys", "out_keys"])
def test_keys_that_are_not_keys_raise_both_error_types(wrong: object, which: str) -> None:
    # a TypeError, and the ValueError of upstream's TensorDictModule
    keys: dict[str, object] = {"in_keys": ["x"], "out_keys": ["y"], which: wrong}
    for error in (TypeError, ValueError):
        with pytest.raises(error, match=f"TensorDictModule: {which} must be of type list, str"):
            TensorDictModule(nn.Identity(), **keys)  # type: ignore[arg-type]


def test_an_in_key_named_discard_warns() -> None:
    with pytest.warns(UserWarning, match='in key "_" reads an entry named "_"'):
        module = TensorDictModule(lambda x: x + 1, in_keys=["_"], out_keys=["y"])
    td = module(TensorDict({"_": torch.zeros(2)}, [2]))  # it still reads that entry
    torch.testing.assert_close(td["y"], torch.ones(2))
