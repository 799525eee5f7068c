"""A Llama-style decoder: embeddings, RMSNorm, rotary positions, GQA, SwiGLU, LM head.

Module and parameter names are those of Hugging Face's `LlamaForCausalLM`, so a
checkpoint's state dict loads as it is. How keys and values are stored and read
is left to an `AttentionBackend`: paged for the engine, dense for the reference.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import ModelConfig
from .rotary import apply_rotary, inverse_frequencies, rotary_cos_sin


class AttentionBackend(Protocol):
    """Keeps each layer's keys and values and attends every query to its sequence's past."""

    def forward(self, layer_index: int, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        """`query` `[num_tokens, num_heads, head_dim]`, key and value per KV head; out as query."""
        ...


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int) -> None:
        super().__init__()
        self.layer_index = layer_index
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        hidden, q_size = config.hidden_size, self.num_heads * self.head_dim
        kv_size = self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(hidden, q_size, bias=False)
        self.k_proj = nn.Linear(hidden, kv_size, bias=False)
        self.v_proj = nn.Linear(hidden, kv_size, bias=False)
        self.o_proj = nn.Linear(q_size, hidden, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, attention: AttentionBackend) -> Tensor:
        num_tokens = x.shape[0]
        query = self.q_proj(x).view(num_tokens, self.num_heads, self.head_dim)
        key = self.k_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        value = self.v_proj(x).view(num_tokens, self.num_kv_heads, self.head_dim)
        query, key = apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)
        out = attention.forward(self.layer_index, query, key, value)
        projected: Tensor = self.o_proj(out.reshape(num_tokens, -1))
        return projected


class LlamaMLP(nn.Module):
    """SwiGLU: `down(silu(gate(x)) * up(x))`."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden, intermediate = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, layer_index: int) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config, layer_index)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, attention: AttentionBackend) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, attention)
        out: Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out


class LlamaModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(config, index) for index in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, input_ids: Tensor, positions: Tensor, attention: AttentionBackend) -> Tensor:
        x: Tensor = self.embed_tokens(input_ids)
        inv_freq = inverse_frequencies(self.config, x.device)
        cos, sin = rotary_cos_sin(positions, inv_freq, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, attention)
        normed: Tensor = self.norm(x)
        return normed


class LlamaForCausalLM(nn.Module):
    """The decoder plus its LM head; a tied head reuses the embedding matrix."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        )

    def forward(self, input_ids: Tensor, positions: Tensor, attention: AttentionBackend) -> Tensor:
        """Final hidden states `[num_tokens, hidden_size]` of a flattened batch of tokens."""
        hidden: Tensor = self.model(input_ids, positions, attention)
        return hidden

    def compute_logits(self, hidden: Tensor) -> Tensor:
        """Float32 logits `[num_rows, vocab_size]` for the given hidden states."""
        weight = self.model.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(hidden, weight).to(torch.float32)
