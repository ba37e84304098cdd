"""Deprecated home of ``tensorclass`` (the seeds' ``tensordict.prototype.tensorclass``);
``tensordict.prototype.fx`` holds upstream's prototype ``symbolic_trace``."""

from __future__ import annotations

import warnings
from typing import Any


def __getattr__(name: str) -> Any:
    if name == "tensorclass":
        warnings.warn(
            "tensordict.prototype.tensorclass is deprecated; use `from tensordict import "
            "tensorclass`",
            DeprecationWarning,
            stacklevel=2,
        )
        from tensordict import tensorclass

        return tensorclass
    raise AttributeError(f"module 'tensordict.prototype' has no attribute {name!r}")
