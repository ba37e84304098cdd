"""``resolve_inherited``: a concrete collection class owns what it inherits, unchanged."""

from __future__ import annotations

import pytest
import torch

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


def test_a_base_added_by_a_subclass_still_overrides_the_mixins() -> None:
    from tensordict import TensorDictBase

    class Overrides(TensorDictBase):
        _abstract = True

        def to_dict(self, *args: object, **kwargs: object) -> str:  # type: ignore[override]
            return "Overrides.to_dict"

    class Mine(TensorDict, Overrides):
        pass

    class Deeper(Mine):
        pass

    for cls in (Mine, Deeper):
        assert cls({"a": torch.zeros(1)}, [1]).to_dict() == "Overrides.to_dict"
    assert TensorDict({"a": torch.zeros(1)}, [1]).to_dict() == {"a": torch.zeros(1)}

    class Again(Deeper, TensorDictBase):  # (nothing more to override: copies stay right)
        pass

    assert Again({}, []).to_dict() == "Overrides.to_dict"
