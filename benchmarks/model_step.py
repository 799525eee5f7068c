"""Tokens per second of the decoder's forward pass: the paged KV cache next to dense ones.

    python benchmarks/model_step.py [--model tiny] [--device cpu] [--results benchmarks/RESULTS.md]

Cases: decode batches of 1, 16 and 64 sequences, each with `--context` tokens of
past (default 512), and one 2,048-token prefill. Three ways, same weights, same run:

- paged: the engine's path, block tables over shuffled blocks (block size 16),
  batch flattening and the gather through the tables included;
- dense reference: what the tests check against, each sequence's past in one
  contiguous tensor grown by concatenation, attention in plain math;
- contiguous: a preallocated contiguous cache read by the same attention kernel
  as the paged path, so paged / contiguous is the cost of paging alone.

Each computes the logits of the tokens that would sample.
"""

from __future__ import annotations

import argparse
import platform
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import torch
from results import write_section
from stepscope.engine.model.config import PRESETS
from stepscope.engine.model.dense_attention import DenseAttention
from stepscope.engine.model.input_batch import build_input_batch
from stepscope.engine.model.llama import LlamaForCausalLM
from stepscope.engine.model.paged_attention import (
    PagedAttention,
    PagedKVCache,
    grouped_query_attention,
)
from stepscope.engine.model.weights import seeded_model
from stepscope.engine.request_states import CachedRequestState, ScheduledChunk
from stepscope.engine.sampling_params import SamplingParams

BLOCK_SIZE = 16
PREFILL_LEN = 2048
WAYS = ("paged", "dense reference", "contiguous")
ROUNDS = 10


@dataclass(frozen=True)
class Case:
    name: str
    batch_size: int
    context_len: int
    num_new: int

    @property
    def num_tokens(self) -> int:
        return self.batch_size * self.num_new


def paged_step(model: LlamaForCausalLM, case: Case) -> Callable[[], None]:
    config, weight = model.config, model.model.embed_tokens.weight
    end = case.context_len + case.num_new
    blocks_per_seq = -(-end // BLOCK_SIZE)
    block_ids = list(range(1, case.batch_size * blocks_per_seq + 1))
    random.Random(0).shuffle(block_ids)
    cache = PagedKVCache(config, len(block_ids) + 1, BLOCK_SIZE, weight.dtype, weight.device)
    for kv_cache in cache.kv_caches:
        kv_cache.normal_()
    chunks = [
        ScheduledChunk(
            CachedRequestState(
                req_id=f"r{index}",
                token_ids=[(index * 131 + t) % config.vocab_size for t in range(end)],
                num_prompt_tokens=end,
                block_ids=block_ids[index * blocks_per_seq : (index + 1) * blocks_per_seq],
                sampling_params=SamplingParams(max_tokens=1),
            ),
            start=case.context_len,
            num_tokens=case.num_new,
        )
        for index in range(case.batch_size)
    ]

    def step() -> None:
        batch = build_input_batch(chunks, BLOCK_SIZE, weight.device)
        hidden = model(batch.input_ids, batch.positions, PagedAttention(cache, batch))
        model.compute_logits(hidden[batch.logits_indices]).argmax(dim=-1)

    return step


def dense_step(model: LlamaForCausalLM, case: Case) -> Callable[[], None]:
    past = _random_past(model, case)

    def step() -> None:
        attention = DenseAttention(model.config.num_hidden_layers, case.batch_size)
        if case.context_len:
            for layer_index, (key, value) in enumerate(past):
                attention.set_past(layer_index, key, value)
        _run_dense(model, case, attention)

    return step


def contiguous_step(model: LlamaForCausalLM, case: Case) -> Callable[[], None]:
    caches = []
    for key, value in _random_past(model, case):
        new_shape = (case.batch_size, case.num_new, *key.shape[2:])
        room = key.new_zeros(new_shape)
        caches.append((torch.cat((key, room), dim=1), torch.cat((value, room), dim=1)))
    attention = ContiguousAttention(caches, case.num_new)
    return lambda: _run_dense(model, case, attention)


class ContiguousAttention:
    """Preallocated per-sequence caches with room for the new tokens, read like the paged path."""

    def __init__(self, caches: list[tuple[torch.Tensor, torch.Tensor]], num_new: int) -> None:
        self.caches = caches
        self.num_new = num_new

    def forward(
        self, layer_index: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor
    ) -> torch.Tensor:
        key_cache, value_cache = self.caches[layer_index]
        batch_size, context_len = key_cache.shape[:2]
        past_len = context_len - self.num_new
        key_cache[:, past_len:] = key.view(batch_size, self.num_new, *key.shape[1:])
        value_cache[:, past_len:] = value.view(batch_size, self.num_new, *value.shape[1:])
        positions = torch.arange(context_len, device=query.device)
        mask = positions[None, :] <= positions[past_len:, None]
        out = grouped_query_attention(
            query.view(batch_size, self.num_new, *query.shape[1:]),
            key_cache,
            value_cache,
            mask[None].expand(batch_size, -1, -1),
        )
        return out.reshape(query.shape)


def _random_past(model: LlamaForCausalLM, case: Case) -> list[tuple[torch.Tensor, torch.Tensor]]:
    config, weight = model.config, model.model.embed_tokens.weight
    shape = (case.batch_size, case.context_len, config.num_key_value_heads, config.head_dim)
    return [
        (
            torch.randn(shape, dtype=weight.dtype, device=weight.device),
            torch.randn(shape, dtype=weight.dtype, device=weight.device),
        )
        for _ in range(config.num_hidden_layers)
    ]


def _run_dense(model: LlamaForCausalLM, case: Case, attention: object) -> None:
    device, vocab_size = model.model.embed_tokens.weight.device, model.config.vocab_size
    input_ids = torch.arange(case.num_tokens, device=device) % vocab_size
    positions = (torch.arange(case.num_new, device=device) + case.context_len).repeat(
        case.batch_size
    )
    last = torch.arange(1, case.batch_size + 1, device=device) * case.num_new - 1
    hidden = model(input_ids, positions, attention)
    model.compute_logits(hidden[last]).argmax(dim=-1)


def fastest_calls(
    steps: list[list[Callable[[], None]]], device: torch.device, min_seconds: float
) -> list[list[float]]:
    """Each step's fastest call over `ROUNDS` rounds, each round visiting every step in turn.

    The fastest call is the one least disturbed by other work on the machine, and
    rounds that sweep all cases and ways spread a disturbance over them alike.
    """

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    fastest = [[float("inf")] * len(ways) for ways in steps]
    with torch.inference_mode():
        for step in (step for ways in steps for step in ways):
            step()
            step()
        sync()
        for _ in range(ROUNDS):
            for case_index, ways in enumerate(steps):
                for way_index, step in enumerate(ways):
                    round_start = time.perf_counter()
                    while True:
                        start = time.perf_counter()
                        step()
                        sync()
                        end = time.perf_counter()
                        best = fastest[case_index][way_index]
                        fastest[case_index][way_index] = min(best, end - start)
                        if end - round_start >= min_seconds / ROUNDS:
                            break
    return fastest


def table(rows: list[tuple[Case, list[float]]]) -> str:
    lines = [
        "| case | tokens / forward | "
        + " | ".join(f"{way} tok/s (ms)" for way in WAYS)
        + " | paged / dense reference | paged / contiguous |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for case, seconds in rows:
        cells = [f"{case.num_tokens / s:,.0f} ({s * 1e3:.2f})" for s in seconds]
        paged, dense, contiguous = seconds
        lines.append(
            f"| {case.name} | {case.num_tokens} | {' | '.join(cells)} | "
            f"{dense / paged:.2f} | {contiguous / paged:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", choices=sorted(PRESETS))
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    parser.add_argument("--context", type=int, default=512, help="past tokens per decode")
    parser.add_argument(
        "--min-seconds", type=float, default=3.0, help="timed per way and case, all rounds"
    )
    parser.add_argument("--results", type=Path, help="write the table into this RESULTS.md")
    args = parser.parse_args()
    device = torch.device(args.device)
    model = seeded_model(PRESETS[args.model], 0, device, getattr(torch, args.dtype))
    cases = [
        Case(f"decode batch {n}, context {args.context}", n, args.context, 1) for n in (1, 16, 64)
    ]
    cases.append(Case(f"prefill {PREFILL_LEN}", 1, 0, PREFILL_LEN))
    steps = [
        [make(model, case) for make in (paged_step, dense_step, contiguous_step)] for case in cases
    ]
    text = table(list(zip(cases, fastest_calls(steps, device, args.min_seconds), strict=True)))
    print(text)
    if args.results:
        heading = (
            f"## model_step.py ({date.today()}, {platform.machine()}, {args.device}, "
            f"torch {torch.__version__}, {torch.get_num_threads()} threads)\n\n"
            f"Forward pass of the `{args.model}` preset ({args.dtype}) including the logits of "
            "the sampling tokens. Paged: the engine's path through "
            f"shuffled block tables (block size {BLOCK_SIZE}). Dense reference: the unpaged "
            "forward the tests compare against (plain-math attention, past grown by "
            "concatenation). Contiguous: a preallocated unpaged cache read by the same attention "
            "kernel as the paged path. Time per forward: the fastest call over "
            f"{ROUNDS} rounds that each sweep every case and way (the machine may be shared). "
            "Ratios: paged throughput over the other's.\n\n"
        )
        write_section(args.results, "model_step", heading + text)


if __name__ == "__main__":
    main()
