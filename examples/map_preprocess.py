"""Preprocess a memory-mapped image dataset with TensorDict.map, in worker processes.

1. Allocate a dataset on disk with ``memmap_like`` and fill it with fake images.
2. Flip the images and cluster the labels *in place*, one item per call
   (``chunksize=0``), as in the package README: the workers write into the files.
3. Normalise the images into a second memory-mapped TensorDict passed as ``out=``:
   each worker writes its chunk there, nothing travels back through a pipe.

A progress bar is shown when tqdm is installed (``pip install tqdm``); without it the
script runs the same, without bars. Run: ``python examples/map_preprocess.py``.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time

import torch

from tensordict import TensorDict

N = 20_000
HAS_TQDM = importlib.util.find_spec("tqdm") is not None


def process_data(item: TensorDict) -> None:
    """Flip an image upside down and cluster its label, writing into the dataset."""
    item.set_("images", item["images"].flip(-2).clone())
    item.set_("labels", item["labels"] // 10)


def normalise(chunk: TensorDict) -> TensorDict:
    """uint8 images in [0, 255] to float images in [-1, 1]."""
    images = chunk["images"].float().div_(127.5).sub_(1.0)
    return TensorDict({"images": images, "labels": chunk["labels"]}, chunk.batch_size)


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="map-preprocess-") as root:
        run(root)


def run(root: str) -> None:
    item = TensorDict(
        {
            "images": torch.zeros(3, 32, 32, dtype=torch.uint8),
            "labels": torch.zeros((), dtype=torch.int64),
        },
        [],
    )
    data = item.expand(N).memmap_like(os.path.join(root, "raw"))
    data["images"].copy_(torch.randint(256, (N, 3, 32, 32), dtype=torch.uint8))
    data["labels"].copy_(torch.randint(100, (N,)))
    before = data[:2].clone()
    if not HAS_TQDM:
        print("tqdm is not installed: running without progress bars (pip install tqdm)")

    start = time.perf_counter()
    assert data[:2000].map(process_data, num_workers=2, chunksize=0, pbar=HAS_TQDM) is None
    print(f"in place, item by item: 2,000 items in {time.perf_counter() - start:.2f} s")
    assert torch.equal(data["images"][:2], before["images"].flip(-2))
    assert torch.equal(data["labels"][:2], before["labels"] // 10)

    template = normalise(data[:1]).clone()[0]  # one item, in RAM: the layout of the output
    out = template.expand(N).memmap_like(os.path.join(root, "normalised"))
    start = time.perf_counter()
    result = data.map(normalise, num_workers=2, chunksize=1000, out=out, pbar=HAS_TQDM)
    print(f"normalised {N:,} items into {out.saved_path} in {time.perf_counter() - start:.2f} s")
    assert result is out
    images = TensorDict.load_memmap(os.path.join(root, "normalised"))["images"]
    low, high = images.min().item(), images.max().item()
    print(f"images in [{low:.2f}, {high:.2f}], shape {tuple(images.shape)}")


if __name__ == "__main__":
    main()
