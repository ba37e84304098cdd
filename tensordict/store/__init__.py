"""``tensordict.store``: TensorDicts kept in a Redis-protocol server (upstream's module path)."""

from tensordict._store import STORE_BACKENDS, LazyStackedTensorDictStore, TensorDictStore

__all__ = ["STORE_BACKENDS", "LazyStackedTensorDictStore", "TensorDictStore"]
