"""The knob changes a what-if tries for a finding, smallest first: each only adds capacity
or lifts a limit, so the recorded state can always take it (`check_knobs`)."""

from __future__ import annotations

import math
from typing import Any

from stepscope.engine import EngineConfig

GROWTH = (1.25, 1.5, 2.0, 4.0)
"""How much more of a resource to try: a quarter more is a modest ask of a deployment
(`gpu_memory_utilization` from 0.8 to 1.0), twice as much a larger GPU, four times a
tensor-parallel group of four."""


def more_blocks(config: EngineConfig) -> tuple[dict[str, Any], ...]:
    return _grown("num_blocks", config.num_blocks)


def more_seqs(config: EngineConfig) -> tuple[dict[str, Any], ...]:
    return _grown("max_num_seqs", config.max_num_seqs)


def more_batched_tokens(config: EngineConfig) -> tuple[dict[str, Any], ...]:
    return _grown("max_num_batched_tokens", config.max_num_batched_tokens)


def chunked_prefill(config: EngineConfig) -> tuple[dict[str, Any], ...]:
    return () if config.enable_chunked_prefill else ({"enable_chunked_prefill": True},)


def more_loras(config: EngineConfig) -> tuple[dict[str, Any], ...]:
    if config.max_loras is None:
        return ()
    return tuple({"max_loras": config.max_loras + extra} for extra in (1, 2))


def shorter_prefill_interval(config: EngineConfig) -> tuple[dict[str, Any], ...]:
    """Prefill held between releases: half the interval, then none (1)."""
    interval = config.local_prefill_interval
    shorter = dict.fromkeys(value for value in (interval // 2, 1) if 1 <= value < interval)
    return tuple({"prefill_schedule_interval": value} for value in shorter)


def _grown(knob: str, value: int) -> tuple[dict[str, Any], ...]:
    grown = dict.fromkeys(math.ceil(value * factor) for factor in GROWTH)
    return tuple({knob: new} for new in grown if new > value)
