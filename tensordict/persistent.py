"""Upstream's ``tensordict.persistent`` module path: a public face, re-exporting only."""

from tensordict._io_persistent import PersistentTensorDict

__all__ = ["PersistentTensorDict"]
