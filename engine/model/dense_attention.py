"""The unpaged reference: each sequence's keys and values in one contiguous tensor.

Plain math (scores, mask, softmax) with the KV heads repeated per query head, so it
shares no attention code with the paged path it checks.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from .llama import LlamaForCausalLM


class DenseAttention:
    """Attention for `batch_size` sequences of equal length, each cached contiguously."""

    def __init__(self, num_layers: int, batch_size: int) -> None:
        self.batch_size = batch_size
        self.keys: list[Tensor | None] = [None] * num_layers
        self.values: list[Tensor | None] = [None] * num_layers

    def set_past(self, layer_index: int, key: Tensor, value: Tensor) -> None:
        """Give a layer its past keys and values `[batch, past_len, num_kv_heads, head_dim]`."""
        self.keys[layer_index], self.values[layer_index] = key, value

    def forward(self, layer_index: int, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        batch_size = self.batch_size
        num_new = query.shape[0] // batch_size
        query = query.view(batch_size, num_new, *query.shape[1:])
        key = self._append(self.keys, layer_index, key.view(batch_size, num_new, *key.shape[1:]))
        value = self._append(
            self.values, layer_index, value.view(batch_size, num_new, *value.shape[1:])
        )
        out = _causal_attention(query, key, value)
        return out.reshape(batch_size * num_new, *out.shape[2:])

    @staticmethod
    def _append(cache: list[Tensor | None], layer_index: int, new: Tensor) -> Tensor:
        past = cache[layer_index]
        cache[layer_index] = new if past is None else torch.cat((past, new), dim=1)
        return cache[layer_index]  # type: ignore[return-value]


def _causal_attention(query: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """`query` `[B, n, H, D]` against `key`/`value` `[B, L, H_kv, D]`, the new tokens last."""
    num_new, num_heads, head_dim = query.shape[1:]
    context_len = key.shape[1]
    repeats = num_heads // key.shape[2]
    key = key.repeat_interleave(repeats, dim=2)
    value = value.repeat_interleave(repeats, dim=2)
    scores = torch.einsum("bqhd,bkhd->bhqk", query.float(), key.float()) * head_dim**-0.5
    query_pos = torch.arange(context_len - num_new, context_len, device=query.device)
    key_pos = torch.arange(context_len, device=query.device)
    scores = scores.masked_fill(key_pos[None, :] > query_pos[:, None], float("-inf"))
    probs = scores.softmax(dim=-1)
    return torch.einsum("bhqk,bkhd->bqhd", probs, value.float()).to(query.dtype)


def reference_logits(model: LlamaForCausalLM, token_ids: Sequence[int]) -> Tensor:
    """Float32 logits `[len(token_ids), vocab_size]` of one whole sequence, no cache."""
    device = model.model.embed_tokens.weight.device
    input_ids = torch.tensor(list(token_ids), dtype=torch.int64, device=device)
    positions = torch.arange(len(token_ids), device=device)
    attention = DenseAttention(model.config.num_hidden_layers, batch_size=1)
    with torch.inference_mode():
        return model.compute_logits(model(input_ids, positions, attention))
