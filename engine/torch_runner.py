"""A model runner that runs each step through a real decoder on the paged KV cache."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from .config import EngineConfig
from .model.input_batch import build_input_batch
from .model.llama import LlamaForCausalLM
from .model.paged_attention import PagedAttention, PagedKVCache
from .model.sampler import Sampler
from .outputs import ModelRunnerOutput
from .request_states import RequestStates, ScheduledChunk
from .scheduler_output import SchedulerOutput

LogitsObserver = Callable[[Sequence[ScheduledChunk], Tensor], None]
"""Called each step with the chunks that sample and their float32 logits, row for row."""


class TorchModelRunner:
    """One forward pass per step over the whole `SchedulerOutput`, prefills and decodes mixed.

    New keys and values go to the slots the scheduler's block tables name, and
    attention reads each request's past through its table, so a wrong block id
    shows up as wrong tokens. Scripted outputs in the workload are ignored.
    """

    def __init__(
        self,
        model: LlamaForCausalLM,
        engine_config: EngineConfig,
        *,
        runner_seed: int = 0,
        on_logits: LogitsObserver | None = None,
    ) -> None:
        weight = model.model.embed_tokens.weight
        self.model = model
        self.device = weight.device
        self.block_size = engine_config.block_size
        self.kv_cache = PagedKVCache(
            model.config, engine_config.num_blocks, self.block_size, weight.dtype, weight.device
        )
        self.request_states = RequestStates()
        self.sampler = Sampler(runner_seed)
        self.on_logits = on_logits

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        for new in scheduler_output.scheduled_new_reqs:
            self.model.config.check_prompt(new.req_id, new.prompt_token_ids)
        chunks = self.request_states.update(scheduler_output)
        if not chunks:
            return ModelRunnerOutput.from_sampled({})
        sampling = [chunk for chunk in chunks if chunk.samples]
        token_ids = self._forward_and_sample(chunks, sampling)
        sampled: dict[str, list[int]] = {chunk.state.req_id: [] for chunk in chunks}
        for chunk, token_id in zip(sampling, token_ids, strict=True):
            sampled[chunk.state.req_id] = [token_id]
            self.request_states.append_sampled(chunk.state.req_id, token_id)
        return ModelRunnerOutput.from_sampled(sampled)

    @torch.inference_mode()
    def _forward_and_sample(
        self, chunks: Sequence[ScheduledChunk], sampling: Sequence[ScheduledChunk]
    ) -> list[int]:
        batch = build_input_batch(chunks, self.block_size, self.device)
        attention = PagedAttention(self.kv_cache, batch)
        hidden = self.model(batch.input_ids, batch.positions, attention)
        if not sampling:
            return []
        logits = self.model.compute_logits(hidden[batch.logits_indices])
        if self.on_logits is not None:
            self.on_logits(sampling, logits)
        return self.sampler.sample(logits, [chunk.state for chunk in sampling])
