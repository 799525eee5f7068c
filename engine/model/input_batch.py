"""One step's scheduled chunks flattened into a single batch, with where each K/V lives.

Token `pos` of a request lives in slot `block_ids[pos // block_size] * block_size
+ pos % block_size` of every layer's cache. Requests with one query token this
step (decodes) attend together, padded to the longest context; each longer chunk
(a prefill, whole or partial) attends on its own, causally.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from ..request_states import ScheduledChunk


class BlockTableError(AssertionError):
    """A block table that cannot be right: too short, or mapping a token to the null block."""


@dataclass(frozen=True, slots=True)
class DecodeQueries:
    """Requests with a single query token, attended as one padded batch."""

    token_indices: Tensor
    """`[num_reqs]` index of each request's token in the flat batch."""
    context_slots: Tensor
    """`[num_reqs, max_context_len]` slots of positions 0.. of each request (padding repeats)."""
    context_mask: Tensor
    """`[num_reqs, 1, max_context_len]` True where the position exists."""


@dataclass(frozen=True, slots=True)
class PrefillQueries:
    """One request's chunk of several query tokens."""

    token_start: int
    token_end: int
    context_slots: Tensor
    """`[context_len]` slots of positions 0 .. the chunk's last token."""
    causal_mask: Tensor
    """`[num_tokens, context_len]` True where the key's position is at most the query's."""


@dataclass(frozen=True, slots=True)
class InputBatch:
    input_ids: Tensor
    positions: Tensor
    slot_mapping: Tensor
    """`[num_tokens]` the slot each token's new key and value are written to."""
    decodes: DecodeQueries | None
    prefills: tuple[PrefillQueries, ...]
    logits_indices: Tensor
    """The last `1 + drafts` tokens of each chunk that samples, in chunk order."""


def check_block_table(chunk: ScheduledChunk, block_size: int) -> None:
    """Every position up to the chunk's end has a block, and none is the null block 0."""
    state = chunk.state
    num_blocks_needed = -(-chunk.end // block_size)
    if len(state.block_ids) < num_blocks_needed:
        raise BlockTableError(
            f"request {state.req_id!r}: {len(state.block_ids)} blocks cannot hold "
            f"{chunk.end} tokens of block size {block_size}"
        )
    if 0 in state.block_ids[:num_blocks_needed]:
        raise BlockTableError(
            f"request {state.req_id!r}: block table {state.block_ids[:num_blocks_needed]} "
            "maps a position to the null block 0, which is never written"
        )


def build_input_batch(
    chunks: Sequence[ScheduledChunk],
    block_size: int,
    device: torch.device,
    draft_token_ids: Mapping[str, Sequence[int]] | None = None,
) -> InputBatch:
    """The batch of `chunks`; a request's scheduled drafts follow its known tokens.

    A -1 draft (padding) is read as token 0, as vLLM clamps it before the embedding.
    """
    for chunk in chunks:
        check_block_table(chunk, block_size)
    drafts = draft_token_ids or {}
    input_ids: list[int] = []
    positions: list[int] = []
    rows: list[int] = []
    sampling: list[int] = []
    for row, chunk in enumerate(chunks):
        chunk_drafts = [max(t, 0) for t in drafts.get(chunk.state.req_id, ())]
        input_ids += (chunk.state.token_ids + chunk_drafts)[chunk.start : chunk.end]
        positions += range(chunk.start, chunk.end)
        rows += [row] * chunk.num_tokens
        if chunk.samples:
            sampling += range(len(input_ids) - 1 - len(chunk_drafts), len(input_ids))
    token_starts = list(itertools.accumulate((c.num_tokens for c in chunks), initial=0))
    block_table = _block_table(chunks, device)
    position_tensor = torch.tensor(positions, device=device)
    return InputBatch(
        input_ids=torch.tensor(input_ids, dtype=torch.int64, device=device),
        positions=position_tensor,
        slot_mapping=_slots(
            block_table, torch.tensor(rows, device=device), position_tensor, block_size
        ),
        decodes=_decode_queries(chunks, token_starts, block_table, block_size),
        prefills=tuple(
            _prefill_queries(chunk, token_starts[row], block_table[row], block_size)
            for row, chunk in enumerate(chunks)
            if chunk.num_tokens > 1
        ),
        logits_indices=torch.tensor(sampling, dtype=torch.int64, device=device),
    )


def _block_table(chunks: Sequence[ScheduledChunk], device: torch.device) -> Tensor:
    """`[num_reqs, max_blocks]` each request's block ids, padded with the null block."""
    width = max(len(c.state.block_ids) for c in chunks)
    padded = [c.state.block_ids + [0] * (width - len(c.state.block_ids)) for c in chunks]
    return torch.tensor(padded, dtype=torch.int64, device=device)


def _slots(block_table: Tensor, rows: Tensor, positions: Tensor, block_size: int) -> Tensor:
    return block_table[rows, positions // block_size] * block_size + positions % block_size


def _decode_queries(
    chunks: Sequence[ScheduledChunk], token_starts: list[int], block_table: Tensor, block_size: int
) -> DecodeQueries | None:
    rows = [row for row, chunk in enumerate(chunks) if chunk.num_tokens == 1]
    if not rows:
        return None
    device = block_table.device
    context_lens = torch.tensor([chunks[row].end for row in rows], device=device)
    key_positions = torch.arange(int(context_lens.max()), device=device)[None, :]
    clamped = torch.minimum(key_positions, context_lens[:, None] - 1)
    row_index = torch.tensor(rows, device=device)[:, None].expand_as(clamped)
    return DecodeQueries(
        token_indices=torch.tensor([token_starts[row] for row in rows], device=device),
        context_slots=_slots(block_table, row_index, clamped, block_size),
        context_mask=(key_positions < context_lens[:, None])[:, None, :],
    )


def _prefill_queries(
    chunk: ScheduledChunk, token_start: int, block_ids: Tensor, block_size: int
) -> PrefillQueries:
    device = block_ids.device
    key_positions = torch.arange(chunk.end, device=device)
    query_positions = torch.arange(chunk.start, chunk.end, device=device)
    return PrefillQueries(
        token_start=token_start,
        token_end=token_start + chunk.num_tokens,
        context_slots=block_ids[key_positions // block_size] * block_size
        + key_positions % block_size,
        causal_mask=key_positions[None, :] <= query_positions[:, None],
    )
