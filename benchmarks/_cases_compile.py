"""Cases for compiled code (issue 19): TensorDict op chains and a module sequence under compile.

Each library function is compiled with ``torch.compile(fullgraph=True)`` (one graph or an
error) and timed against the same computation compiled over plain tensors in a dict.
The steady-state cases time calls of the already-compiled function; the compile-time
cases reset dynamo and compile from scratch on every call (inductor's on-disk caches
stay warm for both sides, so they time tracing, guards and graph lowering).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from benchmarks._harness import Case, Fn
from tdnn import TensorDictModule, TensorDictSequential
from tensordict import TensorDict


def _leaves(n: int = 10) -> dict[str, torch.Tensor]:
    return {f"k{i}": torch.randn(32, 8) for i in range(n)}


def chain(td: TensorDict) -> TensorDict:
    """The op chain: arithmetic, an apply, a reduction-free pointwise op."""
    return ((td + 1) * 2).apply(torch.relu)


def chain_dict(d: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The same chain over a dict of plain tensors."""
    return {k: torch.relu((v + 1) * 2) for k, v in d.items()}


def _linears(n: int = 4, width: int = 16) -> list[nn.Linear]:
    torch.manual_seed(0)
    return [nn.Linear(width, width) for _ in range(n)]


def sequence(linears: list[nn.Linear]) -> TensorDictSequential:
    """A TensorDictSequential ``h0 -> h1 -> ... -> hN`` of the given modules."""
    return TensorDictSequential(
        *(TensorDictModule(m, [f"h{i}"], [f"h{i + 1}"]) for i, m in enumerate(linears))
    )


class PlainChain(nn.Module):
    """The plain-tensor equivalent of :func:`sequence`: every hidden state in a dict."""

    def __init__(self, linears: list[nn.Linear]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(linears)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        out = {"h0": x}
        for i, layer in enumerate(self.layers):
            x = layer(x)
            out[f"h{i + 1}"] = x
        return out


def _seq_fns() -> tuple[Callable[[torch.Tensor], Any], Callable[[torch.Tensor], Any]]:
    linears = _linears()
    seq = sequence(linears)
    plain = PlainChain(linears)

    def lib(x: torch.Tensor) -> TensorDict:
        return seq(TensorDict({"h0": x}, [x.shape[0]]))

    return lib, plain


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    return torch.compile(fn, fullgraph=True)


def _warm(lib: Fn, base: Fn) -> tuple[Fn, Fn]:
    """Call both a few times so that a recompile (if any) is not left to calibration."""
    for _ in range(3):
        lib()
        base()
    return lib, base


def chain_steady() -> tuple[Fn, Fn]:
    d = _leaves()
    td = TensorDict(d, [32])
    lib, base = _compiled(chain), _compiled(chain_dict)
    return _warm(lambda: lib(td), lambda: base(d))


def seq_steady() -> tuple[Fn, Fn]:
    lib_fn, base_fn = _seq_fns()
    x = torch.randn(32, 16)
    lib, base = _compiled(lib_fn), _compiled(base_fn)
    return _warm(lambda: lib(x), lambda: base(x))


def _fresh(fn: Callable[..., Any], *args: Any) -> Fn:
    """A callable that compiles ``fn`` from scratch and calls it once."""

    def call() -> object:
        torch._dynamo.reset()
        return _compiled(fn)(*args)

    return call


def chain_compile() -> tuple[Fn, Fn]:
    d = _leaves()
    td = TensorDict(d, [32])
    return _fresh(chain, td), _fresh(chain_dict, d)


def seq_compile() -> tuple[Fn, Fn]:
    lib_fn, base_fn = _seq_fns()
    x = torch.randn(32, 16)
    return _fresh(lib_fn, x), _fresh(base_fn, x)


CASES = [
    Case(
        "compiled ((td + 1) * 2).apply(relu), 10 leaves [32,8]",
        "compiled, dict of tensors",
        1.1,
        chain_steady,
    ),
    Case(
        "compiled TensorDictSequential of 4 Linear(16,16), batch 32",
        "compiled plain module, dict out",
        1.1,
        seq_steady,
    ),
    Case(
        "compile time: ((td + 1) * 2).apply(relu), 10 leaves",
        "compile the dict version",
        None,
        chain_compile,
        rounds=3,
    ),
    Case(
        "compile time: TensorDictSequential of 4 Linear(16,16)",
        "compile the plain module",
        None,
        seq_compile,
        rounds=3,
    ),
]
