"""Random LoRA adapters for the tiny Llama, made locally, as a real vLLM engine loads them.

    python -m stepscope.tracer.vllm.drive.tiny_lora MODEL_DIR [--ids 1 2] [--rank 8]

Each adapter `MODEL_DIR/loras/lora{id}` is PEFT's layout (`adapter_config.json` and
`adapter_model.safetensors`) over the attention's q and v projections, its weights
random (seeded by the id), so a request served with it samples differently from the
base model. A live recording looks a request's `lora_id` up there.
"""

from __future__ import annotations

import argparse
import json
import random
import struct
from pathlib import Path
from typing import Any

from .tiny_model import MODEL_SHAPE

LORA_DIR = "loras"
TARGET_MODULES = ("q_proj", "v_proj")
DEFAULT_RANK = 8
WEIGHT_STD = 0.05
"""Large enough that an adapter changes what the model samples, small enough that greedy
decoding still falls into the repetition ngram drafts from."""
MARKER = "stepscope-tiny-lora.json"
"""Written last: the recipe of a complete adapter."""


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
    marker = out / MARKER
    recipe = json.dumps({"lora_id": lora_id, "std": WEIGHT_STD, **config}, sort_keys=True)
    if marker.exists() and marker.read_text() == recipe:
        return out
    out.mkdir(parents=True, exist_ok=True)
    _save_weights(out, lora_id, rank)
    (out / "adapter_config.json").write_text(json.dumps(config, indent=1, sort_keys=True))
    marker.write_text(recipe)
    return out


def _save_weights(out: Path, lora_id: int, rank: int) -> None:
    """Normal(0, `WEIGHT_STD`) weights in bfloat16, seeded by the id, as safetensors."""
    rng = random.Random(lora_id)
    hidden = MODEL_SHAPE["hidden_size"]
    head_dim = MODEL_SHAPE["head_dim"]
    outputs = {
        "q_proj": MODEL_SHAPE["num_attention_heads"] * head_dim,
        "v_proj": MODEL_SHAPE["num_key_value_heads"] * head_dim,
    }
    tensors: dict[str, tuple[tuple[int, int], bytes]] = {}
    for layer in range(MODEL_SHAPE["num_hidden_layers"]):
        for module, out_features in outputs.items():
            name = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            for suffix, shape in (("lora_A", (rank, hidden)), ("lora_B", (out_features, rank))):
                tensors[f"{name}.{suffix}.weight"] = (shape, _bfloat16(rng, shape[0] * shape[1]))
    _write_safetensors(out / "adapter_model.safetensors", tensors)


def _bfloat16(rng: random.Random, count: int) -> bytes:
    """`count` random values as bfloat16: the high half of each float32."""
    values = struct.pack(f"<{count}f", *(rng.gauss(0.0, WEIGHT_STD) for _ in range(count)))
    return b"".join(values[i + 2 : i + 4] for i in range(0, len(values), 4))


def _write_safetensors(path: Path, tensors: dict[str, tuple[tuple[int, int], bytes]]) -> None:
    """The safetensors layout: a little-endian header length, a JSON header, the raw data."""
    header: dict[str, Any] = {}
    offset = 0
    for name, (shape, data) in tensors.items():
        header[name] = {
            "dtype": "BF16",
            "shape": list(shape),
            "data_offsets": [offset, offset + len(data)],
        }
        offset += len(data)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    body = b"".join(data for _, data in tensors.values())
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + body)


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
