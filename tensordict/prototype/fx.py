"""``tensordict.prototype.fx``: upstream's prototype home of ``symbolic_trace`` and
``TDGraphModule``. Both belong to the module layer (``tdnn``), reached on first use through
``tensordict._module_names`` so that importing this module alone loads nothing more."""

from __future__ import annotations

from tensordict._module_names import PROTOTYPE_FX, prototype_fx_name


def __getattr__(name: str) -> object:
    return prototype_fx_name(name)


def __dir__() -> list[str]:
    return sorted(PROTOTYPE_FX)
