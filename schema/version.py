"""The trace schema's version; a reader refuses versions it does not know."""

from __future__ import annotations

SCHEMA_VERSION = 12
"""Bumped on any change to `tables.sql` that a reader must know about.

1: the first schema.
2: `_steps.update_step` and `_requests.abort_before_update` (async scheduling and
   aborts between schedule and update), `_config.async_scheduling`.
3: `_config.vllm_version` (the vLLM version whose rules the run followed); a version-2
   trace reads as vLLM 0.33.0's, or as the version its `meta.vllm_version` names.
4: speculative decoding, LoRA and structured output: `_config.num_speculative_tokens`,
   `speculative_method`, `max_loras`; `_requests.lora_id`, `grammar_ready_step`,
   `draft_mismatch_every`, `draft_accept`; the `_spec_decode` table. In an older trace
   they read as their "off" values (0, NULL, no rows).
5: a compacted trace stores `_requests` as `_request_rows` (a prompt that begins with a
   prefix other prompts share keeps its id in `_prompt_prefixes`, where the prefix is
   stored once, the tokens of it taken and its own rest) behind a stored view
   `_requests` with the table's columns; a trace too small to compact, or cut short,
   keeps the `_requests` table. Readers see one `_requests`.
6: checkpoints, the scheduler's state at the start of a step: `_checkpoints`,
   `_checkpoint_requests`, `_checkpoint_blocks`, `_checkpoint_batches`. An older trace
   has none (it replays from step 0 only).
7: `_config.block_hasher` and `none_hash`: a trace recorded from vLLM hashes its blocks as
   vLLM did, so its checkpoints restore hash for hash. In an older trace they read as NULL,
   stepscope's own hasher.
8: `_steps.ended_at_ns`, the wall clock when each step ended (`snapshot --last 10m`, the
   TUI's clock); NULL in an older trace. A recording can also be a folder of segments
   (`recording_layout.py`), each of whose Parquet files holds tables of this version.
9: EAGLE-style drafters and the prefill cadence: `_config.mtp_num_modules`,
   `parallel_drafting`, `disable_lookahead_block_hashes`, `prefill_schedule_interval`, and
   the `admission_stop` `prefill_held`. In an older trace they read as NULL (off).
10: hybrid KV cache groups: `_config.kv_cache_groups` (NULL: one full group) and
   `prefix_cache_retention_interval`, `_block_ids.kv_cache_group` (every group's block ids
   are rows). In an older trace they read as NULL, 0 and 0 (one group). A hybrid trace holds
   no checkpoints (it replays from step 0 only).
11: `_steps.num_held_blocks_by_group`, the blocks each hybrid KV cache group holds right
   after `schedule()` (the pool's free count is shared by every group). NULL without
   `kv_cache_groups`, and in an older trace.
12: checkpoints of hybrid KV cache groups: `_checkpoint_requests.group_block_ids` and
   `group_num_cached_blocks`, the tables of the groups after the first, and
   `shared_prefix_boundary`. In an older trace they read as [], [] and 0 (one group); an
   older hybrid trace has no checkpoints.
"""

SUPPORTED_VERSIONS = frozenset({2, 3, 4, 5, 6, 7, 8, 9, 10, 11, SCHEMA_VERSION})

RECORDING_VERSIONS = frozenset(range(8, SCHEMA_VERSION + 1))
"""The versions a recording folder can be of: folders came with version 8."""

TABLES_ADDED = {
    "_spec_decode": 4,
    "_checkpoints": 6,
    "_checkpoint_requests": 6,
    "_checkpoint_blocks": 6,
    "_checkpoint_batches": 6,
}
"""Each table a later version added, with that version: an older trace has no such table (it
reads as one with no rows), and lacks no other."""
