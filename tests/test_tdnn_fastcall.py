"""TensorDict modules call ``forward`` directly only where ``nn.Module.__call__`` would
add nothing: every hook, a custom ``__call__`` and ``module.compile()`` still apply."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook

from tdnn import TensorDictModule, TensorDictSequential
from tdnn._fastcall import hookless, plain_calls
from tensordict import TensorDict


def _chain() -> tuple[list[nn.Linear], TensorDictSequential]:
    layers = [nn.Linear(3, 3) for _ in range(3)]
    keys = ["x", "h1", "h2", "y"]
    seq = TensorDictSequential(
        *[TensorDictModule(m, [keys[i]], [keys[i + 1]]) for i, m in enumerate(layers)]
    )
    return layers, seq


def test_outputs_match_plain_torch() -> None:
    layers, seq = _chain()
    x = torch.randn(4, 3)
    td = seq(TensorDict({"x": x}, [4]))
    torch.testing.assert_close(td["y"], nn.Sequential(*layers)(x))
    torch.testing.assert_close(td["h1"], layers[0](x))
    single = TensorDictModule(layers[0], ["x"], ["out"])
    torch.testing.assert_close(single(TensorDict({"x": x}, [4]))["out"], layers[0](x))
    torch.testing.assert_close(single.forward(TensorDict({"x": x}, [4]))["out"], layers[0](x))


def test_hooks_on_the_modules_and_on_the_layers_they_wrap_still_run() -> None:
    layers, seq = _chain()
    seen: list[str] = []
    member = seq.module[1]
    member.register_forward_pre_hook(lambda m, args: seen.append("member pre"))
    member.register_forward_hook(lambda m, args, out: seen.append("member post"))
    layers[2].register_forward_hook(lambda m, args, out: seen.append("layer post") or out * 0)
    seq.register_forward_hook(lambda m, args, out: seen.append("seq post"))
    td = seq(TensorDict({"x": torch.randn(2, 3)}, [2]))
    assert seen == ["member pre", "member post", "layer post", "seq post"]
    assert td["y"].eq(0).all()  # the layer's hook replaced its output
    single = TensorDictModule(layers[2], ["x"], ["z"])
    assert single(TensorDict({"x": torch.randn(2, 3)}, [2]))["z"].eq(0).all()


def test_a_global_forward_hook_sees_every_module() -> None:
    _, seq = _chain()
    seen: list[type] = []
    handle = register_module_forward_hook(lambda m, args, out: seen.append(type(m)))
    try:
        assert not plain_calls()
        seq(TensorDict({"x": torch.randn(2, 3)}, [2]))
    finally:
        handle.remove()
    assert plain_calls()
    assert seen.count(nn.Linear) == 3 and seen.count(TensorDictModule) == 3
    assert seen[-1] is TensorDictSequential


def test_a_custom_call_and_a_compiled_module_are_called_through_call() -> None:
    calls: list[str] = []

    class Logged(nn.Linear):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            calls.append("call")
            return super().__call__(*args, **kwargs)

    logged = Logged(3, 3)
    assert not hookless(logged)
    module = TensorDictModule(logged, ["x"], ["y"])
    module(TensorDict({"x": torch.randn(2, 3)}, [2]))
    assert calls == ["call"]
    compiled = nn.Linear(3, 3)
    compiled.compile(backend="eager")
    assert not hookless(compiled)
    x = torch.randn(2, 3)
    out = TensorDictSequential(TensorDictModule(compiled, ["x"], ["y"]))(TensorDict({"x": x}, [2]))
    torch.testing.assert_close(out["y"], nn.functional.linear(x, compiled.weight, compiled.bias))


def test_compiled_calls_keep_the_hooks() -> None:
    layers, seq = _chain()
    seq.module[0].register_forward_hook(lambda m, args, out: out.set("h1", out["h1"] * 0))
    single = TensorDictModule(nn.Linear(3, 3), ["x"], ["y"])

    def run(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        td = TensorDict({"x": x}, [x.shape[0]])
        return seq(td)["y"], single(td)["y"]

    x = torch.randn(4, 3)
    compiled = torch.compile(run, fullgraph=True, backend="eager")
    got, eager = compiled(x), run(x)
    torch.testing.assert_close(got, eager)
    expected = layers[2](layers[1](torch.zeros(4, 3)))  # the hook zeroed h1
    torch.testing.assert_close(got[0], expected)
    torch.testing.assert_close(got[1], single.module(x))
