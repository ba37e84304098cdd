"""The four module-layer names upstream also exports from ``tensordict`` itself, and the
public submodules ``import tensordict`` makes attributes upstream (``tensordict.utils``).

``from tensordict import TensorDictParams`` is common in code written for upstream. The
names are ``tdnn``'s; this module's ``module_layer_name`` is the package's ``__getattr__``
(PEP 562) and reaches them through the ``tensordict.nn`` alias on first use, so that
``import tensordict`` alone still never loads the module layer (tests/test_layers.py).
"""

from __future__ import annotations

import importlib

MODULE_LAYER = frozenset(
    {
        "TensorDictParams",
        "TensorClassModuleBase",
        "TensorClassModuleWrapper",
        "as_tensordict_module",
    }
)
# upstream's prototype ``tensordict.prototype.fx`` exports these; the names are tdnn's
PROTOTYPE_FX = frozenset({"TDGraphModule", "symbolic_trace"})
# upstream's ``import tensordict`` imports these, so ``tensordict.utils.NestedKey`` works
# without its own import; here each loads on first use
SUBMODULES = frozenset({"base", "functional", "nn", "persistent", "store", "tensordict", "utils"})


def module_layer_name(name: str) -> object:
    """One of :data:`MODULE_LAYER`, from ``tensordict.nn`` (which loads ``tdnn``), or one
    of :data:`SUBMODULES`.

    >>> import tensordict
    >>> tensordict.utils.NestedKey is tensordict.NestedKey
    True
    """
    if name in MODULE_LAYER:
        return getattr(importlib.import_module("tensordict.nn"), name)
    if name in SUBMODULES:
        return importlib.import_module(f"tensordict.{name}")
    raise AttributeError(f"module 'tensordict' has no attribute {name!r}")


def prototype_fx_name(name: str) -> object:
    """One of :data:`PROTOTYPE_FX`, from ``tensordict.nn`` (which loads ``tdnn``): the
    ``__getattr__`` of ``tensordict.prototype.fx``.

    >>> from tensordict.prototype.fx import symbolic_trace
    >>> symbolic_trace.__name__
    'symbolic_trace'
    """
    if name in PROTOTYPE_FX:
        return getattr(importlib.import_module("tensordict.nn"), name)
    raise AttributeError(f"module 'tensordict.prototype.fx' has no attribute {name!r}")
