"""Random LoRA adapters for the tiny Llama, made locally, as a real vLLM engine loads them.

    python -m stepscope.tracer.vllm.tiny_lora MODEL_DIR [--ids 1 2] [--rank 8]

Each adapter `MODEL_DIR/loras/lora{id}` is PEFT's layout (`adapter_config.json` and
`adapter_model.safetensors`) over the attention's q and v projections, its weights
random (seeded by the id), so a request served with it samples differently from the
base model. A live recording looks a request's `lora_id` up there.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .tiny_model import MODEL_SHAPE

LORA_DIR = "loras"
TARGET_MODULES = ("q_proj", "v_proj")
DEFAULT_RANK = 8


def adapter_dir(model_dir: Path, lora_id: int) -> Path:
    """Where the adapter of `lora_id` lives (its name is vLLM's `lora_name`)."""
    return model_dir / LORA_DIR / f"lora{lora_id}"


def make_adapter(model_dir: Path, lora_id: int, rank: int = DEFAULT_RANK) -> Path:
    """Write the adapter of `lora_id` for the model in `model_dir` (kept when already made)."""
    out = adapter_dir(model_dir, lora_id)
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(model_dir),
        "r": rank,
        "lora_alpha": 2 * rank,
        "lora_dropout": 0.0,
        "bias": "none",
        "target_modules": list(TARGET_MODULES),
        "fan_in_fan_out": False,
    }
    config_path = out / "adapter_config.json"
    if config_path.exists() and json.loads(config_path.read_text()) == config:
        return out
    out.mkdir(parents=True, exist_ok=True)
    _save_weights(out, lora_id, rank)
    config_path.write_text(json.dumps(config, indent=1, sort_keys=True))
    return out


def _save_weights(out: Path, lora_id: int, rank: int) -> None:
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(lora_id)
    hidden = MODEL_SHAPE["hidden_size"]
    head_dim = MODEL_SHAPE["head_dim"]
    outputs = {
        "q_proj": MODEL_SHAPE["num_attention_heads"] * head_dim,
        "v_proj": MODEL_SHAPE["num_key_value_heads"] * head_dim,
    }
    tensors = {}
    for layer in range(MODEL_SHAPE["num_hidden_layers"]):
        for module, out_features in outputs.items():
            name = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors[f"{name}.lora_A.weight"] = _random(generator, (rank, hidden))
            tensors[f"{name}.lora_B.weight"] = _random(generator, (out_features, rank))
    save_file(tensors, str(out / "adapter_model.safetensors"))


def _random(generator: object, shape: tuple[int, int]) -> object:
    import torch

    assert isinstance(generator, torch.Generator)
    return (torch.randn(shape, generator=generator) * 0.5).to(torch.bfloat16).contiguous()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", type=Path)
    parser.add_argument("--ids", type=int, nargs="+", default=[1])
    parser.add_argument("--rank", type=int, default=DEFAULT_RANK)
    args = parser.parse_args()
    for lora_id in args.ids:
        print(make_adapter(args.model_dir, lora_id, args.rank))


if __name__ == "__main__":
    main()
