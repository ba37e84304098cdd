"""Distribution helpers: parameter extractors, Delta, OneHotCategorical, TruncatedNormal."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import torch
from torch import distributions as D
from torch import nn

from tdnn._mappings import mappings

_NO_SHAPE = torch.Size()

# torch leaves these unannotated; their types, stated once for the type checker.
_broadcast: Callable[..., tuple[torch.Tensor, ...]] = torch.broadcast_tensors
_interval: Callable[[torch.Tensor, torch.Tensor], D.constraints.Constraint] = D.constraints.interval


class NormalParamExtractor(nn.Module):
    """Split the last dim of a tensor into ``loc`` and a positive ``scale`` (through
    ``scale_mapping``, at least ``scale_lb``); further inputs pass through.

    >>> import torch
    >>> from tensordict.nn import NormalParamExtractor
    >>> loc, scale = NormalParamExtractor()(torch.zeros(3, 4))
    >>> loc.shape, scale.shape, bool((scale > 0).all())
    (torch.Size([3, 2]), torch.Size([3, 2]), True)
    """

    def __init__(self, scale_mapping: str = "biased_softplus_1.0", scale_lb: float = 1e-4) -> None:
        super().__init__()
        self.scale_mapping = mappings(scale_mapping)
        self.scale_lb = scale_lb

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        tensor, *others = tensors
        loc, scale = tensor.chunk(2, -1)
        return (loc, self.scale_mapping(scale).clamp_min(self.scale_lb), *others)


class AddStateIndependentNormalScale(nn.Module):
    """Return ``(loc, scale)``: a learnt scale of shape ``scale_shape`` (independent of
    the input, through ``scale_mapping``, at least ``scale_lb``) expanded like ``loc``.

    >>> import torch
    >>> from tensordict.nn import AddStateIndependentNormalScale
    >>> loc, scale = AddStateIndependentNormalScale(4)(torch.zeros(2, 4))
    >>> scale
    tensor([[1., 1., 1., 1.],
            [1., 1., 1., 1.]], grad_fn=<ClampMinBackward0>)
    """

    def __init__(
        self,
        scale_shape: torch.Size | int | Sequence[int] | None = None,
        *,
        scale_mapping: str = "exp",
        scale_lb: float = 1e-4,
        device: torch.device | None = None,
        make_param: bool = True,
        init_value: float = 0.0,
    ) -> None:
        super().__init__()
        if scale_shape is None:
            scale_shape = torch.Size([])
        if isinstance(scale_shape, int):
            scale_shape = (scale_shape,)
        self.scale_shape = torch.Size(scale_shape)
        self.scale_mapping = scale_mapping
        self.scale_lb = scale_lb
        init = torch.full(self.scale_shape, float(init_value), device=device)
        if make_param:
            self.state_independent_scale = nn.Parameter(init)
        else:
            self.register_buffer("state_independent_scale", init)

    def forward(self, loc: torch.Tensor, *others: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = len(self.scale_shape)
        if n and loc.shape[-n:] != self.scale_shape:
            raise RuntimeError(
                f"AddStateIndependentNormalScale: the last dims of loc {tuple(loc.shape[-n:])} "
                f"do not match scale_shape {tuple(self.scale_shape)}"
            )
        scale = self.state_independent_scale.expand_as(loc)
        return (loc, mappings(self.scale_mapping)(scale).clamp_min(self.scale_lb), *others)


class Delta(D.Distribution):
    """All mass on ``param``: samples are ``param``, log_prob is +inf there, -inf elsewhere.

    >>> import torch
    >>> from tensordict.nn.distributions import Delta
    >>> d = Delta(torch.ones(2))
    >>> d.sample(), d.log_prob(torch.ones(2))
    (tensor([1., 1.]), tensor(inf))
    """

    arg_constraints: ClassVar[dict[str, Any]] = {}
    has_rsample = True

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: torch.Size | Sequence[int] | None = None,
        event_shape: torch.Size | Sequence[int] | None = None,
    ) -> None:
        if batch_shape is None:
            batch_shape = torch.Size([])
        if event_shape is None:
            event_shape = torch.Size([])
        self.param = param
        self.atol = atol
        self.rtol = rtol
        if not len(batch_shape) and not len(event_shape):
            batch_shape, event_shape = param.shape[:-1], param.shape[-1:]
        super().__init__(torch.Size(batch_shape), torch.Size(event_shape), validate_args=False)

    def update(self, param: torch.Tensor) -> None:
        """Point the distribution at ``param``."""
        self.param = param

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        param = self.param.expand_as(value)
        equal = (value - param).abs() < self.atol + self.rtol * param.abs()
        for _ in self.event_shape:
            equal = equal.all(-1)
        inf = torch.full_like(equal, math.inf, dtype=value.dtype)
        return torch.where(equal, inf, -inf)

    def sample(self, sample_shape: Sequence[int] | torch.Size = _NO_SHAPE) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Sequence[int] | torch.Size = _NO_SHAPE) -> torch.Tensor:
        return self.param.expand((*sample_shape, *self.param.shape))

    @property
    def mode(self) -> torch.Tensor:
        return self.param

    @property
    def mean(self) -> torch.Tensor:
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The parameter itself."""
        return self.param


class OneHotCategorical(D.OneHotCategorical):
    """``torch.distributions.OneHotCategorical`` whose ``sample``, ``mode`` and
    ``deterministic_sample`` are ``torch.long`` one-hot tensors (as upstream) and whose
    ``rsample`` is a float straight-through sample (gradients reach the logits).
    ``has_rsample`` is False, as upstream: a module drawing at random calls ``sample``.

    >>> import torch
    >>> from tensordict.nn import OneHotCategorical
    >>> OneHotCategorical(logits=torch.tensor([0.0, 5.0, 0.0])).mode
    tensor([0, 1, 0])
    """

    has_rsample = False
    num_params = 1

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("grad_method", None)
        super().__init__(probs=probs, logits=logits, **kwargs)

    @property
    def mode(self) -> torch.Tensor:
        return nn.functional.one_hot(self.logits.argmax(-1), self.logits.shape[-1])

    def sample(self, sample_shape: Sequence[int] | torch.Size = _NO_SHAPE) -> torch.Tensor:
        draw: Callable[[torch.Size], torch.Tensor] = super().sample
        return draw(torch.Size(sample_shape)).long()

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The mode."""
        return self.mode

    def rsample(self, sample_shape: Sequence[int] | torch.Size = _NO_SHAPE) -> torch.Tensor:
        # As upstream: the one-hot of a relaxed (Gumbel-softmax, temperature 1) draw,
        # carrying that draw's gradient; the same seed gives upstream's values and grads.
        relaxed = D.RelaxedOneHotCategorical(
            torch.ones((), dtype=self.logits.dtype), logits=self.logits
        )
        soft = relaxed.rsample(torch.Size(sample_shape))
        hard = nn.functional.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
        return soft + (hard - soft).detach()


def rand_one_hot(values: torch.Tensor, do_softmax: bool = True) -> torch.Tensor:
    """A one-hot tensor drawn from ``values`` (logits, or probabilities with
    ``do_softmax=False``) along the last dim.

    >>> import torch
    >>> from tensordict.nn import rand_one_hot
    >>> rand_one_hot(torch.tensor([0.0, 100.0]))
    tensor([0., 1.])
    """
    probs = values.softmax(-1) if do_softmax else values
    index = torch.multinomial(probs.reshape(-1, probs.shape[-1]), 1)
    out = torch.zeros_like(probs.reshape(-1, probs.shape[-1])).scatter_(-1, index, 1.0)
    return out.reshape(probs.shape)


class TruncatedNormal(D.Distribution):
    """A normal distribution of mean ``loc`` and standard deviation ``scale`` (clamped to
    at least ``eps``) restricted to ``[a, b]`` (``low``/``high`` are accepted as
    keyword aliases); ``rsample`` draws through the inverse CDF, so gradients reach
    ``loc`` and ``scale``. ``tanh_loc=True`` squashes ``loc`` into ``(-1, 1)`` first.
    ``a`` and ``b`` read back standardised, as upstream (``low``/``high`` as given).

    >>> import torch
    >>> from tensordict.nn import TruncatedNormal
    >>> d = TruncatedNormal(torch.zeros(3), torch.ones(3), a=-0.5, b=0.5)
    >>> bool(((d.rsample() >= -0.5) & (d.rsample() <= 0.5)).all())
    True
    >>> TruncatedNormal(5.0, 1.0, 4.0, 6.0).mean
    tensor(5.)
    """

    arg_constraints: ClassVar[dict[str, Any]] = {
        "loc": D.constraints.real,
        "scale": D.constraints.positive,
    }
    has_rsample = True
    eps = 1e-6

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        a: float | torch.Tensor = -1.0,
        b: float | torch.Tensor = 1.0,
        validate_args: bool | None = None,
        *,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        tanh_loc: bool = False,
    ) -> None:
        loc_t = (
            torch.as_tensor(loc, dtype=torch.get_default_dtype())
            if not isinstance(loc, torch.Tensor)
            else loc
        )
        loc_t, scale_t = _broadcast(loc_t, torch.as_tensor(scale, dtype=loc_t.dtype))
        if tanh_loc:
            loc_t = loc_t.tanh()
        self.loc, self.scale = loc_t, scale_t.clamp_min(self.eps)
        low = a if low is None else low
        high = b if high is None else high
        self.low = torch.as_tensor(low, dtype=loc_t.dtype, device=loc_t.device)
        self.high = torch.as_tensor(high, dtype=loc_t.dtype, device=loc_t.device)
        if not torch.compiler.is_compiling() and bool((self.low >= self.high).any()):
            raise ValueError(
                f"TruncatedNormal: expected a < b everywhere, got a={self.low.tolist()} "
                f"and b={self.high.tolist()}"
            )
        self._a = (self.low - self.loc) / self.scale
        self._b = (self.high - self.loc) / self.scale
        self._cdf_a = _phi(self._a, self.eps)
        self._z = _phi(self._b, self.eps) - self._cdf_a
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def a(self) -> torch.Tensor:
        """The lower bound, standardised: ``(low - loc) / scale``."""
        return self._a

    @property
    def b(self) -> torch.Tensor:
        """The upper bound, standardised: ``(high - loc) / scale``."""
        return self._b

    @property
    def auc(self) -> torch.Tensor:
        """The standard normal's mass between the standardised bounds."""
        return self._z

    @property
    def support(self) -> Any:
        return _interval(self.low, self.high)

    def rsample(self, sample_shape: Sequence[int] | torch.Size = _NO_SHAPE) -> torch.Tensor:
        shape = self._extended_shape(torch.Size(sample_shape))
        p = torch.empty(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.icdf(p.uniform_(self.eps, 1 - self.eps))

    def icdf(self, value: torch.Tensor) -> torch.Tensor:
        p = (self._cdf_a + value * self._z).clamp(self.eps, 1 - self.eps)
        return self.loc + self.scale * math.sqrt(2) * torch.erfinv(2 * p - 1)

    def cdf(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        std = (value - self.loc) / self.scale
        return ((_phi(std, self.eps) - self._cdf_a) / self._z).clamp(0, 1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        xi = (value - self.loc) / self.scale
        out = -0.5 * xi**2 - 0.5 * math.log(2 * math.pi) - self.scale.log() - self._z.log()
        outside = (value < self.low) | (value > self.high)
        return out.masked_fill(outside, -math.inf)

    @property
    def mean(self) -> torch.Tensor:
        return self.loc + self.scale * (_pdf(self._a) - _pdf(self._b)) / self._z

    @property
    def variance(self) -> torch.Tensor:
        a_pdf, b_pdf = _pdf(self._a), _pdf(self._b)
        a_term = torch.where(torch.isfinite(self._a), self._a * a_pdf, 0.0)
        b_term = torch.where(torch.isfinite(self._b), self._b * b_pdf, 0.0)
        std_var = 1 - (b_term - a_term) / self._z - ((b_pdf - a_pdf) / self._z) ** 2
        return std_var * self.scale**2

    @property
    def mode(self) -> torch.Tensor:
        return torch.max(torch.min(self.loc, self.high), self.low)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The mean."""
        return self.mean

    def entropy(self) -> torch.Tensor:
        a_pdf, b_pdf = _pdf(self._a), _pdf(self._b)
        a_term = torch.where(torch.isfinite(self._a), self._a * a_pdf, 0.0)
        b_term = torch.where(torch.isfinite(self._b), self._b * b_pdf, 0.0)
        return (
            0.5 * math.log(2 * math.pi * math.e)
            + self.scale.log()
            + self._z.log()
            + (a_term - b_term) / (2 * self._z)
        )


def _phi(x: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    out = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    return out.clamp(eps, 1 - eps) if eps else out


def _pdf(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)


class TruncatedStandardNormal(TruncatedNormal):
    """The standard normal restricted to ``[a, b]`` (a :class:`TruncatedNormal` of
    ``loc=0``, ``scale=1``).

    >>> import torch
    >>> from tensordict.nn.distributions.truncated_normal import TruncatedStandardNormal
    >>> TruncatedStandardNormal(torch.tensor([-1.0]), torch.tensor([1.0])).mean
    tensor([0.])
    """

    def __init__(
        self,
        a: float | torch.Tensor,
        b: float | torch.Tensor,
        validate_args: bool | None = None,
    ) -> None:
        a_t, b_t = _broadcast(torch.as_tensor(a), torch.as_tensor(b))
        zero = torch.zeros_like(a_t, dtype=a_t.dtype if a_t.is_floating_point() else None)
        super().__init__(zero, torch.ones_like(zero), a_t, b_t, validate_args)
