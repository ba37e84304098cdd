"""tdnn.symbolic_trace (upstream's ``tensordict.prototype.fx``): TensorDict modules traced
into one ``torch.fx`` graph that reads and writes TensorDicts."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn

from tdnn import TDGraphModule, TensorDictModule, TensorDictSequential, symbolic_trace
from tensordict import TensorDict


class _TwoOutputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.linear(x)
        return h, h.softmax(-1)


class _Masked(nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return x * mask


def _inputs() -> TensorDict:
    return TensorDict(
        {"obs": {"x": torch.randn(5, 4), "mask": torch.randint(2, (5, 3))}}, batch_size=[5]
    )


def test_a_module_with_several_outputs_traces_to_the_same_results() -> None:
    module = TensorDictModule(
        _TwoOutputs(), in_keys=[("obs", "x")], out_keys=[("out", "h"), ("out", "p")]
    )
    traced = symbolic_trace(module)
    assert isinstance(traced, TDGraphModule)
    assert traced.in_keys == [("obs", "x")] and traced.out_keys == module.out_keys
    td = _inputs()
    want, got = module(td.clone(), tensordict_out=TensorDict()), TensorDict()
    assert traced(td, tensordict_out=got) is got
    assert set(got.keys(True, True)) == {("out", "h"), ("out", "p")}
    for key in (("out", "h"), ("out", "p")):
        torch.testing.assert_close(got[key], want[key])
    assert traced(td) is td and ("out", "p") in td.keys(True)  # into the input by default
    # one graph of the wrapped layer's operations, sharing its parameters
    calls = [n.target for n in traced.graph.nodes if n.op == "call_module"]
    assert calls == ["td_module.module.linear"]
    assert traced.graph_module.get_submodule(calls[0]).weight is module.module.linear.weight
    assert "softmax" in traced.code


def test_nested_sequences_trace_into_one_graph() -> None:
    first = TensorDictModule(
        _TwoOutputs(), in_keys=[("obs", "x")], out_keys=["h", "_"]
    )  # "_": an output not written
    masked = TensorDictModule(_Masked(), in_keys=["h", ("obs", "mask")], out_keys=["y"])
    again = TensorDictModule(nn.Linear(3, 3), in_keys=["y"], out_keys=["y"])
    seq = TensorDictSequential(TensorDictSequential(first, masked), again)
    traced = symbolic_trace(seq)
    td = _inputs()
    want = seq(td.clone())
    got = traced(td)
    assert set(got.keys(True, True)) == set(want.keys(True, True))
    for key in ("h", "y"):
        torch.testing.assert_close(got[key], want[key])
    calls = [n.target for n in traced.graph.nodes if n.op == "call_module"]
    assert len(calls) == 2  # the two linear layers; _Masked's product is traced through
    with pytest.raises(KeyError):
        traced(TensorDict(obs={"x": torch.randn(5, 4)}, batch_size=[5]))  # no mask


def test_symbolic_trace_refuses_what_is_not_a_tensordict_module() -> None:
    with pytest.raises(TypeError, match="symbolic_trace: expected a TensorDictModule"):
        symbolic_trace(nn.Linear(2, 2))  # type: ignore[arg-type]


def test_the_prototype_path_reaches_it_without_loading_the_module_layer_early() -> None:
    code = (
        "import sys, tensordict.prototype.fx as fx; assert 'tdnn' not in sys.modules; "
        "from tensordict.prototype.fx import symbolic_trace, TDGraphModule; import tdnn; "
        "assert symbolic_trace is tdnn.symbolic_trace and TDGraphModule is tdnn.TDGraphModule"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_library_layer_returning_a_tuple_traces_one_node_per_output() -> None:
    # torch.nn layers are not traced through: their call is one proxy, indexed per out key
    module = TensorDictModule(
        nn.GRU(4, 3, batch_first=True), in_keys=["x"], out_keys=["out", "hidden"]
    )
    traced = symbolic_trace(module)
    td = TensorDict(x=torch.randn(5, 2, 4))  # GRU hidden is (layers, batch, size)
    want = module(td.clone())
    got = traced(td.clone())
    for key in ("out", "hidden"):
        torch.testing.assert_close(got[key], want[key])
    assert [n.op for n in traced.graph.nodes].count("call_module") == 1
