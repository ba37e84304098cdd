"""Upstream's ``tensordict.store._store`` module path, where ``TensorDictStore`` is named
(its ``__module__``, so that pickles of the class find it): re-exports only."""

from tensordict._store import LazyStackedTensorDictStore, TensorDictStore

__all__ = ["LazyStackedTensorDictStore", "TensorDictStore"]
