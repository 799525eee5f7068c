"""A model runner that runs each step through a real decoder on the paged KV cache."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import Tensor

from .config import EngineConfig
from .errors import ConfigError
from .model.input_batch import build_input_batch
from .model.llama import LlamaForCausalLM
from .model.paged_attention import PagedAttention, PagedKVCache
from .model.sampler import Sampler
from .ngram_proposer import NgramProposer
from .outputs import DraftTokenIds, ModelRunnerOutput
from .request_states import RequestStates, ScheduledChunk
from .scheduler_output import SchedulerOutput

LogitsObserver = Callable[[Sequence[ScheduledChunk], Tensor], None]
"""Called each step with the chunks that sample and their float32 logits, row for row.

A request verifying drafts has one row per token it appended, each as the chunk
that ends at that row's position.
"""


class TorchModelRunner:
    """One forward pass per step over the whole `SchedulerOutput`, prefills and decodes mixed.

    New keys and values go to the slots the scheduler's block tables name, and
    attention reads each request's past through its table, so a wrong block id
    shows up as wrong tokens. Scripted outputs in the workload are ignored. With
    speculative decoding, drafts come from ngram prompt lookup and each step
    verifies the scheduled ones in the same forward pass.
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
        self.drafter = _drafter(engine_config)
        self._draft_token_ids: DraftTokenIds | None = None

    def execute_model(self, scheduler_output: SchedulerOutput) -> ModelRunnerOutput:
        for new in scheduler_output.scheduled_new_reqs:
            self.model.config.check_prompt(new.req_id, new.prompt_token_ids)
        chunks = self.request_states.update(scheduler_output)
        if not chunks:
            return ModelRunnerOutput.from_sampled({})
        drafts = scheduler_output.scheduled_spec_decode_tokens
        sampling = [chunk for chunk in chunks if chunk.samples]
        sampled: dict[str, list[int]] = {chunk.state.req_id: [] for chunk in chunks}
        for chunk, token_ids in zip(
            sampling, self._forward_and_sample(chunks, sampling, drafts), strict=True
        ):
            sampled[chunk.state.req_id] = token_ids
            for token_id in token_ids:
                self.request_states.append_sampled(chunk.state.req_id, token_id)
        if self.drafter is not None:
            self._draft_token_ids = self._propose(self.drafter, sampled)
        return ModelRunnerOutput.from_sampled(sampled)

    def take_draft_token_ids(self) -> DraftTokenIds | None:
        """The drafts proposed after the last step, once (vLLM's worker call)."""
        draft_token_ids, self._draft_token_ids = self._draft_token_ids, None
        return draft_token_ids

    @torch.inference_mode()
    def _forward_and_sample(
        self,
        chunks: Sequence[ScheduledChunk],
        sampling: Sequence[ScheduledChunk],
        drafts: Mapping[str, Sequence[int]],
    ) -> list[list[int]]:
        """Each sampling chunk's appended tokens: its accepted drafts, then one more."""
        batch = build_input_batch(chunks, self.block_size, self.device, drafts)
        attention = PagedAttention(self.kv_cache, batch)
        hidden = self.model(batch.input_ids, batch.positions, attention)
        if not sampling:
            return []
        logits = self.model.compute_logits(hidden[batch.logits_indices])
        rows = [(chunk, j) for chunk in sampling for j in range(1 + _num_drafts(chunk, drafts))]
        token_ids = self.sampler.sample(
            logits, [chunk.state for chunk, _ in rows], [j for _, j in rows]
        )
        appended: list[list[int]] = []
        kept: list[int] = []
        row = 0
        for chunk in sampling:
            chunk_drafts = drafts.get(chunk.state.req_id, ())
            tokens = accept_drafts(chunk_drafts, token_ids[row : row + 1 + len(chunk_drafts)])
            appended.append(tokens)
            kept += range(row, row + len(tokens))
            row += 1 + len(chunk_drafts)
        if self.on_logits is not None:
            self.on_logits(_rows_as_chunks([rows[r] for r in kept], drafts), logits[kept])
        return appended

    def _propose(self, drafter: NgramProposer, sampled: Mapping[str, list[int]]) -> DraftTokenIds:
        """Drafts for every scheduled request, in the batch's order, as vLLM's worker returns."""
        req_ids = tuple(sampled)
        states = self.request_states.states
        proposals = drafter.propose(
            [sampled[req_id] for req_id in req_ids],
            [states[req_id].token_ids for req_id in req_ids],
        )
        return DraftTokenIds(req_ids, tuple(tuple(p) for p in proposals))


def accept_drafts(drafts: Sequence[int], sampled: Sequence[int]) -> list[int]:
    """The tokens a request appends: drafts while each equals the token sampled there, then one.

    `sampled[j]` is the request's own sampler at the j-th position (the token after
    `drafts[:j]`). For a drafter that proposes one token with certainty (ngram), this is
    vLLM's rejection sampler exactly: the draft is accepted with probability
    `p(draft)`, and a rejected position keeps a sample of `p` conditioned on not
    being the draft, which is the recovered distribution `max(p - q, 0)` normalized
    for a one-hot `q`. Greedy requests thus decode what they would without drafts,
    and seeded ones too, since each output index draws the same noise. A -1 draft
    (padding) matches nothing.
    """
    num_accepted = 0
    while num_accepted < len(drafts) and drafts[num_accepted] == sampled[num_accepted]:
        num_accepted += 1
    return list(sampled[: num_accepted + 1])


def _num_drafts(chunk: ScheduledChunk, drafts: Mapping[str, Sequence[int]]) -> int:
    return len(drafts.get(chunk.state.req_id, ()))


def _rows_as_chunks(
    rows: Sequence[tuple[ScheduledChunk, int]], drafts: Mapping[str, Sequence[int]]
) -> list[ScheduledChunk]:
    """Row j of a chunk as the chunk cut to end at its j-th sampled position."""
    return [
        ScheduledChunk(chunk.state, chunk.start, chunk.num_tokens - _num_drafts(chunk, drafts) + j)
        for chunk, j in rows
    ]


def _drafter(engine_config: EngineConfig) -> NgramProposer | None:
    """Ngram prompt lookup when speculative decoding is on; a draft model is not run here."""
    if not engine_config.num_speculative_tokens:
        return None
    if engine_config.speculative_method != "ngram":
        raise ConfigError(
            "speculative_method",
            f"{engine_config.speculative_method!r} needs a draft model; a torch model drafts "
            'with ngram prompt lookup only (use speculative_method = "ngram" or --model tape)',
        )
    return NgramProposer(engine_config.num_speculative_tokens, engine_config.max_model_len)
