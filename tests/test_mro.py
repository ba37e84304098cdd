"""``resolve_inherited``: a concrete collection class owns what it inherits, unchanged."""

from __future__ import annotations

import pytest

from tensordict import LazyStackedTensorDict, TensorDict
from tensordict._mro import _KEEP, resolve_inherited


def _mro_lookup(cls: type, name: str) -> object:
    for klass in cls.__mro__[1:]:
        if name in vars(klass):
            return vars(klass)[name]
    raise AssertionError(name)


@pytest.mark.parametrize("cls", [TensorDict, LazyStackedTensorDict])
def test_every_inherited_attribute_is_the_one_the_mro_resolves(cls: type) -> None:
    inherited = {name for klass in cls.__mro__[1:-1] for name in vars(klass) if name not in _KEEP}
    assert inherited  # (the check below is not vacuous)
    for name in inherited:
        own = vars(cls)[name]
        defined_here = any(name in vars(k) and vars(k)[name] is own for k in cls.__mro__[1:])
        # either the class defined it itself, or it holds exactly what its MRO gives
        assert own is _mro_lookup(cls, name) or not defined_here, name


def test_the_first_base_naming_an_attribute_wins() -> None:
    class Low:
        def f(self) -> str:
            return "low"

        def g(self) -> str:
            return "low"

    class High(Low):
        def f(self) -> str:
            return "high"

    class Concrete(High):
        def g(self) -> str:
            return "own"

    resolve_inherited(Concrete)
    assert vars(Concrete)["f"] is vars(High)["f"]
    assert vars(Concrete)["g"].__qualname__.endswith("Concrete.g")  # its own is kept
    assert Concrete().f() == "high" and Concrete().g() == "own"
    assert "__slots__" not in vars(Concrete) and "__weakref__" not in vars(Concrete)


def test_subclasses_still_override() -> None:
    class Mine(TensorDict):
        def __len__(self) -> int:
            return 123

    assert len(Mine({}, [])) == 123
    assert len(TensorDict({}, [4])) == 4
