"""Tiny hybrid-attention models, made locally: a windowed layer, then a full-attention one.

    python -m stepscope.tracer.vllm.drive.tiny_hybrid_model OUT_DIR [--kind sliding_window]

`sliding_window` is Gemma-3-style (layer 0 sees the last `WINDOW` tokens), `chunked_local`
Llama-4-style (layer 0 sees its own chunk of `WINDOW` tokens, with RoPE; layer 1 none). Either
way vLLM's hybrid KV cache manager makes two KV cache groups over one block pool, the
windowed one first, as for Gemma 3, gpt-oss or Llama 4. The shapes and the tokenizer are
the tiny Llama's (`tiny_model`); the weights are random (seeded) and saved with
`save_pretrained`, so nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from .tiny_model import BOS_TOKEN_ID, EOS_TOKEN_ID, MODEL_SHAPE, PAD_TOKEN_ID, save_tokenizer

WINDOW = 64
"""Two blocks of 32: a request longer than that frees its windowed group's older blocks."""
MARKER = "stepscope-tiny-hybrid-model.json"
"""Written last: a directory holding it is a complete model."""


class WindowedAttention(StrEnum):
    """The attention of layer 0, named as the trace's `attention_type` names it."""

    SLIDING_WINDOW = "sliding_window"
    CHUNKED_LOCAL = "chunked_local"


def make_tiny_hybrid_model(
    out_dir: Path, kind: WindowedAttention = WindowedAttention.SLIDING_WINDOW, seed: int = 0
) -> Path:
    """Write the model of `kind` and the tokenizer into `out_dir` (kept when already made)."""
    marker = out_dir / MARKER
    recipe = json.dumps({"kind": kind.value, "seed": seed, "window": WINDOW, **MODEL_SHAPE})
    if marker.exists() and marker.read_text() == recipe:
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    _save_model(out_dir, kind, seed)
    save_tokenizer(out_dir)
    marker.write_text(recipe)
    return out_dir


def _save_model(out_dir: Path, kind: WindowedAttention, seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    special = {"bos_token_id": BOS_TOKEN_ID, "eos_token_id": EOS_TOKEN_ID}
    common = {**MODEL_SHAPE, **special, "pad_token_id": PAD_TOKEN_ID, "torch_dtype": "bfloat16"}
    make = _chunked_local if kind is WindowedAttention.CHUNKED_LOCAL else _sliding_window
    model = make(common)
    model.to(torch.bfloat16).save_pretrained(out_dir, safe_serialization=True)


def _sliding_window(common: dict[str, Any]) -> Any:
    """Gemma 3's text model: `layer_types` marks the windowed layers."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    config = Gemma3TextConfig(
        **common,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=WINDOW,
        query_pre_attn_scalar=MODEL_SHAPE["head_dim"],
    )
    return Gemma3ForCausalLM(config)


def _chunked_local(common: dict[str, Any]) -> Any:
    """Llama 4's text model, dense: layers with RoPE attend within chunks, the others fully."""
    from transformers import Llama4ForCausalLM, Llama4TextConfig

    config = Llama4TextConfig(
        **common,
        intermediate_size_mlp=MODEL_SHAPE["intermediate_size"],
        attention_chunk_size=WINDOW,
        no_rope_layers=[1, 0],
        interleave_moe_layer_step=0,
        moe_layers=[],
        num_local_experts=1,
        tie_word_embeddings=False,
    )
    return Llama4ForCausalLM(config)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument(
        "--kind", type=WindowedAttention, choices=list(WindowedAttention), default="sliding_window"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(make_tiny_hybrid_model(args.out_dir, args.kind, args.seed))


if __name__ == "__main__":
    main()
