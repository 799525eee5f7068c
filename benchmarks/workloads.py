"""Benchmark workloads in the conformance JSON format (plain dicts, no stepscope imports)."""

from __future__ import annotations

import random
from typing import Any

from step_timer import SAMPLED_TOKEN_ID


def decode_case(num_requests: int, num_steps: int) -> dict[str, Any]:
    prompt_len, block_size = 128, 16
    blocks_per_request = (prompt_len + num_steps + 64) // block_size + 1
    return _decode_case(num_requests, num_steps, blocks_per_request, f"decode N={num_requests}")


def spec_decode_case(
    num_requests: int, num_steps: int, num_speculative_tokens: int, draft_seed: int = 0
) -> dict[str, Any]:
    """The decode case with ngram speculative decoding: each step proposes k drafts, accepted
    per the fake drafter's seeded pattern (`fake_drafter.py`, both sides alike)."""
    prompt_len, block_size = 128, 16
    tokens_per_step = num_speculative_tokens + 1
    blocks_per_request = (prompt_len + tokens_per_step * (num_steps + 64)) // block_size + 1
    name = f"decode N={num_requests} spec k={num_speculative_tokens}"
    case = _decode_case(num_requests, num_steps, blocks_per_request, name)
    case["workload"]["config"] |= {
        "num_speculative_tokens": num_speculative_tokens,
        "speculative_method": "ngram",
    }
    case["draft_seed"] = draft_seed
    return case


def _decode_case(
    num_requests: int, num_steps: int, blocks_per_request: int, name: str
) -> dict[str, Any]:
    prompt_len, block_size = 128, 16
    requests = [
        {
            "id": f"d{i}",
            "arrival_step": 0,
            "prompt_token_ids": [(i * 7919 + t) % 30000 + 3 for t in range(prompt_len)],
            "max_tokens": 100_000,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": block_size,
        "num_blocks": num_requests * blocks_per_request + 1,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 1024,
        "max_model_len": 65536,
        "enable_prefix_caching": True,
    }
    warmup = num_requests * prompt_len // 8192 + 2
    return {
        "name": name,
        "workload": {"config": config, "requests": requests},
        "measure_from": warmup,
        "num_steps": num_steps,
    }


def serve_case(num_requests: int = 200, seed: int = 0) -> dict[str, Any]:
    """`vllm_serve_overhead.py`'s load without a server: prompts of a 64-token shared prefix
    and 96 random tokens, 64 output tokens each, all arriving at once, into its server's
    settings (block size 32, 96 blocks, budget 256, 32 sequences): a full KV pool, so
    admissions are refused and running requests preempted."""
    rng = random.Random(seed)
    prefix = [rng.randint(3, 1000) for _ in range(64)]
    requests = [
        {
            "id": f"s{i}",
            "arrival_step": 0,
            "prompt_token_ids": prefix + [rng.randint(3, 1000) for _ in range(96)],
            "max_tokens": 64,
        }
        for i in range(num_requests)
    ]
    config = {
        "block_size": 32,
        "num_blocks": 96,
        "max_num_batched_tokens": 256,
        "max_num_seqs": 32,
        "max_model_len": 1024,
        "enable_prefix_caching": True,
    }
    return {
        "name": f"serve {num_requests} reqs",
        "workload": {"config": config, "requests": requests},
        "measure_from": 0,
        "num_steps": 100_000,
    }


def lora_mixed_case(num_requests: int, max_loras: int, num_adapters: int) -> dict[str, Any]:
    """The mixed case with LoRA: request i uses adapter `i % num_adapters + 1`, at most
    `max_loras` of them run at once (the rest wait at the LoRA gate)."""
    case = mixed_case(num_requests)
    case["name"] += f" LoRA {max_loras}/{num_adapters}"
    case["workload"]["config"]["max_loras"] = max_loras
    for i, request in enumerate(case["workload"]["requests"]):
        request["lora_id"] = i % num_adapters + 1
    return case


def mixed_case(num_requests: int, seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    requests = []
    for i in range(num_requests):
        prompt_len = rng.randint(64, 2048)
        shared = [11 + (i % 4)] * 256 if rng.random() < 0.3 else []  # some shared prefixes
        prompt = shared + [rng.randint(3, 30000) for _ in range(prompt_len - len(shared))]
        requests.append(
            {
                "id": f"m{i}",
                "arrival_step": i // 2,
                "prompt_token_ids": prompt[:prompt_len],
                "max_tokens": rng.randint(16, 256),
            }
        )
    config = {
        "block_size": 16,
        "num_blocks": 2400,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "max_model_len": 4096,
        "enable_prefix_caching": True,
    }
    return {
        "name": f"mixed {num_requests} reqs",
        "workload": {"config": config, "requests": requests},
        "measure_from": 0,
        "num_steps": 100_000,
    }


def chat_case(
    num_conversations: int, measure_from: int, num_steps: int, seed: int = 0
) -> dict[str, Any]:
    """Multi-turn chat at `max_num_seqs` 256: each turn's prompt is a shared system prompt,
    the conversation so far and a new user message, so admissions hit the prefix cache;
    long prompts are prefilled in chunks; the KV pool is tight enough to preempt.

    A conversation starts every other step; its next turn arrives when the previous
    answer would be done unqueued, plus a pause. Timed from `measure_from` (the running
    list is full by then) for `num_steps` steps.
    """
    rng = random.Random(seed)
    system_prompts = [[rng.randint(3, 30000) for _ in range(512)] for _ in range(4)]
    requests: list[dict[str, Any]] = []
    for c in range(num_conversations):
        requests.extend(_conversation(rng, f"c{c}", system_prompts[c % 4], c * 2))
    config = {
        "block_size": 16,
        "num_blocks": 14_000,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "max_model_len": 8192,
        "enable_prefix_caching": True,
    }
    return {
        "name": f"chat {num_conversations} conversations",
        "workload": {"config": config, "requests": requests},
        "measure_from": measure_from,
        "num_steps": num_steps,
    }


def _conversation(
    rng: random.Random, name: str, system_prompt: list[int], start_step: int
) -> list[dict[str, Any]]:
    """Up to five turns; each prompt repeats the whole conversation before it, the earlier
    answers as the fake model's sampled token, so their cached blocks can hit."""
    context = list(system_prompt)
    arrival_step = start_step
    turns = []
    for turn in range(rng.randint(2, 5)):
        context += [rng.randint(3, 30000) for _ in range(rng.randint(16, 400))]
        max_tokens = rng.randint(32, 384)
        if len(context) + max_tokens > 6000:
            break
        turns.append(
            {
                "id": f"{name}t{turn}",
                "arrival_step": arrival_step,
                "prompt_token_ids": list(context),
                "max_tokens": max_tokens,
            }
        )
        context += [SAMPLED_TOKEN_ID] * max_tokens
        arrival_step += max_tokens + rng.randint(5, 40)
    return turns


SLIDING_WINDOW_128 = [{"type": "full"}, {"type": "sliding_window", "sliding_window": 128}]
"""gpt-oss's KV cache groups: full attention and a 128-token sliding window."""

CHUNKED_LOCAL_256 = [{"type": "full"}, {"type": "chunked_local", "attention_chunk_size": 256}]
"""Llama 4's shape with a chunk short enough for these prompts to cross it."""


def hybrid_case(case: dict[str, Any], groups: list[dict[str, Any]], label: str) -> dict[str, Any]:
    """`case` with hybrid KV cache groups over the same pool (`label` names them)."""
    workload = case["workload"]
    return {
        **case,
        "name": f"{case['name']} {label}",
        "workload": {**workload, "config": {**workload["config"], "kv_cache_groups": groups}},
    }
