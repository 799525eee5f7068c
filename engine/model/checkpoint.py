"""Real Llama weights from a local directory of `*.safetensors` files; nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import torch

from ..errors import InputError
from .config import ModelConfig
from .llama import LlamaForCausalLM
from .weights import empty_model

_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)
"""Buffers some checkpoints store that are recomputed here."""


def load_checkpoint(
    directory: Path, config: ModelConfig, device: torch.device, dtype: torch.dtype
) -> LlamaForCausalLM:
    """Fill an empty decoder tensor by tensor from memory-mapped safetensors files."""
    try:
        from safetensors import safe_open
    except ImportError:
        raise InputError(
            f"{directory}: reading *.safetensors needs the 'safetensors' package "
            "(pip install safetensors)"
        ) from None
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise InputError(f"{directory}: no *.safetensors files")
    model = empty_model(config, device, dtype)
    params = dict(model.named_parameters())
    loaded: set[str] = set()
    with torch.no_grad():
        for file in files:
            with safe_open(str(file), framework="pt", device="cpu") as tensors:
                for name in tensors.keys():  # noqa: SIM118 (a safetensors handle, not a dict)
                    if _is_ignored(name, config):
                        continue
                    if name not in params:
                        raise InputError(f"{file}: unexpected tensor {name!r} for a Llama model")
                    _copy(file, name, tensors.get_tensor(name), params[name])
                    loaded.add(name)
    missing = sorted(set(params) - loaded)
    if missing:
        raise InputError(f"{directory}: no weights for {missing[0]} ({len(missing)} missing)")
    return model


def _is_ignored(name: str, config: ModelConfig) -> bool:
    return name.endswith(_IGNORED_SUFFIXES) or (
        config.tie_word_embeddings and name == "lm_head.weight"
    )


def _copy(file: Path, name: str, tensor: torch.Tensor, param: torch.Tensor) -> None:
    if tensor.shape != param.shape:
        raise InputError(
            f"{file}: {name}: shape {tuple(tensor.shape)} does not match config.json's "
            f"{tuple(param.shape)}"
        )
    param.copy_(tensor)
