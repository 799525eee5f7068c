"""The drafters of a scripted vLLM run: `SpeculativeConfig`s around never-loaded configs.

The scheduler reads only a drafter's slots and lookahead, so each drafter is a model
config for vLLM to read, no weights: `draft_model`, `eagle` and `eagle3` take the
target's tiny config itself (vLLM wraps it in an `EAGLEConfig` for EAGLE), `mtp` a
tiny DeepSeek-V3 config whose `num_nextn_predict_layers` is the MTP modules (vLLM
rewrites it to `deepseek_mtp`), as `../shared/oracle/` builds them.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from stepscope.engine import ConfigError, EngineConfig

from ..attach.versions import installed_rules, installed_version

_TINY_MTP_MODEL = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "n_routed_experts": 2,
    "n_shared_experts": 1,
    "num_experts_per_tok": 1,
    "first_k_dense_replace": 0,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 16,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "num_nextn_predict_layers": 1,
    "max_position_embeddings": 1048576,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "vocab_size": 32000,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
"""An MTP drafter's model config (`num_nextn_predict_layers` set per run)."""


def speculative_config(config: EngineConfig, model_config: Any, parallel_config: Any) -> Any:
    """vLLM's `SpeculativeConfig` for the engine config's draft method and knobs."""
    from vllm.config import SpeculativeConfig

    method = config.speculative_method
    knobs: dict[str, Any] = {}
    if method in ("draft_model", "eagle", "eagle3"):
        knobs["model"] = model_config.model
    elif method == "mtp":
        knobs["model"] = _mtp_model_dir(config.mtp_num_modules or 1)
    if config.parallel_drafting:
        knobs["parallel_drafting"] = True
    if config.disable_lookahead_block_hashes:
        _require_lookahead_block_hashes()
        knobs["disable_lookahead_block_hashes"] = True
    return SpeculativeConfig(
        method=method,
        num_speculative_tokens=config.num_speculative_tokens,
        target_model_config=model_config,
        target_parallel_config=parallel_config,
        **knobs,
    )


def _require_lookahead_block_hashes() -> None:
    """A one-line error where the installed vLLM has no lookahead block hashes to disable
    (0.32: its SpeculativeConfig refuses the key)."""
    if not installed_rules().has_lookahead_block_hashes:
        raise ConfigError(
            "disable_lookahead_block_hashes",
            f"the installed vLLM {installed_version()} has no lookahead block hashes to disable",
        )


def _mtp_model_dir(num_modules: int) -> str:
    model = dict(_TINY_MTP_MODEL, num_nextn_predict_layers=num_modules)
    return config_dir(f"stepscope-vllm-tiny-mtp{num_modules}", model)


def config_dir(name: str, model: dict[str, Any]) -> str:
    """A folder under the temp dir holding `config.json` (rewritten only when it differs)."""
    directory = Path(tempfile.gettempdir()) / name
    directory.mkdir(exist_ok=True)
    path = directory / "config.json"
    text = json.dumps(model, indent=1, sort_keys=True)
    if not path.exists() or path.read_text() != text:
        scratch = path.with_name(f"config.json.{os.getpid()}.tmp")
        scratch.write_text(text)
        scratch.replace(path)
    return str(directory)
