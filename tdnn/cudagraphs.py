"""``tensordict.nn.cudagraphs``: upstream's module path for CudaGraphModule."""

from tdnn._wrappers import CudaGraphModule

__all__ = ["CudaGraphModule"]
