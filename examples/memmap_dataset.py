"""A dataset on disk as a memory-mapped TensorDict: preallocate it from one datum, fill
it chunk by chunk, reopen it, and train a classifier on TensorDict batches read by index."""

from __future__ import annotations

import os
import tempfile

import torch
from torch import nn

from tdnn import TensorDictModule, TensorDictSequential
from tensordict import TensorDict

NUM_ITEMS = 2048
NUM_CLASSES = 4
SIDE = 8


def synthetic_chunk(start: int, stop: int, generator: torch.Generator) -> TensorDict:
    """Rows start..stop of the dataset: class k is a bright row band at height 2k, plus noise."""
    labels = torch.arange(start, stop) % NUM_CLASSES
    images = torch.randint(0, 96, (stop - start, 1, SIDE, SIDE), generator=generator)
    for k in range(NUM_CLASSES):
        images[labels == k, :, 2 * k : 2 * k + 2, :] += 128
    return TensorDict(
        {
            "image": images.to(torch.uint8),
            "label": labels,
            "meta": {"index": torch.arange(start, stop)},
        },
        batch_size=[stop - start],
    )


def main() -> None:
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as root:
        path = os.path.join(root, "dataset")

        # 1. Preallocate: one datum expanded to the dataset's length is never materialised;
        #    memmap_like creates the files at full size on disk.
        datum = TensorDict(
            {
                "image": torch.zeros(1, SIDE, SIDE, dtype=torch.uint8),
                "label": torch.zeros((), dtype=torch.int64),
                "meta": {"index": torch.zeros((), dtype=torch.int64)},
            },
            batch_size=[],
        )
        dataset = datum.expand(NUM_ITEMS).memmap_like(path)
        print("allocated:", tuple(dataset.batch_size), "rows in", path.replace(root, "<tmp>"))

        # 2. Fill it chunk by chunk (as a producer would, without holding it all in RAM).
        for start in range(0, NUM_ITEMS, 512):
            stop = min(start + 512, NUM_ITEMS)
            dataset[start:stop] = synthetic_chunk(start, stop, generator)

        # 3. Reopen it, as a training process would: lazily, only touched rows are read.
        dataset = TensorDict.load_memmap(path)
        print("reopened:", type(dataset["image"]).__name__, tuple(dataset["image"].shape))
        counts = torch.bincount(dataset["label"], minlength=NUM_CLASSES)
        print("labels per class:", counts.tolist())

        # 4. A TensorDict-in / TensorDict-out model: scale the pixels, then classify.
        model = TensorDictSequential(
            TensorDictModule(lambda image: image.float() / 255.0, ["image"], ["pixels"]),
            TensorDictModule(
                nn.Sequential(
                    nn.Flatten(), nn.Linear(SIDE * SIDE, 32), nn.ReLU(), nn.Linear(32, NUM_CLASSES)
                ),
                ["pixels"],
                ["logits"],
            ),
        )
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        train, test = torch.arange(0, 1536), torch.arange(1536, NUM_ITEMS)

        # 5. The training loop: shuffled index batches, each read from disk as a TensorDict.
        for epoch in range(2):
            order = train[torch.randperm(len(train), generator=generator)]
            total = 0.0
            for idx in order.split(128):
                batch = model(dataset[idx].clone())  # rows idx of every leaf, in RAM
                loss = nn.functional.cross_entropy(batch["logits"], batch["label"])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += float(loss.detach()) * len(idx)
            print(f"epoch {epoch}: mean loss {total / len(train):.4f}")

        # 6. Evaluate on the held-out rows, in one read.
        with torch.no_grad():
            held_out = model(dataset[test].clone())
        accuracy = float((held_out["logits"].argmax(-1) == held_out["label"]).float().mean())
        print(f"held-out accuracy: {accuracy:.3f} on {len(test)} rows")
        if accuracy < 0.9:
            raise SystemExit(f"the classifier did not learn the toy task: accuracy {accuracy}")


if __name__ == "__main__":
    main()
