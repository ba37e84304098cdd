"""Public face of upstream's ``tensordict.memmap``: the memory-mapped tensor."""

from tensordict._memmap import MemoryMappedTensor

__all__ = ["MemoryMappedTensor"]
