"""The four module-layer names upstream also exports from ``tensordict`` itself.

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


def module_layer_name(name: str) -> object:
    """One of :data:`MODULE_LAYER`, from ``tensordict.nn`` (which loads ``tdnn``)."""
    if name in MODULE_LAYER:
        return getattr(importlib.import_module("tensordict.nn"), name)
    raise AttributeError(f"module 'tensordict' has no attribute {name!r}")
