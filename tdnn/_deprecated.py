"""Upstream's deprecated attributes of the ``tensordict.nn`` faces: the tables that
``tensordict.utils.deprecated_attributes`` serves through each face's PEP 562
``__getattr__``."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

#: ``name -> (value, replacement or None)``
DeprecatedTable = Mapping[str, tuple[Any, "str | None"]]


def distributions_by_name() -> dict[str, type]:
    from tdnn.distributions import continuous, discrete

    return {
        name.lower(): getattr(module, name)
        for module in (continuous, discrete)
        for name in module.__all__
    }


#: ``tensordict.nn.utils``
UTILS_TABLE: DeprecatedTable = {"StrEnum": (enum.StrEnum, "enum.StrEnum")}
#: ``tensordict.nn.distributions.truncated_normal``: the constants of its closed forms
TRUNCATED_NORMAL_TABLE: DeprecatedTable = {
    "CONST_SQRT_2": (math.sqrt(2), None),
    "CONST_INV_SQRT_2PI": (1 / math.sqrt(2 * math.pi), None),
    "CONST_INV_SQRT_2": (1 / math.sqrt(2), None),
    "CONST_LOG_INV_SQRT_2PI": (math.log(1 / math.sqrt(2 * math.pi)), None),
    "CONST_LOG_SQRT_2PI_E": (0.5 * math.log(2 * math.pi * math.e), None),
}
