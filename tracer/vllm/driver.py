"""vLLM's real scheduler stepped through a workload, recorded: no model, no GPU.

The loop is vLLM's `EngineCore.step` (synchronous) or `step_with_batch_queue`
(async scheduling, a batch queue of depth 2) with a scripted model: a scheduled
request that is not a prefill chunk samples the next token of its tape. The
scheduler is built as vLLM's engine builds it, around a tiny model config that
only supplies `max_model_len`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stepscope.engine import EngineConfig, Workload
from stepscope.engine.engine_loop import check_prompt_len
from stepscope.engine.workload import RequestSpec
from stepscope.tracer.redact import Redactor

from . import versions
from .session import VllmRecording

VLLM_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_USE_V2_MODEL_RUNNER": "0",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TOKENIZERS_PARALLELISM": "false",
}
"""Set before vLLM is first imported: CPU platform, V1 model-runner output shape."""

_TINY_MODEL = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "num_hidden_layers": 1,
    "head_dim": 32,
    "max_position_embeddings": 1048576,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "vocab_size": 32000,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "tie_word_embeddings": False,
    "torch_dtype": "float32",
}
"""A model config for `ModelConfig` to read; no weights or tokenizer are loaded."""

BATCH_QUEUE_SIZE = 2
"""vLLM's `max_concurrent_batches` with async scheduling and no pipeline parallelism."""

PAD_TOKEN_ID = 0


def prepare_environment() -> None:
    for key, value in VLLM_ENVIRONMENT.items():
        os.environ.setdefault(key, value)


@dataclass(frozen=True)
class DriverRun:
    num_steps: int
    complete: bool
    num_padded_tokens: int


def build_scheduler(
    workload: Workload, scheduler_cls: type | None = None, log_stats: bool = True
) -> tuple[Any, Any]:
    """vLLM's scheduler for the workload's config, and the block hasher requests need.

    `log_stats` is on as in `vllm serve` (it records request events and prefix-cache
    stats); vLLM's offline `LLM` class turns it off.
    """
    prepare_environment()
    from vllm.v1.core.kv_cache_utils import (
        resolve_cache_hit_alignment_tokens,
        resolve_kv_cache_block_sizes,
    )
    from vllm.v1.structured_output import StructuredOutputManager

    vllm_config = _vllm_config(workload.config)
    kv_cache_config = _kv_cache_config(workload.config, vllm_config)
    block_size, hash_block_size = resolve_kv_cache_block_sizes(kv_cache_config, vllm_config)
    kv_cache_config.hash_block_size = hash_block_size
    kv_cache_config.cache_hit_alignment_tokens = resolve_cache_hit_alignment_tokens(
        kv_cache_config, vllm_config, block_size, hash_block_size
    )
    scheduler = (scheduler_cls or vllm_config.scheduler_config.get_scheduler_cls())(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=block_size,
        hash_block_size=hash_block_size,
        log_stats=log_stats,
    )
    return scheduler, _block_hasher(vllm_config, hash_block_size)


def _vllm_config(config: EngineConfig) -> Any:
    """A `VllmConfig` with the engine config's scheduler and cache settings."""
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig

    model_config = ModelConfig(
        model=_tiny_model_dir(),
        skip_tokenizer_init=True,
        dtype="float32",
        seed=0,
        max_model_len=config.max_model_len,
        generation_config="vllm",
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=config.max_num_seqs,
        max_num_batched_tokens=config.max_num_batched_tokens,
        max_model_len=config.max_model_len,
        is_encoder_decoder=False,
        runner_type=model_config.runner_type,
        is_multimodal_model=False,
        long_prefill_token_threshold=config.long_prefill_token_threshold,
        long_prefill_token_threshold_adaptive=config.long_prefill_token_threshold_adaptive,
        enable_chunked_prefill=config.enable_chunked_prefill,
        policy=config.policy.value,
        async_scheduling=config.async_scheduling,
        scheduler_reserve_full_isl=config.scheduler_reserve_full_isl,
        watermark=config.watermark,
        max_num_scheduled_tokens=config.max_num_scheduled_tokens,
        max_num_active_seqs=config.max_num_active_seqs,
    )
    cache_config = CacheConfig(
        block_size=config.block_size, enable_prefix_caching=config.enable_prefix_caching
    )
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config, model_config=model_config, cache_config=cache_config
    )
    # vLLM's CPU platform turns async scheduling off; the scheduler itself runs either way.
    vllm_config.scheduler_config.async_scheduling = config.async_scheduling
    vllm_config.cache_config.num_gpu_blocks = config.num_blocks
    return vllm_config


def _kv_cache_config(config: EngineConfig, vllm_config: Any) -> Any:
    """One full-attention group over `num_blocks` blocks (the scheduler needs no tensors)."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    spec = FullAttentionSpec(
        block_size=config.block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
    )
    return KVCacheConfig(
        num_blocks=config.num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["model.layers.0.self_attn.attn"], spec)],
        prefix_cache_retention_interval=vllm_config.cache_config.prefix_cache_retention_interval,
    )


def _block_hasher(vllm_config: Any, hash_block_size: int) -> Any:
    """What `EngineCore.__init__` hands every request when prefix caching is on."""
    if not vllm_config.cache_config.enable_prefix_caching:
        return None
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import init_none_hash

    hash_fn = get_hash_fn_by_name(vllm_config.cache_config.prefix_caching_hash_algo)
    init_none_hash(hash_fn)
    return versions.request_block_hasher(hash_block_size, hash_fn, vllm_config)


def _tiny_model_dir() -> str:
    directory = Path(tempfile.gettempdir()) / "stepscope-vllm-tiny-llama"
    directory.mkdir(exist_ok=True)
    path = directory / "config.json"
    text = json.dumps(_TINY_MODEL, indent=1, sort_keys=True)
    if not path.exists() or path.read_text() != text:
        scratch = path.with_name(f"config.json.{os.getpid()}.tmp")
        scratch.write_text(text)
        scratch.replace(path)
    return str(directory)


def make_request(spec: RequestSpec, block_hasher: Any) -> Any:
    """vLLM's `Request` for a workload request, as the input processor would make it."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    params = spec.sampling_params
    extra: dict[str, Any] = {}
    if params.min_tokens:
        extra["min_tokens"] = params.min_tokens
    if params.stop_token_ids:
        extra["stop_token_ids"] = list(params.stop_token_ids)
    if params.top_k:
        extra["top_k"] = params.top_k
    if params.seed is not None:
        extra["seed"] = params.seed
    sampling = SamplingParams(
        max_tokens=params.max_tokens,
        ignore_eos=params.eos_token_id is None,
        temperature=params.temperature,
        top_p=params.top_p,
        **extra,
    )
    sampling.update_from_generation_config({}, eos_token_id=params.eos_token_id)
    return Request(
        request_id=spec.request_id,
        prompt_token_ids=list(spec.prompt_token_ids),
        sampling_params=sampling,
        pooling_params=None,
        arrival_time=spec.arrival_time,
        priority=spec.priority,
        block_hasher=block_hasher,
    )


class VllmDriver:
    """Steps a vLLM scheduler through a workload the way `EngineCore` steps it."""

    def __init__(self, workload: Workload, scheduler: Any, block_hasher: Any) -> None:
        self.workload = workload
        self.scheduler = scheduler
        self.block_hasher = block_hasher
        self.async_scheduling = workload.config.async_scheduling
        self.tapes = {spec.request_id: spec.output_token_ids for spec in workload.requests}
        self.batch_queue: deque[tuple[Any, Any]] = deque()
        self.num_padded_tokens = 0
        self._pending = sorted(
            workload.requests, key=lambda spec: spec.arrival_step
        )  # stable: list order within a step
        self._next = 0
        self._finished: set[str] = set()
        self._aborts = {
            before_update: workload.aborts_by_step(before_update) for before_update in (False, True)
        }

    def run(self, recording: VllmRecording | None = None) -> DriverRun:
        steps = 0
        for step in range(self.workload.max_steps):
            steps = step + 1
            self._add_arrivals(step, recording)
            self._abort(step, before_update=False)
            busy = self.scheduler.has_requests() or self.batch_queue
            if not busy:
                if self._next >= len(self._pending):
                    return DriverRun(step, True, self.num_padded_tokens)
                if recording is not None:
                    recording.idle_step()
                continue
            if self.async_scheduling:
                self._step_with_batch_queue(step)
            else:
                self._step(step)
            if self._next >= len(self._pending) and not (
                self.scheduler.has_requests() or self.batch_queue
            ):
                return DriverRun(steps, True, self.num_padded_tokens)
        return DriverRun(steps, False, self.num_padded_tokens)

    def _add_arrivals(self, step: int, recording: VllmRecording | None) -> None:
        max_model_len = self.workload.config.max_model_len
        while self._next < len(self._pending) and self._pending[self._next].arrival_step <= step:
            spec = self._pending[self._next]
            self._next += 1
            if check_prompt_len(len(spec.prompt_token_ids), max_model_len) is not None:
                self._finished.add(spec.request_id)
                if recording is not None:
                    recording.reject(spec)
                continue
            self.scheduler.add_request(make_request(spec, self.block_hasher))

    def _abort(self, step: int, before_update: bool) -> None:
        """One `finish_requests` call per id, in list order (a set's order would vary)."""
        from vllm.v1.request import RequestStatus

        for request_id in self._aborts[before_update].get(step, ()):
            self.scheduler.finish_requests(request_id, RequestStatus.FINISHED_ABORTED)

    def _step(self, step: int) -> None:
        """`EngineCore.step`: schedule, run the model, apply late aborts, update."""
        if not self.scheduler.has_requests():
            return
        output = self.scheduler.schedule()
        runner_output = self._execute(output)
        self._abort(step, before_update=True)
        self.scheduler.update_from_output(output, runner_output)

    def _step_with_batch_queue(self, step: int) -> None:
        """`EngineCore.step_with_batch_queue`: keep the queue full before taking an output."""
        scheduler = self.scheduler
        if scheduler.has_requests():
            output = scheduler.schedule()
            executed = output.total_num_scheduled_tokens > 0
            self.batch_queue.appendleft((output, self._execute(output)))
            if len(self.batch_queue) < BATCH_QUEUE_SIZE and (executed or scheduler.has_requests()):
                return
        elif not self.batch_queue:
            return
        output, runner_output = self.batch_queue.pop()
        self._abort(step, before_update=True)
        scheduler.update_from_output(output, runner_output)

    def _execute(self, output: Any) -> Any:
        """The scripted model: a request past its prefill samples its next tape token."""
        from vllm.v1.outputs import ModelRunnerOutput

        req_ids = list(output.num_scheduled_tokens)
        sampled: list[list[int]] = []
        for req_id in req_ids:
            request = self.scheduler.requests[req_id]
            if request.is_prefill_chunk:
                sampled.append([])
                continue
            index = request.num_computed_tokens - request.num_prompt_tokens
            tape: Sequence[int] = self.tapes.get(req_id, ())
            if index < len(tape):
                sampled.append([tape[index]])
            else:
                self.num_padded_tokens += 1
                sampled.append([PAD_TOKEN_ID])
        return ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )


def record_with_vllm(
    workload: Workload,
    path: Path,
    scheduler_cls: type | None = None,
    meta: dict[str, str] | None = None,
    redactor: Redactor | None = None,
) -> DriverRun:
    """Run the workload through vLLM's scheduler (or `scheduler_cls`), recorded at `path`."""
    from .attach import attach_recording

    scheduler, block_hasher = build_scheduler(workload, scheduler_cls)
    recording = attach_recording(
        scheduler,
        path,
        planned=workload,
        meta={
            "workload": workload.source,
            "description": workload.description,
            "max_steps": str(workload.max_steps),
            "model": "tape",
            "device": "cpu",
            **(meta or {}),
        },
        redactor=redactor,
    )
    driver = VllmDriver(workload, scheduler, block_hasher)
    finished = False
    try:
        run = driver.run(recording)
        finished = True
    finally:
        recording.close(finished)
    return run
