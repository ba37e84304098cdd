"""``tensordict.nn.ensemble``: upstream's module path for EnsembleModule."""

from tdnn._ensemble import EnsembleModule

__all__ = ["EnsembleModule"]
