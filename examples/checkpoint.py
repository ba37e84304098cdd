"""Checkpoint a model as a folder of memory-mapped tensors, look inside the folder, and
load single submodules (without reading the rest) into a freshly built model."""

from __future__ import annotations

import json
import os
import tempfile

import torch
from torch import nn

from tensordict import TensorDict
from tensordict.utils import print_directory_tree


class Net(nn.Module):
    """A small model with named submodules and a buffer, so the folder has some depth."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU())
        self.head = nn.Linear(16, 2)
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


def main() -> None:
    torch.manual_seed(0)
    model = Net()
    model.steps += 1000
    x = torch.randn(4, 8)

    with tempfile.TemporaryDirectory() as root:
        folder = os.path.join(root, "checkpoint")
        # Save: one file per tensor, one folder per submodule, a meta.json per folder.
        # checksum=True records a SHA-256 per file, which load_memmap(verify=True) checks.
        params = TensorDict.from_module(model).detach()
        params.memmap(folder, num_threads=2, checksum=True)

        # Inspect the folder: its tree, its sizes, and the self-describing meta.json.
        print_directory_tree(folder)
        total = sum(
            os.path.getsize(os.path.join(here, name))
            for here, _, names in os.walk(folder)
            for name in names
        )
        print(f"{total} bytes on disk for {sum(p.numel() for p in model.parameters())} params")
        with open(os.path.join(folder, "head", "meta.json")) as handle:
            meta = json.load(handle)
        print("head/meta.json: format", meta["format"], "version", meta["version"])
        for key, entry in meta["entries"].items():
            print(f"  {key}: {entry['kind']} {entry.get('dtype')} {entry.get('shape')}")

        # Load the whole checkpoint into a fresh model, lazily: nothing is read until used.
        fresh = Net()
        loaded = TensorDict.load_memmap(folder, verify=True)
        print("loaded leaves are", type(loaded["head", "weight"]).__name__)
        loaded.to_module(fresh, inplace=True)
        print("whole model restored:", torch.equal(fresh(x), model(x)), int(fresh.steps))

        # Load one submodule on its own: its folder is a checkpoint of its own.
        other = Net()
        before = torch.equal(other.head(torch.ones(16)), model.head(torch.ones(16)))
        head = TensorDict.load_memmap(os.path.join(folder, "head"))
        head.to_module(other.head, inplace=True)
        after = torch.equal(other.head(torch.ones(16)), model.head(torch.ones(16)))
        print(f"head only: equal before {before}, after {after}")
        print(
            "encoder untouched:", not torch.equal(other.encoder[0].weight, model.encoder[0].weight)
        )

        # subpath= reaches a deeper submodule from the checkpoint's root.
        norm = TensorDict.load_memmap(folder, subpath=os.path.join("encoder", "1"))
        norm.to_module(other.encoder[1], inplace=True)
        print("encoder.1 loaded by subpath:", sorted(norm.keys()))

        # A corrupted file is caught by verify=True before anything is used.
        with open(os.path.join(folder, "head", "bias.memmap"), "r+b") as handle:
            handle.write(b"\x00\x01\x02\x03")
        try:
            TensorDict.load_memmap(folder, verify=True)
        except ValueError as error:
            print(
                "corruption detected:", type(error).__name__, str(error).replace(folder, "<ckpt>")
            )
        else:
            raise SystemExit("a corrupted checkpoint loaded with verify=True")


if __name__ == "__main__":
    main()
