"""The one place that touches torch's private APIs (``torch._foreach_*``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def foreach(name: str) -> Callable[..., Any] | None:
    """The multi-tensor kernel ``torch._foreach_<name>``, or None where torch lacks it."""
    return getattr(torch, f"_foreach_{name}", None)
