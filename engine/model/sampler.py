"""Greedy and seeded temperature / top-k / top-p sampling, reproducible per request.

The token a request samples at output index k depends only on its logits, its
sampling params and its seed: the noise comes from a generator seeded with
(request seed, k), drawn on the CPU so every device gets the same. Neither the
rest of the batch nor a preemption that recomputes the request changes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch
from torch import Tensor

from ..request_states import CachedRequestState
from ..sampling_params import SamplingParams


def request_seed(params: SamplingParams, req_id: str, runner_seed: int) -> int:
    """The request's own seed, or one derived from the runner's seed and the request id."""
    if params.seed is not None:
        return params.seed
    return _stable_hash(f"{runner_seed}:{req_id}")


def _stable_hash(text: str) -> int:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def exponential_noise(seed: int, output_index: int, vocab_size: int) -> Tensor:
    """Exp(1) noise for one draw; `argmax(probs / noise)` samples from `probs`."""
    generator = torch.Generator().manual_seed(_stable_hash(f"{seed}:{output_index}"))
    return torch.empty(vocab_size).exponential_(generator=generator)


class Sampler:
    """Picks one token per row of float32 logits, each row with its request's params."""

    def __init__(self, runner_seed: int = 0) -> None:
        self.runner_seed = runner_seed

    def sample(
        self,
        logits: Tensor,
        states: Sequence[CachedRequestState],
        offsets: Sequence[int] | None = None,
    ) -> list[int]:
        """One token per row; row r samples output `num_output_tokens + offsets[r]` (0: next).

        Offsets let one request sample several positions in a step (speculative decoding)
        with the noise and `min_tokens` of the outputs they would be one at a time.
        """
        offsets = offsets if offsets is not None else [0] * len(states)
        logits = _mask_stop_tokens_before_min_tokens(logits, states, offsets)
        token_ids = logits.argmax(dim=-1)
        random_rows = [row for row, s in enumerate(states) if not s.sampling_params.is_greedy]
        if random_rows:
            random_states = [states[row] for row in random_rows]
            random_offsets = [offsets[row] for row in random_rows]
            index = torch.tensor(random_rows, device=logits.device)
            token_ids[index] = self._sample_random(logits[index], random_states, random_offsets)
        return [int(token_id) for token_id in token_ids.tolist()]

    def _sample_random(
        self, logits: Tensor, states: Sequence[CachedRequestState], offsets: Sequence[int]
    ) -> Tensor:
        params = [s.sampling_params for s in states]
        device = logits.device
        temperatures = torch.tensor([p.temperature for p in params], device=device)
        logits = logits / temperatures[:, None]
        if any(p.top_k > 0 or p.top_p < 1 for p in params):
            top_k = torch.tensor([p.top_k for p in params], device=device)
            top_p = torch.tensor([p.top_p for p in params], device=device)
            logits = apply_top_k_top_p(logits, top_k, top_p)
        probs = logits.softmax(dim=-1)
        vocab_size = logits.shape[-1]
        noise = torch.stack(
            [
                exponential_noise(
                    request_seed(s.sampling_params, s.req_id, self.runner_seed),
                    s.num_output_tokens + offset,
                    vocab_size,
                )
                for s, offset in zip(states, offsets, strict=True)
            ]
        )
        return (probs / noise.to(device)).argmax(dim=-1)


def apply_top_k_top_p(logits: Tensor, top_k: Tensor, top_p: Tensor) -> Tensor:
    """Keep each row's `top_k` best (0: all), then the fewest that hold `top_p` of the mass."""
    vocab_size = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    ranks = torch.arange(vocab_size, device=logits.device)[None, :]
    k = torch.where(top_k > 0, top_k, vocab_size)
    sorted_logits = sorted_logits.masked_fill(ranks >= k[:, None], float("-inf"))
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    sorted_logits = sorted_logits.masked_fill(mass_before >= top_p[:, None], float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def _mask_stop_tokens_before_min_tokens(
    logits: Tensor, states: Sequence[CachedRequestState], offsets: Sequence[int]
) -> Tensor:
    """EOS and stop ids cannot be sampled until a request has `min_tokens` outputs (vLLM)."""
    vocab_size = logits.shape[-1]
    masked = logits
    for row, (state, offset) in enumerate(zip(states, offsets, strict=True)):
        params = state.sampling_params
        if state.num_output_tokens + offset >= params.min_tokens:
            continue
        stop_ids = [t for t in params.all_stop_token_ids if t < vocab_size]
        if stop_ids:
            masked = masked.clone() if masked is logits else masked
            masked[row, stop_ids] = float("-inf")
    return masked
