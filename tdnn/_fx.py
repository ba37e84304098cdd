"""symbolic_trace: a TensorDictModule or TensorDictSequential as a ``torch.fx`` graph that
reads its inputs from, and writes its outputs to, a TensorDict (upstream's prototype
``tensordict.prototype.fx``)."""

from __future__ import annotations

from typing import Any

from torch import fx, nn

from tdnn._base import DISCARD, TensorDictModuleBase
from tdnn._module import TensorDictModule
from tdnn._sequential import TensorDictSequential
from tensordict import NestedKey


class _TensorCall(nn.Module):
    """The root that is traced: the TensorDict module called with plain tensors (its
    in_keys, in order), a call that builds no TensorDict and returns its out_keys."""

    def __init__(self, td_module: TensorDictModuleBase) -> None:
        super().__init__()
        self.td_module = td_module

    def forward(self, *inputs: Any) -> Any:
        return self.td_module(*inputs)


class TDGraphModule(nn.Module):
    """What :func:`symbolic_trace` returns: a ``torch.fx.GraphModule`` of the traced
    module's computation, called with a TensorDict. A call reads ``in_keys`` from
    ``tensordict``, runs the graph and writes the outputs at ``out_keys``, into
    ``tensordict_out`` when given, else into ``tensordict``, and returns that TensorDict.
    ``graph_module`` (and so ``graph`` and ``code``) is the traced graph; its parameters
    are those of the traced module (shared, not copied).
    """

    def __init__(
        self, graph_module: fx.GraphModule, in_keys: list[NestedKey], out_keys: list[NestedKey]
    ) -> None:
        super().__init__()
        self.graph_module = graph_module
        self.in_keys = list(in_keys)
        self.out_keys = list(out_keys)

    @property
    def graph(self) -> fx.Graph:
        """The traced graph."""
        return self.graph_module.graph

    @property
    def code(self) -> str:
        """The Python code generated from :attr:`graph`."""
        return self.graph_module.code

    def forward(self, tensordict: Any, tensordict_out: Any = None) -> Any:
        outputs = self.graph_module(*[tensordict.get(key) for key in self.in_keys])
        written = [key for key in self.out_keys if key != DISCARD]
        if len(written) == 1:
            outputs = (outputs,)
        dest = tensordict if tensordict_out is None else tensordict_out
        for key, value in zip(written, outputs, strict=True):
            dest.set(key, value)
        return dest


def symbolic_trace(td_module: TensorDictModuleBase) -> TDGraphModule:
    """Trace ``td_module`` (a :class:`TensorDictModule` or a :class:`TensorDictSequential`
    of them, nested ones included) into a :class:`TDGraphModule`: the wrapped modules'
    operations as one ``torch.fx`` graph, with the same inputs and outputs. The wrapped
    modules must be traceable by ``torch.fx.symbolic_trace`` (no control flow on tensor
    values). Prototype API, as upstream's ``tensordict.prototype.fx.symbolic_trace``.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import TensorDictModule, TensorDictSequential
    >>> from tensordict.prototype.fx import symbolic_trace
    >>> seq = TensorDictSequential(
    ...     TensorDictModule(nn.Linear(3, 4), in_keys=["x"], out_keys=["hidden"]),
    ...     TensorDictModule(nn.ReLU(), in_keys=["hidden"], out_keys=["y"]),
    ... )
    >>> traced = symbolic_trace(seq)
    >>> [node.target for node in traced.graph.nodes if node.op == "call_module"]
    ['td_module.module.0.module', 'td_module.module.1.module']
    >>> td = traced(TensorDict(x=torch.ones(2, 3), batch_size=[2]))
    >>> sorted(td.keys())
    ['hidden', 'x', 'y']
    >>> torch.equal(td["y"], seq(TensorDict(x=torch.ones(2, 3), batch_size=[2]))["y"])
    True
    """
    if not isinstance(td_module, (TensorDictModule, TensorDictSequential)):
        raise TypeError(
            "symbolic_trace: expected a TensorDictModule or a TensorDictSequential, got "
            f"{type(td_module).__name__}"
        )
    in_keys = list(td_module.in_keys)
    if not in_keys:
        raise ValueError(f"symbolic_trace: {type(td_module).__name__} has no in_keys to trace")
    root = _TensorCall(td_module)
    # one placeholder per in key: torch.fx reads a tuple of concrete args as the *inputs
    flat: Any = tuple(fx.PH for _ in in_keys)  # type: ignore[attr-defined]
    graph = fx.Tracer().trace(root, concrete_args=flat)
    return TDGraphModule(fx.GraphModule(root, graph), in_keys, list(td_module.out_keys))
