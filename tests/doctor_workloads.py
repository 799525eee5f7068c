"""Workloads `stepscope doctor` is tested on: for each kind of finding, one that shows it
and its near twin, the same traffic with the cause taken away."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from conftest import REPO
from stepscope.engine import Workload, load_workload
from stepscope.engine.workload import parse_workload

EXAMPLES = REPO / "examples"


@dataclass(frozen=True)
class Twins:
    kind: str
    sick: Workload
    healthy: Workload
    """The same arrivals with the cause taken away."""


def _example(name: str, **twin_knobs: Any) -> tuple[Workload, Workload]:
    workload = load_workload(EXAMPLES / name / "workload.json")
    return workload, workload.with_config(workload.config.with_knobs(twin_knobs))


def _synthetic(config: dict[str, Any], requests: list[dict[str, Any]]) -> Workload:
    text = json.dumps({"config": config, "requests": requests, "max_steps": 1000})
    return parse_workload(text, source="doctor")


def _prompt(seed: int, length: int = 16) -> list[int]:
    return [1000 + 97 * seed + t for t in range(length)]


def stalled_at_max_num_seqs(max_num_seqs: int) -> Workload:
    """Two long decodes fill max_num_seqs=2; four short requests wait 100+ steps behind them
    with blocks and budget free."""
    longs = [{"id": f"long-{i}", "prompt_token_ids": _prompt(i), "output_token_ids": [5] * 120,
              "max_tokens": 120} for i in range(2)]  # fmt: skip
    shorts = [{"id": f"short-{i}", "arrival_step": 2, "prompt_token_ids": _prompt(10 + i),
               "output_token_ids": [6] * 8, "max_tokens": 8} for i in range(4)]  # fmt: skip
    config = {"block_size": 16, "num_blocks": 64, "max_num_batched_tokens": 256,
              "max_num_seqs": max_num_seqs, "max_model_len": 256}  # fmt: skip
    return _synthetic(config, longs + shorts)


def held_by_prefill_interval(interval: int) -> Workload:
    """Two long decodes run; four short requests that arrive at step 3 wait for the
    prefill cadence's next release (`prefill_schedule_interval`), with blocks and budget free."""
    longs = [{"id": f"long-{i}", "prompt_token_ids": _prompt(i), "output_token_ids": [5] * 80,
              "max_tokens": 80} for i in range(2)]  # fmt: skip
    shorts = [{"id": f"short-{i}", "arrival_step": 3, "prompt_token_ids": _prompt(10 + i),
               "output_token_ids": [6] * 8, "max_tokens": 8} for i in range(4)]  # fmt: skip
    config = {"block_size": 16, "num_blocks": 64, "max_num_batched_tokens": 256,
              "max_num_seqs": 8, "max_model_len": 256,
              "prefill_schedule_interval": interval}  # fmt: skip
    return _synthetic(config, longs + shorts)


def gated_by_max_loras(max_loras: int) -> Workload:
    """Adapter 1's two long decodes take the only LoRA slot; adapter 2's requests wait."""
    first = [{"id": f"a1-{i}", "prompt_token_ids": _prompt(i), "output_token_ids": [5] * 60,
              "max_tokens": 60, "lora_id": 1} for i in range(2)]  # fmt: skip
    second = [{"id": f"a2-{i}", "arrival_step": 1, "prompt_token_ids": _prompt(20 + i),
               "output_token_ids": [6] * 8, "max_tokens": 8, "lora_id": 2}
              for i in range(3)]  # fmt: skip
    config = {"block_size": 16, "num_blocks": 64, "max_num_batched_tokens": 256,
              "max_num_seqs": 8, "max_model_len": 256, "max_loras": max_loras}  # fmt: skip
    return _synthetic(config, first + second)


def drafting(mismatch_every: int) -> Workload:
    """Four requests decoding 40 tokens with 3 drafts a step; every `mismatch_every`-th
    draft is mispredicted (1: all of them)."""
    requests = [{"id": f"r{i}", "prompt_token_ids": _prompt(i), "output_token_ids": [7] * 40,
                 "max_tokens": 40, "draft_mismatch_every": mismatch_every}
                for i in range(4)]  # fmt: skip
    config = {"block_size": 16, "num_blocks": 64, "max_num_batched_tokens": 256,
              "max_num_seqs": 8, "max_model_len": 256, "num_speculative_tokens": 3}  # fmt: skip
    return _synthetic(config, requests)


def twins() -> list[Twins]:
    storm = _example("preemption_storm", num_blocks=200)
    blocked = _example("head_of_line_blocking", num_blocks=96)
    inverted = _example("priority_inversion", num_blocks=200)
    return [
        Twins("preemption_thrash", *storm),
        Twins("head_of_line_blocking", *blocked),
        Twins("starvation", *inverted),
        Twins("admission_stall", stalled_at_max_num_seqs(2), stalled_at_max_num_seqs(8)),
        Twins("priority_inversion", *inverted),
        Twins("prefix_cache_thrash", evicting_a_shared_prefix(24), evicting_a_shared_prefix(64)),
        Twins("spec_decode_waste", drafting(1), drafting(1000)),
        Twins("lora_gate_stall", gated_by_max_loras(1), gated_by_max_loras(2)),
        Twins("budget_underuse", *blocked),
    ]


def evicting_a_shared_prefix(num_blocks: int) -> Workload:
    """Users sharing a 96-token system prompt arrive every 30 steps; between them a long
    unrelated prompt takes nearly all of a 24-block pool, evicting the shared blocks."""
    system = _prompt(0, 96)
    users = [{"id": f"user-{i}", "arrival_step": 30 * i,
              "prompt_token_ids": system + _prompt(100 + i), "output_token_ids": [5] * 4,
              "max_tokens": 4} for i in range(6)]  # fmt: skip
    fillers = [{"id": f"filler-{i}", "arrival_step": 30 * i + 5,
                "prompt_token_ids": _prompt(200 + i, 320), "output_token_ids": [6] * 8,
                "max_tokens": 8} for i in range(6)]  # fmt: skip
    config = {"block_size": 16, "num_blocks": num_blocks, "max_num_batched_tokens": 512,
              "max_num_seqs": 8, "max_model_len": 512}  # fmt: skip
    return _synthetic(config, users + fillers)
