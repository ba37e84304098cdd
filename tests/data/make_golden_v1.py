"""Writes the version-1 golden checkpoint under tests/data/v1 (run once; the files are kept).

Every later version of the library must load these files (docs/format.md): do not
re-run this script to "fix" a failing golden test.
"""

from __future__ import annotations

import pathlib
import shutil

import torch

from tensordict import TensorDict, lazy_stack, tensorclass


@tensorclass
class GoldenClass:
    values: torch.Tensor
    note: str


def build() -> TensorDict:
    return TensorDict(
        {
            "float": torch.arange(6.0).reshape(2, 3),
            "int": torch.tensor([7, -8]),
            "bool": torch.tensor([True, False]),
            "bf16": torch.tensor([1.5, -2.25], dtype=torch.bfloat16),
            "nested": {"deep": {"x": torch.tensor([[1, 2], [3, 4]], dtype=torch.int16)}},
            "text": "version one",
            "words": ["left", "right"],
            "tc": GoldenClass(torch.tensor([0.5, 0.25]), note="golden", batch_size=[2]),
            "odd/key": torch.zeros(2, dtype=torch.uint8),
        },
        batch_size=[2],
    )


def main() -> None:
    out = pathlib.Path(__file__).parent / "v1"
    shutil.rmtree(out, ignore_errors=True)
    build().memmap(out / "td", checksum=True)
    ragged = lazy_stack(
        [TensorDict({"a": torch.ones(1)}, []), TensorDict({"a": torch.ones(3), "b": 1}, [])]
    )
    ragged.memmap(out / "lazy")


if __name__ == "__main__":
    main()
