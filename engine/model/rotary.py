"""Rotary position embeddings in the Hugging Face Llama layout (halves, not pairs)."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .config import Llama3RopeScaling, ModelConfig


def inverse_frequencies(config: ModelConfig, device: torch.device) -> Tensor:
    """One rotation frequency per pair of dimensions, Llama 3 scaling applied if set."""
    dim = config.head_dim
    exponents = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    inv_freq = 1.0 / (config.rope_theta**exponents)
    if config.rope_scaling is not None:
        inv_freq = _llama3_scaled(inv_freq, config.rope_scaling)
    return inv_freq


def _llama3_scaled(inv_freq: Tensor, scaling: Llama3RopeScaling) -> Tensor:
    """Stretch long wavelengths by `factor`, keep short ones, blend in between."""
    old_context_len = scaling.original_max_position_embeddings
    low_freq_wavelen = old_context_len / scaling.low_freq_factor
    high_freq_wavelen = old_context_len / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (old_context_len / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    is_medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


def rotary_cos_sin(
    positions: Tensor, inv_freq: Tensor, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """Cosines and sines `[num_tokens, head_dim]` for the given token positions."""
    freqs = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    angles = torch.cat((freqs, freqs), dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate `x` `[num_tokens, num_heads, head_dim]` by each token's position."""
    half = x.shape[-1] // 2
    rotated_half = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rotated_half * sin[:, None, :]
