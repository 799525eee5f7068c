"""The builder thread's half of a vLLM recording: vLLM's objects made into stepscope's steps.

The engine thread keeps references to what vLLM makes afresh for each step (the
`SchedulerOutput`, the model runner's output, what `update_from_output` returns) and
copies only what vLLM changes in place later: the block ids of new and resumed requests
(the model runner keeps those lists as its own and extends them), and with speculative
decoding the drafts a batch scheduled (async scheduling writes the next drafts into them)
and the sampled lists (a stop among accepted drafts trims them). Everything is converted
here, on the recorder's builder thread, in the order the engine thread handed it over; so
what this side keeps for the requests the scheduler holds (sampling params, first
admissions) is what the engine thread saw at each call.
"""

from __future__ import annotations

from collections.abc import Sequence

from stepscope.engine import EngineStep, SamplingParams, StepRecord
from stepscope.engine.kv_cache_groups import KVCacheGroupSpec
from stepscope.engine.outputs import EngineCoreOutput

from . import convert
from .iterations import Batch, Iteration


class VllmStepBuilder:
    """Converts one recording's batches and steps; runs on the builder thread only."""

    def __init__(
        self, kv_cache_groups: Sequence[KVCacheGroupSpec] | None, *, speculative_decoding: bool
    ) -> None:
        self.kv_cache_groups = kv_cache_groups
        self.speculative_decoding = speculative_decoding
        self.sampling: dict[str, SamplingParams] = {}
        """The sampling params of each request the scheduler holds (its first admission's
        row needs them), let go once an output ships the request as finished."""
        self.admitted: set[str] = set()
        """Requests admitted once and not shipped as finished yet (`convert.scheduler_output`)."""

    def arrived(self, request_id: str, sampling_params: SamplingParams) -> None:
        self.sampling[request_id] = sampling_params

    def scheduled(self, batch: Batch) -> None:
        """Convert a `schedule()` call's output, right after the calls before it."""
        output = batch.scheduler_output
        batch.output = convert.scheduler_output(
            output,
            self.sampling,
            self.admitted,
            self.kv_cache_groups,
            batch.spec_tokens,
            batch.block_tables,
        )
        # A server's recording would otherwise keep some for every request it was sent.
        for req_id in output.finished_req_ids:
            self.sampling.pop(req_id, None)
            self.admitted.discard(req_id)

    def step_record(self, iteration: Iteration) -> StepRecord:
        batch = iteration.batch
        return StepRecord(
            step=iteration.step,
            arrived=tuple(iteration.arrived),
            rejected=tuple(iteration.rejected),
            aborted=tuple(iteration.aborted),
            engine_step=None if batch is None else self._engine_step(batch),
            update_step=None if batch is None else batch.update_step,
            aborted_before_update=tuple(iteration.aborted_before_update),
        )

    def _engine_step(self, batch: Batch) -> EngineStep:
        assert batch.output is not None, "the batch was not converted when scheduled"
        return EngineStep(
            scheduler_output=batch.output,
            model_runner_output=convert.model_runner_output(batch.runner_output),
            num_free_blocks_after_schedule=batch.num_free_blocks_after_schedule,
            schedule_end=batch.end,
            schedule_ns=batch.schedule_ns,
            model_ns=batch.model_ns,
            outputs=engine_outputs(batch, speculative_decoding=self.speculative_decoding),
            update_ns=batch.update_ns,
            num_held_blocks_by_group=batch.num_held_blocks_by_group,
            draft_token_ids=batch.draft_token_ids,
        )


def engine_outputs(batch: Batch, *, speculative_decoding: bool) -> tuple[EngineCoreOutput, ...]:
    """The outputs the recorder needs of the batch's update, converted once (with drafts:
    every one that appended tokens, which a stop may cut short of the sampled ones; else
    the finishes). Either thread may call it: it reads only the batch's update."""
    if batch.engine_outputs is None:
        convert_outputs = (
            convert.token_outputs if speculative_decoding else convert.finished_outputs
        )
        batch.engine_outputs = convert_outputs(batch.outputs)
    return batch.engine_outputs
