"""A tiny Llama and a word-level tokenizer, made locally for a real vLLM engine on a CPU.

    python -m stepscope.tracer.vllm.drive.tiny_model OUT_DIR [--seed 0]

Random weights (transformers' own initialisation, seeded) saved with
`save_pretrained`, so `vllm serve OUT_DIR` and `LLM(OUT_DIR)` load it as any
checkpoint; nothing is downloaded. The shapes suit vLLM's CPU attention (head
dimension 64, block sizes in multiples of 32). The tokenizer maps the words
`w0 … w1019` to ids 4 … 1023 (ids 0–3 are `<unk>`, `<s>`, `</s>`, `<pad>`) and splits on
whitespace, so a decoded id sequence encodes back to the same ids: vLLM's own
`vllm bench serve` client, which decodes random ids into prompts, works with it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

VOCAB_SIZE = 1024
SPECIAL_TOKENS = ("<unk>", "<s>", "</s>", "<pad>")
BOS_TOKEN_ID = 1
EOS_TOKEN_ID = 2
PAD_TOKEN_ID = 3
MODEL_SHAPE: dict[str, Any] = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_hidden_layers": 2,
    "max_position_embeddings": 4096,
    "vocab_size": VOCAB_SIZE,
}
MARKER = "stepscope-tiny-model.json"
"""Written last: a directory holding it is a complete model."""


def make_tiny_model(out_dir: Path, seed: int = 0) -> Path:
    """Write the model and tokenizer into `out_dir` (kept when already made with `seed`)."""
    marker = out_dir / MARKER
    recipe = json.dumps({"seed": seed, **MODEL_SHAPE}, sort_keys=True)
    if marker.exists() and marker.read_text() == recipe:
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    _save_model(out_dir, seed)
    save_tokenizer(out_dir)
    marker.write_text(recipe)
    return out_dir


def _save_model(out_dir: Path, seed: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        **MODEL_SHAPE,
        bos_token_id=BOS_TOKEN_ID,
        eos_token_id=EOS_TOKEN_ID,
        pad_token_id=PAD_TOKEN_ID,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)


def save_tokenizer(out_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [f"w{i}" for i in range(VOCAB_SIZE - len(SPECIAL_TOKENS))]
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *words])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        model_max_length=MODEL_SHAPE["max_position_embeddings"],
    )
    fast.save_pretrained(out_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(make_tiny_model(args.out_dir, args.seed))


if __name__ == "__main__":
    main()
