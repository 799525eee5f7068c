"""The paged KV cache and the attention that writes and reads it through block tables."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .config import ModelConfig
from .input_batch import InputBatch


class PagedKVCache:
    """Per layer one tensor `[2, num_blocks × block_size, num_kv_heads, head_dim]` (keys, values).

    Slot `block_id * block_size + offset` holds one token; block 0 is vLLM's null
    block and is never written.
    """

    def __init__(
        self,
        config: ModelConfig,
        num_blocks: int,
        block_size: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        shape = (2, num_blocks * block_size, config.num_key_value_heads, config.head_dim)
        self.kv_caches = [
            torch.zeros(shape, dtype=dtype, device=device) for _ in range(config.num_hidden_layers)
        ]

    def write(self, layer_index: int, slot_mapping: Tensor, key: Tensor, value: Tensor) -> None:
        kv_cache = self.kv_caches[layer_index]
        kv_cache[0].index_copy_(0, slot_mapping, key)
        kv_cache[1].index_copy_(0, slot_mapping, value)

    def gather(self, layer_index: int, slots: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values stored in `slots` (any shape), each `[*slots.shape, kv_heads, dim]`."""
        kv_cache = self.kv_caches[layer_index]
        return kv_cache[0][slots], kv_cache[1][slots]


class PagedAttention:
    """Writes a step's new keys and values to their slots, then attends through block tables."""

    def __init__(self, kv_cache: PagedKVCache, batch: InputBatch) -> None:
        self.kv_cache = kv_cache
        self.batch = batch

    def forward(self, layer_index: int, query: Tensor, key: Tensor, value: Tensor) -> Tensor:
        batch, kv_cache = self.batch, self.kv_cache
        kv_cache.write(layer_index, batch.slot_mapping, key, value)
        out = torch.empty_like(query)
        decodes = batch.decodes
        if decodes is not None:
            keys, values = kv_cache.gather(layer_index, decodes.context_slots)
            queries = query[decodes.token_indices][:, None]
            attended = grouped_query_attention(queries, keys, values, decodes.context_mask)
            out[decodes.token_indices] = attended[:, 0]
        for prefill in batch.prefills:
            keys, values = kv_cache.gather(layer_index, prefill.context_slots)
            queries = query[prefill.token_start : prefill.token_end]
            attended = grouped_query_attention(
                queries[None], keys[None], values[None], prefill.causal_mask[None]
            )
            out[prefill.token_start : prefill.token_end] = attended[0]
        return out


def grouped_query_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
    """`query` `[B, n, H, D]`, `key`/`value` `[B, L, H_kv, D]`, `mask` `[B, n, L]` → `[B, n, H, D]`.

    The query heads sharing a KV head are folded into its query rows, so grouped-query
    attention needs no copy of the keys and values.
    """
    batch_size, num_queries, num_heads, head_dim = query.shape
    num_kv_heads = key.shape[2]
    group = num_heads // num_kv_heads
    folded = query.view(batch_size, num_queries, num_kv_heads, group, head_dim)
    folded = folded.permute(0, 2, 3, 1, 4).reshape(
        batch_size, num_kv_heads, group * num_queries, head_dim
    )
    folded_mask = mask[:, None, None].expand(-1, 1, group, -1, -1)
    folded_mask = folded_mask.reshape(batch_size, 1, group * num_queries, mask.shape[-1])
    out = F.scaled_dot_product_attention(
        folded, key.transpose(1, 2), value.transpose(1, 2), attn_mask=folded_mask
    )
    out = out.view(batch_size, num_kv_heads, group, num_queries, head_dim)
    return out.permute(0, 3, 1, 2, 4).reshape(batch_size, num_queries, num_heads, head_dim)
