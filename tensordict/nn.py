"""``tensordict.nn``: the upstream spelling of the ``tdnn`` package, loaded on import only.

This module is the one place where ``tensordict`` refers to ``tdnn``: nothing in the
core imports it at import time, so ``import tensordict`` never loads the module layer
(``TensorDict.from_module(..., as_module=True)`` loads it through this alias, on request).
"""

from __future__ import annotations

import importlib
import sys

sys.modules[__name__] = importlib.import_module("tdnn")
