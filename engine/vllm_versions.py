"""The vLLM versions whose scheduling rules the engine follows, and the rules that differ.

Inside the subset, vLLM 0.32.x and 0.33.0 decide alike except where a field of
`VllmRules` says otherwise; the engine reads the rules of the version its config
names (`vllm_version`), so a trace recorded from either version replays exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ConfigError

DEFAULT_VLLM_VERSION = "0.33.0"


@dataclass(frozen=True, slots=True)
class VllmRules:
    """The decisions one vLLM version makes differently from another."""

    version_line: str
    """The version, or line of versions, that decides by these rules (`0.32.x`)."""
    self_preemption_continues: bool
    """Priority policy: after the running request being scheduled preempts itself, the
    running pass goes on to the next running request (0.33's `continue`) instead of
    ending (0.32's `break`); the ones behind it have higher priority and may fit."""
    caches_drafted_blocks_at_update: bool
    """Speculative decoding: `update_from_output` registers the blocks the verified tokens
    filled in the prefix cache, as it does for async output (0.33); 0.32 does it for
    async output only, and leaves drafted blocks to the next `allocate_slots`."""
    lora_gate_counts_unscheduled_running: bool
    """The `max_loras` gate counts the adapters of every running request (0.33), or only
    of the running requests scheduled this step (0.32's `scheduled_running_reqs`)."""
    applies_prefill_interval_locally: bool
    """`prefill_schedule_interval` holds prefill in an engine without data parallelism
    (0.33's local cadence); 0.32 applies it only in a data-parallel MoE engine core."""
    has_lookahead_block_hashes: bool
    """EAGLE-style drafters with prefix caching hash each block together with the next
    prefill-lookahead tokens instead of dropping the last matched block (0.33)."""


VLLM_0_33 = VllmRules(
    version_line="0.33.0",
    self_preemption_continues=True,
    caches_drafted_blocks_at_update=True,
    lora_gate_counts_unscheduled_running=True,
    applies_prefill_interval_locally=True,
    has_lookahead_block_hashes=True,
)
VLLM_0_32 = VllmRules(
    version_line="0.32.x",
    self_preemption_continues=False,
    caches_drafted_blocks_at_update=False,
    lora_gate_counts_unscheduled_running=False,
    applies_prefill_interval_locally=False,
    has_lookahead_block_hashes=False,
)

_VERSIONS: tuple[tuple[re.Pattern[str], VllmRules], ...] = (
    (re.compile(r"0\.33\.0"), VLLM_0_33),
    (re.compile(r"0\.32\.\d+"), VLLM_0_32),
)

KNOWN_VERSIONS = ", ".join(rules.version_line for _, rules in reversed(_VERSIONS))
"""The versions the engine knows, for messages: `0.32.x, 0.33.0`."""


def is_known_version(version: str) -> bool:
    return any(pattern.fullmatch(version) for pattern, _ in _VERSIONS)


def vllm_rules(version: object) -> VllmRules:
    """The rules of `version` (`0.33.0`, `0.32.0`, ...); a version not known is a ConfigError."""
    if isinstance(version, str):
        for pattern, rules in _VERSIONS:
            if pattern.fullmatch(version):
                return rules
    raise ConfigError("vllm_version", f"unknown vLLM version {version!r} (known: {KNOWN_VERSIONS})")
