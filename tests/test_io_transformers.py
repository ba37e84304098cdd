"""Hugging Face ``transformers`` loads what ``to_safetensors`` writes, and TensorDict loads
what ``save_pretrained`` writes (one file and sharded): the same keys, the same model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tensordict import TensorDict

transformers: Any = __import__("transformers")


def _tiny_gpt2() -> Any:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=8, n_head=2, vocab_size=16, n_positions=8, bos_token_id=0, eos_token_id=0
    )
    return transformers.GPT2LMHeadModel(config).eval()


def _logits(model: Any) -> torch.Tensor:
    tokens = torch.arange(5).remainder(16).unsqueeze(0)
    with torch.no_grad():
        return model(tokens).logits  # type: ignore[no-any-return]


def test_from_pretrained_loads_a_to_safetensors_checkpoint(tmp_path: Path) -> None:
    model = _tiny_gpt2()
    model.config.save_pretrained(tmp_path)
    TensorDict.from_module(model).to_safetensors(tmp_path / "model.safetensors")
    loaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(_logits(loaded), _logits(model), rtol=0, atol=0)
    for name, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def test_a_save_pretrained_checkpoint_loads_into_a_fresh_model(tmp_path: Path) -> None:
    model = _tiny_gpt2()
    model.save_pretrained(tmp_path)
    fresh = transformers.GPT2LMHeadModel(model.config).eval()
    assert not torch.equal(_logits(fresh), _logits(model))
    weights = TensorDict.from_safetensors(tmp_path / "model.safetensors")
    # save_pretrained leaves out the tied lm_head; a silent partial swap would leave the
    # fresh model's lm_head untied from the new embedding, so the default names it
    with pytest.raises(KeyError, match=r"to_module: missing keys \['lm_head'\]"):
        weights.to_module(fresh)
    weights.to_module(fresh, strict=False)
    fresh.tie_weights()
    torch.testing.assert_close(_logits(fresh), _logits(model), rtol=0, atol=0)


def test_a_sharded_save_pretrained_checkpoint_loads_one_submodule(tmp_path: Path) -> None:
    model = _tiny_gpt2()
    model.save_pretrained(tmp_path, max_shard_size="2KB")
    index_path = tmp_path / "model.safetensors.index.json"
    shards = set(json.loads(index_path.read_text())["weight_map"].values())
    assert len(shards) > 1  # the checkpoint really is sharded
    weights = TensorDict.from_safetensors(index_path)
    fresh = transformers.GPT2LMHeadModel(model.config).eval()
    weights.to_module(fresh, strict=False)
    fresh.tie_weights()
    torch.testing.assert_close(_logits(fresh), _logits(model), rtol=0, atol=0)
    # one block alone, into that block of another fresh model
    other = transformers.GPT2LMHeadModel(model.config).eval()
    weights["transformer", "h", "1"].to_module(other.transformer.h[1])
    for name, tensor in model.transformer.h[1].state_dict().items():
        assert torch.equal(other.transformer.h[1].state_dict()[name], tensor), name
    assert not torch.equal(
        other.transformer.h[0].attn.c_attn.weight, model.transformer.h[0].attn.c_attn.weight
    )
