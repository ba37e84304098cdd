"""Upstream's deprecated attributes of the ``tensordict.nn`` faces, served by a PEP 562
module ``__getattr__`` that warns (the core has its own builder; the layers share no
private code)."""

from __future__ import annotations

import enum
import math
import warnings
from collections.abc import Callable, Mapping

#: ``name -> (loader, replacement)``: the loader returns the value, called on each access
DeprecatedTable = Mapping[str, tuple[Callable[[], object], "str | None"]]


def module_getattr(module: str, table: DeprecatedTable) -> Callable[[str], object]:
    """A module ``__getattr__`` serving ``table``'s names with a :class:`DeprecationWarning`.

    >>> import warnings
    >>> getattr_ = module_getattr("pkg.mod", {"old": (lambda: 1, None)})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     getattr_("old")
    1
    >>> print(caught[0].message)
    pkg.mod.old is deprecated (upstream removes it in TensorDict 0.17).
    """

    def __getattr__(name: str) -> object:
        entry = table.get(name)
        if entry is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        loader, replacement = entry
        message = f"{module}.{name} is deprecated (upstream removes it in TensorDict 0.17)"
        message += f"; use {replacement} instead." if replacement else "."
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return loader()

    return __getattr__


def _distributions_by_name() -> dict[str, type]:
    from tdnn.distributions import continuous, discrete

    return {
        name.lower(): getattr(module, name)
        for module in (continuous, discrete)
        for name in module.__all__
    }


#: ``tensordict.nn.utils``
UTILS_TABLE: DeprecatedTable = {"StrEnum": (lambda: enum.StrEnum, "enum.StrEnum")}
#: ``tensordict.nn.distributions``
DISTRIBUTIONS_TABLE: DeprecatedTable = {"distributions_maps": (_distributions_by_name, None)}
#: ``tensordict.nn.distributions.truncated_normal``: the constants of its closed forms
TRUNCATED_NORMAL_TABLE: DeprecatedTable = {
    "CONST_SQRT_2": (lambda: math.sqrt(2), None),
    "CONST_INV_SQRT_2PI": (lambda: 1 / math.sqrt(2 * math.pi), None),
    "CONST_INV_SQRT_2": (lambda: 1 / math.sqrt(2), None),
    "CONST_LOG_INV_SQRT_2PI": (lambda: math.log(1 / math.sqrt(2 * math.pi)), None),
    "CONST_LOG_SQRT_2PI_E": (lambda: 0.5 * math.log(2 * math.pi * math.e), None),
}
