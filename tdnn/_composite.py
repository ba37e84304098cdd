"""CompositeDistribution: several distributions read from, and sampled into, one TensorDict."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from tdnn._interaction import InteractionType, composite_lp_aggregate, pick
from tensordict import NestedKey, TensorDict, unravel_key

_NO_SHAPE = torch.Size()


def _suffixed(key: NestedKey, suffix: str) -> NestedKey:
    """``key`` with ``suffix`` appended to its last name: ``("a", "x")`` -> ``("a", "x_sfx")``."""
    flat = unravel_key(key)
    if isinstance(flat, str):
        return flat + suffix
    return (*flat[:-1], flat[-1] + suffix)


def log_prob_key_of(key: NestedKey) -> NestedKey:
    """``"x"`` -> ``"x_log_prob"``; ``("a", "x")`` -> ``("a", "x_log_prob")``."""
    return _suffixed(key, "_log_prob")


def summed(values: Iterable[torch.Tensor], batch_ndim: int) -> Any:
    """The sum of per-member values over the members and each one's dims past the first
    ``batch_ndim`` (its event dims): what an aggregated log-prob or entropy is."""
    total: Any = 0
    for v in values:
        extra = v.ndim - batch_ndim
        total = total + (v.sum(tuple(range(-extra, 0))) if extra > 0 else v)
    return total


class CompositeDistribution(torch.distributions.Distribution):
    """Distributions keyed like a TensorDict: ``params[key]`` holds the keyword arguments
    of ``distribution_map[key]``; samples, modes and means are TensorDicts with those keys
    (or ``name_map[key]``); ``log_prob``/``entropy`` give one ``<key>_log_prob`` /
    ``<key>_entropy`` entry each, or their sum when ``composite_lp_aggregate()`` is on.

    >>> import torch
    >>> from torch.distributions import Normal, Categorical
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import CompositeDistribution
    >>> params = TensorDict(
    ...     cont=TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3]),
    ...     disc=TensorDict(logits=torch.zeros(3, 4), batch_size=[3]),
    ...     batch_size=[3],
    ... )
    >>> dist = CompositeDistribution(params, {"cont": Normal, "disc": Categorical})
    >>> sample = dist.sample()
    >>> sorted(dist.log_prob(sample).keys())
    ['cont_log_prob', 'disc_log_prob']
    """

    def __init__(
        self,
        params: Any,
        distribution_map: dict[NestedKey, Callable[..., Any]],
        *,
        name_map: dict[NestedKey, NestedKey] | None = None,
        extra_kwargs: dict[NestedKey, dict[str, Any]] | None = None,
        log_prob_key: NestedKey = "sample_log_prob",
        entropy_key: NestedKey = "entropy",
        **kwargs: Any,
    ) -> None:
        extra_kwargs = extra_kwargs or {}
        dists: dict[NestedKey, Any] = {}
        for key, cls in distribution_map.items():
            sub = params.get(key)
            args = {k: sub.get(k) for k in list(sub.keys())}
            name = unravel_key(name_map[key]) if name_map and key in name_map else unravel_key(key)
            dists[name] = cls(**args, **extra_kwargs.get(key, {}))
        self._setup(params.batch_size, dists, log_prob_key, entropy_key)

    arg_constraints: dict[str, Any] = {}  # noqa: RUF012  (the members check their own)

    def _setup(
        self,
        batch_shape: Sequence[int],
        dists: dict[NestedKey, Any],
        log_prob_key: NestedKey = "sample_log_prob",
        entropy_key: NestedKey = "entropy",
    ) -> None:
        """A ``torch.distributions.Distribution`` of ``batch_shape`` over ``dists``."""
        torch.distributions.Distribution.__init__(
            self, torch.Size(batch_shape), validate_args=False
        )
        self.dists = dists
        self.log_prob_key = log_prob_key
        self.entropy_key = entropy_key

    @classmethod
    def from_distributions(
        cls, params: Any, distributions: dict[NestedKey, Any], **kwargs: Any
    ) -> CompositeDistribution:
        """A composite of already-built ``distributions`` (``params`` gives the batch size).

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)})
        >>> d.sample()["x"].shape
        torch.Size([2])
        """
        self = cls.__new__(cls)
        self._setup(
            params.batch_size,
            {unravel_key(k): d for k, d in distributions.items()},
            kwargs.get("log_prob_key", "sample_log_prob"),
            kwargs.get("entropy_key", "entropy"),
        )
        return self

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        """Whether every member has ``rsample``."""
        return all(d.has_rsample for d in self.dists.values())

    def _gather(self, values: dict[NestedKey, Any], shape: Sequence[int] = ()) -> TensorDict:
        return TensorDict(values, [*shape, *self.batch_shape])

    def sample(self, shape: Sequence[int] | torch.Size = _NO_SHAPE) -> TensorDict:  # type: ignore[override]
        """One sample of each member, as a TensorDict."""
        return self._gather({k: d.sample(shape) for k, d in self.dists.items()}, shape)

    def rsample(self, shape: Sequence[int] | torch.Size = _NO_SHAPE) -> TensorDict:  # type: ignore[override]
        """Reparameterised samples (``sample`` for members without ``rsample``)."""
        return self._gather(
            {
                k: d.rsample(shape) if d.has_rsample else d.sample(shape)
                for k, d in self.dists.items()
            },
            shape,
        )

    def _stat(self, name: str) -> TensorDict:
        return self._gather({k: getattr(d, name) for k, d in self.dists.items()})

    @property
    def mode(self) -> TensorDict:  # type: ignore[override]
        """Each member's mode."""
        return self._stat("mode")

    @property
    def mean(self) -> TensorDict:  # type: ignore[override]
        """Each member's mean."""
        return self._stat("mean")

    @property
    def deterministic_sample(self) -> TensorDict:
        """Each member's deterministic sample; where it has none, its mean if its support is
        real and its mode otherwise (a ``Categorical`` gives its most likely class)."""
        kind = InteractionType.DETERMINISTIC
        return self._gather({k: pick(d, kind) for k, d in self.dists.items()})

    def _per_key(
        self, fn: Callable[[NestedKey, Any], torch.Tensor], suffix: str, key: NestedKey
    ) -> Any:
        values = {k: fn(k, d) for k, d in self.dists.items()}
        if composite_lp_aggregate():
            return summed(values.values(), len(self.batch_shape))
        named = {_suffixed(k, suffix): v for k, v in values.items()}
        return TensorDict(named, self.batch_shape)

    def log_prob(self, sample: Any) -> Any:
        """Each member's log-probability of its entry of ``sample``."""
        return self._per_key(lambda k, d: d.log_prob(sample.get(k)), "_log_prob", self.log_prob_key)

    def entropy(self, aggregate_probabilities: bool | None = None) -> Any:
        """Each member's entropy (their sum under ``set_composite_lp_aggregate(True)``).
        ``aggregate_probabilities`` is upstream's deprecated switch: accepted, with a
        ``DeprecationWarning``, and without effect, as there."""
        if aggregate_probabilities is not None:
            warnings.warn(
                "CompositeDistribution.entropy(aggregate_probabilities=...) has no effect; "
                "use set_composite_lp_aggregate instead",
                DeprecationWarning,
                stacklevel=2,
            )
        return self._per_key(lambda k, d: d.entropy(), "_entropy", self.entropy_key)
