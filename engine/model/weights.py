"""Building a decoder on a device: with seeded weights, or empty for a checkpoint to fill."""

from __future__ import annotations

import math

import torch

from .config import ModelConfig
from .llama import LlamaForCausalLM

OUTPUT_SCALE = 2.0
"""Std of the embedding and head weights times sqrt(hidden_size): logits of about 2 units."""


def empty_model(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> LlamaForCausalLM:
    """A decoder whose parameters are allocated on `device` but not initialised."""
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    model = model.to(dtype).to_empty(device=device).eval()
    return model.requires_grad_(requires_grad=False)


def seeded_model(
    config: ModelConfig, seed: int, device: torch.device, dtype: torch.dtype
) -> LlamaForCausalLM:
    """A decoder with weights drawn from `seed` on the CPU, so every device gets the same."""
    model = empty_model(config, device, dtype)
    generator = torch.Generator().manual_seed(seed)
    hidden_size = config.hidden_size
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(1.0)
                continue
            fan_in = param.shape[1]
            is_vocab_matrix = "embed_tokens" in name or name.startswith("lm_head")
            std = OUTPUT_SCALE / math.sqrt(hidden_size) if is_vocab_matrix else fan_in**-0.5
            values = torch.empty(param.shape, dtype=torch.float32)
            param.copy_(values.normal_(0.0, std, generator=generator))
    return model
