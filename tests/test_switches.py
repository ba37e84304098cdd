"""Behaviour switches: context managers, decorators, .set(), getters, independence."""

from __future__ import annotations

import pytest

import tensordict
from tensordict import utils

SWITCHES = [
    ("set_lazy_legacy", "lazy_legacy", False),
    ("set_list_to_stack", "list_to_stack", True),
    ("set_capture_non_tensor_stack", "capture_non_tensor_stack", False),
]


@pytest.mark.parametrize(("setter", "getter", "default"), SWITCHES)
def test_context_manager_and_decorator(setter: str, getter: str, default: bool) -> None:
    set_, get = getattr(tensordict, setter), getattr(tensordict, getter)
    assert getattr(utils, setter) is set_ and getattr(utils, getter) is get
    assert get() is default
    with set_(not default):
        assert get() is (not default)
        with set_(default):
            assert get() is default
        assert get() is (not default)
    assert get() is default

    @set_(not default)
    def inside() -> bool:
        return bool(get())

    assert inside() is (not default) and get() is default
    with pytest.raises(ZeroDivisionError), set_(not default):
        1 / 0
    assert get() is default  # restored after an error too


@pytest.mark.parametrize(("setter", "getter", "default"), SWITCHES)
def test_set_for_good_and_allow_none(setter: str, getter: str, default: bool) -> None:
    set_, get = getattr(tensordict, setter), getattr(tensordict, getter)
    cls = set_
    saved = cls._state
    try:
        cls._state = None
        assert get(allow_none=True) is None and get() is default
        set_(not default).set()
        assert get() is (not default) and get(allow_none=True) is (not default)
    finally:
        cls._state = saved
    others = [s for s, _, _ in SWITCHES if s != setter]
    with set_(not default):
        for other in others:  # each switch is independent
            other_getter = {s: g for s, g, _ in SWITCHES}[other]
            other_default = {s: d for s, _, d in SWITCHES}[other]
            assert getattr(tensordict, other_getter)() is other_default


def test_get_defaults_to_none_sets_at_once() -> None:
    before = tensordict.get_defaults_to_none()
    try:
        tensordict.set_get_defaults_to_none(False)
        assert tensordict.get_defaults_to_none() is False
        tensordict.set_get_defaults_to_none(None)
        assert tensordict.get_defaults_to_none() is False
        tensordict.set_get_defaults_to_none(True)
        assert tensordict.get_defaults_to_none() is True
        with tensordict.set_get_defaults_to_none(False):
            assert tensordict.get_defaults_to_none() is False
        assert tensordict.get_defaults_to_none() is True
    finally:
        tensordict.set_get_defaults_to_none(before)


def test_environment_values(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensordict._switches import _from_env

    monkeypatch.setenv("LIST_TO_STACK", "off")
    assert _from_env("LIST_TO_STACK") is False
    monkeypatch.setenv("LIST_TO_STACK", "None")
    assert _from_env("LIST_TO_STACK") is None
    monkeypatch.setenv("LIST_TO_STACK", "maybe")
    with pytest.raises(ValueError, match="LIST_TO_STACK='maybe' is not a boolean"):
        _from_env("LIST_TO_STACK")
