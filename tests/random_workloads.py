"""Random workloads in the conformance format, for property tests and oracle diffs.

Every knob the engine supports is exercised: both policies, prefix caching and
chunked prefill on and off, the long-prefill threshold (adaptive too), the
full-sequence check, watermarks, `max_num_scheduled_tokens`, `max_num_active_seqs`,
shared prefixes, EOS / stop ids / `min_tokens`, aborts, explicit arrival times,
and empty or too-long prompts. Pools are small, so preemption is common.
`with_spec_decoding`, `with_lora` and the other `with_*` add the oracle's optional
feature keys.
"""

from __future__ import annotations

import random
from typing import Any

EOS = 2


def random_config(rng: random.Random) -> dict[str, Any]:
    block_size = rng.choice([2, 4, 8, 16])
    max_model_len = rng.choice([16, 32, 64, 128])
    chunked = rng.random() < 0.8
    max_num_seqs = rng.randint(1, 8)
    budget = max(rng.choice([8, 16, 32, 64, 128]), max_num_seqs)
    if not chunked:
        budget = max(budget, max_model_len)
    blocks_per_seq = max_model_len // block_size
    config: dict[str, Any] = {
        "block_size": block_size,
        "num_blocks": rng.randint(max(3, blocks_per_seq // 2), max(4, blocks_per_seq + 2)),
        "max_num_batched_tokens": budget,
        "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len,
        "policy": rng.choice(["fcfs", "priority"]),
        "enable_prefix_caching": rng.random() < 0.7,
        "enable_chunked_prefill": chunked,
        "long_prefill_token_threshold": rng.choice([0, 0, rng.randint(1, max_model_len)]),
    }
    if rng.random() < 0.2:
        config["scheduler_reserve_full_isl"] = False
    if rng.random() < 0.2:
        config["watermark"] = rng.choice([0.05, 0.1, 0.2])
    if rng.random() < 0.15:
        config["max_num_scheduled_tokens"] = rng.randint(max(1, budget // 2), budget)
    if rng.random() < 0.1:
        config["max_num_active_seqs"] = rng.randint(1, max_num_seqs)
    if config["long_prefill_token_threshold"] and rng.random() < 0.2:
        config["long_prefill_token_threshold_adaptive"] = True
    return config


def random_request(
    rng: random.Random, index: int, max_model_len: int, prefixes: list[list[int]]
) -> dict[str, Any]:
    prompt_len = rng.randint(1, max_model_len - 1)
    if rng.random() < 0.5:
        prompt = list(rng.choice(prefixes))[:prompt_len]
        prompt += [rng.randint(3, 50) for _ in range(prompt_len - len(prompt))]
    else:
        prompt = [rng.randint(3, 1000) for _ in range(prompt_len)]
    if rng.random() < 0.03:
        prompt = [] if rng.random() < 0.5 else [7] * max_model_len
    max_tokens = rng.randint(1, 20)
    outputs = [
        rng.choice([5, 6, 7, EOS, 9]) if rng.random() < 0.08 else rng.randint(5, 40)
        for _ in range(max_tokens + 2)
    ]
    request: dict[str, Any] = {
        "id": f"r{index}",
        "arrival_step": rng.randint(0, 10),
        "prompt_token_ids": prompt,
        "output_token_ids": outputs,
        "max_tokens": max_tokens,
        "priority": rng.randint(0, 3),
    }
    if rng.random() < 0.7:
        request["eos_token_id"] = EOS
    if rng.random() < 0.2:
        request["stop_token_ids"] = [rng.choice([5, 6, 7, 9])]
    if rng.random() < 0.2:
        request["min_tokens"] = rng.randint(0, max_tokens)
    if rng.random() < 0.15:
        request["abort_step"] = request["arrival_step"] + rng.randint(0, 15)
    if rng.random() < 0.2:
        request["arrival_time"] = round(rng.uniform(0, 10), 3)
    return request


def random_workload(
    rng: random.Random,
    max_requests: int = 12,
    *,
    async_scheduling: bool = False,
    late_aborts: bool = False,
) -> dict[str, Any]:
    """A random workload; the options add knobs the oracle's format does not have.

    `late_aborts` makes half of the aborts land before the step's update rather
    than before its `schedule()`.
    """
    config = random_config(rng)
    block_size = config["block_size"]
    prefixes = [
        [rng.randint(3, 50) for _ in range(rng.randint(1, 3 * block_size))] for _ in range(3)
    ]
    requests = [
        random_request(rng, index, config["max_model_len"], prefixes)
        for index in range(rng.randint(1, max_requests))
    ]
    if async_scheduling:
        config["async_scheduling"] = True
    if late_aborts:
        for request in requests:
            if "abort_step" in request and rng.random() < 0.5:
                request["abort_before_update"] = True
    return {"config": config, "requests": requests, "max_steps": 1500}


def with_spec_decoding(rng: random.Random, workload: dict[str, Any]) -> dict[str, Any]:
    """`workload` with speculative decoding on and each request's drafts scripted.

    The method is ngram or draft_model, always draft_model under async scheduling
    (vLLM's V1 runner refuses ngram there). A request's drafts are all right, wrong
    every m-th position (`draft_mismatch_every`), or right for a scripted count per
    verification (`draft_accept`).
    """
    config = workload["config"]
    k = rng.randint(1, 4)
    config["num_speculative_tokens"] = k
    if config.get("async_scheduling") or rng.random() < 0.4:
        config["speculative_method"] = "draft_model"
    elif rng.random() < 0.5:
        config["speculative_method"] = "ngram"
    for request in workload["requests"]:
        kind = rng.random()
        if kind < 0.35:
            request["draft_mismatch_every"] = rng.randint(1, k + 2)
        elif kind < 0.7:
            num_verifications = rng.randint(1, request["max_tokens"])
            request["draft_accept"] = [rng.randint(0, k) for _ in range(num_verifications)]
    return workload


def with_eagle_style_drafts(
    rng: random.Random, workload: dict[str, Any], version: str
) -> dict[str, Any]:
    """`workload` with an EAGLE-style drafter: `eagle`, `eagle3` or `mtp` (one module or
    several), now and then drafting in parallel or, under 0.33, hashing blocks plainly.
    Its drafts are scripted as `with_spec_decoding` scripts them."""
    workload = with_spec_decoding(rng, workload)
    config = workload["config"]
    k = config["num_speculative_tokens"]
    method = rng.choice(["eagle", "eagle3", "mtp"])
    config["speculative_method"] = method
    # Several MTP modules look k tokens ahead in a prefill, which vLLM refuses to start
    # with prefix caching and blocks shorter than k.
    if method == "mtp" and (not config["enable_prefix_caching"] or config["block_size"] >= k):
        config["mtp_num_modules"] = _mtp_num_modules(rng.randint(1, 3), k)
    if method != "mtp" and rng.random() < 0.3:
        config["parallel_drafting"] = True
    if version == "0.33.0" and rng.random() < 0.2:
        config["disable_lookahead_block_hashes"] = True
    return workload


def _mtp_num_modules(drawn: int, k: int) -> int:
    """The most modules up to `drawn` that vLLM starts with for `k` drafts: its
    `SpeculativeConfig` reuses the MTP modules in turn and refuses a
    `num_speculative_tokens` above `n_predict` (the module count) that is not a multiple
    of it ("num_speculative_tokens:3 must be divisible by n_predict=2")."""
    while k > drawn and k % drawn:
        drawn -= 1
    return drawn


def with_prefill_interval(rng: random.Random, workload: dict[str, Any]) -> dict[str, Any]:
    """`workload` with `prefill_schedule_interval` 2 to 6: prefill held between releases
    while a decode runs."""
    workload["config"]["prefill_schedule_interval"] = rng.randint(2, 6)
    return workload


def with_lora(rng: random.Random, workload: dict[str, Any]) -> dict[str, Any]:
    """`workload` with the LoRA gate on: `max_loras` slots, most requests on an adapter."""
    max_loras = rng.randint(1, 3)
    workload["config"]["max_loras"] = max_loras
    num_adapters = rng.randint(1, max_loras + 2)
    for request in workload["requests"]:
        if rng.random() < 0.8:
            request["lora_id"] = rng.randint(1, num_adapters)
    return workload


def with_hybrid_groups(rng: random.Random, workload: dict[str, Any]) -> dict[str, Any]:
    """`workload` with one to three KV cache groups of full, sliding-window and chunked
    local attention (a pool as many times larger), now and then a retention interval."""
    config = workload["config"]
    block_size = config["block_size"]
    groups = [_random_group(rng, block_size) for _ in range(rng.randint(1, 3))]
    config["kv_cache_groups"] = groups
    config["num_blocks"] *= len(groups)
    windowed = any(group["type"] == "sliding_window" for group in groups)
    if config["enable_prefix_caching"] and windowed and rng.random() < 0.4:
        config["prefix_cache_retention_interval"] = rng.choice(
            [None, block_size * rng.randint(1, 4)]
        )
    return workload


def _random_group(rng: random.Random, block_size: int) -> dict[str, Any]:
    kind = rng.choice(["full", "sliding_window", "chunked_local"])
    if kind == "sliding_window":
        return {"type": kind, "sliding_window": rng.randint(2, 4 * block_size)}
    if kind == "chunked_local":
        return {"type": kind, "attention_chunk_size": block_size * rng.randint(1, 4)}
    return {"type": kind}


def for_eagle_drafts(workload: dict[str, Any]) -> dict[str, Any]:
    """Hybrid groups as an EAGLE-style drafter needs them: a full group for the draft
    layers, no chunked local group, lookahead block hashes (vLLM 0.33)."""
    config = workload["config"]
    groups = [g for g in config["kv_cache_groups"] if g["type"] != "chunked_local"]
    if not any(group["type"] == "full" for group in groups):
        groups.append({"type": "full"})
    config["kv_cache_groups"] = groups
    config.pop("disable_lookahead_block_hashes", None)
    return workload
