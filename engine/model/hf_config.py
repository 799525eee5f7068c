"""A Hugging Face Llama `config.json` read into a `ModelConfig`, or a clear error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import InputError
from .config import Llama3RopeScaling, ModelConfig

LLAMA_MODEL_TYPES = ("llama", "mistral")
"""Model types whose checkpoints are Llama's architecture under Llama's tensor names."""

_MISSING = object()


def read_model_config(directory: Path) -> ModelConfig:
    """Read `directory/config.json`; every problem names the file and the key."""
    path = directory / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror or error}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"{path}: not a JSON config: {error}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path}: not a JSON object")
    try:
        _check_architecture(raw)
        return _model_config(raw)
    except _KeyError as error:
        raise InputError(f"{path}: {error.key}: {error.message}") from None
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None


class _KeyError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _check_architecture(raw: dict[str, Any]) -> None:
    model_type = raw.get("model_type")
    if model_type not in LLAMA_MODEL_TYPES:
        raise _KeyError(
            "model_type", f"{model_type!r} is not a Llama architecture ({LLAMA_MODEL_TYPES})"
        )
    if raw.get("hidden_act", "silu") != "silu":
        raise _KeyError("hidden_act", f"only 'silu' is supported, got {raw['hidden_act']!r}")
    for key in ("attention_bias", "mlp_bias"):
        if raw.get(key, False):
            raise _KeyError(key, "biases are not supported")
    if raw.get("sliding_window") is not None:
        raise _KeyError("sliding_window", "sliding-window attention is not supported")


def _model_config(raw: dict[str, Any]) -> ModelConfig:
    num_heads = _int(raw, "num_attention_heads")
    hidden_size = _int(raw, "hidden_size")
    return ModelConfig(
        vocab_size=_int(raw, "vocab_size"),
        hidden_size=hidden_size,
        num_hidden_layers=_int(raw, "num_hidden_layers"),
        num_attention_heads=num_heads,
        num_key_value_heads=_int(raw, "num_key_value_heads", num_heads),
        head_dim=_int(raw, "head_dim", hidden_size // num_heads),
        intermediate_size=_int(raw, "intermediate_size"),
        rope_theta=_number(raw, "rope_theta", 10000.0),
        rope_scaling=_rope_scaling(raw.get("rope_scaling")),
        rms_norm_eps=_number(raw, "rms_norm_eps", 1e-6),
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        max_position_embeddings=_int(raw, "max_position_embeddings", 2048),
    )


def _rope_scaling(raw: Any) -> Llama3RopeScaling | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _KeyError("rope_scaling", "expected an object or null")
    rope_type = raw.get("rope_type", raw.get("type"))
    if rope_type == "default":
        return None
    if rope_type != "llama3":
        raise _KeyError("rope_scaling", f"rope_type {rope_type!r} is not supported (llama3 is)")
    return Llama3RopeScaling(
        factor=_number(raw, "factor", key_prefix="rope_scaling."),
        low_freq_factor=_number(raw, "low_freq_factor", key_prefix="rope_scaling."),
        high_freq_factor=_number(raw, "high_freq_factor", key_prefix="rope_scaling."),
        original_max_position_embeddings=_int(
            raw, "original_max_position_embeddings", key_prefix="rope_scaling."
        ),
    )


def _int(raw: dict[str, Any], key: str, default: Any = _MISSING, key_prefix: str = "") -> int:
    value = raw.get(key, default)
    if value is _MISSING:
        raise _KeyError(key_prefix + key, "required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise _KeyError(key_prefix + key, f"expected an integer, got {value!r}")
    return value


def _number(raw: dict[str, Any], key: str, default: Any = _MISSING, key_prefix: str = "") -> float:
    value = raw.get(key, default)
    if value is _MISSING:
        raise _KeyError(key_prefix + key, "required")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _KeyError(key_prefix + key, f"expected a number, got {value!r}")
    return float(value)
