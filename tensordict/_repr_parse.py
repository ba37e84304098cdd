"""``parse_tensor_dict_string``: a zero-filled TensorDict rebuilt from a printed one."""

from __future__ import annotations

import functools
from typing import Any

import torch

from tensordict._repr import dtype_name

_CALL = "parse_tensor_dict_string"
_COLLECTIONS = ("TensorDict", "LazyStackedTensorDict")


@functools.cache
def _dtypes() -> dict[str, torch.dtype]:
    found = {}
    for name in dir(torch):
        value = getattr(torch, name, None)
        if isinstance(value, torch.dtype):
            found[dtype_name(value)] = value
            found[str(value)] = value
    return found


class _Cursor:
    """Reads the printed form with its whitespace removed."""

    def __init__(self, text: str) -> None:
        self.text = "".join(text.split())
        self.at = 0

    def fail(self, what: str) -> ValueError:
        near = self.text[self.at : self.at + 30]
        return ValueError(f"{_CALL}: expected {what} at character {self.at}, found {near!r}")

    def peek(self, literal: str) -> bool:
        return self.text.startswith(literal, self.at)

    def take(self, literal: str) -> bool:
        if self.peek(literal):
            self.at += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.take(literal):
            raise self.fail(repr(literal))

    def until(self, stops: str) -> str:
        start = self.at
        while self.at < len(self.text) and self.text[self.at] not in stops:
            self.at += 1
        return self.text[start : self.at]

    def ints(self, close: str) -> list[int]:
        body = self.until(close)
        self.expect(close)
        return [int(x) for x in body.split(",") if x]


def _device(text: str) -> torch.device | None:
    return None if text == "None" else torch.device(text)


def _leaf(shape: list[int], dtype_text: str, device: Any, key: str) -> torch.Tensor:
    dtype = _dtypes().get(dtype_text)
    if dtype is None:
        raise ValueError(f"{_CALL}: entry {key!r} has unknown dtype {dtype_text!r}")
    if any(s < 0 for s in shape):
        raise ValueError(
            f"{_CALL}: entry {key!r} has ragged shape {shape} (a lazy stack's -1 dims); "
            "it cannot be rebuilt as one tensor"
        )
    return torch.zeros(shape, dtype=dtype, device=device)


# ------------------------------------------------------------------ compact form
def _compact(cur: _Cursor, batch: list[int], device: Any) -> tuple[dict[str, Any], list[int]]:
    """``{key: value, ...}`` of the compact form: (entries, batch size)."""
    cur.expect("{")
    entries: dict[str, Any] = {}
    while not cur.take("}"):
        key = cur.until(":")
        cur.expect(":")
        if cur.peek("{") or cur.peek("[") or any(cur.peek(name) for name in _COLLECTIONS):
            for name in _COLLECTIONS:
                cur.take(name)
            extra = cur.ints("]") if cur.take("[") else []
            sub, sub_bs = _compact(cur, batch + extra, device)
            entries[key] = _build(sub, sub_bs, device, None)
        else:
            start = cur.at
            dtype_text = cur.until("[,}")
            if not cur.take("["):
                cur.at = start
                raise ValueError(
                    f"{_CALL}: entry {key!r} is {cur.until(',}')!r}, not a tensor or a "
                    "TensorDict (non-tensor values are not rebuilt)"
                )
            shape = cur.ints("]")
            leaf_device = torch.device(cur.until(",}")) if cur.take("@") else device
            entries[key] = _leaf(batch + shape, dtype_text, leaf_device, key)
        cur.take(",")
    return entries, batch


def _parse_compact(cur: _Cursor) -> Any:
    batch: list[int] = []
    names = None
    device = None
    while not cur.take("fields="):
        if cur.take("batch_size=["):
            batch = cur.ints("]")
        elif cur.take("names=["):
            names = [None if n == "None" else n for n in cur.until("]").split(",")]
            cur.expect("]")
        elif cur.take("device="):
            device = _device(cur.until(","))
        elif cur.take("stack_dim="):
            cur.until(",")
        else:
            raise cur.fail("batch_size=, names=, device=, stack_dim= or fields=")
        cur.expect(",")
    entries, _ = _compact(cur, batch, device)
    if cur.peek(",exclusive_fields="):
        raise ValueError(f"{_CALL}: a lazy stack with exclusive fields cannot be rebuilt")
    cur.expect(")")
    return _build(entries, batch, device, names)


# ------------------------------------------------------------------ verbose form
def _verbose_value(cur: _Cursor, key: str) -> Any:
    if cur.take("Tensor("):
        fields: dict[str, str] = {}
        while not cur.take(")"):
            name = cur.until("=")
            cur.expect("=")
            if cur.take("torch.Size(["):
                fields[name] = cur.until("]")
                cur.expect("])")
            else:
                fields[name] = cur.until(",)")
            cur.take(",")
        if "shape" not in fields or "dtype" not in fields:
            raise ValueError(f"{_CALL}: entry {key!r} was printed without its shape or dtype")
        shape = [int(x) for x in fields["shape"].split(",") if x]
        return _leaf(shape, fields["dtype"], _device(fields.get("device", "None")), key)
    for name in _COLLECTIONS:
        if cur.take(name + "("):
            return _parse_verbose_body(cur)
    raise ValueError(f"{_CALL}: entry {key!r} is not a Tensor or a TensorDict")


def _parse_verbose_body(cur: _Cursor) -> Any:
    cur.expect("fields={")
    entries: dict[str, Any] = {}
    while not cur.take("}"):
        key = cur.until(":")
        cur.expect(":")
        entries[key] = _verbose_value(cur, key)
        cur.take(",")
    batch = None
    device = None
    names = None
    while not cur.take(")"):
        cur.expect(",")
        if cur.take("exclusive_fields={"):
            if not cur.take("}"):
                raise ValueError(f"{_CALL}: a lazy stack with exclusive fields cannot be rebuilt")
        elif cur.take("batch_size=torch.Size(["):
            batch = cur.ints("]")
            cur.expect(")")
        elif cur.take("names=["):
            names = [None if n == "None" else n.strip("'\"") for n in cur.until("]").split(",")]
            cur.expect("]")
        elif cur.take("device="):
            device = _device(cur.until(",)"))
        else:
            cur.until(",)")  # is_shared=, stack_dim=
    if batch is None:
        raise ValueError(f"{_CALL}: the printed form has no batch_size (print it with it shown)")
    return _build(entries, batch, device, names)


def _build(entries: dict[str, Any], batch: list[int], device: Any, names: Any) -> Any:
    from tensordict._td import TensorDict

    return TensorDict(entries, batch, device=device, names=names)


def parse_tensor_dict_string(s: str) -> Any:
    """A TensorDict with the keys, shapes, dtypes, devices and batch sizes of a printed one
    (compact or verbose form), every tensor filled with zeros: to rebuild one from a log.

    Raises ValueError for a non-tensor entry, a lazy stack with exclusive or ragged
    fields, or text that is not a printed TensorDict.

    >>> import torch
    >>> from tensordict import TensorDict, parse_tensor_dict_string
    >>> done = torch.ones(3, 1, dtype=torch.bool)
    >>> nxt = TensorDict(done=done, batch_size=[3])
    >>> td = TensorDict(obs=torch.ones(3, 4), next=nxt, batch_size=[3])
    >>> rebuilt = parse_tensor_dict_string(repr(td))
    >>> rebuilt["next", "done"].dtype, rebuilt["obs"].shape, float(rebuilt["obs"].sum())
    (torch.bool, torch.Size([3, 4]), 0.0)
    """
    cur = _Cursor(s)
    name = cur.until("(")
    cur.expect("(")
    if name not in _COLLECTIONS:
        raise ValueError(f"{_CALL}: expected a printed TensorDict, got {s[:40]!r}")
    out = _parse_verbose_body(cur) if cur.peek("fields={") else _parse_compact(cur)
    if cur.at != len(cur.text):
        raise cur.fail("the end of the text")
    return out
