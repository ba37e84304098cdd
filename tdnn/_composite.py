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
        log_prob_key: NestedKey | None = "sample_log_prob",
        entropy_key: NestedKey | None = "entropy",
        **kwargs: Any,
    ) -> None:
        extra_kwargs = {unravel_key(k): v for k, v in (extra_kwargs or {}).items()}
        names = {unravel_key(k): unravel_key(v) for k, v in (name_map or {}).items()}
        dists: dict[NestedKey, Any] = {}
        for key, cls in distribution_map.items():
            key = unravel_key(key)  # (keys of the maps may be spelled as nested tuples)
            sub = params.get(key)
            args = {k: sub.get(k) for k in list(sub.keys())}
            dists[names.get(key, key)] = cls(**args, **extra_kwargs.get(key, {}))
        self._setup(params.batch_size, dists, log_prob_key, entropy_key)

    arg_constraints: dict[str, Any] = {}  # noqa: RUF012  (the members check their own)

    def _setup(
        self,
        batch_shape: Sequence[int],
        dists: dict[NestedKey, Any],
        log_prob_key: NestedKey | None = "sample_log_prob",
        entropy_key: NestedKey | None = "entropy",
    ) -> None:
        """A ``torch.distributions.Distribution`` of ``batch_shape`` over ``dists``."""
        torch.distributions.Distribution.__init__(
            self, torch.Size(batch_shape), validate_args=False
        )
        self.dists = dists
        self.log_prob_key = log_prob_key
        self.entropy_key = entropy_key

    @property
    def log_prob_key(self) -> NestedKey:
        """Where ``log_prob_composite(include_sum=True)`` writes the sum (``None`` sets
        the default back, ``"sample_log_prob"``)."""
        return self._log_prob_key

    @log_prob_key.setter
    def log_prob_key(self, value: NestedKey | None) -> None:
        self._log_prob_key = "sample_log_prob" if value is None else value

    @property
    def entropy_key(self) -> NestedKey:
        """Where ``entropy_composite(include_sum=True)`` writes the sum (``None`` sets the
        default back, ``"entropy"``)."""
        return self._entropy_key

    @entropy_key.setter
    def entropy_key(self, value: NestedKey | None) -> None:
        self._entropy_key = "entropy" if value is None else value

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

    def keys(self) -> Any:
        """The members' sample keys.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)})
        >>> list(d.keys()), type(d.get("x")).__name__, d.get("y", None)
        (['x'], 'Normal', None)
        """
        return self.dists.keys()

    def values(self) -> Any:
        """The member distributions."""
        return self.dists.values()

    def items(self) -> Any:
        """``(sample key, member distribution)`` pairs."""
        return self.dists.items()

    def get(self, key: NestedKey, default: Any = None) -> Any:
        """The member distribution at ``key`` (``default`` if there is none)."""
        return self.dists.get(unravel_key(key), default)

    def __getitem__(self, key: NestedKey) -> Any:
        """The member distribution at ``key``.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {("a", "x"): Normal(torch.zeros(2), 1.0)})
        >>> d["a", "x"].mean, len(d), list(d), ("a", "x") in d
        (tensor([0., 0.]), 1, [('a', 'x')], True)
        """
        dist = self.dists.get(unravel_key(key))
        if dist is None:
            raise KeyError(
                f"CompositeDistribution[{key!r}]: no such member; the members are "
                f"{list(self.dists)}"
            )
        return dist

    def __len__(self) -> int:
        return len(self.dists)

    def __iter__(self) -> Any:
        """The members' sample keys."""
        return iter(self.dists)

    def __contains__(self, key: object) -> bool:
        try:
            return unravel_key(key) in self.dists  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def sample(self, shape: Sequence[int] | torch.Size | None = _NO_SHAPE) -> TensorDict:  # type: ignore[override]
        """One sample of each member, as a TensorDict."""
        shape = _NO_SHAPE if shape is None else shape
        return self._gather({k: d.sample(shape) for k, d in self.dists.items()}, shape)

    def sample_and_log_prob(
        self, shape: Sequence[int] | torch.Size | None = None
    ) -> tuple[Any, Any]:
        """``(sample, log_prob(sample))`` in one call.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)})
        >>> sample, lp = d.sample_and_log_prob((3,))
        >>> sample["x"].shape, lp["x_log_prob"].shape
        (torch.Size([3, 2]), torch.Size([3, 2]))
        """
        sample = self.sample(shape)
        return sample, self.log_prob(sample)

    def rsample_and_log_prob(
        self, shape: Sequence[int] | torch.Size | None = None
    ) -> tuple[Any, Any]:
        """``(rsample, log_prob(rsample))`` in one call (see ``sample_and_log_prob``)."""
        sample = self.rsample(shape)
        return sample, self.log_prob(sample)

    def rsample(self, shape: Sequence[int] | torch.Size | None = _NO_SHAPE) -> TensorDict:  # type: ignore[override]
        """Reparameterised samples (``sample`` for members without ``rsample``)."""
        shape = _NO_SHAPE if shape is None else shape
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

    def log_prob(self, sample: Any) -> Any:
        """Each member's log-probability of its entry of ``sample`` (whose batch size may
        have leading sample dims), or their sum under ``set_composite_lp_aggregate(True)``."""
        values = {k: d.log_prob(sample.get(k)) for k, d in self.dists.items()}
        if composite_lp_aggregate():
            return summed(values.values(), sample.ndim)
        named = {log_prob_key_of(k): v for k, v in values.items()}
        return TensorDict(named, sample.batch_size)

    def log_prob_composite(self, sample: Any, *, include_sum: bool | None = None) -> Any:
        """Each member's log-probability at ``<key>_log_prob``, and with ``include_sum``
        (default: ``composite_lp_aggregate()``) their sum over members and event dims at
        ``log_prob_key``. Under ``set_composite_lp_aggregate(True)`` they are written into
        ``sample``, which is returned, as upstream; otherwise into a new TensorDict.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)})
        >>> sorted(d.log_prob_composite(d.sample(), include_sum=True).keys())
        ['sample_log_prob', 'x_log_prob']
        """
        aggregate = composite_lp_aggregate()
        include = aggregate if include_sum is None else include_sum
        lps = {log_prob_key_of(k): d.log_prob(sample.get(k)) for k, d in self.dists.items()}
        if include:
            lps[self.log_prob_key] = summed(lps.values(), sample.ndim)
        if aggregate:
            return sample.update(lps)
        return TensorDict(lps, sample.batch_size)

    def entropy_composite(self, samples_mc: int = 1, *, include_sum: bool | None = None) -> Any:
        """Each member's entropy at ``<key>_entropy`` (a ``samples_mc``-draw Monte Carlo
        estimate for a member without a closed form), and with ``include_sum`` (default:
        ``composite_lp_aggregate()``) their sum at ``entropy_key``, in a new TensorDict.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)})
        >>> sorted(d.entropy_composite(include_sum=True).keys())
        ['entropy', 'x_entropy']
        """
        include = composite_lp_aggregate() if include_sum is None else include_sum
        ents = {_suffixed(k, "_entropy"): _entropy(d, samples_mc) for k, d in self.dists.items()}
        if include:
            ents[self.entropy_key] = summed(ents.values(), len(self.batch_shape))
        return TensorDict(ents, self.batch_shape)

    def entropy(
        self,
        samples_mc: int = 1,
        *,
        aggregate_probabilities: bool | None = None,
        include_sum: bool | None = None,
    ) -> Any:
        """Each member's entropy (``entropy_composite``), or under
        ``set_composite_lp_aggregate(True)`` their sum over members and event dims.
        ``aggregate_probabilities`` is upstream's deprecated switch: accepted, with a
        ``DeprecationWarning``, and without effect, as there."""
        if aggregate_probabilities is not None:
            warnings.warn(
                "CompositeDistribution.entropy(aggregate_probabilities=...) has no effect; "
                "use set_composite_lp_aggregate instead",
                DeprecationWarning,
                stacklevel=2,
            )
        if not composite_lp_aggregate():
            return self.entropy_composite(samples_mc, include_sum=include_sum)
        return summed((_entropy(d, samples_mc) for d in self.dists.values()), len(self.batch_shape))

    def cdf(self, sample: Any) -> Any:
        """Write each member's CDF of its entry at ``<key>_cdf`` into ``sample``; return it.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import CompositeDistribution
        >>> d = CompositeDistribution.from_distributions(
        ...     TensorDict(batch_size=[2]), {"x": Normal(torch.zeros(2), 1.0)})
        >>> d.cdf(TensorDict(x=torch.zeros(2), batch_size=[2]))["x_cdf"]
        tensor([0.5000, 0.5000])
        """
        return sample.update(
            {_suffixed(k, "_cdf"): d.cdf(sample.get(k)) for k, d in self.dists.items()}
        )

    def icdf(self, sample: Any) -> Any:
        """Write each member's inverse CDF of ``<key>_cdf`` (else of the CDF of ``key``) at
        ``<key>_icdf`` into ``sample``; return it."""
        for key, dist in self.dists.items():
            prob = sample.get(_suffixed(key, "_cdf"), None)
            if prob is None:
                value = sample.get(key, None)
                if value is None:
                    raise KeyError(
                        f"CompositeDistribution.icdf: neither {_suffixed(key, '_cdf')!r} nor "
                        f"{key!r} is in the sample, which has {sorted(map(str, sample.keys(True)))}"
                    )
                prob = dist.cdf(value)
            sample.set(_suffixed(key, "_icdf"), dist.icdf(prob))
        return sample


def _entropy(dist: Any, samples_mc: int) -> torch.Tensor:
    """``dist``'s entropy, or a ``samples_mc``-draw Monte Carlo estimate of it."""
    try:
        out: torch.Tensor = dist.entropy()
    except NotImplementedError:
        x = dist.rsample((samples_mc,)) if dist.has_rsample else dist.sample((samples_mc,))
        out = -dist.log_prob(x).mean(0)
    return out
