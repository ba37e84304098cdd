"""Probabilistic modules: build a distribution from TensorDict entries and sample from it."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from tdnn._base import TensorDictModuleBase, unravel_keys
from tdnn._composite import CompositeDistribution, log_prob_key_of, summed
from tdnn._distributions import Delta
from tdnn._fastcall import put
from tdnn._generator import as_generator, from_input, use_generator
from tdnn._interaction import (
    InteractionType,
    _as_type,
    composite_lp_aggregate,
    interaction_type,
    pick,
    set_composite_lp_aggregate,
)
from tdnn._module import SKIP_EXISTING, skip_on, tensor_inputs
from tdnn._sequential import TensorDictSequential
from tensordict import NestedKey, TensorDict, is_leaf_nontensor, is_tensor_collection, unravel_key


class ProbabilisticTensorDictModule(TensorDictModuleBase):
    """Read distribution parameters from ``in_keys``, build ``distribution_class`` and
    write a value of it to ``out_keys``, chosen by the interaction type in force
    (:class:`set_interaction_type`) or ``default_interaction_type``; random draws use
    ``rsample`` where the distribution has it, so losses backpropagate into the
    parameters. ``in_keys`` as a dict maps distribution arguments to keys.
    ``return_log_prob=True`` also writes the log-probability (``<out_key>_log_prob``).
    ``generator`` (a ``torch.Generator``, an int seed, or the key of an input entry holding
    either) is the RNG of the draws; the global one's state is left as it was.

    >>> import torch
    >>> from torch.distributions import Normal
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import ProbabilisticTensorDictModule
    >>> m = ProbabilisticTensorDictModule(
    ...     ["loc", "scale"], ["action"], distribution_class=Normal, return_log_prob=True)
    >>> td = m(TensorDict(loc=torch.zeros(3), scale=torch.ones(3), batch_size=[3]))
    >>> td["action"], td["action_log_prob"].shape
    (tensor([0., 0., 0.]), torch.Size([3]))
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | Mapping[str, NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        *,
        default_interaction_type: InteractionType | str = InteractionType.DETERMINISTIC,
        distribution_class: Callable[..., Any] = Delta,
        distribution_kwargs: dict[str, Any] | None = None,
        return_log_prob: bool = False,
        log_prob_keys: Sequence[NestedKey] | None = None,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        num_samples: int | torch.Size | None = None,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        super().__init__()
        call = type(self).__name__
        self._generator, self._generator_key = as_generator(call, generator)
        # a module (TensorDictParams) is kept as it is, so that its tensors are this
        # module's buffers or parameters (they follow .to() and the state_dict)
        kwargs: Any = (
            distribution_kwargs
            if isinstance(distribution_kwargs, torch.nn.Module)
            else dict(distribution_kwargs or {})
        )
        if isinstance(in_keys, Mapping):
            self.dist_keys = [str(k) for k in in_keys]
            self.in_keys = list(in_keys.values())
        else:
            self.in_keys = in_keys
            self.dist_keys = [k if isinstance(k, str) else k[-1] for k in self.in_keys]
        if out_keys is None:
            if distribution_class is CompositeDistribution:
                names = kwargs.get("name_map") or kwargs.get("distribution_map")
                if names is None:
                    raise KeyError(
                        f"{call}: distribution_kwargs needs a 'distribution_map' for a "
                        "CompositeDistribution"
                    )
                out_keys = list(names.values()) if kwargs.get("name_map") else list(names)
            else:
                out_keys = ["_"]
        samples = unravel_keys(call, out_keys, "out_keys")
        self._samples = samples
        self._aggregate = aggregate = composite_lp_aggregate()
        self._log_prob_keys = _log_prob_keys(call, samples, log_prob_keys, log_prob_key, aggregate)
        self.return_log_prob = return_log_prob
        self.default_interaction_type = _as_type(default_interaction_type)
        self.distribution_class = distribution_class
        self.distribution_kwargs = kwargs
        if cache_dist:
            warnings.warn(
                f"{call}(cache_dist=True) is deprecated and will be removed in TensorDict 0.17",
                DeprecationWarning,
                stacklevel=2,
            )
        self.cache_dist = cache_dist
        self.n_empirical_estimate = n_empirical_estimate
        self.num_samples = (
            torch.Size([num_samples]) if isinstance(num_samples, int) else num_samples
        )
        self._refresh()

    def _refresh(self) -> None:
        keys = list(self._samples) + (self._log_prob_keys if self.return_log_prob else [])
        self._out_keys = keys
        self._out_keys_apparent = keys

    def _built_aggregate(self, attr: str) -> None:
        """Refuse to answer ``attr`` under another ``composite_lp_aggregate()`` than the
        one the module was built under, which fixed its log-prob keys (as upstream)."""
        if composite_lp_aggregate() != self._aggregate:
            raise RuntimeError(
                f"{type(self).__name__}.{attr}: composite_lp_aggregate() is "
                f"{not self._aggregate} but was {self._aggregate} when the module was built, "
                f"which fixed its log-prob keys {self._log_prob_keys}; read it under "
                f"set_composite_lp_aggregate({self._aggregate})"
            )

    @property
    def out_keys(self) -> list[Any]:
        """The keys written; with ``return_log_prob=True`` they include the log-prob keys,
        so reading them under another ``composite_lp_aggregate()`` than the module was
        built under raises ``RuntimeError`` (as upstream)."""
        if self.return_log_prob:
            self._built_aggregate("out_keys")
        return self._out_keys_apparent

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        TensorDictModuleBase.out_keys.fset(self, value)  # type: ignore[attr-defined]

    @property
    def log_prob_keys(self) -> list[Any]:
        """Where the log-probability of each sample key is written (``RuntimeError`` under
        another ``composite_lp_aggregate()`` than the module was built under)."""
        self._built_aggregate("log_prob_keys")
        return list(self._log_prob_keys)

    @property
    def log_prob_key(self) -> Any:
        """The one log-probability key (refused when there are several).

        >>> from tensordict.nn import ProbabilisticTensorDictModule
        >>> ProbabilisticTensorDictModule(["param"], ["x"]).log_prob_key
        'x_log_prob'
        """
        self._built_aggregate("log_prob_key")
        if len(self._log_prob_keys) != 1:
            raise RuntimeError(
                f"{type(self).__name__}.log_prob_key: there are several log-prob keys "
                f"{self._log_prob_keys}; read log_prob_keys (or build the module under "
                "set_composite_lp_aggregate(True) for one summed key)"
            )
        return self._log_prob_keys[0]

    @property
    def dist_params_keys(self) -> list[Any]:
        """The keys holding the distribution's parameters."""
        return list(self.in_keys)

    @property
    def dist_sample_keys(self) -> list[Any]:
        """The keys samples are written to."""
        return list(self._samples)

    def get_dist(self, tensordict: Any) -> Any:
        """The distribution built from ``tensordict``'s parameter entries.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import ProbabilisticTensorDictModule
        >>> m = ProbabilisticTensorDictModule(["loc", "scale"], ["x"], distribution_class=Normal)
        >>> m.get_dist(TensorDict(loc=torch.zeros(2), scale=torch.ones(2))).mean
        tensor([0., 0.])
        """
        args = {
            name: tensordict.get(key, None)
            for name, key in zip(self.dist_keys, self.in_keys, strict=True)
        }
        missing = [k for k, v in zip(self.in_keys, args.values(), strict=True) if v is None]
        if missing:
            have = sorted(map(str, tensordict.keys(True, True, is_leaf=is_leaf_nontensor)))
            raise KeyError(
                f"{type(self).__name__}.get_dist: parameter keys {missing} are missing; the "
                f"TensorDict has {have}"
            )
        kwargs = self.distribution_kwargs
        if not isinstance(kwargs, dict):  # a TensorDictParams: its current values, by key
            kwargs = {key: kwargs[key] for key in kwargs.keys()}  # noqa: SIM118 (iter: rows)
        try:
            return self.distribution_class(**args, **kwargs)
        except TypeError as err:  # a keyword the class does not take: say where it came from
            if "argument" not in str(err):
                raise
            raise TypeError(
                f"{type(self).__name__}.get_dist: {_name_of(self.distribution_class)} was "
                f"given the keywords {list(args)} (read from {self.in_keys}) and "
                f"{list(kwargs)} (distribution_kwargs): {err}"
            ) from err

    build_dist_from_params = get_dist

    def log_prob(self, tensordict: Any, *, dist: Any = None) -> Any:
        """The log-probability of the samples in ``tensordict``.

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import ProbabilisticTensorDictModule
        >>> m = ProbabilisticTensorDictModule(["loc", "scale"], ["x"], distribution_class=Normal)
        >>> td = TensorDict(loc=torch.zeros(1), scale=torch.ones(1), x=torch.zeros(1))
        >>> m.log_prob(td)
        tensor([-0.9189])
        """
        dist = self.get_dist(tensordict) if dist is None else dist
        if isinstance(dist, CompositeDistribution):
            if composite_lp_aggregate():  # (legacy) each member's entry written in, as upstream
                lps = {log_prob_key_of(k): d.log_prob(tensordict.get(k)) for k, d in dist.items()}
                tensordict.update(lps)
                return summed(lps.values(), tensordict.ndim)
            lp = dist.log_prob(tensordict)
            for sample, key in zip(self._samples, self._log_prob_keys, strict=False):
                if log_prob_key_of(sample) != key:  # at the module's log_prob_keys, as upstream
                    lp.rename_key_(log_prob_key_of(sample), key)
            return lp
        return dist.log_prob(tensordict.get(self._samples[0]))

    def forward(
        self,
        tensordict: Any = None,
        tensordict_out: Any = None,
        _requires_sample: bool = True,
        **kwargs: Any,
    ) -> Any:
        if not is_tensor_collection(tensordict):  # tensors: positionally, in in_keys order
            given = [
                t for t in (tensordict_out, _requires_sample) if t is not None and t is not True
            ]
            return self._dispatch(tensordict, *given, **kwargs)
        if tensordict_out is None:
            tensordict_out = tensordict
        if SKIP_EXISTING[0] and skip_on():
            present = tensordict.keys(True)
            if all(k in present for k in self._samples):
                return tensordict_out
        dist = self.get_dist(tensordict)
        if not _requires_sample:
            if self.return_log_prob and isinstance(dist, CompositeDistribution):
                self._write_composite_log_prob(dist, tensordict, tensordict_out)
            elif self.return_log_prob:
                tensordict_out.set(self._log_prob_keys[0], self.log_prob(tensordict, dist=dist))
            return tensordict_out
        kind = interaction_type() or self.default_interaction_type or InteractionType.DETERMINISTIC
        generator, writeback = self._generator, None
        if self._generator_key is not None:
            generator, writeback = from_input(
                type(self).__name__, self._generator_key, tensordict, self.in_keys
            )
        if generator is None:
            value, tensordict_out = self._draw(dist, kind, tensordict_out)
        else:
            with use_generator(generator):
                value, tensordict_out = self._draw(dist, kind, tensordict_out)
            if writeback is not None:
                writeback(generator)
        if is_tensor_collection(value):
            for key in value.keys(True, True, is_leaf=is_leaf_nontensor):
                tensordict_out.set(key, value.get(key))
            if self.return_log_prob:
                self._write_composite_log_prob(dist, value, tensordict_out)
            return tensordict_out
        if len(self._samples) != 1:
            raise ValueError(
                f"{type(self).__name__}: {_name_of(self.distribution_class)} gives one sample, "
                f"for {len(self._samples)} out_keys {self._samples}"
            )
        put(tensordict_out, self._samples[0], value)
        if self.return_log_prob:
            put(tensordict_out, self._log_prob_keys[0], dist.log_prob(value))
        return tensordict_out

    def _draw(self, dist: Any, kind: InteractionType, out: Any) -> tuple[Any, Any]:
        """The value of ``dist`` for ``kind``, and the TensorDict to write it into."""
        n = self.num_samples
        if n is None:
            return pick(dist, kind, self.n_empirical_estimate), out
        if kind is InteractionType.RANDOM:
            value = dist.rsample(n) if dist.has_rsample else dist.sample(n)
        else:  # one value, repeated num_samples times to fit the output (as upstream)
            value = pick(dist, kind, self.n_empirical_estimate)
            value = value.expand(
                *n, *(value.batch_size if is_tensor_collection(value) else value.shape)
            )
        return value, out.expand(*n, *out.batch_size).clone(False)

    def _write_composite_log_prob(self, dist: Any, value: Any, out: Any) -> None:
        """Each member's log-probability at ``<sample>_log_prob`` (or the keys given), and
        for a module built under ``set_composite_lp_aggregate(True)`` their sum, over the
        members and their event dims, at the one log-prob key, as upstream."""
        if composite_lp_aggregate() != self._aggregate:  # the keys were fixed when built
            raise RuntimeError(
                f"{type(self).__name__}: composite_lp_aggregate() is {not self._aggregate} but "
                f"was {self._aggregate} when the module was built, which fixed its log-prob "
                f"keys {self._log_prob_keys}: build it under the setting it runs under"
            )
        with set_composite_lp_aggregate(False):
            lp = dist.log_prob(value)
        if not is_tensor_collection(lp):  # a distribution that sums on its own
            out.set(self._log_prob_keys[0], lp)
            return
        # every member's entry is written, at the module's log_prob_keys for its out_keys
        # (out_keys may name some members only, or none) and where it is for the others
        present = list(lp.keys(True, True))
        moved: dict[Any, Any] = {}
        if not self._aggregate:
            leaf_keys = [log_prob_key_of(k) for k in self._samples]
            moved = dict(zip(leaf_keys, self._log_prob_keys, strict=False))
        for key in present:
            out.set(moved.get(key, key), lp.get(key))
        if self._aggregate:  # the sum over every member, as upstream
            total = summed((lp.get(k) for k in present), len(dist.batch_shape))
            out.set(self._log_prob_keys[0], total)

    def _dispatch(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        call = type(self).__name__
        values = tensor_inputs(call, self.in_keys, first, args, kwargs)
        if kwargs:
            raise TypeError(
                f"{call}: unexpected keyword arguments {sorted(kwargs)}; the inputs are the "
                f"in_keys {self.in_keys} (a nested key's parts joined with '_')"
            )
        td = self.forward(TensorDict(values, []))
        out = tuple(td.get(k) for k in self.out_keys)
        return out[0] if len(out) == 1 else out

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(\n    in_keys={self.in_keys},"
            f"\n    out_keys={self._out_keys_apparent},"
            f"\n    distribution_class={self.distribution_class},"
            f"\n    default_interaction_type={self.default_interaction_type})"
        )


class ProbabilisticTensorDictSequential(TensorDictSequential):
    """A :class:`TensorDictSequential` that ends with probabilistic modules (or holds
    several): ``get_dist`` runs the deterministic part and returns the distribution (a
    :class:`CompositeDistribution` over every probabilistic module when there are
    several, or with ``return_composite=True``); ``log_prob`` scores a TensorDict.

    >>> import torch
    >>> from torch import nn
    >>> from torch.distributions import Normal
    >>> from tensordict import TensorDict
    >>> from tensordict.nn import (NormalParamExtractor, ProbabilisticTensorDictModule,
    ...     ProbabilisticTensorDictSequential, TensorDictModule)
    >>> policy = ProbabilisticTensorDictSequential(
    ...     TensorDictModule(nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()),
    ...                      ["obs"], ["loc", "scale"]),
    ...     ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=Normal),
    ... )
    >>> policy(TensorDict(obs=torch.zeros(5, 3), batch_size=[5]))["action"].shape
    torch.Size([5, 2])
    """

    def __init__(
        self,
        *modules: Any,
        partial_tolerant: bool = False,
        return_composite: bool | None = None,
        aggregate_probabilities: bool | None = None,
        include_sum: bool | None = None,
        inplace: bool | str | None = None,
        selected_out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        self._return_composite = return_composite
        super().__init__(*modules, partial_tolerant=partial_tolerant, inplace=inplace)
        members = self._members()
        if not members:
            raise ValueError(
                "ProbabilisticTensorDictSequential: no module given; it needs one or more "
                "modules ending with a probabilistic one"
            )
        if return_composite is False and not _is_probabilistic(members[-1]):
            raise TypeError(
                "ProbabilisticTensorDictSequential(return_composite=False): the last module "
                "must be a ProbabilisticTensorDictModule or ProbabilisticTensorDictSequential, "
                f"got {type(members[-1]).__name__}"
            )
        if selected_out_keys is not None:
            self.select_out_keys(*selected_out_keys)

    def _refresh_keys(self) -> None:
        """The keys, and what depends on the members (``append``/``insert`` change them)."""
        super()._refresh_keys()
        prob = self._prob_modules()
        self._requires_sample = bool(prob)
        wanted = self.__dict__.get("_return_composite")
        last = self._members()[-1] if self._members() else None
        if not prob:
            self.return_composite = True
        elif wanted is None:  # upstream's default: several draws, or a deterministic end
            # (a nested probabilistic sequence counts; upstream's count skips it, and its
            # get_dist then fails)
            self.return_composite = not _is_probabilistic(last) or len(prob) > 1
        else:  # False keeps the last module's distribution alone, as upstream
            self.return_composite = bool(wanted)
        self._det_part = (
            TensorDictSequential(*self._members()[:-1])
            if prob and _is_probabilistic(last) and len(self) > 1
            else None
        )

    def _like(self, modules: list[tuple[str, Any]]) -> TensorDictSequential:
        """A slice: probabilistic while it ends with a probabilistic module, or always with
        ``return_composite=True`` (as upstream); a plain sequence otherwise."""
        wanted = self.__dict__.get("_return_composite")
        if not modules or not (wanted or _is_probabilistic(modules[-1][1])):
            return super()._like(modules)
        members = (
            (dict(modules),)
            if isinstance(self.module, torch.nn.ModuleDict)
            else [m for _, m in modules]
        )
        return ProbabilisticTensorDictSequential(
            *members,
            partial_tolerant=self.partial_tolerant,
            return_composite=wanted,
            inplace=self.inplace,
        )

    def _prob_modules(self) -> list[Any]:
        """The probabilistic members (modules, and sequences nested in this one)."""
        return [m for m in self._members() if _is_probabilistic(m)]

    def _last_prob(self, call: str) -> Any:
        """The last probabilistic member; a ``RuntimeError`` naming ``call`` if none."""
        prob = self._prob_modules()
        if not prob:
            raise RuntimeError(
                f"ProbabilisticTensorDictSequential.{call}: no probabilistic module among "
                f"the members {[type(m).__name__ for m in self._members()]}"
            )
        return prob[-1]

    @property
    def default_interaction_type(self) -> InteractionType | None:
        """The default interaction type of the last probabilistic module."""
        prob = self._prob_modules()
        return prob[-1].default_interaction_type if prob else InteractionType.DETERMINISTIC

    @property
    def det_part(self) -> TensorDictSequential | None:
        """The modules before the final probabilistic one."""
        return self._det_part

    @property
    def num_samples(self) -> Any:
        """The ``num_samples`` of the last probabilistic module."""
        prob = self._prob_modules()
        return prob[-1].num_samples if prob else None

    @property
    def dist_params_keys(self) -> list[Any]:
        """Parameter keys of every probabilistic module."""
        return [k for m in self._prob_modules() for k in m.dist_params_keys]

    @property
    def dist_sample_keys(self) -> list[Any]:
        """Sample keys of every probabilistic module."""
        return [k for m in self._prob_modules() for k in m.dist_sample_keys]

    @property
    def log_prob_keys(self) -> list[Any]:
        """Log-prob keys of every probabilistic module."""
        return [k for m in self._prob_modules() for k in m.log_prob_keys]

    @property
    def log_prob_key(self) -> Any:
        """The log-prob key of the last probabilistic module."""
        return self._last_prob("log_prob_key").log_prob_key

    def get_dist_params(self, tensordict: Any, tensordict_out: Any = None, **kwargs: Any) -> Any:
        """Run the deterministic part on ``tensordict`` (writing its outputs there) and
        return it; given ``tensordict_out``, run it on a shallow copy and write the
        part's outputs into ``tensordict_out`` instead, and return that (as upstream).
        Probabilistic modules on the way draw with :func:`interaction_type`, or when
        none is set, the ``default_interaction_type`` of the last one (as upstream).

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (ProbabilisticTensorDictModule,
        ...     ProbabilisticTensorDictSequential, TensorDictModule)
        >>> seq = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(lambda x: x + 1, ["x"], ["loc"]),
        ...     ProbabilisticTensorDictModule(["loc"], ["y"], distribution_class=Normal,
        ...                                   distribution_kwargs={"scale": 1.0}))
        >>> seq.get_dist_params(TensorDict(x=torch.zeros(1)))["loc"]
        tensor([1.])
        """
        if tensordict_out is None:
            return self._dist_params(tensordict, **kwargs)[0]
        td, written = self._dist_params(tensordict.clone(False), **kwargs)
        return _copy_keys(td, tensordict_out, written)

    def _dist_params(self, td: Any, **kwargs: Any) -> tuple[Any, list[Any]]:
        """The deterministic part's result on ``td`` (written into it), and the keys
        its members wrote."""
        written: list[Any] = []
        with _unless_set(self.default_interaction_type):
            for m in self._members():
                if _is_probabilistic(m) and m is self._members()[-1]:
                    break
                td = m(td, **kwargs)
                written += m.out_keys
        return td, written

    def get_dist(self, tensordict: Any, tensordict_out: Any = None, **kwargs: Any) -> Any:
        """The distribution of the last probabilistic module, or a composite of all
        (``tensordict_out``: where the parameters computed on the way are written).

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (ProbabilisticTensorDictModule,
        ...     ProbabilisticTensorDictSequential, TensorDictModule)
        >>> seq = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(lambda x: x + 1, ["x"], ["loc"]),
        ...     ProbabilisticTensorDictModule(["loc"], ["y"], distribution_class=Normal,
        ...                                   distribution_kwargs={"scale": 1.0}))
        >>> seq.get_dist(TensorDict(x=torch.zeros(1))).mean
        tensor([1.])
        """
        self._last_prob("get_dist")
        if not self.return_composite:
            return self._members()[-1].get_dist(
                self.get_dist_params(tensordict, tensordict_out, **kwargs)
            )
        td = tensordict.clone(False)
        dists: dict[Any, Any] = {}
        for m in self._members():
            if isinstance(m, ProbabilisticTensorDictSequential):  # its members, each keyed
                dist = m.get_dist(td)
                if isinstance(dist, CompositeDistribution):
                    dists.update(dist.dists)
                else:
                    dists[m.dist_sample_keys[-1]] = dist
                td = m(td)  # (each draws by its own default_interaction_type, as upstream)
            elif isinstance(m, ProbabilisticTensorDictModule):
                dist = m.get_dist(td)
                for key in m.dist_sample_keys:
                    dists[key] = dist
                td = m(td)
            else:
                td = m(td, **kwargs)
        return _Joint(td.batch_size, dists)

    build_dist_from_params = get_dist

    def log_prob(
        self, tensordict: Any, tensordict_out: Any = None, *, dist: Any = None, **kwargs: Any
    ) -> Any:
        """The log-probability of the samples in ``tensordict`` (a TensorDict of
        ``<key>_log_prob`` entries when there are several probabilistic modules).

        >>> import torch
        >>> from torch.distributions import Normal
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import (ProbabilisticTensorDictModule,
        ...     ProbabilisticTensorDictSequential, TensorDictModule)
        >>> seq = ProbabilisticTensorDictSequential(
        ...     TensorDictModule(lambda x: x, ["x"], ["loc"]),
        ...     ProbabilisticTensorDictModule(["loc"], ["y"], distribution_class=Normal,
        ...                                   distribution_kwargs={"scale": 1.0}))
        >>> seq.log_prob(TensorDict(x=torch.zeros(1), y=torch.zeros(1)))
        tensor([-0.9189])
        """
        if dist is None:
            dist = self.get_dist(tensordict, tensordict_out, **kwargs)
        if isinstance(dist, _Joint):
            return _forward_names(self, dist.log_prob(tensordict))
        last = self._last_prob("log_prob")
        if isinstance(dist, CompositeDistribution):  # it reads its samples from tensordict
            return last.log_prob(tensordict, dist=dist)
        return dist.log_prob(tensordict.get(last.dist_sample_keys[-1]))


def _forward_names(seq: ProbabilisticTensorDictSequential, lp: Any) -> Any:
    """The joint log-probabilities ``lp`` under the keys the modules' forward writes (a
    module's own ``log_prob_key``), as upstream renames them."""
    if not is_tensor_collection(lp):
        return lp
    present = lp.keys(True)
    for m in seq._prob_modules():
        if not isinstance(m, ProbabilisticTensorDictModule):
            continue
        try:
            keys = m.log_prob_keys
        except RuntimeError:  # built under composite_lp_aggregate(True): one summed key
            continue
        for sample, key in zip(m.dist_sample_keys, keys, strict=False):
            default = log_prob_key_of(sample)
            if key != default and default in present:
                lp.rename_key_(default, key)
    return lp


def _is_probabilistic(module: Any) -> bool:
    """Whether a sequence member draws samples (a probabilistic module or sequence)."""
    return isinstance(module, (ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential))


def _copy_keys(source: Any, dest: Any, keys: list[Any]) -> Any:
    """Set ``dest[key] = source[key]`` for each of ``keys`` that ``source`` has."""
    present = source.keys(True)
    for key in dict.fromkeys(keys):
        if key in present:
            dest.set(key, source.get(key))
    return dest


class _unless_set:
    """Draw with ``kind`` while no interaction type is set (the distribution parameters
    of a sequence are computed under its last module's default, as upstream)."""

    def __init__(self, kind: InteractionType | None) -> None:
        self._kind = kind

    def __enter__(self) -> None:
        from tdnn._interaction import INTERACTION

        # (only for this thread: other threads' modules keep their interaction type)
        self._set = INTERACTION.get() is None and self._kind is not None
        if self._set:
            INTERACTION.push_local(self._kind)

    def __exit__(self, *exc: Any) -> None:
        from tdnn._interaction import INTERACTION

        if self._set:
            INTERACTION.pop_local()


class _Joint(CompositeDistribution):
    """The distributions of a sequence's probabilistic modules, keyed by sample key."""

    def __init__(self, batch_shape: torch.Size, dists: dict[Any, Any]) -> None:
        self._setup(batch_shape, {unravel_key(k): d for k, d in dists.items()})


def _log_prob_keys(
    call: str,
    samples: list[Any],
    log_prob_keys: Sequence[NestedKey] | None,
    log_prob_key: NestedKey | None,
    aggregate: bool,
) -> list[Any]:
    """Where a probabilistic module writes log-probabilities, by upstream's rules: one key
    per sample (``<sample>_log_prob``) unless the module is built under
    ``set_composite_lp_aggregate(True)``, which writes one summed key (``log_prob_key``,
    ``"sample_log_prob"`` by default)."""
    if aggregate:
        if log_prob_keys is not None:
            raise RuntimeError(
                f"{call}: log_prob_keys were given while composite_lp_aggregate() is True, "
                "which writes one summed log-probability: pass log_prob_key instead"
            )
        return unravel_keys(call, [log_prob_key or "sample_log_prob"], "log_prob_key")
    if log_prob_key is not None and len(samples) != 1:
        raise RuntimeError(
            f"{call}: log_prob_key was given for {len(samples)} sample keys while "
            "composite_lp_aggregate() is False, which writes one log-probability per "
            "sample: pass log_prob_keys instead"
        )
    if log_prob_keys is None:
        if log_prob_key is not None:
            return unravel_keys(call, [log_prob_key], "log_prob_key")
        log_prob_keys = [log_prob_key_of(k) for k in samples]
    elif isinstance(log_prob_keys, tuple):  # (plural: a tuple is keys, as upstream)
        log_prob_keys = list(log_prob_keys)
    keys = unravel_keys(call, log_prob_keys, "log_prob_keys")
    if len(keys) != len(samples):  # one per sample key (they were paired silently)
        raise ValueError(
            f"{call}: {len(keys)} log_prob_keys {keys} for {len(samples)} sample keys "
            f"(out_keys) {samples}: give one per sample key"
        )
    return keys


def _name_of(factory: Any) -> str:
    return str(getattr(factory, "__name__", None) or repr(factory))
