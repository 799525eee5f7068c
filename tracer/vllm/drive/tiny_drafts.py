"""Tiny drafters for the tiny Llama, made locally: an EAGLE head, an EAGLE-3 head, a tiny
MiMo whose one MTP module drafts for itself, and a tiny DeepSeek-V3 with three MTP modules.

    python -m stepscope.tracer.vllm.drive.tiny_drafts TARGET_DIR OUT_DIR

Each drafter is a copy drafter: its decoder layer's output projections are zero, so
the layer adds nothing to the residual stream and the head drafts the token the target
has just produced again (EAGLE, MTP: the target's own hidden state through the target's
head) or the one before it (EAGLE-3: the embedding of the earlier token, read back
through a head tied to the embeddings). The tiny models often repeat a token, so real
rejection sampling accepts some drafts and rejects others. The other weights are random
(seeded); the drafters still run attention over their own KV cache, as a trained head
does. `draft_model` needs nothing made: the tiny Llama drafts for itself.

The DeepSeek-V3 folder holds a config and the tokenizer only: vLLM fills its weights
(`load_format=dummy`), so its drafts are almost never accepted; it is there for the
scheduling of several MTP modules. vLLM's CPU attention for MLA takes a latent rank of
512 and a rope dimension of 64 only, hence those two sizes.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

EAGLE_DIR = "eagle"
EAGLE3_DIR = "eagle3"
MIMO_DIR = "mimo-mtp"
DEEPSEEK_DIR = "deepseek-mtp3"
DEEPSEEK_SHAPE: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "n_routed_experts": 2,
    "n_shared_experts": 1,
    "num_experts_per_tok": 1,
    "first_k_dense_replace": 0,
    "n_group": 1,
    "topk_group": 1,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 64,
    "v_head_dim": 64,
    "num_nextn_predict_layers": 3,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
"""The DeepSeek-V3 drafter's shape beyond what it shares with the tiny Llama."""
MARKER = "stepscope-tiny-draft.json"
"""Written last: a directory holding it is a complete drafter."""
LAYOUT = 2
"""Part of the recipe: raised when what the maker writes changes, so old folders are remade."""
PARALLEL_DRAFTING_TOKEN_ID = 3
"""The EAGLE-3 head's `ptd_token_id` (the pad token), read only when drafting in parallel."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
WEIGHT_STD = 0.02
"""transformers' `initializer_range` for Llama and Qwen2, so the heads look like the target."""


def make_tiny_drafts(target_dir: Path, out_dir: Path, seed: int = 0) -> dict[str, Path]:
    """The three drafter folders under `out_dir` (kept when already made from `target_dir`)."""
    target = json.loads((target_dir / "config.json").read_text())
    recipe = json.dumps({"layout": LAYOUT, "seed": seed, "target": target}, sort_keys=True)
    made = {name: out_dir / name for name in (EAGLE_DIR, EAGLE3_DIR, MIMO_DIR, DEEPSEEK_DIR)}
    if all(_is_made(path, recipe) for path in made.values()):
        return made
    _save_eagle(made[EAGLE_DIR], target, seed)
    _save_eagle3(made[EAGLE3_DIR], target_dir, target, seed)
    _save_mimo(made[MIMO_DIR], target_dir, target, seed)
    _save_deepseek(made[DEEPSEEK_DIR], target_dir, target)
    for path in made.values():
        (path / MARKER).write_text(recipe)
    return made


def _is_made(path: Path, recipe: str) -> bool:
    marker = path / MARKER
    return marker.exists() and marker.read_text() == recipe


def _generator(seed: int) -> Any:
    import torch

    return torch.Generator().manual_seed(seed)


def _random(shape: tuple[int, ...], generator: Any) -> Any:
    import torch

    return (torch.randn(shape, generator=generator) * WEIGHT_STD).to(torch.bfloat16)


def _ones(size: int) -> Any:
    import torch

    return torch.ones(size, dtype=torch.bfloat16)


def _zeros(shape: tuple[int, ...]) -> Any:
    import torch

    return torch.zeros(shape, dtype=torch.bfloat16)


def _select(hidden: int, inputs: int, first: int) -> Any:
    """A projection from `inputs` concatenated vectors that keeps vector `first` as is."""
    import torch

    weight = torch.zeros((hidden, hidden * inputs), dtype=torch.bfloat16)
    weight[:, first * hidden : (first + 1) * hidden] = torch.eye(hidden, dtype=torch.bfloat16)
    return weight


def _silent_layer(
    prefix: str, target: dict[str, Any], qkv_inputs: int, generator: Any
) -> dict[str, Any]:
    """A Llama decoder layer whose attention and MLP write zeros (random elsewhere)."""
    hidden, head_dim = target["hidden_size"], target["head_dim"]
    inner = target["intermediate_size"]
    heads, kv_heads = target["num_attention_heads"], target["num_key_value_heads"]
    return {
        f"{prefix}.self_attn.q_proj.weight": _random((heads * head_dim, qkv_inputs), generator),
        f"{prefix}.self_attn.k_proj.weight": _random((kv_heads * head_dim, qkv_inputs), generator),
        f"{prefix}.self_attn.v_proj.weight": _random((kv_heads * head_dim, qkv_inputs), generator),
        f"{prefix}.self_attn.o_proj.weight": _zeros((hidden, heads * head_dim)),
        f"{prefix}.mlp.gate_proj.weight": _random((inner, hidden), generator),
        f"{prefix}.mlp.up_proj.weight": _random((inner, hidden), generator),
        f"{prefix}.mlp.down_proj.weight": _zeros((hidden, inner)),
        f"{prefix}.post_attention_layernorm.weight": _ones(hidden),
    }


def _save_eagle(out: Path, target: dict[str, Any], seed: int) -> None:
    """EAGLE: `fc` keeps the target's hidden state; embeddings and head are the target's."""
    hidden = target["hidden_size"]
    weights = _silent_layer("layers.0", target, hidden, _generator(seed))
    weights["fc.weight"] = _select(hidden, 2, first=1)
    _save(out, dict(target, num_hidden_layers=1), weights)


def _save_eagle3(out: Path, target_dir: Path, target: dict[str, Any], seed: int) -> None:
    """EAGLE-3: `fc` keeps the first auxiliary state (the target's input embedding) and
    the head is the target's embedding matrix, so the draft is the embedded token. The
    mask token's hidden state (zeros) lets it draft in parallel too."""
    from safetensors.torch import load_file

    embeddings = load_file(str(target_dir / "model.safetensors"))["model.embed_tokens.weight"]
    hidden = target["hidden_size"]
    weights = _silent_layer("layers.0", target, 2 * hidden, _generator(seed))
    weights["layers.0.input_layernorm.weight"] = _ones(hidden)
    weights["layers.0.hidden_norm.weight"] = _ones(hidden)
    weights["fc.weight"] = _select(hidden, 2, first=0)
    weights["norm.weight"] = _ones(hidden)
    weights["lm_head.weight"] = embeddings.clone()
    weights["mask_hidden"] = _zeros((2 * hidden,))
    config = dict(
        target,
        num_hidden_layers=1,
        architectures=["Eagle3LlamaForCausalLM"],
        eagle_config={"eagle_aux_hidden_state_layer_ids": [0, 1]},
        ptd_token_id=PARALLEL_DRAFTING_TOKEN_ID,
    )
    _save(out, config, weights)


def _save_mimo(out: Path, target_dir: Path, target: dict[str, Any], seed: int) -> None:
    """A tiny MiMo (Qwen2 with one MTP module): the MTP module's `input_proj` keeps the
    target's hidden state, so its draft is the token the target just produced."""
    config = _mimo_config(target)
    weights = _qwen2_weights(config, seed)
    generator = _generator(seed)
    prefix = "model.mtp_layers.0"
    hidden = config["hidden_size"]
    weights.update(_silent_layer(prefix, config, hidden, generator))
    weights.update(_qkv_biases(prefix, config))
    weights[f"{prefix}.input_layernorm.weight"] = _ones(hidden)
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        weights[f"{prefix}.{norm}.weight"] = _ones(hidden)
    weights[f"{prefix}.input_proj.weight"] = _select(hidden, 2, first=0)
    _save(out, config, weights)
    _copy_tokenizer(target_dir, out)


def _copy_tokenizer(target_dir: Path, out: Path) -> None:
    for name in TOKENIZER_FILES:
        shutil.copy(target_dir / name, out / name)


def _save_deepseek(out: Path, target_dir: Path, target: dict[str, Any]) -> None:
    """A DeepSeek-V3 config (MLA, two routed experts) with three MTP modules, no weights."""
    shared = ("hidden_size", "intermediate_size", "max_position_embeddings", "rms_norm_eps")
    tokens = ("vocab_size", "bos_token_id", "eos_token_id")
    config = {**DEEPSEEK_SHAPE, **{key: target[key] for key in (*shared, *tokens)}}
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True))
    _copy_tokenizer(target_dir, out)


def _mimo_config(target: dict[str, Any]) -> dict[str, Any]:
    shape = (
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "num_hidden_layers",
        "max_position_embeddings",
        "vocab_size",
        "bos_token_id",
        "eos_token_id",
        "rms_norm_eps",
    )
    return {
        **{key: target[key] for key in shape},
        "architectures": ["MiMoForCausalLM"],
        "model_type": "qwen2",
        "num_nextn_predict_layers": 1,
        "hidden_act": "silu",
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def _qwen2_weights(config: dict[str, Any], seed: int) -> dict[str, Any]:
    """The base model's weights: transformers' own Qwen2 initialisation, seeded."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    known = {k: v for k, v in config.items() if k not in ("architectures", "model_type")}
    model = Qwen2ForCausalLM(Qwen2Config(**known)).to(torch.bfloat16)
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def _qkv_biases(prefix: str, config: dict[str, Any]) -> dict[str, Any]:
    """Qwen2's attention has biases on q, k and v."""
    head_dim = config["head_dim"]
    sizes = {"q": config["num_attention_heads"], "k": config["num_key_value_heads"]}
    sizes["v"] = sizes["k"]
    return {
        f"{prefix}.self_attn.{name}_proj.bias": _zeros((heads * head_dim,))
        for name, heads in sizes.items()
    }


def _save(out: Path, config: dict[str, Any], weights: dict[str, Any]) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1, sort_keys=True))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for name, path in make_tiny_drafts(args.target_dir, args.out_dir, args.seed).items():
        print(name, path)


if __name__ == "__main__":
    main()
