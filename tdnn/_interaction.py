"""Interaction types (how a distribution module turns a distribution into a value) and the
composite log-prob aggregation switch."""

from __future__ import annotations

import copy
import enum
import functools
from collections.abc import Callable
from typing import Any

import torch

from tdnn._settings import LOCAL, Setting

# Process-wide settings, plain lists so compiled code reads them without graph breaks.
_INTERACTION: list[Any] = [None]
_LP_AGGREGATE: list[Any] = [False]
INTERACTION = Setting(_INTERACTION)
LP_AGGREGATE = Setting(_LP_AGGREGATE)


class InteractionType(enum.StrEnum):
    """How a probabilistic module picks its output: the distribution's ``MODE``,
    ``MEDIAN``, ``MEAN``, a ``RANDOM`` sample, or ``DETERMINISTIC`` (the distribution's
    ``deterministic_sample``, else its mean, else its mode). A ``str`` enum, as
    upstream: a member equals its value, and a name in any case converts.

    >>> from tensordict.nn import InteractionType
    >>> InteractionType.from_str("mode") is InteractionType.MODE
    True
    >>> InteractionType("MEAN") == "mean", str(InteractionType.RANDOM)
    (True, 'random')
    """

    MODE = "mode"
    MEDIAN = "median"
    MEAN = "mean"
    RANDOM = "random"
    DETERMINISTIC = "deterministic"

    @classmethod
    def _missing_(cls, value: object) -> InteractionType | None:
        if isinstance(value, str) and value.lower() != value:
            return cls.__members__.get(value.upper())
        return None

    @classmethod
    def from_str(cls, type_str: str) -> InteractionType:
        """The member named ``type_str`` (case-insensitive).

        >>> from tensordict.nn import InteractionType
        >>> InteractionType.from_str("RANDOM")
        <InteractionType.RANDOM: 'random'>
        """
        try:
            return cls(type_str.lower())
        except ValueError:
            names = [m.value for m in cls]
            raise ValueError(
                f"InteractionType.from_str: {type_str!r} is not a valid InteractionType "
                f"(one of {names})"
            ) from None


def _as_type(value: Any) -> InteractionType | None:
    if value is None or isinstance(value, InteractionType):
        return value
    if isinstance(value, str):
        return InteractionType.from_str(value)
    raise TypeError(
        f"set_interaction_type: expected an InteractionType, a str or None, got {value!r}"
    )


def interaction_type() -> InteractionType | None:
    """The interaction type set by :class:`set_interaction_type` (None outside).

    >>> from tensordict.nn import interaction_type, set_interaction_type
    >>> with set_interaction_type("mean"):
    ...     interaction_type()
    <InteractionType.MEAN: 'mean'>
    """
    current: Any = _INTERACTION[0]
    return current if current is not LOCAL else INTERACTION.get()  # type: ignore[no-any-return]


class _Switch:
    """A setting usable as a context manager and as a function decorator; with
    ``thread_local=True`` it applies to the calling thread only."""

    _setting: Setting

    def __init__(self, value: Any, thread_local: bool = False) -> None:
        self._value = value
        self._thread_local = thread_local
        self._previous: list[Any] = []

    def __enter__(self) -> None:
        if self._thread_local:
            self._setting.push_local(self._value)
        else:
            self._previous.append(self._setting.set_global(self._value))

    def __exit__(self, *exc: Any) -> None:
        if self._thread_local:
            self._setting.pop_local()
        else:
            self._setting.set_global(self._previous.pop())

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            fresh = copy.copy(self)
            fresh._previous = []
            with fresh:
                return func(*args, **kwargs)

        return wrapper


class set_interaction_type(_Switch):
    """Within this context (or decorated function), probabilistic modules use
    ``type`` (an :class:`InteractionType`, its name, or None for each module's default);
    with ``thread_local=True``, in the calling thread only.

    >>> import torch
    >>> from torch.distributions import Normal
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import ProbabilisticTensorDictModule, set_interaction_type
    >>> m = ProbabilisticTensorDictModule(["loc", "scale"], ["x"], distribution_class=Normal)
    >>> td = TensorDict(loc=torch.zeros(2), scale=torch.ones(2))
    >>> with set_interaction_type("mode"):
    ...     m(td)["x"]
    tensor([0., 0.])
    """

    _setting = INTERACTION

    def __init__(
        self,
        type: InteractionType | str | None = InteractionType.DETERMINISTIC,
        *,
        thread_local: bool = False,
    ) -> None:
        super().__init__(_as_type(type), thread_local)


def composite_lp_aggregate(nowarn: bool = False) -> bool:
    """Whether composite distributions sum their log-probabilities into one tensor
    (``sample_log_prob``) rather than one ``<key>_log_prob`` entry each (the default).

    >>> from tensordict.nn import composite_lp_aggregate, set_composite_lp_aggregate
    >>> composite_lp_aggregate()
    False
    >>> with set_composite_lp_aggregate(True):
    ...     composite_lp_aggregate()
    True
    """
    value = _LP_AGGREGATE[0]
    return bool(value if value is not LOCAL else LP_AGGREGATE.get())


class set_composite_lp_aggregate(_Switch):
    """Set :func:`composite_lp_aggregate` within a context or a decorated function
    (``thread_local=True``: in the calling thread only);
    ``.set()``/``.unset()`` change it until undone.

    >>> from tensordict.nn import composite_lp_aggregate, set_composite_lp_aggregate
    >>> switch = set_composite_lp_aggregate(True)
    >>> switch.set(); composite_lp_aggregate()
    True
    >>> switch.unset(); composite_lp_aggregate()
    False
    """

    _setting = LP_AGGREGATE

    def __init__(self, mode: bool = True, *, thread_local: bool = False) -> None:
        super().__init__(bool(mode), thread_local)

    def set(self) -> None:
        """Turn the setting on until :meth:`unset`."""
        self.__enter__()

    def unset(self) -> None:
        """Restore the setting :meth:`set` replaced."""
        self.__exit__(None, None, None)


def pick(dist: Any, kind: InteractionType, n_empirical: int = 1000) -> Any:
    """The value of ``dist`` for interaction type ``kind``. ``DETERMINISTIC`` is the
    distribution's ``deterministic_sample``, else its mean or mode as
    :func:`_deterministic_kind` says (as upstream, without its warning). ``MEDIAN`` is
    ``icdf(0.5)`` where the distribution has no ``median``; a ``MEAN``/``MEDIAN`` torch
    cannot give is
    estimated from ``n_empirical`` samples. No choice depends on the
    values, so the choice traces (``torch.export``, ``torch.compile``)."""
    if kind is InteractionType.RANDOM:
        return dist.rsample() if dist.has_rsample else dist.sample()
    if isinstance(dist, torch.distributions.LKJCholesky) and kind is not InteractionType.MEDIAN:
        raise RuntimeError(  # (as upstream: no mean or mode to give, nor to estimate)
            f"DETERMINISTIC, MEAN and MODE are not implemented for LKJCholesky; got {kind}"
        )
    if kind is InteractionType.DETERMINISTIC:
        value = getattr(dist, "deterministic_sample", None)
        if value is not None:
            return value
        kind = _deterministic_kind(dist)
    try:
        return getattr(dist, kind.value)
    except (AttributeError, NotImplementedError):  # torch distributions have no median
        if kind is InteractionType.MEDIAN:
            try:
                return dist.icdf(torch.full(dist.batch_shape + dist.event_shape, 0.5))
            except NotImplementedError:
                return _empirical(dist, n_empirical).median(0).values
        if kind in (InteractionType.MEAN, InteractionType.MODE):
            return _empirical(dist, n_empirical).mean(0)
        raise


_REAL = type(torch.distributions.constraints.real)


def _deterministic_kind(dist: Any) -> InteractionType:
    """What ``DETERMINISTIC`` means for a distribution without ``deterministic_sample``,
    as upstream: for torch's own classes, the mode where the support is enumerable and
    the mean otherwise; for other classes, the mean where the support is real."""
    base = dist.base_dist if isinstance(dist, torch.distributions.Independent) else dist
    if type(base).__module__.startswith("torch.distributions."):
        enumerable = getattr(type(base), "has_enumerate_support", False)
        return InteractionType.MODE if enumerable else InteractionType.MEAN
    return InteractionType.MEAN if _real_support(dist) else InteractionType.MODE


def _real_support(dist: Any) -> bool:
    try:
        support = dist.support
    except NotImplementedError:  # custom distributions may not say
        return True
    return isinstance(getattr(support, "base_constraint", support), _REAL)


def _empirical(dist: Any, n: int) -> torch.Tensor:
    out: torch.Tensor = dist.rsample((n,)) if dist.has_rsample else dist.sample((n,))
    return out
