"""torch.compile over TensorDicts: one graph, no graph break, no recompile on same-shape inputs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from benchmarks._cases_compile import PlainChain, _linears, chain, chain_dict, sequence
from tensordict import TensorDict, UnbatchedTensor, tensorclass


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _seq_run() -> tuple[Callable[[torch.Tensor], TensorDict], PlainChain]:
    linears = _linears()
    seq = sequence(linears)

    def run(x: torch.Tensor) -> TensorDict:
        return seq(TensorDict({"h0": x}, [x.shape[0]]))

    return run, PlainChain(linears)


def _one_graph(fn: Callable[..., Any], *args: Any) -> None:
    explained = torch._dynamo.explain(fn)(*args)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1


def test_sequence_of_four_modules_is_one_graph() -> None:
    run, plain = _seq_run()
    x = torch.randn(32, 16)
    _one_graph(run, x)
    torch._dynamo.reset()
    out = torch.compile(run, fullgraph=True, backend="aot_eager")(x)
    expected = plain(x)
    assert sorted(out.keys()) == sorted(expected)
    for key, value in expected.items():
        torch.testing.assert_close(out[key], value)
    assert out.batch_size == torch.Size([32])


def test_op_chain_is_one_graph() -> None:
    d = {f"k{i}": torch.randn(32, 8) for i in range(4)}
    td = TensorDict(d, [32])
    _one_graph(chain, td)
    torch._dynamo.reset()
    out = torch.compile(chain, fullgraph=True, backend="aot_eager")(td)
    expected = chain_dict(d)
    assert isinstance(out, TensorDict) and out.batch_size == td.batch_size
    for key, value in expected.items():
        torch.testing.assert_close(out[key], value)


@pytest.mark.parametrize("batch", [37, 5000])  # inside and past the batch-size cache
def test_new_inputs_of_the_same_shape_do_not_recompile(batch: int) -> None:
    run, plain = _seq_run()
    compiled = torch.compile(run, fullgraph=True, backend="aot_eager")
    compiled(torch.randn(batch, 16))
    x = torch.randn(batch, 16)
    with torch.compiler.set_stance("fail_on_recompile"):
        out = compiled(x)
    torch.testing.assert_close(out["h4"], plain(x)["h4"])


def test_a_recompile_is_reported_by_the_stance() -> None:
    """The check above can fail: a changed guard does raise under this stance."""
    compiled = torch.compile(lambda td: td + 1, fullgraph=True, backend="aot_eager")
    compiled(TensorDict({"a": torch.zeros(3)}, [3]))
    with (
        torch.compiler.set_stance("fail_on_recompile"),
        pytest.raises(RuntimeError, match="[Rr]ecompil"),
    ):
        compiled(TensorDict({"a": torch.zeros(3), "b": torch.zeros(3)}, [3]))


def _aliasing_guards(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The guards of ``fn`` that check two paths reach one object (evaluated in Python on
    every compiled call)."""
    explained = torch._dynamo.explain(fn)(*args)
    return [str(g) for g in explained.out_guards if "DUPLICATE_INPUT" in str(g.create_fn_name())]


def test_op_chain_reaches_no_object_by_two_paths() -> None:
    td = TensorDict({f"k{i}": torch.randn(32, 8) for i in range(4)}, [32])
    assert _aliasing_guards(chain, td) == []
    assert _aliasing_guards(lambda t: (t * 2).exp(), td) == []


def _mro_guards(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The guards of ``fn`` that a name is still absent from a class of an MRO."""
    explained = torch._dynamo.explain(fn)(*args)
    return [str(g) for g in explained.out_guards if g.create_fn_name() == "DICT_CONTAINS"]


@pytest.mark.parametrize("lazy", [False, True])
def test_collection_attributes_resolve_on_the_class_itself(lazy: bool) -> None:
    # each name read on the way costs no absence check on the twenty-odd mixins
    td = TensorDict({f"k{i}": torch.randn(32, 8) for i in range(4)}, [32])
    if lazy:
        td = torch.stack([td[:16], td[16:]], 0)  # type: ignore[assignment]
    assert _mro_guards(lambda t: (t * 2).exp(), td) == []


@tensorclass
class _CompiledPoint:
    x: torch.Tensor
    y: torch.Tensor


def test_tensorclass_ops_are_one_graph() -> None:
    point = _CompiledPoint(x=torch.randn(4, 3), y=torch.randn(4), batch_size=[4])

    def step(p: _CompiledPoint) -> _CompiledPoint:
        return (p + 1).replace(x=p.x * 2)

    _one_graph(step, point)
    out = torch.compile(step, fullgraph=True, backend="aot_eager")(point)
    assert type(out) is _CompiledPoint and out.batch_size == (4,)
    torch.testing.assert_close(out.x, point.x * 2)
    torch.testing.assert_close(out.y, point.y + 1)


@tensorclass
class _CompiledDefault:
    x: torch.Tensor
    y: torch.Tensor | None = None


@pytest.mark.parametrize("by", ["keyword", "position", "default", "device"])
def test_a_tensorclass_built_inside_a_compiled_function_is_one_graph(by: str) -> None:
    def build(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        p: Any
        if by == "keyword":
            p = _CompiledPoint(x=x, y=y, batch_size=[4])
        elif by == "position":
            p = _CompiledPoint(x, y, batch_size=[4])
        elif by == "default":  # the general constructor path
            p = _CompiledDefault(x=x, batch_size=[4]).set("y", y)
        else:
            p = _CompiledPoint(x, y, batch_size=[4], device="cpu")
        return (p.x * p.y.unsqueeze(-1)).sum(-1) + p[1:].batch_size[0]

    x, y = torch.randn(4, 3), torch.randn(4)
    _one_graph(build, x, y)
    compiled = torch.compile(build, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x, y), build(x, y))


def test_vmap_over_a_tensordict_compiles_as_it_runs_eagerly() -> None:
    td = TensorDict(
        {"a": torch.arange(24.0).reshape(3, 4, 2), "n": {"b": torch.ones(3, 4)}}, [3, 4]
    )

    def f(t: TensorDict) -> torch.Tensor:  # -1: the last batch dim, eager and compiled
        return torch.vmap(lambda u: u["a"].sum() + u["n", "b"].sum(), in_dims=-1)(t)

    def g(p: _CompiledPoint) -> torch.Tensor:
        return torch.vmap(lambda q: q.x * 2 + q.y.unsqueeze(-1))(p)

    _one_graph(f, td)
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(td), f(td))
    point = _CompiledPoint(x=torch.randn(4, 3), y=torch.randn(4), batch_size=[4])
    torch.testing.assert_close(
        torch.compile(g, fullgraph=True, backend="aot_eager")(point), g(point)
    )


@pytest.mark.parametrize("style", ["context", "return_swap"])
def test_vmapped_to_module_is_one_graph_with_eager_gradients(style: str) -> None:
    from tensordict import TensorDictParams

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    stacked = TensorDict.from_module(module).data.expand(4).clone()
    params = TensorDictParams(stacked.apply(lambda t: t.normal_()))

    def call(x: torch.Tensor, p: TensorDict) -> torch.Tensor:
        if style == "context":
            with p.to_module(module):
                return module(x)
        swap = p.to_module(module, return_swap=True)
        out = module(x)
        swap.to_module(module, return_swap=False)
        return out

    def grads(fn: Callable[..., torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        for leaf in params.values(True, True):
            leaf.grad = None
        out = fn(x, params)
        out.square().mean().backward()
        return out.detach(), [leaf.grad.clone() for leaf in params.values(True, True)]

    x = torch.randn(2, 5)
    vmapped = torch.vmap(call, (None, 0))
    _one_graph(vmapped, x, params)
    torch._dynamo.reset()
    eager_out, eager_grads = grads(vmapped)
    out, compiled_grads = grads(torch.compile(vmapped, fullgraph=True, backend="aot_eager"))
    torch.testing.assert_close(out, eager_out)
    for got, expected in zip(compiled_grads, eager_grads, strict=True):
        torch.testing.assert_close(got, expected)
    # the module's own parameters are back, as parameters
    assert all(type(p) is torch.nn.Parameter for p in module.parameters())
    assert module[0].weight.shape == torch.Size([6, 5])


@pytest.mark.parametrize("kind", ["tensors", "parameters"])
def test_compiled_to_module_keeps_a_frozen_slot_frozen(kind: str) -> None:
    module = torch.nn.Linear(3, 2)
    module.weight.requires_grad_(False)
    if kind == "tensors":
        values = TensorDict.from_module(module).apply(
            lambda t: torch.randn_like(t).requires_grad_()
        )
    else:  # another module's: nn.Parameters that require grad
        values = TensorDict.from_module(torch.nn.Linear(3, 2))

    def call(x: torch.Tensor, p: TensorDict) -> torch.Tensor:
        with p.to_module(module):
            return module(x)

    x = torch.randn(4, 3)
    _one_graph(call, x, values)
    torch._dynamo.reset()
    torch.compile(call, fullgraph=True, backend="aot_eager")(x, values).sum().backward()
    assert values["weight"].grad is None  # the slot does not require grad: detached
    torch.testing.assert_close(values["bias"].grad, torch.full((2,), 4.0))
    assert type(module.weight) is torch.nn.Parameter and not module.weight.requires_grad


# (after the graph break dynamo compiles the walk's frames one by one as they run eagerly,
# and warns once that it cannot trace torch's is_functorch_wrapped_tensor in one of them)
@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")
def test_compiled_to_module_takes_memory_mapped_values(tmp_path: Any) -> None:
    module = torch.nn.Linear(3, 2)
    values = TensorDict.from_module(module).data.clone().apply(torch.randn_like)
    mapped = values.memmap(tmp_path / "ck")

    def call(x: torch.Tensor, p: TensorDict) -> torch.Tensor:
        with p.to_module(module):
            return module(x)

    x = torch.randn(4, 3)
    expected = torch.nn.functional.linear(x, values["weight"], values["bias"])
    torch.testing.assert_close(call(x, mapped), expected)
    torch._dynamo.reset()  # (a graph break where the mapped leaf becomes a plain view)
    torch.testing.assert_close(torch.compile(call, backend="aot_eager")(x, mapped), expected)
    assert all(type(p) is torch.nn.Parameter for p in module.parameters())


@tensorclass
class _Doubled:
    x: torch.Tensor

    def __post_init__(self) -> None:
        self.x = self.x * 2


@pytest.mark.parametrize("name", ["from_tensordict", "_from_tensordict"])
def test_a_tensorclass_wrapping_a_tensordict_runs_post_init_in_one_graph(name: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = getattr(_Doubled, name)(TensorDict(x=x, batch_size=())).x
        return out

    x = torch.ones(3)
    torch.testing.assert_close(torch.compile(fn, fullgraph=True, backend="eager")(x), x * 2)


_UNBATCHED_OPS: dict[str, Callable[[TensorDict], TensorDict]] = {
    "clone": lambda t: t.clone(),
    "index": lambda t: t[0],
    "stack": lambda t: torch.stack([t, t], 1),
    "select leaves": lambda t: t.select(*t.keys(True, True)),
}


@pytest.mark.parametrize("name", sorted(_UNBATCHED_OPS))
def test_ops_on_an_unbatched_entry_are_one_graph(name: str) -> None:
    op = _UNBATCHED_OPS[name]
    td = TensorDict({"a": torch.randn(4, 3), "u": UnbatchedTensor(torch.randn(5))}, [4])
    out = torch.compile(op, fullgraph=True, backend="eager")(td)
    expected = op(td)
    u, got = td.get("u"), out.get("u")
    assert type(got) is UnbatchedTensor and got.batch_size == expected.batch_size
    assert out.batch_size == expected.batch_size
    # a copy for clone; the same storage, shared by the batch, for shape ops
    assert (got.data_ptr() == u.data_ptr()) is (name != "clone")
    torch.testing.assert_close(got.as_subclass(torch.Tensor), u.as_subclass(torch.Tensor))
    torch.testing.assert_close(out["a"], expected["a"])
