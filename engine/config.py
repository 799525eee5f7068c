"""Engine knobs: vLLM's `SchedulerConfig` and `CacheConfig` for the subset, flattened."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import Any

from .block_hash import (
    BLOCK_HASHERS,
    STEPSCOPE_HASHER,
    VLLM_HASHERS,
    BlockHash,
    is_reproducible,
)
from .errors import ConfigError
from .json_fields import finite
from .kv_cache_groups import KEY as KV_CACHE_GROUPS
from .kv_cache_groups import AttentionType, KVCacheGroupSpec, groups_to_json, parse_kv_cache_groups
from .memory_limit import BYTES_PER_BLOCK, INT32_MAX, over_memory_limit
from .vllm_versions import DEFAULT_VLLM_VERSION, VllmRules, vllm_rules


class SchedulingPolicy(enum.StrEnum):
    FCFS = "fcfs"
    PRIORITY = "priority"


_REQUIRED = ("block_size", "num_blocks", "max_num_batched_tokens", "max_num_seqs")

HASHING_KNOBS = ("block_hasher", "none_hash")
"""Knobs that decide nothing: each hasher gives equal hashes to the same prefixes, so the
same prefix-cache hits (a checkpoint's hashes depend on them: `restore.SHAPING_KNOBS`)."""

EAGLE_METHODS = ("eagle", "eagle3", "mtp")
"""Drafters that read the target's hidden states (vLLM's `use_eagle()`), as the scheduler
sees them: no draft slot, k lookahead slots, a prefill lookahead and lookahead hashes."""
SPECULATIVE_METHODS = ("ngram", "draft_model", *EAGLE_METHODS)
"""The speculative-decoding methods whose scheduling the engine models."""
NULLABLE_KNOBS = ("prefix_cache_retention_interval",)
"""Knobs whose JSON null is a value of its own rather than 'the default'."""
SPEC_ONLY_KNOBS = ("mtp_num_modules", "parallel_drafting", "disable_lookahead_block_hashes")
"""Speculative-config knobs beyond the method and `num_speculative_tokens`."""


@dataclasses.dataclass(frozen=True, slots=True)
class EngineConfig:
    """Every knob that changes a scheduling decision, with vLLM 0.33.0's defaults.

    `num_blocks` counts vLLM's null block 0, so `num_blocks - 1` blocks are usable.
    `max_model_len` defaults to `max_num_batched_tokens`, as the oracle does.
    """

    block_size: int
    num_blocks: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    policy: SchedulingPolicy = SchedulingPolicy.FCFS
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    long_prefill_token_threshold: int = 0
    long_prefill_token_threshold_adaptive: bool = False
    scheduler_reserve_full_isl: bool = True
    watermark: float = 0.0
    max_num_scheduled_tokens: int | None = None
    max_num_active_seqs: int | None = None
    async_scheduling: bool = False
    """vLLM's AsyncScheduler and its batch queue: step N+1 is scheduled before N's output."""
    vllm_version: str = DEFAULT_VLLM_VERSION
    """The vLLM version whose rules decide where versions differ (`0.32.x` or `0.33.0`)."""
    num_speculative_tokens: int = 0
    """Drafts verified per decode step (vLLM's `SpeculativeConfig`); 0 turns spec decoding off."""
    speculative_method: str | None = None
    """How drafts are proposed: `ngram`, `draft_model`, `eagle`, `eagle3` or `mtp` (None when
    spec decoding is off)."""
    mtp_num_modules: int | None = None
    """MTP modules of an `mtp` drafter (its `num_nextn_predict_layers`); None: 1."""
    parallel_drafting: bool = False
    """All drafts in one forward pass (P-EAGLE, or PARD with `draft_model`)."""
    disable_lookahead_block_hashes: bool = False
    """EAGLE-style drafters keep plain block hashes and drop the last matched block (0.33)."""
    prefill_schedule_interval: int | None = None
    """Prefill only once every N executed steps while a decode runs (vLLM's
    `SchedulerConfig`); None: not set (1)."""
    max_loras: int | None = None
    """LoRA adapters that may run at once (vLLM's `LoRAConfig.max_loras`); None: LoRA off."""
    block_hasher: str = STEPSCOPE_HASHER
    """How full blocks are hashed: `stepscope`, or `vllm-<prefix_caching_hash_algo>` (vLLM's
    hashes, so a checkpoint recorded from vLLM restores hash for hash)."""
    none_hash: str | None = None
    """vLLM's `NONE_HASH` (hex), the parent of every first block; only with `vllm-sha256*`."""
    kv_cache_groups: tuple[KVCacheGroupSpec, ...] | None = None
    """The KV cache groups of a hybrid model, in vLLM's order; None: one full-attention group."""
    prefix_cache_retention_interval: int | None = 0
    """Which sliding-window blocks are cached (vLLM's `CacheConfig`): 0, only the tails at the
    replay boundary and junctions; N, also every N-token segment's tail; None, every block."""

    @property
    def sliding_window_extra_tokens(self) -> int:
        """Tokens a sliding window keeps below itself for a multi-module MTP drafter."""
        return max(0, self.num_prefill_lookahead_tokens - 1)

    @property
    def max_in_flight_tokens(self) -> int:
        """Tokens scheduled but not yet settled: one budget per batch in flight."""
        return self.max_num_batched_tokens * (2 if self.async_scheduling else 1)

    @property
    def none_hash_bytes(self) -> BlockHash | None:
        return None if self.none_hash is None else bytes.fromhex(self.none_hash)

    @property
    def block_hashes_reproducible(self) -> bool:
        """Whether the engine computes the hashes its `block_hasher` names (not xxhash)."""
        return is_reproducible(self.block_hasher)

    @property
    def vllm_rules(self) -> VllmRules:
        return vllm_rules(self.vllm_version)

    @property
    def token_budget(self) -> int:
        """Tokens the scheduler may issue per step (`max_num_scheduled_tokens`)."""
        if self.max_num_scheduled_tokens is None:
            return self.max_num_batched_tokens
        return self.max_num_scheduled_tokens

    @property
    def max_num_running_reqs(self) -> int:
        """The admission gate: `max_num_active_seqs`, else `max_num_seqs`."""
        if self.max_num_active_seqs is None:
            return self.max_num_seqs
        return self.max_num_active_seqs

    @property
    def use_eagle(self) -> bool:
        """Whether the drafter reads the target's hidden states (EAGLE, EAGLE-3, MTP)."""
        return self.speculative_method in EAGLE_METHODS

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots past the scheduled tokens that the drafter writes (draft_model, EAGLE: k)."""
        if self.speculative_method == "draft_model" or self.use_eagle:
            return self.num_speculative_tokens
        return 0

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """Input slots each scheduled request takes beyond its tokens (draft_model: 1;
        parallel drafting: k - 1, PARD's k)."""
        if self.parallel_drafting:
            k = self.num_speculative_tokens
            return k if self.speculative_method == "draft_model" else k - 1
        return 1 if self.speculative_method == "draft_model" else 0

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """Prompt tokens past a chunk that an EAGLE-style drafter reads: 1, multi-module MTP's k."""
        if not self.use_eagle:
            return 0
        num_modules = self.mtp_num_modules or 1
        if self.speculative_method == "mtp" and min(num_modules, self.num_speculative_tokens) > 1:
            return self.num_speculative_tokens
        return 1

    @property
    def num_hash_lookahead_tokens(self) -> int:
        """Tokens after each block that its hash covers (0: plain hashes)."""
        if (
            not self.use_eagle
            or self.disable_lookahead_block_hashes
            or not self.enable_prefix_caching
            or not self.vllm_rules.has_lookahead_block_hashes
        ):
            return 0
        return self.num_prefill_lookahead_tokens

    @property
    def use_eagle_block_drop(self) -> bool:
        """Whether a prefix hit drops its last matched block (EAGLE-style, plain hashes)."""
        return self.use_eagle and self.num_hash_lookahead_tokens == 0

    @property
    def keeps_prefill_cadence(self) -> bool:
        """Whether the scheduler keeps the prefill cadence's counters (the knob set, 0.33)."""
        return (
            self.prefill_schedule_interval is not None
            and self.vllm_rules.applies_prefill_interval_locally
        )

    @property
    def local_prefill_interval(self) -> int:
        """The prefill cadence this single-engine scheduler applies itself (1: none)."""
        interval = self.prefill_schedule_interval
        if interval is None or not self.vllm_rules.applies_prefill_interval_locally:
            return 1
        return interval

    @property
    def watermark_blocks(self) -> int:
        return int(self.watermark * self.num_blocks)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> EngineConfig:
        """Build and validate a config from workload JSON; unknown keys are errors."""
        values = dict(raw)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(unknown[0], f"unknown knob (known: {', '.join(sorted(known))})")
        missing = [key for key in _REQUIRED if values.get(key) is None]
        if missing:
            raise ConfigError(missing[0], "required")
        if values.get("max_model_len") is None:
            values["max_model_len"] = values["max_num_batched_tokens"]
        _resolve_speculative_method(values)
        values = {
            k: _coerce(k, v) for k, v in values.items() if v is not None or k in NULLABLE_KNOBS
        }
        config = cls(**values)
        config.validate()
        return config

    def to_dict(self) -> dict[str, Any]:
        """Every knob, flattened, with defaults resolved (JSON-ready)."""
        out = dataclasses.asdict(self)
        out["policy"] = self.policy.value
        if self.kv_cache_groups is None:
            del out[KV_CACHE_GROUPS]
        else:
            out[KV_CACHE_GROUPS] = groups_to_json(self.kv_cache_groups)
        if self.prefix_cache_retention_interval == 0:
            del out["prefix_cache_retention_interval"]
        return out

    def with_knobs(self, knobs: Mapping[str, Any]) -> EngineConfig:
        """A copy with some knobs changed (`--set knob=value`), validated."""
        merged = self.to_dict()
        merged.update(knobs)
        return EngineConfig.from_dict(merged)

    def validate(self) -> None:
        """vLLM's `SchedulerConfig` / `CacheConfig` checks, plus ranges the engine needs."""
        vllm_rules(self.vllm_version)
        for key in ("block_size", "max_num_batched_tokens", "max_num_seqs", "max_model_len"):
            _in_range(key, getattr(self, key), 1)
        _in_range("num_blocks", self.num_blocks, 2)
        _in_range("long_prefill_token_threshold", self.long_prefill_token_threshold, 0)
        _in_range("num_speculative_tokens", self.num_speculative_tokens, 0)
        for key in (
            "max_num_scheduled_tokens",
            "max_num_active_seqs",
            "max_loras",
            "mtp_num_modules",
            "prefill_schedule_interval",
        ):
            value = getattr(self, key)
            if value is not None:
                _in_range(key, value, 1)
        problem = over_memory_limit(self.num_blocks, BYTES_PER_BLOCK, "KV blocks")
        if problem is not None:
            raise ConfigError("num_blocks", problem)
        if not 0.0 <= self.watermark < 1.0:
            raise ConfigError("watermark", f"must be in [0, 1), got {self.watermark}")
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise ConfigError(
                "max_num_batched_tokens",
                f"{self.max_num_batched_tokens} is smaller than "
                f"max_model_len {self.max_model_len} with enable_chunked_prefill off",
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise ConfigError(
                "max_num_batched_tokens",
                f"{self.max_num_batched_tokens} must be at least max_num_seqs {self.max_num_seqs}",
            )
        if self.max_num_active_seqs is not None and self.max_num_active_seqs > self.max_num_seqs:
            raise ConfigError(
                "max_num_active_seqs",
                f"{self.max_num_active_seqs} cannot exceed max_num_seqs {self.max_num_seqs}",
            )
        self._validate_speculative()
        self._validate_block_hasher()
        self._validate_kv_cache_groups()
        if self.long_prefill_token_threshold > self.max_model_len:
            raise ConfigError(
                "long_prefill_token_threshold",
                f"{self.long_prefill_token_threshold} "
                f"cannot exceed max_model_len {self.max_model_len}",
            )

    def _validate_speculative(self) -> None:
        """vLLM's checks of the speculative config the engine models."""
        method = self.speculative_method
        if self.num_speculative_tokens == 0:
            if method is not None:
                raise ConfigError("speculative_method", "needs num_speculative_tokens >= 1")
            for knob in SPEC_ONLY_KNOBS:
                if getattr(self, knob) not in (None, False):
                    raise ConfigError(knob, "needs num_speculative_tokens >= 1")
            return
        _check_method(method)
        self._validate_eagle()
        if self.async_scheduling and method == "ngram":
            raise ConfigError(
                "speculative_method",
                "ngram is not supported with async_scheduling (vLLM's V1 model runner"
                " refuses it); use draft_model",
            )

    def _validate_eagle(self) -> None:
        """vLLM's checks of the EAGLE-style knobs."""
        if self.mtp_num_modules is not None and self.speculative_method != "mtp":
            raise ConfigError("mtp_num_modules", "needs speculative_method mtp")
        self._validate_mtp_module_reuse()
        if self.disable_lookahead_block_hashes and not self.vllm_rules.has_lookahead_block_hashes:
            raise ConfigError(
                "disable_lookahead_block_hashes",
                f"vLLM {self.vllm_version} has no lookahead block hashes to disable",
            )
        num_prefill_lookahead = self.num_prefill_lookahead_tokens
        if self.enable_prefix_caching and self.block_size < num_prefill_lookahead:
            raise ConfigError(
                "block_size",
                f"multi-module MTP with prefix caching needs block_size >= "
                f"num_speculative_tokens ({num_prefill_lookahead}), got {self.block_size}",
            )

    def _validate_mtp_module_reuse(self) -> None:
        """vLLM's `SpeculativeConfig` runs the MTP modules in turn, so it refuses more drafts
        than modules unless they are a multiple of the module count (`n_predict`)."""
        num_modules = self.mtp_num_modules or 1
        k = self.num_speculative_tokens
        if k > num_modules and k % num_modules:
            raise ConfigError(
                "num_speculative_tokens",
                f"{k} must be divisible by mtp_num_modules {num_modules} (vLLM reuses the"
                " MTP modules in turn)",
            )

    def _validate_kv_cache_groups(self) -> None:
        """vLLM's checks of hybrid groups and of `prefix_cache_retention_interval`."""
        groups = self.kv_cache_groups or ()
        types = {group.type for group in groups}
        if AttentionType.CHUNKED_LOCAL in types and self.use_eagle:
            raise ConfigError(
                KV_CACHE_GROUPS,
                "chunked_local with an EAGLE-style drafter is not a hybrid KV cache in vLLM",
            )
        if groups and self.use_eagle and AttentionType.FULL not in types:
            raise ConfigError(
                KV_CACHE_GROUPS,
                f"{self.speculative_method} needs a full group for the draft layers",
            )
        if groups and self.enable_prefix_caching and self.use_eagle_block_drop:
            raise ConfigError(
                KV_CACHE_GROUPS,
                "the EAGLE last-block drop across groups is not modelled "
                "(use lookahead block hashes, vLLM 0.33's default)",
            )
        interval = self.prefix_cache_retention_interval
        if interval is None:
            return
        if AttentionType.SLIDING_WINDOW not in types:
            if interval != 0:
                raise ConfigError(
                    "prefix_cache_retention_interval",
                    "is set but no kv_cache_groups entry is a sliding_window group; set it to 0",
                )
            return
        if interval < 0 or interval % self.block_size:
            raise ConfigError(
                "prefix_cache_retention_interval",
                f"must be non-negative and a multiple of block_size ({self.block_size}), "
                f"got {interval}",
            )

    def _validate_block_hasher(self) -> None:
        """A vLLM hasher chains from the NONE_HASH its engine drew; no other takes one."""
        if self.block_hasher not in BLOCK_HASHERS:
            raise ConfigError(
                "block_hasher", f"{self.block_hasher!r} is not one of {', '.join(BLOCK_HASHERS)}"
            )
        if self.block_hasher not in VLLM_HASHERS:
            if self.none_hash is not None:
                raise ConfigError(
                    "none_hash",
                    f"only {' or '.join(VLLM_HASHERS)} chains from vLLM's NONE_HASH "
                    f"(block_hasher is {self.block_hasher})",
                )
            return
        if self.none_hash is None:
            raise ConfigError(
                "none_hash", f"block_hasher {self.block_hasher} needs vLLM's NONE_HASH, in hex"
            )
        if not _is_hex_digest(self.none_hash):
            raise ConfigError("none_hash", f"expected 64 hex digits, got {self.none_hash!r}")


def _is_hex_digest(text: str) -> bool:
    """Whether `text` is a SHA-256 digest in lower-case hex."""
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _resolve_speculative_method(values: dict[str, Any]) -> None:
    """`ngram` when drafts are on and no method is named; none when they are off (k = 0)."""
    method = values.get("speculative_method")
    if method is None:
        values.pop("speculative_method", None)
    else:
        _check_method(method)
        if values.get("num_speculative_tokens") is None:
            raise ConfigError("speculative_method", "needs num_speculative_tokens")
    if not values.get("num_speculative_tokens"):
        values.pop("speculative_method", None)
    elif method is None:
        values["speculative_method"] = "ngram"


def _check_method(method: object) -> None:
    if method not in SPECULATIVE_METHODS:
        raise ConfigError(
            "speculative_method",
            f"{method!r} is not modelled (the engine models {', '.join(SPECULATIVE_METHODS)})",
        )


_FIELD_TYPES: dict[str, type] = {
    "policy": SchedulingPolicy,
    "enable_prefix_caching": bool,
    "enable_chunked_prefill": bool,
    "long_prefill_token_threshold_adaptive": bool,
    "scheduler_reserve_full_isl": bool,
    "watermark": float,
    "async_scheduling": bool,
    "vllm_version": str,
    "speculative_method": str,
    "parallel_drafting": bool,
    "disable_lookahead_block_hashes": bool,
    "block_hasher": str,
    "none_hash": str,
}


def _coerce(key: str, value: Any) -> Any:
    """Check a JSON value's type for `key`; ints stay ints, policies become enums."""
    if key == KV_CACHE_GROUPS:
        return parse_kv_cache_groups(value)
    if value is None:
        return value
    kind = _FIELD_TYPES.get(key, int)
    if kind is SchedulingPolicy:
        try:
            return SchedulingPolicy(value)
        except ValueError:
            raise ConfigError("policy", f"must be 'fcfs' or 'priority', got {value!r}") from None
    if key == "vllm_version":
        vllm_rules(value)  # a version the engine does not know is an error here
        return value
    if kind is str:
        if not isinstance(value, str):
            raise ConfigError(key, f"expected a string, got {value!r}")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, f"expected true or false, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not finite(value):
            raise ConfigError(key, f"expected a finite number, got {value!r}")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(key, f"expected an integer, got {value!r}")
    return value


def _in_range(key: str, value: int, minimum: int) -> None:
    """At least `minimum`, and no more than a trace's INTEGER columns hold."""
    if value < minimum:
        raise ConfigError(key, f"must be at least {minimum}, got {value}")
    if value > INT32_MAX:
        raise ConfigError(key, f"must be at most {INT32_MAX} (a trace's INTEGER), got {value}")
