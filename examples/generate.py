"""Writes the example workloads (deterministic): python examples/generate.py"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
EOS = 2


def request(
    request_id: str,
    arrival_step: int,
    prompt: list[int],
    num_outputs: int,
    max_tokens: int | None = None,
    priority: int = 0,
    *,
    eos: bool = True,
) -> dict[str, Any]:
    outputs = [1000 + (hash_token(request_id, k)) for k in range(num_outputs)]
    spec: dict[str, Any] = {
        "id": request_id,
        "arrival_step": arrival_step,
        "prompt_token_ids": prompt,
        "output_token_ids": [*outputs, EOS] if eos else outputs,
        "max_tokens": max_tokens or num_outputs + 1,
        "priority": priority,
    }
    if eos:
        spec["eos_token_id"] = EOS
    return spec


def hash_token(request_id: str, index: int) -> int:
    return (sum(map(ord, request_id)) * 131 + index * 17) % 20000


def tokens(rng: random.Random, count: int) -> list[int]:
    return [rng.randint(3, 30000) for _ in range(count)]


def preemption_storm() -> dict[str, Any]:
    rng = random.Random(1)
    requests = [
        request(f"chat-{i:02d}", i // 8, tokens(rng, 30), rng.randint(90, 110)) for i in range(24)
    ]
    return {
        "description": "24 chats with 30-token prompts arrive eight per step; they cross block "
        "boundaries together, so when the pool runs dry whole batches are preempted at once "
        "and the same requests are evicted again when they come back.",
        "config": {"block_size": 16, "num_blocks": 41, "max_num_batched_tokens": 512,
                   "max_num_seqs": 24, "max_model_len": 256},
        "requests": requests,
        "max_steps": 2000,
    }  # fmt: skip


def head_of_line_blocking() -> dict[str, Any]:
    rng = random.Random(2)
    requests = [request(f"decode-{i}", 0, tokens(rng, 32), 60) for i in range(4)]
    requests.append(request("big-doc", 2, tokens(rng, 600), 20))
    requests += [request(f"small-{i}", 3 + i, tokens(rng, 24), 12) for i in range(6)]
    return {
        "description": "A 600-token document reaches the head of the queue while four chats "
        "decode; its whole sequence does not fit yet, so the small requests behind it wait too.",
        "config": {"block_size": 16, "num_blocks": 48, "max_num_batched_tokens": 256,
                   "max_num_seqs": 16, "max_model_len": 1024},
        "requests": requests,
        "max_steps": 2000,
    }  # fmt: skip


def prefix_cache_reuse() -> dict[str, Any]:
    rng = random.Random(3)
    system_prompt = tokens(rng, 96)
    requests = [
        request(f"user-{i:02d}", i, [*system_prompt, *tokens(rng, rng.randint(8, 40))],
                rng.randint(10, 30))
        for i in range(16)
    ]  # fmt: skip
    return {
        "description": "16 users share a 96-token system prompt; the pool is small enough that "
        "some are preempted and re-find their own blocks when they resume.",
        "config": {"block_size": 16, "num_blocks": 30, "max_num_batched_tokens": 256,
                   "max_num_seqs": 8, "max_model_len": 512},
        "requests": requests,
        "max_steps": 2000,
    }  # fmt: skip


def chunked_prefill_long_prompts() -> dict[str, Any]:
    rng = random.Random(4)
    requests = [request(f"chat-{i}", 0, tokens(rng, 40), 80) for i in range(6)]
    requests += [request(f"doc-{i}", 5 + 10 * i, tokens(rng, 1500), 16) for i in range(3)]
    return {
        "description": "Six chats decode while three 1,500-token documents arrive; chunked "
        "prefill with long_prefill_token_threshold 256 keeps every decode going.",
        "config": {"block_size": 16, "num_blocks": 512, "max_num_batched_tokens": 512,
                   "max_num_seqs": 16, "max_model_len": 2048,
                   "long_prefill_token_threshold": 256},
        "requests": requests,
        "max_steps": 2000,
    }  # fmt: skip


def priority_inversion() -> dict[str, Any]:
    rng = random.Random(5)
    requests = [request(f"batch-{i}", 0, tokens(rng, 160), 150, priority=5) for i in range(5)]
    requests.append(request("urgent", 40, tokens(rng, 400), 10, priority=0))
    return {
        "description": "Five low-priority batch jobs fill the KV cache; an urgent request "
        "arrives and waits, because only a running request that needs blocks can preempt.",
        "config": {"block_size": 16, "num_blocks": 90, "max_num_batched_tokens": 512,
                   "max_num_seqs": 8, "max_model_len": 512, "policy": "priority"},
        "requests": requests,
        "max_steps": 2000,
    }  # fmt: skip


EXAMPLES = {
    "preemption_storm": preemption_storm,
    "head_of_line_blocking": head_of_line_blocking,
    "prefix_cache_reuse": prefix_cache_reuse,
    "chunked_prefill_long_prompts": chunked_prefill_long_prompts,
    "priority_inversion": priority_inversion,
}


def main() -> None:
    for name, build in EXAMPLES.items():
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        workload = build()
        lines = [json.dumps(value) for value in workload["requests"]]
        text = json.dumps({k: v for k, v in workload.items() if k != "requests"}, indent=1)
        text = text[:-2] + ',\n "requests": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"
        (folder / "workload.json").write_text(text)


if __name__ == "__main__":
    main()
