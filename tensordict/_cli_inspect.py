"""``python -m tensordict inspect``: a checkpoint's tree of keys, shapes, dtypes and sizes."""

from __future__ import annotations

import json
from typing import Any

from tensordict._survey import TENSOR_KINDS, Collection, Leaf, Survey

_GLYPHS = ("├── ", "└── ", "│   ", "    ")
_ASCII_GLYPHS = ("|-- ", "`-- ", "|   ", "    ")  # for terminals that cannot print the others


def human_bytes(n: int) -> str:
    """``n`` bytes for people: ``"512 B"``, ``"1.5 KiB"``, ``"2.0 GiB"``.

    >>> human_bytes(512), human_bytes(1536), human_bytes(3 << 30)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        size /= 1024
        if size < 1024 or unit == "PiB":
            break
    return f"{size:.1f} {unit}"


def show_key(key: str) -> str:
    """A key as printed: as it is when plain, quoted when it has odd characters.

    >>> show_key("obs"), show_key("odd/key"), show_key("two\\nlines"), show_key(" pad")
    ('obs', 'odd/key', "'two\\\\nlines'", "' pad'")
    """
    return key if key and key.isprintable() and key.strip() == key else repr(key)


def short(value: Any, width: int = 40) -> str:
    """A JSON value in at most ``width`` characters.

    >>> short({"lr": 0.1}), short(list(range(100)), 20)
    ('{"lr": 0.1}', '[0, 1, 2, 3, 4, 5...')
    """
    text = json.dumps(value, ensure_ascii=False)
    if not text.isprintable():  # control characters (terminal escapes, bidi marks): escaped
        text = json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _collection_text(node: Collection) -> str:
    meta = node.meta
    parts = [show_key(node.type), f"batch_size={meta['batch_size']}"]
    if meta["device"] not in (None, "cpu"):  # (memory-mapped collections are on the CPU)
        parts.append(f"device={meta['device']}")
    if meta["names"] is not None and any(n is not None for n in meta["names"]):
        parts.append(f"names={meta['names']}")
    if node.lazy:
        parts.append(f"stack_dim={meta['stack_dim']}")
    return "  ".join(parts)


def _leaf_text(leaf: Leaf) -> str:
    if leaf.kind in TENSOR_KINDS:
        check = "  sha256" if "sha256" in leaf.record else ""
        shape = leaf.shape if leaf.kind == "tensor" else f"nested {short(leaf.shape)}"
        return f"{leaf.dtype}  {shape}  {human_bytes(leaf.nbytes)}{check}"
    if leaf.kind == "json":
        return f"json  {short(leaf.record['value'])}"
    if leaf.kind == "json_stack":
        values = leaf.record["values"]
        return f"json_stack  {len(values)} distinct values  {short(values)}"
    return f"pickle  {human_bytes(leaf.nbytes)}  (not loaded)"


def _rows(
    node: Collection, indent: str, out: list[tuple[str, str]], glyphs: tuple[str, ...]
) -> None:
    branch, last_branch, pipe, space = glyphs
    children: list[tuple[str, Collection | Leaf]] = [
        (f"[{i}]", member) for i, member in enumerate(node.members)
    ]
    children += [(show_key(key), child) for key, child in node.entries.items()]
    for i, (label, child) in enumerate(children):
        last = i == len(children) - 1
        left = indent + (last_branch if last else branch) + label
        if isinstance(child, Collection):
            out.append((left, _collection_text(child)))
            _rows(child, indent + (space if last else pipe), out, glyphs)
        else:
            out.append((left, _leaf_text(child)))


def totals(root: Collection) -> str:
    """The summary line: leaves by kind and the bytes of the tensor files."""
    nodes = root.walk()
    leaves = [n for n in nodes if isinstance(n, Leaf)]
    tensors = [n for n in leaves if n.kind in TENSOR_KINDS]
    nbytes = sum(n.nbytes for n in tensors)
    others = len(leaves) - len(tensors)
    collections = len(nodes) - len(leaves)
    return (
        f"{len(leaves)} leaves ({len(tensors)} tensors, {others} non-tensor) in "
        f"{collections + 1} collections; tensor data {nbytes} bytes ({human_bytes(nbytes)})"
    )


def render(path: str, result: Survey, ascii_only: bool = False) -> str:
    """The tree printed by ``inspect``: one line per key, aligned, then the totals
    (drawn with ASCII characters only with ``ascii_only``).

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> from tensordict._survey import survey
    >>> folder = tempfile.mkdtemp() + "/ckpt"
    >>> td = TensorDict({"obs": torch.zeros(4, 3), "info": {"step": torch.arange(4)}}, [4])
    >>> _ = td.memmap(folder)
    >>> print(render("ckpt", survey(folder, "demo")))
    ckpt      TensorDict  batch_size=[4]
    ├── obs   float32  [4, 3]  48 B
    └── info  TensorDict  batch_size=[4]
        └── step  int64  [4]  32 B
    2 leaves (2 tensors, 0 non-tensor) in 2 collections; tensor data 80 bytes (80 B)
    """
    rows = [(path, _collection_text(result.root))]
    _rows(result.root, "", rows, _ASCII_GLYPHS if ascii_only else _GLYPHS)
    width = max(len(left) for left, _ in rows)
    lines = [f"{left.ljust(width)}  {right}" for left, right in rows]
    return "\n".join([*lines, totals(result.root)])
