"""Choosing a model runner by name: the tape, a seeded preset, or a local checkpoint.

PyTorch is imported only for a real model, so the tape runner works without it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import InputError
from .model.config import PRESETS, ModelConfig
from .model.hf_config import read_model_config
from .model_runner import ModelRunner
from .tape_runner import TapeModelRunner
from .workload import Workload

TAPE = "tape"
DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "bfloat16")


def create_model_runner(
    model: str,
    workload: Workload,
    *,
    device: str = "auto",
    dtype: str = "float32",
    seed: int = 0,
) -> ModelRunner:
    """`tape` plays each request's scripted outputs; a preset or a directory runs a decoder.

    Every argument and the workload's prompts are checked before weights are made.
    """
    _check_choice("--device", device, DEVICES)
    _check_choice("--dtype", dtype, DTYPES)
    if model == TAPE:
        return TapeModelRunner.for_workload(workload)
    config, checkpoint = _model_config(model)
    _check_workload(workload, config)
    torch = import_torch(model)
    from .model.checkpoint import load_checkpoint
    from .model.weights import seeded_model
    from .torch_runner import TorchModelRunner

    torch_device = _resolve_device(torch, device)
    torch_dtype = getattr(torch, dtype)
    llama = (
        seeded_model(config, seed, torch_device, torch_dtype)
        if checkpoint is None
        else load_checkpoint(checkpoint, config, torch_device, torch_dtype)
    )
    return TorchModelRunner(llama, workload.config, runner_seed=seed)


def import_torch(model: str) -> ModuleType:
    """PyTorch, or an `InputError` saying how to install it."""
    try:
        with warnings.catch_warnings():
            # The CPU wheel warns when NumPy is absent; nothing here needs NumPy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        raise InputError(
            f"--model {model}: needs PyTorch, which is not installed "
            "(pip install torch, or stepscope's 'model' extra)"
        ) from None
    return torch


def _check_choice(option: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"{option} {value!r}: expected one of {', '.join(choices)}")


def _model_config(model: str) -> tuple[ModelConfig, Path | None]:
    if model in PRESETS:
        return PRESETS[model], None
    path = Path(model)
    if path.is_dir():
        return read_model_config(path), path
    raise InputError(
        f"--model {model!r}: expected {TAPE}, a preset ({', '.join(PRESETS)}) "
        "or a directory with config.json and *.safetensors"
    )


def _check_workload(workload: Workload, config: ModelConfig) -> None:
    if workload.config.kv_cache_groups is not None:
        raise InputError(
            f"{workload.source}: config.kv_cache_groups: the torch model is full attention "
            "with one KV cache group; run hybrid groups with --model tape"
        )
    max_model_len = workload.config.max_model_len
    if max_model_len > config.max_position_embeddings:
        raise InputError(
            f"{workload.source}: config.max_model_len {max_model_len} exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )
    for spec in workload.requests:
        try:
            config.check_prompt(spec.request_id, spec.prompt_token_ids)
        except InputError as error:
            raise InputError(f"{workload.source}: {error}") from None


def _resolve_device(torch: Any, device: str) -> Any:
    has_cuda = bool(torch.cuda.is_available())
    if device == "cuda" and not has_cuda:
        raise InputError("--device cuda: PyTorch sees no CUDA device here")
    return torch.device("cuda" if device == "cuda" or (device == "auto" and has_cuda) else "cpu")
