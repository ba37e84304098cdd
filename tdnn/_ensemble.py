"""EnsembleModule: independently initialised copies of a module run with one vmap."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from tdnn._base import TensorDictModuleBase, _reset
from tdnn._params import TensorDictParams
from tensordict import TensorDict, is_tensor_collection, lazy_stack


class EnsembleModule(TensorDictModuleBase):
    """``num_copies`` copies of ``module``, each initialised independently (the module's
    ``reset_parameters`` run once per copy), evaluated with one ``torch.vmap`` over their
    stacked parameters (``params_td``, registered for optimisers).

    With ``expand_input=True`` every copy sees the same input and the output gains a
    leading dim of size ``num_copies``; with ``False`` the input must already carry
    that leading dim. vmap runs with ``randomness="different"``, so dropout and other
    random ops draw independently for each copy. A TensorDict module keeps its keys:
    the ensemble reads ``in_keys`` and writes ``out_keys``.

    >>> import torch
    >>> from torch import nn
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import EnsembleModule, TensorDictModule
    >>> ensemble = EnsembleModule(TensorDictModule(nn.Linear(3, 2), ["x"], ["y"]), num_copies=4)
    >>> ensemble(TensorDict(x=torch.randn(5, 3), batch_size=[5]))["y"].shape
    torch.Size([4, 5, 2])
    """

    def __init__(self, module: nn.Module, num_copies: int, expand_input: bool = True) -> None:
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(
                f"EnsembleModule: module must be an nn.Module, got {type(module).__name__}"
            )
        if not isinstance(num_copies, int) or isinstance(num_copies, bool):
            raise TypeError(
                f"EnsembleModule: num_copies must be an int, got {type(num_copies).__name__} "
                f"{num_copies!r}"
            )
        if num_copies < 1:
            raise ValueError(f"EnsembleModule: num_copies must be >= 1, got {num_copies}")
        self.in_keys = list(getattr(module, "in_keys", []))
        self.out_keys = list(getattr(module, "out_keys", []))
        stacked = TensorDict.from_modules(*[module] * num_copies)
        for i in range(num_copies):  # reset each copy through the module itself
            _reset_copy(module, stacked[i])
        # Registered before params_td, as upstream: state_dict() and parameters() list
        # module.* (the template's own tensors, swapped out while forward runs) first, so
        # checkpoints and optimiser states load across the two libraries; and forward
        # runs the module itself, so train()/eval() and changes to it apply.
        self.module = module
        self.params_td = TensorDictParams(stacked)
        self.num_copies = num_copies
        self.expand_input = expand_input

    @property
    def params(self) -> TensorDictParams:
        """The stacked parameters (``params_td``)."""
        return self.params_td

    def reset_parameters_recursive(self, parameters: Any = None) -> Any:
        """Re-initialise each copy in ``parameters`` (leading dim: the copies) in place.

        Returns a lazy stack of the copies. The copies live in the TensorDict given, so
        one is required (pass ``ensemble.params_td`` to reset the ensemble's own).

        >>> import torch
        >>> from torch import nn
        >>> from tensordict.nn import EnsembleModule
        >>> e = EnsembleModule(nn.Linear(3, 2), num_copies=2)
        >>> before = e.params_td.data.clone()
        >>> e.reset_parameters_recursive(e.params_td).batch_size
        torch.Size([2])
        >>> bool((e.params_td.data != before).any())
        True
        """
        if parameters is None:
            raise ValueError(
                "EnsembleModule.reset_parameters_recursive: the copies' parameters are "
                "required (expected a TensorDict with a leading dim of copies, e.g. "
                "ensemble.params_td; got None)"
            )
        if parameters.ndim == 0:
            raise ValueError(
                "EnsembleModule.reset_parameters_recursive: expected parameters with a "
                f"leading dim of copies, got batch_size {tuple(parameters.batch_size)}"
            )
        copies = list(parameters.unbind(0))
        for one in copies:
            _reset_copy(self.module, one)
        return lazy_stack(copies, 0)

    def vmapped_forward(self, *args: Any) -> Any:
        """Upstream's ``vmapped_forward(input, params)``: every copy run on ``input``
        (with ``expand_input``, else input ``i`` for copy ``i``) with its slice of
        ``params`` (``params_td`` or a TensorDict shaped like it).

        >>> import torch
        >>> from torch import nn
        >>> from tensordict.nn import EnsembleModule
        >>> e = EnsembleModule(nn.Linear(3, 2), num_copies=2)
        >>> e.vmapped_forward(torch.zeros(1, 3), e.params_td).shape
        torch.Size([2, 1, 2])
        """
        if len(args) < 2:
            raise TypeError(
                f"EnsembleModule.vmapped_forward: expected (input, ..., params), got {len(args)} "
                "argument(s)"
            )
        *inputs, params = args
        if isinstance(params, TensorDictParams):
            params = params._tree()  # the parameters themselves: gradients reach them
        return self._copies(params, *inputs)

    def forward(self, *args: Any) -> Any:
        return self._copies(self.params_td._tree(), *args)

    def _copies(self, params: Any, *args: Any) -> Any:
        dims = (0, *([None] * len(args))) if self.expand_input else (0, *([0] * len(args)))
        if args and is_tensor_collection(args[0]):
            if len(args) > 1:  # (they were ignored)
                raise TypeError(
                    f"EnsembleModule: called with a TensorDict and {len(args) - 1} more "
                    "arguments; a TensorDict input comes alone"
                )
            td = args[0]
            if self.expand_input:
                td = td.expand(self.num_copies, *td.batch_size)
            return torch.vmap(self._one_copy, (0, 0), randomness="different")(params, td)
        return torch.vmap(self._one_copy, dims, randomness="different")(params, *args)

    def _one_copy(self, params: Any, *args: Any) -> Any:
        module = self.module
        with params.to_module(module, preserve_module_state=False):
            return module(*args)


def _reset_copy(module: nn.Module, params: Any) -> None:
    """Run ``module``'s resets with ``params`` swapped in, writing into them."""
    if params.ndim:
        for one in params.unbind(0):
            _reset_copy(module, one)
        return
    with params.to_module(module, preserve_module_state=False), torch.no_grad():
        _reset(_Holder(module))


class _Holder(nn.Module):
    """A parent for ``module`` so that resetting reaches the module itself too."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.inner = module
