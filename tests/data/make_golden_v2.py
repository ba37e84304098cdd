"""Writes the version-2 golden checkpoints under tests/data/v2 (run once; the files are kept).

Every later version of the library must load these files (docs/format.md): do not
re-run this script to "fix" a failing golden test.
"""

from __future__ import annotations

import pathlib
import shutil

import torch

from tensordict import TensorDict, lazy_stack, tensorclass


@tensorclass(shadow=True)
class GoldenClassV2:
    values: torch.Tensor
    note: str


def build() -> TensorDict:
    raw = torch.arange(8, dtype=torch.uint8)
    return TensorDict(
        {
            "float": torch.arange(6.0).reshape(2, 3),
            "complex32": raw.view(torch.complex32).reshape(2, 1),
            "e8m0": raw[:2].view(torch.float8_e8m0fnu),
            "bits16": raw[:4].view(torch.bits16),
            "nested": {"deep": {"x": torch.tensor([[1, 2], [3, 4]], dtype=torch.int16)}},
            "text": "version two",
            "words": ["left", "right"],
            "obj": {"a set": {1, 2}},  # not JSON: the pickle fallback
            "tc": GoldenClassV2(torch.tensor([0.5, 0.25]), note="golden", batch_size=[2]),
            "ragged": lazy_stack(
                [
                    TensorDict({"a": torch.ones(2, 1)}, [2]),
                    TensorDict({"a": torch.ones(2, 1)}, [2]),
                ],
                1,
            ),
        },
        batch_size=[2],
    )


def main() -> None:
    out = pathlib.Path(__file__).parent / "v2"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    build().memmap(out / "td", checksum=True)
    build().memmap(out / "td.tdz")
    lazy_stack(
        [TensorDict({"a": torch.ones(1)}, []), TensorDict({"a": torch.ones(3), "b": 1}, [])]
    ).memmap(out / "lazy")


def nested_strided() -> TensorDict:
    """The ``"nested"`` entry kind (added to version 2 later): a strided nested tensor."""
    elements = [torch.arange(6, dtype=torch.int32).view(3, 2), torch.arange(9).view(3, 3)]
    return TensorDict(
        {"ragged": torch.nested.nested_tensor([e.to(torch.int32) for e in elements])}, [2, 3]
    )


def main_nested() -> None:
    """Writes only tests/data/v2/nested (the files above are kept as they are)."""
    out = pathlib.Path(__file__).parent / "v2" / "nested"
    if not out.exists():
        nested_strided().memmap(out, checksum=True)


if __name__ == "__main__":
    import sys

    main_nested() if sys.argv[1:] == ["nested"] else main()
